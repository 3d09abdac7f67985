//! SDK clients for one StorageClass's settings, and the translation of SDK errors into
//! permanent or transient backend errors.

use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    SharedCredentialsProvider, SharedHttpClient,
};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use bucket_provisioner::BackendError;

use crate::params::Settings;

/// An HTTP client for both plain-HTTP test endpoints and TLS to AWS.
pub(crate) fn http_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// Standard SDK retries: throttling, 5xx and connection errors, with jittered exponential backoff.
pub(crate) fn retry_config(max_attempts: u32) -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(max_attempts.max(1))
        .with_initial_backoff(Duration::from_millis(200))
        .with_max_backoff(Duration::from_secs(5))
}

fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(60))
        .build()
}

/// Clients for the S3 and IAM APIs of one StorageClass, signed with the owner's credentials.
pub(crate) struct Clients {
    pub(crate) s3: aws_sdk_s3::Client,
    pub(crate) iam: aws_sdk_iam::Client,
}

pub(crate) fn clients(
    settings: &Settings,
    credentials: SharedCredentialsProvider,
    http: &SharedHttpClient,
    retry: &RetryConfig,
) -> Clients {
    let mut s3 = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(settings.region.clone()))
        .credentials_provider(credentials.clone())
        .http_client(http.clone())
        .retry_config(retry.clone())
        .timeout_config(timeouts())
        .force_path_style(settings.force_path_style);
    if let Some(endpoint) = &settings.endpoint {
        // S3-compatible services often lack the newer flexible checksums; send them only where
        // the API requires one.
        s3 = s3
            .endpoint_url(endpoint.url())
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
    }
    let mut iam = aws_sdk_iam::Config::builder()
        .behavior_version(aws_sdk_iam::config::BehaviorVersion::latest())
        .region(aws_sdk_iam::config::Region::new(settings.region.clone()))
        .credentials_provider(credentials)
        .http_client(http.clone())
        .retry_config(retry.clone())
        .timeout_config(timeouts());
    if let Some(url) = settings.iam_url() {
        iam = iam.endpoint_url(url);
    }
    Clients {
        s3: aws_sdk_s3::Client::from_conf(s3.build()),
        iam: aws_sdk_iam::Client::from_conf(iam.build()),
    }
}

/// The error code of a service error (`None` for network or client-side failures).
pub(crate) fn code<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> Option<&str> {
    match error {
        SdkError::ServiceError(service) => service.err().code(),
        _ => None,
    }
}

/// The text of the first `<tag>` element in `xml`.
fn xml_field(xml: &str, tag: &str) -> Option<String> {
    let start = xml.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = xml[start..].find(&format!("</{tag}>"))? + start;
    Some(xml[start..end].trim().to_string()).filter(|v| !v.is_empty())
}

/// The HTTP status of a service error.
pub(crate) fn status<E>(error: &SdkError<E>) -> Option<u16> {
    match error {
        SdkError::ServiceError(service) => Some(service.raw().status().as_u16()),
        _ => None,
    }
}

const THROTTLING: [&str; 9] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "SlowDown",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
    "ServiceUnavailable",
    "OperationAborted",
];
const REJECTED_CREDENTIALS: [&str; 5] = [
    "InvalidAccessKeyId",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "AuthFailure",
];
const ACCESS_DENIED: [&str; 4] =
    ["AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Forbidden"];

/// Turns a failed call into a backend error. `action` says what was attempted (e.g.
/// `iam:CreateUser obc-…`); `owner` how the owner's credentials were found. The SDK already
/// retried what is retryable, so throttling and server errors that reach here are transient;
/// refusals that only a person can fix are permanent.
pub(crate) fn classify<E>(error: SdkError<E>, action: &str, owner: &str) -> BackendError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let SdkError::ServiceError(service) = &error else {
        // Timeouts, connection failures, unreadable responses: the service may come back.
        return BackendError::transient(format!("{action}: {}", DisplayErrorContext(&error)));
    };
    let status = service.raw().status().as_u16();
    let (mut code, mut message) = (
        service.err().code().unwrap_or_default().to_string(),
        service.err().message().unwrap_or_default().to_string(),
    );
    if code.is_empty() {
        // Some services (moto among them) wrap query-API errors in <Errors>, which the SDK does
        // not parse; the code and message are still in the body.
        let body = String::from_utf8_lossy(service.raw().body().bytes().unwrap_or_default());
        code = xml_field(&body, "Code").unwrap_or_default();
        message = xml_field(&body, "Message").unwrap_or_default();
    }
    let detail = match (code.is_empty(), message.is_empty()) {
        (true, _) => format!("HTTP {status}"),
        (false, true) => code.clone(),
        (false, false) => format!("{code}: {message}"),
    };
    if status >= 500 || status == 429 || status == 408 || THROTTLING.contains(&code.as_str()) {
        return BackendError::transient(format!("{action}: {detail} (HTTP {status})"));
    }
    if code == "ExpiredToken" || code == "RequestTimeTooSkewed" {
        return BackendError::transient(format!("{action}: {detail}"));
    }
    if REJECTED_CREDENTIALS.contains(&code.as_str()) {
        return BackendError::permanent(
            "OwnerCredentialsRejected",
            format!("{action}: the service rejected {owner} ({detail}); check the keys"),
        );
    }
    if ACCESS_DENIED.contains(&code.as_str()) || status == 403 {
        return BackendError::permanent(
            "AccessDenied",
            format!(
                "{action}: {owner} are not allowed to do this ({detail}); grant the permission, \
                 then edit the claim or StorageClass to retry"
            ),
        );
    }
    let reason = if !code.is_empty() && code.chars().all(|c| c.is_ascii_alphanumeric()) {
        code.clone()
    } else {
        format!("Http{status}")
    };
    BackendError::permanent(reason, format!("{action}: {detail} (HTTP {status})"))
}

#[cfg(test)]
mod tests {
    use aws_sdk_iam::operation::create_user::CreateUserError;
    use aws_sdk_s3::config::http::HttpResponse;
    use aws_sdk_s3::error::ErrorMetadata;
    use aws_sdk_s3::primitives::SdkBody;

    use super::*;

    const OWNER: &str = "the owner credentials from Secret infra/owner";

    fn failure(status: u16, code: Option<&str>, body: &str) -> SdkError<CreateUserError> {
        let mut meta = ErrorMetadata::builder();
        if let Some(code) = code {
            meta = meta.code(code).message("said the service");
        }
        let raw = http::Response::builder().status(status).body(SdkBody::from(body)).unwrap();
        let raw = HttpResponse::try_from(raw).unwrap();
        SdkError::service_error(CreateUserError::generic(meta.build()), raw)
    }

    fn reason(error: &BackendError) -> &str {
        match error {
            BackendError::Permanent { reason, .. } => reason,
            BackendError::Transient { .. } => "transient",
        }
    }

    #[test]
    fn throttling_and_server_errors_are_transient() {
        for (status, code) in [(503, "SlowDown"), (400, "Throttling"), (500, "InternalError")] {
            let error = classify(failure(status, Some(code), ""), "iam:CreateUser u", OWNER);
            assert_eq!(reason(&error), "transient", "{status} {code}");
        }
    }

    #[test]
    fn refusals_are_permanent_and_say_whose_keys() {
        let denied = classify(failure(403, Some("AccessDenied"), ""), "iam:CreateUser u", OWNER);
        assert_eq!(reason(&denied), "AccessDenied");
        assert!(denied.to_string().contains("infra/owner"), "{denied}");
        let rejected = classify(failure(403, Some("InvalidClientTokenId"), ""), "x", OWNER);
        assert_eq!(reason(&rejected), "OwnerCredentialsRejected");
        let malformed = classify(failure(400, Some("MalformedPolicyDocument"), ""), "x", OWNER);
        assert_eq!(reason(&malformed), "MalformedPolicyDocument");
    }

    #[test]
    fn codes_are_found_in_bodies_the_sdk_does_not_parse() {
        let body = "<ErrorResponse><Errors><Error><Code>AccessDenied</Code><Message>User u is not \
                    authorized to perform: iam:CreateUser</Message></Error></Errors></ErrorResponse>";
        let error = classify(failure(403, None, body), "iam:CreateUser u", OWNER);
        assert_eq!(reason(&error), "AccessDenied");
        assert!(error.to_string().contains("not authorized to perform: iam:CreateUser"), "{error}");
    }
}

//! STS's answers on the wire: the `AssumeRoleWithWebIdentityResponse` document and the
//! `ErrorResponse` with AWS's codes, which the SDKs read.

use http::StatusCode;
use jiff::Timestamp;

use crate::store::Session;

const NAMESPACE: &str = "https://sts.amazonaws.com/doc/2011-06-15/";

/// A refusal, as STS words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StsError {
    /// The HTTP status.
    pub status: StatusCode,
    /// AWS's error code, e.g. `InvalidIdentityToken`.
    pub code: &'static str,
    /// What went wrong, for the caller.
    pub message: String,
}

impl StsError {
    fn new(status: StatusCode, code: &'static str, message: &str) -> Self {
        Self { status, code, message: message.to_owned() }
    }

    /// A parameter out of its constraints.
    pub fn validation(message: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "ValidationError", message)
    }

    /// A parameter this endpoint does not take.
    pub fn invalid_parameter(message: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "InvalidParameterValue", message)
    }

    /// An action other than `AssumeRoleWithWebIdentity`.
    pub fn invalid_action(action: &str) -> Self {
        let message = format!("Could not find operation {action} for version 2011-06-15");
        Self::new(StatusCode::BAD_REQUEST, "InvalidAction", &message)
    }

    /// No action at all.
    pub fn missing_action() -> Self {
        Self::new(StatusCode::BAD_REQUEST, "MissingAction", "the request names no Action")
    }

    /// A token the identity provider did not accept.
    pub fn invalid_token(message: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "InvalidIdentityToken", message)
    }

    /// A token past its expiry.
    pub fn expired_token() -> Self {
        Self::new(StatusCode::BAD_REQUEST, "ExpiredTokenException", "Token is expired")
    }

    /// The token is valid, but the role does not admit its subject (or there is no such role:
    /// answered the same, so that no one learns which roles exist).
    pub fn not_authorized() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "Not authorized to perform sts:AssumeRoleWithWebIdentity",
        )
    }

    /// The identity provider could not be asked.
    pub fn idp_unreachable() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "IDPCommunicationError",
            "The request could not be fulfilled because the identity provider (IDP) that was \
             asked to verify the incoming identity token could not be reached. Try again.",
        )
    }

    /// Web identities are not taken on this endpoint, or the endpoint failed.
    pub fn unavailable(message: &str) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message)
    }

    /// The `ErrorResponse` document.
    pub fn to_xml(&self, request_id: &str) -> String {
        let kind = if self.status.is_server_error() { "Receiver" } else { "Sender" };
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"{NAMESPACE}\">\
             <Error><Type>{kind}</Type><Code>{}</Code><Message>{}</Message></Error>\
             <RequestId>{}</RequestId></ErrorResponse>",
            self.code,
            escape(&self.message),
            escape(request_id)
        )
    }
}

/// What a granted request is answered with, besides the session itself.
#[derive(Clone, Debug)]
pub struct Granted<'a> {
    /// The role assumed.
    pub role_arn: &'a str,
    /// The caller's name for the session.
    pub session_name: &'a str,
    /// The token's subject.
    pub subject: &'a str,
    /// The token's audience.
    pub audience: &'a str,
}

/// The `AssumeRoleWithWebIdentityResponse` document for `session`.
pub fn granted_xml(session: &Session, granted: &Granted<'_>, request_id: &str) -> String {
    let expiration = i64::try_from(session.expires_unix)
        .ok()
        .and_then(|secs| Timestamp::from_second(secs).ok())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H:%M:%SZ");
    let (account, role) = assumed_role(granted.role_arn);
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <AssumeRoleWithWebIdentityResponse xmlns=\"{NAMESPACE}\">\
         <AssumeRoleWithWebIdentityResult>\
         <SubjectFromWebIdentityToken>{subject}</SubjectFromWebIdentityToken>\
         <Audience>{audience}</Audience>\
         <AssumedRoleUser><Arn>arn:aws:sts::{account}:assumed-role/{role}/{name}</Arn>\
         <AssumedRoleId>{id}:{name}</AssumedRoleId></AssumedRoleUser>\
         <Credentials><AccessKeyId>{key}</AccessKeyId>\
         <SecretAccessKey>{secret}</SecretAccessKey>\
         <SessionToken>{token}</SessionToken>\
         <Expiration>{expiration}</Expiration></Credentials>\
         <Provider>{audience}</Provider>\
         </AssumeRoleWithWebIdentityResult>\
         <ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>\
         </AssumeRoleWithWebIdentityResponse>",
        subject = escape(granted.subject),
        audience = escape(granted.audience),
        account = escape(account),
        role = escape(role),
        name = escape(granted.session_name),
        id = escape(&session.access_key_id),
        key = escape(&session.access_key_id),
        secret = escape(&session.secret_access_key),
        token = escape(&session.session_token),
        request_id = escape(request_id),
    )
}

/// The account and role name of a role ARN the request parser accepted.
fn assumed_role(arn: &str) -> (&str, &str) {
    let mut parts = arn.splitn(6, ':').skip(4);
    let account = parts.next().unwrap_or_default();
    let role = parts.next().and_then(|r| r.rsplit('/').next()).unwrap_or_default();
    (account, role)
}

/// Escapes text for an XML element.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_who_is_at_fault_and_escapes_its_message() {
        let xml = StsError::validation("a <b> & c").to_xml("req-1");
        assert!(xml.contains("<Type>Sender</Type><Code>ValidationError</Code>"), "{xml}");
        assert!(xml.contains("<Message>a &lt;b&gt; &amp; c</Message>"), "{xml}");
        assert!(StsError::unavailable("x").to_xml("r").contains("<Type>Receiver</Type>"));
    }

    #[test]
    fn a_grant_names_the_assumed_role_and_the_session() {
        let session = Session {
            access_key_id: "ASIA1".into(),
            secret_access_key: "s".into(),
            session_token: "t".into(),
            user_id: "obc-1".into(),
            subject: "system:serviceaccount:a:app".into(),
            subject_uid: None,
            expires_unix: 3600,
        };
        let granted = Granted {
            role_arn: "arn:aws:iam::000000000000:role/obc-1",
            session_name: "pod",
            subject: &session.subject,
            audience: "aud",
        };
        let xml = granted_xml(&session, &granted, "r");
        assert!(xml.contains("<Arn>arn:aws:sts::000000000000:assumed-role/obc-1/pod</Arn>"));
        assert!(xml.contains("<Expiration>1970-01-01T01:00:00Z</Expiration>"), "{xml}");
        assert!(xml.contains("<AccessKeyId>ASIA1</AccessKeyId>"));
    }
}

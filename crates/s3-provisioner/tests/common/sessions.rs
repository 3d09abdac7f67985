//! Sessions of an IAM role as a pod's SDK holds them, and S3 calls made with them, on moto.

use aws_sdk_s3::primitives::ByteStream;
use bucket_provisioner::Credentials;
use s3_provisioner::web_identity::ROLE_PATH;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::error_code;
use super::moto::Moto;

/// A session of `role_arn` from `AssumeRoleWithWebIdentity`, as a pod's SDK would hold after
/// trading its token (the request signed by moto's administrator: see the module's comment).
pub async fn session(moto: &Moto, role_arn: &str) -> Credentials {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let form = serde_urlencoded::to_string([
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role_arn),
        ("RoleSessionName", "pod"),
        ("WebIdentityToken", "a-projected-serviceaccount-token"),
    ])
    .unwrap();
    let host = moto.endpoint.trim_start_matches("http://").to_owned();
    let identity = aws_sdk_s3::config::Credentials::new(
        &moto.admin.access_key_id,
        &moto.admin.secret_access_key,
        None,
        None,
        "test",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("sts")
        .time(std::time::SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let content_type = "application/x-www-form-urlencoded";
    let headers = [("host", host.as_str()), ("content-type", content_type)];
    let url = format!("{}/", moto.endpoint);
    let body = SignableBody::Bytes(form.as_bytes());
    let request = SignableRequest::new("POST", url.as_str(), headers.into_iter(), body).unwrap();
    let (instructions, _) = sign(request, &params).unwrap().into_parts();
    let mut text = format!(
        "POST / HTTP/1.1\r\nhost: {host}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
        form.len()
    );
    for (name, value) in instructions.headers() {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&form);
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let field = |name: &str| {
        let open = format!("<{name}>");
        let rest = answer.split(&open).nth(1).unwrap_or_else(|| panic!("no {name} in {answer}"));
        rest.split('<').next().unwrap().to_owned()
    };
    Credentials {
        access_key_id: field("AccessKeyId"),
        secret_access_key: format!("{}\n{}", field("SecretAccessKey"), field("SessionToken")),
    }
}

/// An S3 client signing with a session (its secret and token joined by [`session`]).
pub fn s3_with(moto: &Moto, session: &Credentials) -> aws_sdk_s3::Client {
    let (secret, token) = session.secret_access_key.split_once('\n').unwrap();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(&moto.endpoint)
        .force_path_style(true)
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            &session.access_key_id,
            secret,
            Some(token.to_owned()),
            None,
            "session",
        ))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

pub async fn put(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    let put = s3.put_object().bucket(bucket).key(key).body(ByteStream::from_static(b"x")).send();
    put.await.map(drop).map_err(|e| error_code(Err::<(), _>(e)))
}

pub async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    let got = s3.get_object().bucket(bucket).key(key).send().await;
    got.map(drop).map_err(|e| error_code(Err::<(), _>(e)))
}

/// The role's trust policy as IAM stores it (URL-encoded on the wire, by AWS at least).
pub async fn trust_of(moto: &Moto, role: &str) -> Option<serde_json::Value> {
    let got = moto.iam(&moto.admin).get_role().role_name(role).send().await.ok()?;
    let role = got.role()?;
    assert_eq!(role.path(), ROLE_PATH);
    let text = role.assume_role_policy_document()?;
    let text = percent_encoding::percent_decode_str(text).decode_utf8().ok()?;
    serde_json::from_str(&text).ok()
}

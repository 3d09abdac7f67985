//! An application using a claim, as a pod with `envFrom` on the claim's Secret and ConfigMap
//! would: credentials, endpoint, region and bucket all come from the environment, so there is
//! no endpoint code here. It writes an object, reads it back and lists the bucket, then reads
//! each object named on its command line (objects someone else put there).
//!
//! With `AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE` in its environment instead of keys
//! (a claim of ServiceAccounts), the SDK trades the pod's projected token for short-lived
//! credentials and renews them by itself; `CONSUMER_KEEP_USING_SECONDS` keeps it working for
//! that long, across renewals.
//!
//! With a COSI (`objectstorage.k8s.io/v1alpha1`) access Secret mounted as a volume instead,
//! `COSI_BUCKET_INFO=/path/BucketInfo` names its one key, `BucketInfo`: JSON whose
//! `spec.bucketName` and `spec.secretS3` (`endpoint`, `region`, `accessKeyID`,
//! `accessSecretKey`) say everything.

use std::error::Error;
use std::fmt::Debug;
use std::process::ExitCode;

use aws_config::BehaviorVersion;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use serde_json::Value;

/// What the service answered (`AccessDenied: ...`), or why there was no answer.
fn explain<E, R>(e: SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + Error + 'static,
    R: Debug,
{
    if let Some(code) = e.code() {
        return format!("{code}: {}", e.message().unwrap_or_default());
    }
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("consumer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where the bucket is and the keys to it, from a COSI access Secret.
struct CosiAccess {
    endpoint: String,
    region: String,
    access_key_id: String,
    secret_access_key: String,
    bucket: String,
}

/// The v1alpha1 `BucketInfo` JSON of an access Secret, naming the first field it lacks.
fn bucket_info(text: &str) -> Result<CosiAccess, String> {
    let info: Value = serde_json::from_str(text).map_err(|e| format!("BucketInfo: {e}"))?;
    let field = |pointer: &str| -> Result<String, String> {
        match info.pointer(pointer).and_then(Value::as_str) {
            Some(value) if !value.is_empty() => Ok(value.to_owned()),
            _ => Err(format!("BucketInfo has no {}", pointer[1..].replace('/', "."))),
        }
    };
    Ok(CosiAccess {
        endpoint: field("/spec/secretS3/endpoint")?,
        region: field("/spec/secretS3/region")?,
        access_key_id: field("/spec/secretS3/accessKeyID")?,
        secret_access_key: field("/spec/secretS3/accessSecretKey")?,
        bucket: field("/spec/bucketName")?,
    })
}

/// The COSI v1alpha1 access this pod was given, if any: its mounted `BucketInfo` file.
fn cosi_access() -> Result<Option<CosiAccess>, String> {
    let Ok(path) = std::env::var("COSI_BUCKET_INFO") else { return Ok(None) };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    bucket_info(&text).map(Some)
}

async fn run() -> Result<(), Box<dyn Error>> {
    let http = aws_smithy_http_client::Builder::new().build_http();
    let (bucket, config) = match cosi_access()? {
        Some(access) => {
            println!("consumer: COSI access to bucket {} at {}", access.bucket, access.endpoint);
            let credentials = Credentials::new(
                access.access_key_id,
                access.secret_access_key,
                None,
                None,
                "cosi-access",
            );
            let config = aws_sdk_s3::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .http_client(http)
                .credentials_provider(credentials)
                .region(Region::new(access.region))
                .endpoint_url(access.endpoint)
                .force_path_style(true)
                .build();
            (access.bucket, config)
        }
        None => {
            let bucket = std::env::var("BUCKET_NAME").map_err(|_| "BUCKET_NAME is not set")?;
            // Reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ENDPOINT_URL.
            let shared =
                aws_config::defaults(BehaviorVersion::latest()).http_client(http).load().await;
            // Path-style addressing, because the endpoint host may be an address or a Service
            // name.
            (bucket, aws_sdk_s3::config::Builder::from(&shared).force_path_style(true).build())
        }
    };
    let s3 = aws_sdk_s3::Client::from_conf(config);

    let key = "hello.txt";
    let text = format!("hello from a claim on bucket {bucket}");
    s3.put_object()
        .bucket(&bucket)
        .key(key)
        .body(ByteStream::from(text.clone().into_bytes()))
        .send()
        .await
        .map_err(explain)?;
    println!("consumer: wrote s3://{bucket}/{key}");

    let read = s3.get_object().bucket(&bucket).key(key).send().await.map_err(explain)?;
    let read = read.body.collect().await?;
    let read = String::from_utf8(read.into_bytes().to_vec())?;
    if read != text {
        return Err(format!("read back {read:?}, expected {text:?}").into());
    }
    println!("consumer: read it back: {read:?}");

    let listed = s3.list_objects_v2().bucket(&bucket).send().await.map_err(explain)?;
    for object in listed.contents() {
        println!(
            "consumer: listed {} ({} bytes)",
            object.key().unwrap_or(""),
            object.size().unwrap_or(0)
        );
    }

    for key in std::env::args().skip(1) {
        let body = s3.get_object().bucket(&bucket).key(&key).send().await.map_err(explain)?;
        let body = body.body.collect().await?;
        let body = String::from_utf8_lossy(&body.into_bytes()).into_owned();
        println!("consumer: read s3://{bucket}/{key}: {body:?}");
    }
    keep_using(&s3, &bucket).await
}

/// With `CONSUMER_KEEP_USING_SECONDS`, goes on writing and reading an object every few seconds
/// for that long, stopping at the first failure: a pod's steady use, across as many renewals of
/// short-lived credentials as the time holds (the SDK renews them by itself).
async fn keep_using(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<(), Box<dyn Error>> {
    let Ok(seconds) = std::env::var("CONSUMER_KEEP_USING_SECONDS") else { return Ok(()) };
    let seconds: u64 = seconds.parse().map_err(|e| format!("CONSUMER_KEEP_USING_SECONDS: {e}"))?;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let mut requests = 0u64;
    while std::time::Instant::now() < until {
        let body = format!("request {requests}");
        let put = s3.put_object().bucket(bucket).key("steady.txt");
        put.body(ByteStream::from(body.clone().into_bytes())).send().await.map_err(explain)?;
        let read =
            s3.get_object().bucket(bucket).key("steady.txt").send().await.map_err(explain)?;
        let read = read.body.collect().await?.into_bytes();
        if read.as_ref() != body.as_bytes() {
            return Err(format!("read back {read:?} after writing {body:?}").into());
        }
        requests += 2;
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    }
    println!("consumer: {requests} requests over {seconds}s, none failed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::bucket_info;

    const INFO: &str = r#"{"metadata":{"name":"bc-1"},"spec":{"bucketName":"bc-1",
        "authenticationType":"KEY","secretS3":{"endpoint":"http://s3.example:9000",
        "region":"us-east-1","accessKeyID":"AK","accessSecretKey":"SK"},"protocols":["s3"]}}"#;

    #[test]
    fn reads_the_v1alpha1_bucket_info() {
        let access = bucket_info(INFO).unwrap();
        assert_eq!(access.bucket, "bc-1");
        assert_eq!(access.endpoint, "http://s3.example:9000");
        assert_eq!(access.region, "us-east-1");
        assert_eq!(
            (access.access_key_id.as_str(), access.secret_access_key.as_str()),
            ("AK", "SK")
        );
    }

    #[test]
    fn names_the_field_it_lacks() {
        let missing = INFO.replace(r#""accessSecretKey":"SK""#, r#""accessSecretKey":"""#);
        let error = bucket_info(&missing).err().unwrap();
        assert_eq!(error, "BucketInfo has no spec.secretS3.accessSecretKey");
        let error = bucket_info("not json").err().unwrap();
        assert!(error.starts_with("BucketInfo: "), "{error}");
    }

    proptest! {
        /// Whatever the file holds, the answer is the access or an error about BucketInfo.
        #[test]
        fn any_text_is_read_or_refused_by_name(text in ".*") {
            if let Err(error) = bucket_info(&text) {
                prop_assert!(error.starts_with("BucketInfo"), "{error}");
            }
        }
    }
}

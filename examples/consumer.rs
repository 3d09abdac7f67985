//! An application using a claim, as a pod with `envFrom` on the claim's Secret and ConfigMap
//! would: credentials, endpoint, region and bucket all come from the environment, so there is
//! no endpoint code here. It writes an object, reads it back and lists the bucket, then reads
//! each object named on its command line (objects someone else put there).

use std::error::Error;
use std::fmt::Debug;
use std::process::ExitCode;

use aws_config::BehaviorVersion;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;

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

async fn run() -> Result<(), Box<dyn Error>> {
    let bucket = std::env::var("BUCKET_NAME").map_err(|_| "BUCKET_NAME is not set")?;
    // Reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ENDPOINT_URL.
    let shared = aws_config::defaults(BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .load()
        .await;
    // Path-style addressing, because the endpoint host may be an address or a Service name.
    let config = aws_sdk_s3::config::Builder::from(&shared).force_path_style(true).build();
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
    Ok(())
}

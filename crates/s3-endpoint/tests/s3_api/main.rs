//! The S3 endpoint as a real client sees it: the AWS SDK over HTTP on loopback; a module per
//! kind of object, in one test binary.

#[path = "../common/mod.rs"]
mod common;

mod large_objects;
mod objects;

async fn body(client: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<u8> {
    let out = client.get_object().bucket(bucket).key(key).send().await.unwrap();
    out.body.collect().await.unwrap().into_bytes().to_vec()
}

fn list_keys(out: &aws_sdk_s3::operation::list_objects_v2::ListObjectsV2Output) -> Vec<String> {
    out.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect()
}

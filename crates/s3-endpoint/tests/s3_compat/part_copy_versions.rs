//! UploadPartCopy from a given version of its source (`x-amz-copy-source: bucket/key?versionId=`),
//! as S3 copies it and s3-tests' test_multipart_copy_versioned reads it back: the bytes of that
//! version, whichever is newest, and the version named in `x-amz-copy-source-version-id`.

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketVersioningStatus, CompletedMultipartUpload, CompletedPart, VersioningConfiguration,
};

use crate::common::{Server, code};

async fn put(s3: &Client, key: &str, body: &'static [u8]) -> Option<String> {
    let put = s3.put_object().bucket("parts").key(key).body(ByteStream::from_static(body));
    put.send().await.unwrap().version_id
}

/// Makes `dest` of the one part copied from `source`, and reads it back.
async fn copied(s3: &Client, source: &str) -> Result<(Vec<u8>, Option<String>), String> {
    let upload = s3.create_multipart_upload().bucket("parts").key("dest").send().await.unwrap();
    let upload_id = upload.upload_id().unwrap();
    let part = s3
        .upload_part_copy()
        .bucket("parts")
        .key("dest")
        .upload_id(upload_id)
        .part_number(1)
        .copy_source(source)
        .send()
        .await
        .map_err(|e| code(&e))?;
    let etag = part.copy_part_result().and_then(|r| r.e_tag()).unwrap();
    let done = CompletedPart::builder().part_number(1).e_tag(etag).build();
    s3.complete_multipart_upload()
        .bucket("parts")
        .key("dest")
        .upload_id(upload_id)
        .multipart_upload(CompletedMultipartUpload::builder().parts(done).build())
        .send()
        .await
        .unwrap();
    let got = s3.get_object().bucket("parts").key("dest").send().await.unwrap();
    let bytes = got.body.collect().await.unwrap().into_bytes().to_vec();
    Ok((bytes, part.copy_source_version_id))
}

#[tokio::test]
async fn a_part_is_copied_from_the_version_named() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("parts", "obc-parts").await;
    let s3 = server.client(&key);
    put(&s3, "src", b"before versioning").await;
    let enabled = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled);
    let set = s3.put_bucket_versioning().bucket("parts");
    set.versioning_configuration(enabled.build()).send().await.unwrap();
    let first = put(&s3, "src", b"first").await.unwrap();
    let second = put(&s3, "src", b"second").await.unwrap();

    let by_id = |id: &str| format!("parts/src?versionId={id}");
    let (bytes, named) = copied(&s3, &by_id(&first)).await.unwrap();
    assert_eq!((bytes.as_slice(), named.as_deref()), (&b"first"[..], Some(first.as_str())));
    let (bytes, named) = copied(&s3, &by_id("null")).await.unwrap();
    assert_eq!((bytes.as_slice(), named.as_deref()), (&b"before versioning"[..], Some("null")));
    let (bytes, named) = copied(&s3, "parts/src").await.unwrap();
    assert_eq!((bytes.as_slice(), named), (&b"second"[..], None), "the newest: {second}");

    let marker = s3.delete_object().bucket("parts").key("src").send().await.unwrap();
    let marker = marker.version_id().unwrap().to_owned();
    assert_eq!(copied(&s3, &by_id(&marker)).await.unwrap_err(), "InvalidRequest");
    assert_eq!(copied(&s3, "parts/src").await.unwrap_err(), "NoSuchKey");
    let unknown = by_id("0123456789abcdef01234567");
    assert_eq!(copied(&s3, &unknown).await.unwrap_err(), "NoSuchVersion");
    let (bytes, _) = copied(&s3, &by_id(&second)).await.unwrap();
    assert_eq!(bytes, b"second", "behind a marker, still copied by id");
    server.stop().await;
}

//! The order GetObjectTagging lists tags in: by key, as S3 lists a tag set, whatever order a
//! write gave them in (s3-tests' test_put_obj_with_tags sends `foo=bar&bar` and reads back
//! `bar`, then `foo`).

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, Tag, Tagging};

use crate::common::Server;

async fn listed(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<(String, String)> {
    let got = s3.get_object_tagging().bucket(bucket).key(key).send().await.unwrap();
    got.tag_set().iter().map(|t| (t.key().to_owned(), t.value().to_owned())).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[tokio::test]
async fn tags_are_listed_by_key_whichever_way_they_were_given() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("order", "obc-order").await;
    let s3 = server.client(&key);
    let body = ByteStream::from_static(b"A");
    s3.put_object()
        .bucket("order")
        .key("put")
        .tagging("foo=bar&bar")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(listed(&s3, "order", "put").await, pairs(&[("bar", ""), ("foo", "bar")]));

    let upload = s3
        .create_multipart_upload()
        .bucket("order")
        .key("multi")
        .tagging("zeta=1&Hello=World&foo=bar")
        .send()
        .await
        .unwrap();
    let upload_id = upload.upload_id().unwrap();
    let part = s3
        .upload_part()
        .bucket("order")
        .key("multi")
        .upload_id(upload_id)
        .part_number(1)
        .body(ByteStream::from_static(b"part"))
        .send()
        .await
        .unwrap();
    let done = CompletedPart::builder().part_number(1).e_tag(part.e_tag().unwrap()).build();
    s3.complete_multipart_upload()
        .bucket("order")
        .key("multi")
        .upload_id(upload_id)
        .multipart_upload(CompletedMultipartUpload::builder().parts(done).build())
        .send()
        .await
        .unwrap();
    let expected = pairs(&[("Hello", "World"), ("foo", "bar"), ("zeta", "1")]);
    assert_eq!(listed(&s3, "order", "multi").await, expected);

    let given = [("key2", "val2"), ("key", "val"), ("a", "")];
    let tags = given.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build().unwrap());
    let tagging = Tagging::builder().set_tag_set(Some(tags.collect())).build().unwrap();
    s3.put_object_tagging().bucket("order").key("put").tagging(tagging).send().await.unwrap();
    let expected = pairs(&[("a", ""), ("key", "val"), ("key2", "val2")]);
    assert_eq!(listed(&s3, "order", "put").await, expected);
    server.stop().await;
}

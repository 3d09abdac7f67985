//! Conditional reads and writes (`If-Match`, `If-None-Match` and the dates).

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};

use crate::common::{Server, code, status};

#[tokio::test]
async fn conditional_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("cond", "obc-c").await;
    let s3 = server.client(&key);
    let put = s3
        .put_object()
        .bucket("cond")
        .key("k")
        .body(ByteStream::from_static(b"versioned by etag"))
        .send()
        .await
        .unwrap();
    let tag = put.e_tag().unwrap().to_owned();
    let head = s3.head_object().bucket("cond").key("k").send().await.unwrap();
    let modified = head.last_modified().unwrap().to_owned();
    let secs = |offset: i64| aws_sdk_s3::primitives::DateTime::from_secs(modified.secs() + offset);

    // If-Match.
    let out = s3.get_object().bucket("cond").key("k").if_match(&tag).send().await.unwrap();
    assert_eq!(out.e_tag(), Some(tag.as_str()));
    s3.get_object().bucket("cond").key("k").if_match("*").send().await.unwrap();
    let err =
        s3.get_object().bucket("cond").key("k").if_match("\"nope\"").send().await.unwrap_err();
    assert_eq!(status(&err), Some(412));
    assert_eq!(code(&err), "PreconditionFailed");
    // If-None-Match.
    let err = s3.get_object().bucket("cond").key("k").if_none_match(&tag).send().await.unwrap_err();
    assert_eq!(status(&err), Some(304));
    let err =
        s3.head_object().bucket("cond").key("k").if_none_match(&tag).send().await.unwrap_err();
    assert_eq!(status(&err), Some(304));
    s3.get_object().bucket("cond").key("k").if_none_match("\"other\"").send().await.unwrap();
    // If-Modified-Since / If-Unmodified-Since, at second resolution.
    let err = s3
        .get_object()
        .bucket("cond")
        .key("k")
        .if_modified_since(secs(0))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(304));
    s3.get_object().bucket("cond").key("k").if_modified_since(secs(-60)).send().await.unwrap();
    s3.get_object().bucket("cond").key("k").if_unmodified_since(secs(0)).send().await.unwrap();
    let err = s3
        .head_object()
        .bucket("cond")
        .key("k")
        .if_unmodified_since(secs(-60))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    // Precedence: a matching If-Match wins over a failing If-Unmodified-Since, and a matching
    // If-None-Match over a passing If-Modified-Since.
    s3.get_object()
        .bucket("cond")
        .key("k")
        .if_match(&tag)
        .if_unmodified_since(secs(-60))
        .send()
        .await
        .unwrap();
    let err = s3
        .get_object()
        .bucket("cond")
        .key("k")
        .if_none_match(&tag)
        .if_modified_since(secs(-60))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(304));
    server.stop().await;
}

#[tokio::test]
async fn conditional_writes_are_atomic() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("locks", "obc-l").await;
    let s3 = server.client(&key);

    let first = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_none_match("*")
        .body(ByteStream::from_static(b"first"))
        .send()
        .await
        .unwrap();
    let err = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_none_match("*")
        .body(ByteStream::from_static(b"second"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    assert_eq!(code(&err), "PreconditionFailed");
    // If-Match swaps only the version the writer saw.
    let err = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_match("\"00000000000000000000000000000000\"")
        .body(ByteStream::from_static(b"stale"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    s3.put_object()
        .bucket("locks")
        .key("lock")
        .if_match(first.e_tag().unwrap())
        .body(ByteStream::from_static(b"swapped"))
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("locks").key("lock").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"swapped");
    let err = s3
        .put_object()
        .bucket("locks")
        .key("absent")
        .if_match(first.e_tag().unwrap())
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");

    // If-None-Match with an ETag writes unless the current object has that ETag.
    let current = s3.head_object().bucket("locks").key("lock").send().await.unwrap();
    let err = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_none_match(current.e_tag().unwrap())
        .body(ByteStream::from_static(b"unchanged"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));

    // Many writers racing for one lock object: exactly one wins.
    let mut racers = Vec::new();
    for i in 0..12 {
        let s3 = s3.clone();
        racers.push(tokio::spawn(async move {
            s3.put_object()
                .bucket("locks")
                .key("race")
                .if_none_match("*")
                .body(ByteStream::from(format!("writer {i}").into_bytes()))
                .send()
                .await
                .map(|_| i)
        }));
    }
    let mut winners = Vec::new();
    for racer in racers {
        match racer.await.unwrap() {
            Ok(i) => winners.push(i),
            Err(e) => assert_eq!(status(&e), Some(412)),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let out = s3.get_object().bucket("locks").key("race").send().await.unwrap();
    let text = out.body.collect().await.unwrap().into_bytes();
    assert_eq!(text.as_ref(), format!("writer {}", winners[0]).as_bytes());

    // CompleteMultipartUpload honours If-None-Match too, and leaves the object alone.
    let upload = s3.create_multipart_upload().bucket("locks").key("lock").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let part = s3
        .upload_part()
        .bucket("locks")
        .key("lock")
        .upload_id(id)
        .part_number(1)
        .body(ByteStream::from_static(b"multipart"))
        .send()
        .await
        .unwrap();
    let complete = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag(part.e_tag().unwrap()).build())
        .build();
    let err = s3
        .complete_multipart_upload()
        .bucket("locks")
        .key("lock")
        .upload_id(id)
        .if_none_match("*")
        .multipart_upload(complete.clone())
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    let out = s3.get_object().bucket("locks").key("lock").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"swapped");
    let current = s3.head_object().bucket("locks").key("lock").send().await.unwrap();
    s3.complete_multipart_upload()
        .bucket("locks")
        .key("lock")
        .upload_id(id)
        .if_match(current.e_tag().unwrap())
        .multipart_upload(complete)
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("locks").key("lock").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"multipart");
    server.stop().await;
}

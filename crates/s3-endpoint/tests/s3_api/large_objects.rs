//! Large objects: multipart uploads, aborted and with small parts, and large GETs in every
//! shape.

use std::time::Instant;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use md5::Digest;

use crate::body;
use crate::common::{Server, code, pattern};

/// Sends `size` bytes as 5 MiB parts generated on the fly (the last one shorter).
async fn upload_parts(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    size: usize,
) -> (Vec<CompletedPart>, String) {
    const PART: usize = 5 * 1024 * 1024;
    let mut parts = Vec::new();
    let mut whole = md5::Md5::new();
    let mut offset = 0;
    let mut number = 1;
    while offset < size {
        let len = PART.min(size - offset);
        let data = pattern(number as u64, len);
        whole.update(&data);
        let out = s3
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(upload_id)
            .part_number(number)
            .body(ByteStream::from(data))
            .send()
            .await
            .unwrap();
        parts
            .push(CompletedPart::builder().part_number(number).e_tag(out.e_tag().unwrap()).build());
        offset += len;
        number += 1;
    }
    (parts, hex::encode(whole.finalize()))
}

#[tokio::test]
async fn multipart_upload_of_21_mib_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("multi", "obc-m").await;
    let s3 = server.client(&key);
    let size = 21 * 1024 * 1024 + 12_345;

    let started = Instant::now();
    let upload = s3
        .create_multipart_upload()
        .bucket("multi")
        .key("big/object.bin")
        .content_type("application/x-big")
        .metadata("origin", "multipart")
        .send()
        .await
        .unwrap();
    let upload_id = upload.upload_id().unwrap().to_owned();
    let (parts, whole_md5) = upload_parts(&s3, "multi", "big/object.bin", &upload_id, size).await;
    assert_eq!(parts.len(), 5);

    let listed = s3
        .list_parts()
        .bucket("multi")
        .key("big/object.bin")
        .upload_id(&upload_id)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.parts().len(), 5);
    assert_eq!(listed.parts()[0].size(), Some(5 * 1024 * 1024));
    assert_eq!(listed.parts()[4].e_tag(), parts[4].e_tag());
    let page = s3
        .list_parts()
        .bucket("multi")
        .key("big/object.bin")
        .upload_id(&upload_id)
        .max_parts(2)
        .part_number_marker("2")
        .send()
        .await
        .unwrap();
    let numbers: Vec<_> = page.parts().iter().filter_map(|p| p.part_number()).collect();
    assert_eq!(numbers, [3, 4]);
    assert_eq!(page.is_truncated(), Some(true));

    // Wrong ETag, wrong order.
    let wrong = CompletedPart::builder()
        .part_number(1)
        .e_tag("\"00000000000000000000000000000000\"")
        .build();
    let e = s3
        .complete_multipart_upload()
        .bucket("multi")
        .key("big/object.bin")
        .upload_id(&upload_id)
        .multipart_upload(CompletedMultipartUpload::builder().parts(wrong).build())
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "InvalidPart");
    let e = s3
        .complete_multipart_upload()
        .bucket("multi")
        .key("big/object.bin")
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(parts[1].clone())
                .parts(parts[0].clone())
                .build(),
        )
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "InvalidPartOrder");

    let done = s3
        .complete_multipart_upload()
        .bucket("multi")
        .key("big/object.bin")
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder().set_parts(Some(parts.clone())).build(),
        )
        .send()
        .await
        .unwrap();
    let upload_secs = started.elapsed().as_secs_f64();
    // ETag: MD5 of the concatenated binary part MD5s, a dash, the part count.
    let mut of_parts = md5::Md5::new();
    for part in &parts {
        of_parts.update(hex::decode(part.e_tag().unwrap().trim_matches('"')).unwrap());
    }
    let expected_etag = format!("\"{}-5\"", hex::encode(of_parts.finalize()));
    assert_eq!(done.e_tag(), Some(expected_etag.as_str()));

    // Read it back as a stream, hashing as it comes.
    let started = Instant::now();
    let got = s3.get_object().bucket("multi").key("big/object.bin").send().await.unwrap();
    assert_eq!(got.content_length(), Some(size as i64));
    assert_eq!(got.e_tag(), Some(expected_etag.as_str()));
    assert_eq!(got.content_type(), Some("application/x-big"));
    assert_eq!(got.metadata().unwrap().get("origin").map(String::as_str), Some("multipart"));
    let mut hash = md5::Md5::new();
    let mut received = 0;
    let mut stream = got.body;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        received += chunk.len();
        hash.update(&chunk);
    }
    assert_eq!(received, size);
    assert_eq!(hex::encode(hash.finalize()), whole_md5);
    eprintln!(
        "multipart: {} MiB uploaded in {upload_secs:.2}s, downloaded in {:.2}s",
        size >> 20,
        started.elapsed().as_secs_f64()
    );

    // A range across a part boundary.
    let boundary = 5 * 1024 * 1024;
    let out = s3
        .get_object()
        .bucket("multi")
        .key("big/object.bin")
        .range(format!("bytes={}-{}", boundary - 4, boundary + 3))
        .send()
        .await
        .unwrap();
    let bytes = out.body.collect().await.unwrap().into_bytes();
    let mut expected = pattern(1, boundary)[boundary - 4..].to_vec();
    expected.extend_from_slice(&pattern(2, 4));
    assert_eq!(bytes.as_ref(), &expected[..]);

    // The upload is gone once complete; nothing is left in the upload area.
    let e = s3
        .list_parts()
        .bucket("multi")
        .key("big/object.bin")
        .upload_id(&upload_id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchUpload");
    let uploads = tmp.path().join(".provisioner/uploads/multi");
    assert_eq!(std::fs::read_dir(uploads).unwrap().count(), 0);

    server.stop().await;
}

#[tokio::test]
async fn multipart_abort_and_small_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("multi", "obc-m").await;
    let s3 = server.client(&key);

    // Parts below 5 MiB are only allowed last.
    let upload = s3.create_multipart_upload().bucket("multi").key("small").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let mut parts = Vec::new();
    for number in 1..=2 {
        let out = s3
            .upload_part()
            .bucket("multi")
            .key("small")
            .upload_id(id)
            .part_number(number)
            .body(ByteStream::from(pattern(number as u64, 1000)))
            .send()
            .await
            .unwrap();
        parts
            .push(CompletedPart::builder().part_number(number).e_tag(out.e_tag().unwrap()).build());
    }
    let e = s3
        .complete_multipart_upload()
        .bucket("multi")
        .key("small")
        .upload_id(id)
        .multipart_upload(
            CompletedMultipartUpload::builder().set_parts(Some(parts.clone())).build(),
        )
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "EntityTooSmall");
    // A single small part is fine.
    let done = s3
        .complete_multipart_upload()
        .bucket("multi")
        .key("small")
        .upload_id(id)
        .multipart_upload(CompletedMultipartUpload::builder().parts(parts[0].clone()).build())
        .send()
        .await
        .unwrap();
    assert!(done.e_tag().unwrap().ends_with("-1\""));
    assert_eq!(body(&s3, "multi", "small").await, pattern(1, 1000));

    // Abort removes the upload; the key never appears.
    let upload = s3.create_multipart_upload().bucket("multi").key("aborted").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    s3.upload_part()
        .bucket("multi")
        .key("aborted")
        .upload_id(id)
        .part_number(1)
        .body(ByteStream::from_static(b"data"))
        .send()
        .await
        .unwrap();
    s3.abort_multipart_upload().bucket("multi").key("aborted").upload_id(id).send().await.unwrap();
    let e = s3.list_parts().bucket("multi").key("aborted").upload_id(id).send().await.unwrap_err();
    assert_eq!(code(&e), "NoSuchUpload");
    let e = s3.get_object().bucket("multi").key("aborted").send().await.unwrap_err();
    assert_eq!(code(&e), "NoSuchKey");
    // Upload ids are never paths.
    let e = s3
        .list_parts()
        .bucket("multi")
        .key("aborted")
        .upload_id("../../state.json")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchUpload");

    server.stop().await;
}

/// Large bodies go from their files to the socket in the kernel; what arrives must be the
/// object's bytes exactly, whole or in ranges, one after another on a kept connection, between
/// small ones, and side by side on several.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_gets_arrive_exactly_in_every_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("large", "obc-large").await;
    let s3 = server.client(&key);
    let sizes = [1 << 20, (1 << 20) + 1, 7 * (1 << 20) + 12_345];
    for (i, size) in sizes.iter().enumerate() {
        let data = pattern(i as u64 + 40, *size);
        s3.put_object()
            .bucket("large")
            .key(format!("o{i}"))
            .body(data.into())
            .send()
            .await
            .unwrap();
    }
    s3.put_object()
        .bucket("large")
        .key("small")
        .body(b"small".to_vec().into())
        .send()
        .await
        .unwrap();

    // One after another (the client keeps its connection), with a small one in between.
    for round in 0..2 {
        for (i, size) in sizes.iter().enumerate() {
            let got = body(&s3, "large", &format!("o{i}")).await;
            assert!(got == pattern(i as u64 + 40, *size), "o{i} round {round}: wrong bytes");
            assert_eq!(body(&s3, "large", "small").await, b"small");
        }
    }
    // Ranges, including ones below the size sent from the file.
    let data = pattern(42, sizes[2]);
    let len = data.len();
    for (range, expected) in [
        ("bytes=0-1048575".to_string(), &data[..1 << 20]),
        ("bytes=5-3000000".to_string(), &data[5..3_000_001]),
        ("bytes=-2000000".to_string(), &data[len - 2_000_000..]),
        (format!("bytes={}-", len - 10), &data[len - 10..]),
        ("bytes=100-199".to_string(), &data[100..200]),
    ] {
        let out = s3.get_object().bucket("large").key("o2").range(&range).send().await.unwrap();
        let got = out.body.collect().await.unwrap().into_bytes();
        assert!(got == expected, "{range}: {} bytes, {} expected", got.len(), expected.len());
    }
    // Side by side, each on a connection of its own.
    let gets = (0..4).map(|n| {
        let s3 = server.client(&key);
        async move { (n, body(&s3, "large", &format!("o{}", n % 3)).await) }
    });
    for (n, got) in futures::future::join_all(gets).await {
        assert!(got == pattern(n % 3 + 40, sizes[n as usize % 3]), "parallel GET {n}");
    }
    // A HEAD of a large object sends no body, and the connection goes on serving.
    let head = s3.head_object().bucket("large").key("o2").send().await.unwrap();
    assert_eq!(head.content_length(), Some(sizes[2] as i64));
    assert!(body(&s3, "large", "o1").await == pattern(41, sizes[1]));
}

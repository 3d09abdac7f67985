//! Checksums a client sends, in headers, trailers and multipart uploads, verified, kept and
//! returned; and reads by part number.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    ChecksumAlgorithm, ChecksumMode, ChecksumType, CompletedMultipartUpload, CompletedPart,
    ObjectAttributes,
};
use base64::Engine as _;

use crate::common::{RawResponse, Server, code, pattern, raw_request, sign_v4, status};
use crate::{PART, b64};

/// The S3 checksum of `data` with `algorithm`, base64, computed independently of the server.
fn checksum_of(algorithm: &ChecksumAlgorithm, data: &[u8]) -> String {
    use sha1::Digest as _;
    let crc = |algorithm, width: usize| {
        let value = crc_fast::checksum(algorithm, data).to_be_bytes();
        b64(&value[8 - width..])
    };
    match algorithm {
        ChecksumAlgorithm::Crc32 => crc(crc_fast::CrcAlgorithm::Crc32IsoHdlc, 4),
        ChecksumAlgorithm::Crc32C => crc(crc_fast::CrcAlgorithm::Crc32Iscsi, 4),
        ChecksumAlgorithm::Crc64Nvme => crc(crc_fast::CrcAlgorithm::Crc64Nvme, 8),
        ChecksumAlgorithm::Sha1 => b64(&sha1::Sha1::digest(data)),
        ChecksumAlgorithm::Sha256 => b64(&sha2::Sha256::digest(data)),
        other => panic!("no such algorithm {other:?}"),
    }
}

fn raw_checksum(algorithm: &ChecksumAlgorithm, data: &[u8]) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(checksum_of(algorithm, data)).unwrap()
}

const ALGORITHMS: [ChecksumAlgorithm; 5] = [
    ChecksumAlgorithm::Crc32,
    ChecksumAlgorithm::Crc32C,
    ChecksumAlgorithm::Crc64Nvme,
    ChecksumAlgorithm::Sha1,
    ChecksumAlgorithm::Sha256,
];

fn stored_checksum(
    out: &aws_sdk_s3::operation::head_object::HeadObjectOutput,
    algorithm: &ChecksumAlgorithm,
) -> Option<String> {
    match algorithm {
        ChecksumAlgorithm::Crc32 => out.checksum_crc32(),
        ChecksumAlgorithm::Crc32C => out.checksum_crc32_c(),
        ChecksumAlgorithm::Crc64Nvme => out.checksum_crc64_nvme(),
        ChecksumAlgorithm::Sha1 => out.checksum_sha1(),
        ChecksumAlgorithm::Sha256 => out.checksum_sha256(),
        _ => None,
    }
    .map(str::to_owned)
}

#[tokio::test]
async fn checksums_are_verified_kept_and_returned() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("sums", "obc-s").await;
    let s3 = server.client(&key);
    let data = pattern(3, 300_000);

    for algorithm in ALGORITHMS {
        let name = format!("ok/{}", algorithm.as_str());
        // The SDK computes the checksum and sends it (a header or an aws-chunked trailer).
        let put = s3
            .put_object()
            .bucket("sums")
            .key(&name)
            .checksum_algorithm(algorithm.clone())
            .body(ByteStream::from(data.clone()))
            .send()
            .await
            .unwrap();
        let expected = checksum_of(&algorithm, &data);
        let head = s3
            .head_object()
            .bucket("sums")
            .key(&name)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(stored_checksum(&head, &algorithm), Some(expected.clone()), "{algorithm:?}");
        assert_eq!(head.checksum_type(), Some(&ChecksumType::FullObject), "{algorithm:?}");
        let put_value = match algorithm {
            ChecksumAlgorithm::Crc32 => put.checksum_crc32(),
            ChecksumAlgorithm::Crc32C => put.checksum_crc32_c(),
            ChecksumAlgorithm::Crc64Nvme => put.checksum_crc64_nvme(),
            ChecksumAlgorithm::Sha1 => put.checksum_sha1(),
            _ => put.checksum_sha256(),
        };
        assert_eq!(put_value, Some(expected.as_str()), "{algorithm:?}");
        // With ChecksumMode the SDK validates the body against the returned checksum itself.
        let got = s3
            .get_object()
            .bucket("sums")
            .key(&name)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), &data[..]);
        // Without it, no checksum is announced.
        let plain = s3.head_object().bucket("sums").key(&name).send().await.unwrap();
        assert_eq!(stored_checksum(&plain, &algorithm), None);

        // A wrong value in the header is refused and nothing is stored.
        let wrong = checksum_of(&algorithm, b"something else");
        let mut request = s3.put_object().bucket("sums").key(format!("bad/{}", algorithm.as_str()));
        request = match algorithm {
            ChecksumAlgorithm::Crc32 => request.checksum_crc32(wrong),
            ChecksumAlgorithm::Crc32C => request.checksum_crc32_c(wrong),
            ChecksumAlgorithm::Crc64Nvme => request.checksum_crc64_nvme(wrong),
            ChecksumAlgorithm::Sha1 => request.checksum_sha1(wrong),
            _ => request.checksum_sha256(wrong),
        };
        let err = request.body(ByteStream::from(data.clone())).send().await.unwrap_err();
        assert_eq!(code(&err), "BadDigest", "{algorithm:?}");
        let err = s3
            .head_object()
            .bucket("sums")
            .key(format!("bad/{}", algorithm.as_str()))
            .send()
            .await
            .unwrap_err();
        assert_eq!(status(&err), Some(404), "{algorithm:?}: nothing may be stored");
    }

    // A mismatch never replaces an existing object either.
    let err = s3
        .put_object()
        .bucket("sums")
        .key("ok/CRC32")
        .checksum_crc32(checksum_of(&ChecksumAlgorithm::Crc32, b"other"))
        .body(ByteStream::from_static(b"replacement"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "BadDigest");
    let out = s3.get_object().bucket("sums").key("ok/CRC32").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), &data[..]);

    // A value that is not a checksum of that algorithm at all.
    let err = s3
        .put_object()
        .bucket("sums")
        .key("bad/format")
        .checksum_crc32("not-base64!")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRequest");
    assert!(!tmp.path().join("buckets/sums/bad").exists());
    server.stop().await;
}

/// Sends `data` as an aws-chunked `STREAMING-UNSIGNED-PAYLOAD-TRAILER` PUT (as current SDKs
/// do) whose trailer carries `trailer_value` for `x-amz-checksum-crc32`.
async fn put_with_trailer(
    server: &Server,
    key: &s3_endpoint::AccessKey,
    path: &str,
    data: &[u8],
    trailer_value: &str,
) -> RawResponse {
    let payload = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
    let decoded = data.len().to_string();
    let headers = [
        ("content-encoding", "aws-chunked"),
        ("x-amz-content-sha256", payload),
        ("x-amz-decoded-content-length", decoded.as_str()),
        ("x-amz-trailer", "x-amz-checksum-crc32"),
    ];
    let signed = sign_v4(server.addr, key, "PUT", path, &headers, payload);
    let mut body = format!("{:x}\r\n", data.len()).into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(
        format!("\r\n0\r\nx-amz-checksum-crc32:{trailer_value}\r\n\r\n").as_bytes(),
    );
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    all.extend(signed.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    raw_request(server.addr, "PUT", path, &all, &body).await
}

#[tokio::test]
async fn aws_chunked_trailer_checksums_are_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("trail", "obc-t").await;
    let s3 = server.client(&key);
    let data = pattern(5, 70_000);

    let good = checksum_of(&ChecksumAlgorithm::Crc32, &data);
    let response = put_with_trailer(&server, &key, "/trail/good", &data, &good).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let head = s3
        .head_object()
        .bucket("trail")
        .key("good")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    assert_eq!(head.checksum_crc32(), Some(good.as_str()));
    assert_eq!(head.content_length(), Some(data.len() as i64));
    // aws-chunked describes the transfer only; it is not the object's Content-Encoding.
    assert_eq!(head.content_encoding(), None);

    let bad = checksum_of(&ChecksumAlgorithm::Crc32, b"tampered");
    let response = put_with_trailer(&server, &key, "/trail/bad", &data, &bad).await;
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("BadDigest"));
    let err = s3.head_object().bucket("trail").key("bad").send().await.unwrap_err();
    assert_eq!(status(&err), Some(404));
    // Temporary files live one directory down, in the store's temporary directories.
    let shards = std::fs::read_dir(tmp.path().join(".provisioner/tmp")).unwrap();
    let leftovers: usize =
        shards.map(|shard| std::fs::read_dir(shard.unwrap().path()).unwrap().count()).sum();
    assert_eq!(leftovers, 0, "the refused body leaves no temporary file");
    server.stop().await;
}

/// Uploads `sizes` as parts of a new upload of `key` with `algorithm`; returns the upload id,
/// the completed parts (with their checksums) and the whole data.
async fn upload_with_checksums(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    algorithm: &ChecksumAlgorithm,
    kind: Option<ChecksumType>,
    sizes: &[usize],
) -> (String, Vec<CompletedPart>, Vec<u8>) {
    let upload = s3
        .create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .checksum_algorithm(algorithm.clone())
        .set_checksum_type(kind)
        .send()
        .await
        .unwrap();
    let id = upload.upload_id().unwrap().to_owned();
    let (mut parts, mut whole) = (Vec::new(), Vec::new());
    for (i, size) in sizes.iter().enumerate() {
        let number = i as i32 + 1;
        let data = pattern(100 + number as u64, *size);
        whole.extend_from_slice(&data);
        let out = s3
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(&id)
            .part_number(number)
            .checksum_algorithm(algorithm.clone())
            .body(ByteStream::from(data.clone()))
            .send()
            .await
            .unwrap();
        let part = CompletedPart::builder().part_number(number).e_tag(out.e_tag().unwrap());
        let part = match algorithm {
            ChecksumAlgorithm::Crc32 => {
                part.set_checksum_crc32(out.checksum_crc32().map(str::to_owned))
            }
            ChecksumAlgorithm::Crc32C => {
                part.set_checksum_crc32_c(out.checksum_crc32_c().map(str::to_owned))
            }
            ChecksumAlgorithm::Crc64Nvme => {
                part.set_checksum_crc64_nvme(out.checksum_crc64_nvme().map(str::to_owned))
            }
            ChecksumAlgorithm::Sha1 => {
                part.set_checksum_sha1(out.checksum_sha1().map(str::to_owned))
            }
            _ => part.set_checksum_sha256(out.checksum_sha256().map(str::to_owned)),
        };
        assert!(
            out.checksum_crc32()
                .or(out.checksum_crc32_c())
                .or(out.checksum_crc64_nvme())
                .or(out.checksum_sha1())
                .or(out.checksum_sha256())
                == Some(checksum_of(algorithm, &data).as_str()),
            "part {number} answers its checksum"
        );
        parts.push(part.build());
    }
    (id, parts, whole)
}

#[tokio::test]
async fn multipart_checksums_composite_and_full_object() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("mpsum", "obc-m").await;
    let s3 = server.client(&key);
    let sizes = [PART, 1234];

    // SHA-256 parts: the object's checksum is the composite of the parts' checksums.
    let algorithm = ChecksumAlgorithm::Sha256;
    let (id, parts, whole) =
        upload_with_checksums(&s3, "mpsum", "composite", &algorithm, None, &sizes).await;
    // A part named with a checksum it does not have is refused.
    let mut forged = parts.clone();
    forged[1] = CompletedPart::builder()
        .part_number(2)
        .e_tag(parts[1].e_tag().unwrap())
        .checksum_sha256(checksum_of(&algorithm, b"not the part"))
        .build();
    let err = s3
        .complete_multipart_upload()
        .bucket("mpsum")
        .key("composite")
        .upload_id(&id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(forged)).build())
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidPart");
    let done = s3
        .complete_multipart_upload()
        .bucket("mpsum")
        .key("composite")
        .upload_id(&id)
        .multipart_upload(
            CompletedMultipartUpload::builder().set_parts(Some(parts.clone())).build(),
        )
        .send()
        .await
        .unwrap();
    let mut of_parts = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        of_parts.extend(raw_checksum(&algorithm, &pattern(101 + i as u64, *size)));
    }
    let composite = format!("{}-2", checksum_of(&algorithm, &of_parts));
    assert_eq!(done.checksum_sha256(), Some(composite.as_str()));
    let head = s3
        .head_object()
        .bucket("mpsum")
        .key("composite")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    assert_eq!(head.checksum_sha256(), Some(composite.as_str()));
    assert_eq!(head.checksum_type(), Some(&ChecksumType::Composite));

    // GetObjectAttributes: the checksum, the size and each part with its checksum.
    let attrs = s3
        .get_object_attributes()
        .bucket("mpsum")
        .key("composite")
        .object_attributes(ObjectAttributes::Checksum)
        .object_attributes(ObjectAttributes::ObjectParts)
        .object_attributes(ObjectAttributes::ObjectSize)
        .object_attributes(ObjectAttributes::Etag)
        .send()
        .await
        .unwrap();
    assert_eq!(attrs.object_size(), Some(whole.len() as i64));
    assert_eq!(attrs.checksum().and_then(|c| c.checksum_sha256()), Some(composite.as_str()));
    assert_eq!(attrs.checksum().and_then(|c| c.checksum_type()), Some(&ChecksumType::Composite));
    let object_parts = attrs.object_parts().unwrap();
    assert_eq!(object_parts.total_parts_count(), Some(2));
    let listed: Vec<_> = object_parts
        .parts()
        .iter()
        .map(|p| (p.part_number(), p.size(), p.checksum_sha256().map(str::to_owned)))
        .collect();
    assert_eq!(
        listed,
        [
            (Some(1), Some(PART as i64), Some(checksum_of(&algorithm, &pattern(101, PART)))),
            (Some(2), Some(1234), Some(checksum_of(&algorithm, &pattern(102, 1234)))),
        ]
    );

    // CRC64NVME: a whole-object checksum, combined from the parts without a second read.
    let algorithm = ChecksumAlgorithm::Crc64Nvme;
    let (id, parts, whole) = upload_with_checksums(
        &s3,
        "mpsum",
        "full",
        &algorithm,
        Some(ChecksumType::FullObject),
        &sizes,
    )
    .await;
    let done = s3
        .complete_multipart_upload()
        .bucket("mpsum")
        .key("full")
        .upload_id(&id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
        .send()
        .await
        .unwrap();
    assert_eq!(done.checksum_crc64_nvme(), Some(checksum_of(&algorithm, &whole).as_str()));
    assert_eq!(done.checksum_type(), Some(&ChecksumType::FullObject));
    // The SDK validates the whole body against it.
    let got = s3
        .get_object()
        .bucket("mpsum")
        .key("full")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    assert_eq!(got.checksum_crc64_nvme(), Some(checksum_of(&algorithm, &whole).as_str()));
    assert_eq!(got.body.collect().await.unwrap().into_bytes().len(), whole.len());

    // A part checksum of another algorithm than the upload's is refused.
    let upload = s3
        .create_multipart_upload()
        .bucket("mpsum")
        .key("mixed")
        .checksum_algorithm(ChecksumAlgorithm::Crc32)
        .send()
        .await
        .unwrap();
    let err = s3
        .upload_part()
        .bucket("mpsum")
        .key("mixed")
        .upload_id(upload.upload_id().unwrap())
        .part_number(1)
        .checksum_sha1(checksum_of(&ChecksumAlgorithm::Sha1, b"x"))
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRequest");
    // A wrong part checksum is BadDigest and stores no part.
    let err = s3
        .upload_part()
        .bucket("mpsum")
        .key("mixed")
        .upload_id(upload.upload_id().unwrap())
        .part_number(1)
        .checksum_crc32(checksum_of(&ChecksumAlgorithm::Crc32, b"y"))
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "BadDigest");
    let listed = s3
        .list_parts()
        .bucket("mpsum")
        .key("mixed")
        .upload_id(upload.upload_id().unwrap())
        .send()
        .await
        .unwrap();
    assert!(listed.parts().is_empty());
    assert_eq!(listed.checksum_algorithm(), Some(&ChecksumAlgorithm::Crc32));
    server.stop().await;
}

#[tokio::test]
async fn get_object_by_part_number() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("parts", "obc-p").await;
    let s3 = server.client(&key);
    let sizes = [PART, PART + 17, 999];
    let (id, parts, whole) =
        upload_with_checksums(&s3, "parts", "big", &ChecksumAlgorithm::Crc32, None, &sizes).await;
    let done = s3
        .complete_multipart_upload()
        .bucket("parts")
        .key("big")
        .upload_id(&id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
        .send()
        .await
        .unwrap();

    let mut offset = 0;
    for (i, size) in sizes.iter().enumerate() {
        let number = i as i32 + 1;
        // With ChecksumMode the part's own checksum comes back, and the SDK checks the bytes.
        let out = s3
            .get_object()
            .bucket("parts")
            .key("big")
            .part_number(number)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        let out_checksum = out.checksum_crc32().map(str::to_owned);
        assert_eq!(
            out_checksum,
            Some(checksum_of(&ChecksumAlgorithm::Crc32, &whole[offset..offset + size])),
            "part {number}"
        );
        assert_eq!(out.parts_count(), Some(3), "part {number}");
        assert_eq!(out.content_length(), Some(*size as i64), "part {number}");
        assert_eq!(
            out.content_range(),
            Some(format!("bytes {offset}-{}/{}", offset + size - 1, whole.len()).as_str())
        );
        assert_eq!(out.e_tag(), done.e_tag(), "the ETag is the object's");
        let bytes = out.body.collect().await.unwrap().into_bytes();
        assert_eq!(bytes.as_ref(), &whole[offset..offset + size], "part {number}");
        let head = s3
            .head_object()
            .bucket("parts")
            .key("big")
            .part_number(number)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(head.content_length(), Some(*size as i64));
        assert_eq!(head.checksum_crc32(), out_checksum.as_deref(), "part {number}");
        assert_eq!(head.parts_count(), Some(3));
        offset += size;
    }
    // The same through the raw protocol: 206 and x-amz-mp-parts-count.
    let head = s3.head_object().bucket("parts").key("big").part_number(2).send().await.unwrap();
    assert_eq!(head.parts_count(), Some(3));

    let err = s3.get_object().bucket("parts").key("big").part_number(4).send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidPartNumber");
    assert_eq!(status(&err), Some(416));
    let err = s3
        .get_object()
        .bucket("parts")
        .key("big")
        .part_number(1)
        .range("bytes=0-1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRequest");

    // A simple object is its own part 1.
    s3.put_object()
        .bucket("parts")
        .key("small")
        .body(ByteStream::from_static(b"single"))
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("parts").key("small").part_number(1).send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"single");
    let err = s3.get_object().bucket("parts").key("small").part_number(2).send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidPartNumber");
    server.stop().await;
}

//! Objects are streamed, not buffered: moving an object much larger than the allowed memory
//! growth through the endpoint (client and server in this one process) keeps peak RSS low.
//! Alone in its own test binary so that no other test's allocations blur the numbers.

mod common;

use std::io::Write;
use std::time::Instant;

use aws_sdk_s3::primitives::ByteStream;
use common::{Server, pattern};
use md5::Digest;

const OBJECT: usize = 128 * 1024 * 1024;
/// Far below the object size: a server (or client) holding the object whole would exceed it.
const ALLOWED_GROWTH: u64 = 64 * 1024 * 1024;

/// Peak resident set size of this process, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_objects_stream_through_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("root")).await;
    let key = server.bucket_with_key("big", "obc-big").await;
    let s3 = server.client(&key);

    // The source file is written in 1 MiB pieces, never held whole.
    let source = tmp.path().join("source.bin");
    let mut file = std::fs::File::create(&source).unwrap();
    let mut expected = md5::Md5::new();
    for i in 0..OBJECT / (1024 * 1024) {
        let piece = pattern(i as u64 + 1, 1024 * 1024);
        expected.update(&piece);
        file.write_all(&piece).unwrap();
    }
    drop(file);
    let expected = hex::encode(expected.finalize());

    // Warm up connection pools and allocator arenas, then reset the peak (Linux clear_refs "5").
    s3.put_object()
        .bucket("big")
        .key("warm")
        .body(ByteStream::from_static(b"w"))
        .send()
        .await
        .unwrap();
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = peak_rss();

    let started = Instant::now();
    let body = ByteStream::from_path(&source).await.unwrap();
    let put = s3.put_object().bucket("big").key("object").body(body).send().await.unwrap();
    let put_secs = started.elapsed().as_secs_f64();
    assert_eq!(put.e_tag(), Some(format!("\"{expected}\"").as_str()));

    let started = Instant::now();
    let mut got = s3.get_object().bucket("big").key("object").send().await.unwrap().body;
    let mut hash = md5::Md5::new();
    let mut size = 0;
    while let Some(chunk) = got.next().await {
        let chunk = chunk.unwrap();
        size += chunk.len();
        hash.update(&chunk);
    }
    let get_secs = started.elapsed().as_secs_f64();
    assert_eq!(size, OBJECT);
    assert_eq!(hex::encode(hash.finalize()), expected);

    let growth = peak_rss().saturating_sub(before);
    eprintln!(
        "128 MiB object: put {put_secs:.2}s, get {get_secs:.2}s, peak RSS growth {} MiB",
        growth >> 20
    );
    assert!(growth < ALLOWED_GROWTH, "peak RSS grew by {} MiB", growth >> 20);
    server.stop().await;
}

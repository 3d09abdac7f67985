//! Throughput and memory of the hostPath S3 endpoint, measured with the AWS SDK over loopback.
//! `make bench` runs it in release mode and writes the results to `bench-results.txt`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use hostpath_provisioner::BucketStore;
use tokio::io::AsyncWriteExt;

const SMALL: usize = 4 << 10;
const SMALL_COUNT: usize = 500;
const PARALLEL_CLIENTS: usize = 8;
const LARGE: u64 = 256 << 20;

fn client(port: u16, key: &str, secret: &str) -> Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(Credentials::new(key, secret, None, None, "bench"))
        .force_path_style(true)
        .build();
    Client::from_conf(config)
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

async fn small_objects(s3: &Client, bucket: &str, out: &mut String) {
    let body = vec![7u8; SMALL];
    let mut latencies = Vec::with_capacity(SMALL_COUNT);
    let started = Instant::now();
    for i in 0..SMALL_COUNT {
        let t = Instant::now();
        let object = s3.put_object().bucket(bucket).key(format!("small/{i}"));
        object.body(ByteStream::from(body.clone())).send().await.unwrap();
        latencies.push(t.elapsed());
    }
    let put_rate = SMALL_COUNT as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    writeln!(
        out,
        "PUT 4 KiB, one client:      {put_rate:8.0} ops/s  p50 {p50:.2} ms  p99 {p99:.2} ms"
    )
    .unwrap();

    latencies.clear();
    let started = Instant::now();
    for i in 0..SMALL_COUNT {
        let t = Instant::now();
        let object = s3.get_object().bucket(bucket).key(format!("small/{i}")).send().await.unwrap();
        assert_eq!(object.body.collect().await.unwrap().into_bytes().len(), SMALL);
        latencies.push(t.elapsed());
    }
    let get_rate = SMALL_COUNT as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    writeln!(
        out,
        "GET 4 KiB, one client:      {get_rate:8.0} ops/s  p50 {p50:.2} ms  p99 {p99:.2} ms"
    )
    .unwrap();

    let started = Instant::now();
    let tasks: Vec<_> = (0..PARALLEL_CLIENTS)
        .map(|c| {
            let (s3, bucket, body) = (s3.clone(), bucket.to_string(), body.clone());
            tokio::spawn(async move {
                for i in 0..SMALL_COUNT / PARALLEL_CLIENTS {
                    let object = s3.put_object().bucket(&bucket).key(format!("parallel/{c}/{i}"));
                    object.body(ByteStream::from(body.clone())).send().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let rate = SMALL_COUNT as f64 / started.elapsed().as_secs_f64();
    writeln!(out, "PUT 4 KiB, {PARALLEL_CLIENTS} clients:     {rate:8.0} ops/s").unwrap();
}

async fn large_object(s3: &Client, bucket: &str, scratch: &std::path::Path, out: &mut String) {
    let source = scratch.join("large.bin");
    let mut file = tokio::fs::File::create(&source).await.unwrap();
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    for _ in 0..LARGE >> 20 {
        file.write_all(&chunk).await.unwrap();
    }
    file.sync_all().await.unwrap();
    let before = peak_rss_mib();

    let started = Instant::now();
    let body = ByteStream::from_path(&source).await.unwrap();
    s3.put_object().bucket(bucket).key("large.bin").body(body).send().await.unwrap();
    let put = (LARGE >> 20) as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    let mut object = s3.get_object().bucket(bucket).key("large.bin").send().await.unwrap();
    let mut read = 0u64;
    while let Some(bytes) = object.body.try_next().await.unwrap() {
        read += bytes.len() as u64;
    }
    assert_eq!(read, LARGE);
    let get = (LARGE >> 20) as f64 / started.elapsed().as_secs_f64();
    let growth = peak_rss_mib() - before;
    writeln!(out, "PUT 256 MiB, streamed:      {put:8.0} MiB/s").unwrap();
    writeln!(out, "GET 256 MiB, streamed:      {get:8.0} MiB/s").unwrap();
    writeln!(
        out,
        "peak memory growth for it:  {growth:8.1} MiB (client and server in one process)"
    )
    .unwrap();
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut output = None;
    while let Some(arg) = args.next() {
        if arg == "--output" {
            output = args.next();
        }
    }
    let scratch = tempfile::tempdir().unwrap();
    let store = Arc::new(BucketStore::open(scratch.path().join("root"), "bench").unwrap());
    let creator = hostpath_provisioner::Creator { user_id: "bench", delete_with_claim: true };
    store.create_bucket("bench", creator).await.unwrap();
    let key = store.issue_key("bench-user", "bench").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(hostpath_provisioner::serve(listener, store, std::future::pending()));
    let s3 = client(port, &key.access_key_id, &key.secret_access_key);

    let mut out = format!(
        "hostPath S3 endpoint, aws-sdk-s3 over loopback, {} cores, {}\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if cfg!(debug_assertions) { "debug build" } else { "release build" }
    );
    small_objects(&s3, "bench", &mut out).await;
    large_object(&s3, "bench", scratch.path(), &mut out).await;
    print!("{out}");
    if let Some(path) = output {
        std::fs::write(&path, &out).unwrap();
        println!("results written to {path}");
    }
}

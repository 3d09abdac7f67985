//! Throughput and memory of the hostPath S3 endpoint, measured with the AWS SDK over loopback;
//! what quotas and versioning cost a PUT (and versioning a GET), what listing costs as a bucket grows and what completing a multipart
//! upload costs, and what a page of ListObjectVersions costs on a bucket with many versions, and what a lifecycle pass
//! costs on a bucket with a thousand rules, within a budget, and what short-lived credentials
//! cost (sessions granted per second, and a small GET with a session key beside the claim's own). `make bench` runs it in release mode and writes the results to
//! `bench-results.txt`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use s3_endpoint::{BucketStore, Quota};
use tokio::io::AsyncWriteExt;

mod support;
use support::{client, cpu_times, median, web_identity};

const SMALL: usize = 4 << 10;
const SMALL_COUNT: usize = 500;
const PARALLEL_CLIENTS: usize = 8;
const LARGE: u64 = 256 << 20;
/// Rounds of the quota comparison, alternating which bucket goes first; medians are reported.
const QUOTA_ROUNDS: usize = 7;
const QUOTA_ROUND_PUTS: usize = 200;

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
    let one_client = SMALL_COUNT as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    writeln!(
        out,
        "PUT 4 KiB, one client:      {one_client:8.0} ops/s  p50 {p50:.2} ms  p99 {p99:.2} ms"
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

    let rate = put_rate(s3, bucket, "parallel", PARALLEL_CLIENTS, SMALL_COUNT).await;
    writeln!(out, "PUT 4 KiB, {PARALLEL_CLIENTS} clients:     {rate:8.0} ops/s").unwrap();
}

/// PUTs per second of `count` 4 KiB objects under `prefix`, from `clients` clients at once.
async fn put_rate(s3: &Client, bucket: &str, prefix: &str, clients: usize, count: usize) -> f64 {
    let body = vec![7u8; SMALL];
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (s3, bucket, body) = (s3.clone(), bucket.to_string(), body.clone());
            let prefix = format!("{prefix}/{c}");
            tokio::spawn(async move {
                for i in 0..count / clients {
                    let object = s3.put_object().bucket(&bucket).key(format!("{prefix}/{i}"));
                    object.body(ByteStream::from(body.clone())).send().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    count as f64 / started.elapsed().as_secs_f64()
}

/// The same PUTs into a bucket without quotas and into one where both the bucket and the
/// claim have quotas (never reached), in alternating rounds so that drift of the machine
/// affects both alike.
async fn quota_overhead(free: &Client, limited: &Client, out: &mut String) {
    for clients in [1, PARALLEL_CLIENTS] {
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for round in 0..QUOTA_ROUNDS {
            let prefix = format!("round-{round}");
            let mut measure = async |limited_first: bool| {
                if limited_first {
                    with.push(
                        put_rate(limited, "bench-quota", &prefix, clients, QUOTA_ROUND_PUTS).await,
                    );
                } else {
                    without.push(
                        put_rate(free, "bench-free", &prefix, clients, QUOTA_ROUND_PUTS).await,
                    );
                }
            };
            let limited_first = round % 2 == 1;
            measure(limited_first).await;
            measure(!limited_first).await;
        }
        let (without, with) = (median(without), median(with));
        writeln!(
            out,
            "PUT 4 KiB, {clients} client(s), no quota:   {without:8.0} ops/s (median of {QUOTA_ROUNDS} rounds)"
        )
        .unwrap();
        writeln!(
            out,
            "PUT 4 KiB, {clients} client(s), quotas set: {with:8.0} ops/s ({:.1}% of without)",
            with / without * 100.0
        )
        .unwrap();
    }
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

/// Keys of the listing bucket, in the order a listing returns them.
fn listed_key(i: usize) -> String {
    format!("obj/{i:06}")
}

/// Empty objects `range` of the listing bucket, from 16 clients at once.
async fn fill(s3: &Client, bucket: &str, range: std::ops::Range<usize>) {
    const CLIENTS: usize = 16;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (s3, bucket, range) = (s3.clone(), bucket.to_owned(), range.clone());
            tokio::spawn(async move {
                for i in range.skip(c).step_by(CLIENTS) {
                    let object = s3.put_object().bucket(&bucket).key(listed_key(i));
                    object.body(ByteStream::from_static(b"")).send().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// Seconds and process CPU seconds (user and system) of `work`.
async fn timed<T>(work: impl Future<Output = T>) -> (f64, f64, T) {
    let cpu = || {
        let (user, system) = cpu_times(std::process::id());
        user + system
    };
    let (before, started) = (cpu(), Instant::now());
    let value = work.await;
    (started.elapsed().as_secs_f64(), cpu() - before, value)
}

/// A whole ListObjectsV2 listing of `bucket`, 1,000 keys a page; how many keys it returned.
async fn list_all(s3: &Client, bucket: &str) -> usize {
    let mut pages = s3.list_objects_v2().bucket(bucket).into_paginator().send();
    let mut keys = 0;
    while let Some(page) = pages.next().await {
        keys += page.unwrap().contents().len();
    }
    keys
}

/// What listing costs as a bucket grows from 10,000 to 40,000 objects: a whole listing should
/// cost four times as much, and a page of 100 from the middle the same.
async fn listing(s3: &Client, bucket: &str, out: &mut String) {
    const PAGE_READS: usize = 50;
    let mut filled = 0;
    for objects in [10_000, 40_000] {
        fill(s3, bucket, filled..objects).await;
        filled = objects;
        let (seconds, cpu, keys) = timed(list_all(s3, bucket)).await;
        assert_eq!(keys, objects);
        writeln!(
            out,
            "list {objects:>6} objects, all:   {seconds:8.3} s  {cpu:.3} CPU-s (client and server)"
        )
        .unwrap();
        let middle = listed_key(objects / 2);
        let (seconds, cpu, ()) = timed(async {
            for _ in 0..PAGE_READS {
                let page = s3.list_objects_v2().bucket(bucket).start_after(&middle).max_keys(100);
                assert_eq!(page.send().await.unwrap().contents().len(), 100);
            }
        })
        .await;
        let (ms, cpu_ms) = (seconds * 1e3 / PAGE_READS as f64, cpu * 1e3 / PAGE_READS as f64);
        let page = "a page of 100 from the middle";
        writeln!(out, "list {objects:>6} objects, {page}: {ms:6.2} ms  {cpu_ms:.2} CPU-ms")
            .unwrap();
    }
}

/// Keys of the versioned listing bucket, each written this many times.
const VERSIONS_PER_KEY: usize = 3;

/// A whole ListObjectVersions listing of `bucket`, 1,000 entries a page; how many versions
/// and markers it returned.
async fn list_all_versions(s3: &Client, bucket: &str) -> usize {
    let (mut key_marker, mut id_marker, mut versions) = (None, None, 0);
    loop {
        let list = s3.list_object_versions().bucket(bucket).max_keys(1000);
        let page = list.set_key_marker(key_marker).set_version_id_marker(id_marker);
        let page = page.send().await.unwrap();
        versions += page.versions().len() + page.delete_markers().len();
        if !page.is_truncated().unwrap_or(false) {
            return versions;
        }
        key_marker = page.next_key_marker().map(str::to_owned);
        id_marker = page.next_version_id_marker().map(str::to_owned);
    }
}

/// What ListObjectVersions costs on a versioned bucket of 10,000 keys written three times
/// each (20,000 noncurrent versions): a page should cost what it lists, whatever the bucket
/// keeps besides.
async fn version_listing(s3: &Client, bucket: &str, out: &mut String) {
    const KEYS: usize = 10_000;
    const PAGE_READS: usize = 20;
    for _ in 0..VERSIONS_PER_KEY {
        fill(s3, bucket, 0..KEYS).await;
    }
    let (seconds, cpu, versions) = timed(list_all_versions(s3, bucket)).await;
    assert_eq!(versions, KEYS * VERSIONS_PER_KEY);
    let what = format!("list versions, {KEYS} keys x {VERSIONS_PER_KEY}, all:");
    writeln!(out, "{what}   {seconds:8.3} s  {cpu:.3} CPU-s (client and server)").unwrap();
    let middle = listed_key(KEYS / 2);
    let (seconds, cpu, ()) = timed(async {
        for _ in 0..PAGE_READS {
            let page = s3.list_object_versions().bucket(bucket).key_marker(&middle).max_keys(100);
            assert_eq!(page.send().await.unwrap().versions().len(), 100);
        }
    })
    .await;
    let (ms, cpu_ms) = (seconds * 1e3 / PAGE_READS as f64, cpu * 1e3 / PAGE_READS as f64);
    let what = format!("list versions, {KEYS} keys x {VERSIONS_PER_KEY}, a page of 100");
    writeln!(out, "{what} from the middle: {ms:6.2} ms  {cpu_ms:.2} CPU-ms").unwrap();
}

/// A lifecycle pass over a bucket of 20,000 objects with 1,000 rules, none due: one walk of
/// the bucket, not one per rule; then, within a budget of 5,000 objects a pass, how many passes
/// walk it through, a small bucket behind it being done in the first.
async fn lifecycle_pass(store: &BucketStore, s3: &Client, small: &Client, out: &mut String) {
    use s3_endpoint::store::{Expiration, LifecycleConfig, LifecycleFilter, LifecycleRule};
    const OBJECTS: usize = 20_000;
    const BUDGET: u64 = 5_000;
    let rule = |prefix: String, days| LifecycleRule {
        status: "Enabled".into(),
        filter: LifecycleFilter { prefix: Some(prefix), ..LifecycleFilter::default() },
        expiration: Some(Expiration { days: Some(days), ..Expiration::default() }),
        ..LifecycleRule::default()
    };
    let rules = (0..1000).map(|n| rule(format!("obj/{n:03}"), 3650)).collect();
    store.set_bucket_lifecycle("bench-lifecycle", Some(LifecycleConfig { rules })).await.unwrap();
    fill(s3, "bench-lifecycle", 0..OBJECTS).await;
    let now = std::time::SystemTime::now();
    let (seconds, cpu, report) = timed(store.run_lifecycle_pass(now)).await;
    let report = report.unwrap();
    assert_eq!(report.examined, OBJECTS as u64, "each object once, whatever the rules");
    writeln!(
        out,
        "lifecycle pass, {OBJECTS} objects x 1000 rules: {seconds:8.3} s  {cpu:.3} CPU-s  \
         ({} objects examined, {} pages listed)",
        report.examined, report.listings
    )
    .unwrap();

    let small_rules = LifecycleConfig { rules: vec![rule(String::new(), 1)] };
    store.set_bucket_lifecycle("bench-lifecycle-small", Some(small_rules)).await.unwrap();
    fill(small, "bench-lifecycle-small", 0..100).await;
    let later = now + Duration::from_secs(3 * 86_400);
    let (mut passes, mut total) = (0, 0.0);
    loop {
        let (seconds, _, report) = timed(store.run_lifecycle_pass_within(later, BUDGET)).await;
        let report = report.unwrap();
        passes += 1;
        total += seconds;
        if passes == 1 {
            assert_eq!(report.expired, 100, "the small bucket is done in the first pass");
        }
        if report.unfinished == 0 {
            break;
        }
    }
    writeln!(
        out,
        "lifecycle, budget {BUDGET} a pass:        {passes} passes, {:.3} s each (the small bucket done in the first)",
        total / f64::from(passes)
    )
    .unwrap();
}

/// CompleteMultipartUpload of 8 parts of 32 MiB: the parts are joined in the kernel
/// (`copy_file_range`, a reflink where the file system has them), never read back by the
/// endpoint.
async fn multipart_completion(s3: &Client, bucket: &str, out: &mut String) {
    const PARTS: i32 = 8;
    const PART: usize = 32 << 20;
    let key = "multipart.bin";
    let upload = s3.create_multipart_upload().bucket(bucket).key(key).send().await.unwrap();
    let id = upload.upload_id().unwrap().to_owned();
    let mut completed = Vec::new();
    let data = bytes::Bytes::from(vec![5u8; PART]);
    for number in 1..=PARTS {
        let part = s3.upload_part().bucket(bucket).key(key).upload_id(&id).part_number(number);
        let sent = part.body(ByteStream::from(data.clone())).send().await.unwrap();
        let part = aws_sdk_s3::types::CompletedPart::builder().part_number(number);
        completed.push(part.e_tag(sent.e_tag().unwrap()).build());
    }
    let parts = aws_sdk_s3::types::CompletedMultipartUpload::builder().set_parts(Some(completed));
    let complete = s3
        .complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(&id)
        .multipart_upload(parts.build());
    let (seconds, cpu, done) = timed(complete.send()).await;
    done.unwrap();
    let mib = ((PARTS as usize * PART) >> 20) as f64;
    writeln!(
        out,
        "complete {PARTS} x 32 MiB parts:  {seconds:8.3} s ({:.0} MiB/s joined)  {cpu:.3} CPU-s",
        mib / seconds
    )
    .unwrap();
}

/// Rounds of the versioning comparison, alternating which bucket goes first.
const VERSIONING_ROUNDS: usize = 5;
/// Keys the versioning comparison overwrites: each PUT after the first round replaces one.
const VERSIONING_KEYS: usize = 50;

/// PUT (overwrites) and GET of 4 KiB objects in an unversioned bucket and a versioned one,
/// where every overwrite keeps the replaced version; medians of alternating rounds.
async fn versioning_overhead(plain: &Client, versioned: &Client, out: &mut String) {
    let body = vec![9u8; SMALL];
    let mut rates: [[Vec<f64>; 2]; 2] = Default::default();
    for round in 0..VERSIONING_ROUNDS {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let (s3, bucket) =
                if which == 0 { (plain, "bench-plain") } else { (versioned, "bench-versioned") };
            let started = Instant::now();
            for i in 0..QUOTA_ROUND_PUTS {
                let key = format!("v/{}", i % VERSIONING_KEYS);
                let put = s3.put_object().bucket(bucket).key(key);
                put.body(ByteStream::from(body.clone())).send().await.unwrap();
            }
            rates[which][0].push(QUOTA_ROUND_PUTS as f64 / started.elapsed().as_secs_f64());
            let started = Instant::now();
            for i in 0..QUOTA_ROUND_PUTS {
                let key = format!("v/{}", i % VERSIONING_KEYS);
                let got = s3.get_object().bucket(bucket).key(key).send().await.unwrap();
                assert_eq!(got.body.collect().await.unwrap().into_bytes().len(), SMALL);
            }
            rates[which][1].push(QUOTA_ROUND_PUTS as f64 / started.elapsed().as_secs_f64());
        }
    }
    for (op, index) in [("PUT", 0), ("GET", 1)] {
        let plain = median(rates[0][index].clone());
        let versioned = median(rates[1][index].clone());
        writeln!(
            out,
            "{op} 4 KiB overwrite, unversioned: {plain:8.0} ops/s  versioned: {versioned:8.0} \
             ops/s  ({:+.1}%)",
            (versioned / plain - 1.0) * 100.0
        )
        .unwrap();
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut output, mut only) = (None, None);
    while let Some(arg) = args.next() {
        if arg == "--output" {
            output = args.next();
        } else if arg == "--only" {
            only = args.next();
        }
    }
    let scratch = tempfile::tempdir().unwrap();
    let store = Arc::new(BucketStore::open(scratch.path().join("root"), "bench").unwrap());
    let creator = s3_endpoint::Creator { user_id: "bench", delete_with_claim: true };
    store.create_bucket("bench", creator).await.unwrap();
    let key = store.issue_key("bench-user", "bench").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut quota_clients = Vec::new();
    for (bucket, user) in [("bench-free", "bench-free-user"), ("bench-quota", "bench-quota-user")] {
        let creator = s3_endpoint::Creator { user_id: user, delete_with_claim: true };
        store.create_bucket(bucket, creator).await.unwrap();
        let key = store.issue_key(user, bucket).await.unwrap();
        quota_clients.push(client(port, &key.access_key_id, &key.secret_access_key));
    }
    let mut versioning_clients = Vec::new();
    for (bucket, user) in [("bench-plain", "bench-plain-user"), ("bench-versioned", "bench-v-user")]
    {
        let creator = s3_endpoint::Creator { user_id: user, delete_with_claim: true };
        store.create_bucket(bucket, creator).await.unwrap();
        let key = store.issue_key(user, bucket).await.unwrap();
        versioning_clients.push(client(port, &key.access_key_id, &key.secret_access_key));
    }
    store
        .set_bucket_versioning("bench-versioned", s3_endpoint::store::Versioning::Enabled)
        .await
        .unwrap();
    let creator = s3_endpoint::Creator { user_id: "bench-user", delete_with_claim: true };
    store.create_bucket("bench-list", creator).await.unwrap();
    let list_key = store.issue_key("bench-user", "bench-list").await.unwrap();
    let creator = s3_endpoint::Creator { user_id: "bench-user", delete_with_claim: true };
    store.create_bucket("bench-list-versions", creator).await.unwrap();
    let versions_key = store.issue_key("bench-user", "bench-list-versions").await.unwrap();
    store
        .set_bucket_versioning("bench-list-versions", s3_endpoint::store::Versioning::Enabled)
        .await
        .unwrap();
    let mut lifecycle_clients = Vec::new();
    for bucket in ["bench-lifecycle", "bench-lifecycle-small"] {
        let creator = s3_endpoint::Creator { user_id: "bench-user", delete_with_claim: true };
        store.create_bucket(bucket, creator).await.unwrap();
        let key = store.issue_key("bench-user", bucket).await.unwrap();
        lifecycle_clients.push(client(port, &key.access_key_id, &key.secret_access_key));
    }
    let never_reached = Quota { max_objects: Some(1 << 40), max_bytes: Some(1 << 50) };
    store.set_bucket_quota("bench-quota", "bench-quota-user", never_reached).await.unwrap();
    store.set_user_quota("bench-quota-user", "bench-quota", never_reached).await.unwrap();
    let endpoint =
        s3_endpoint::s3::service(store.clone()).web_identity(Arc::new(web_identity::Vouch));
    tokio::spawn(s3_endpoint::s3::serve_endpoint(listener, endpoint, std::future::pending()));
    let s3 = client(port, &key.access_key_id, &key.secret_access_key);
    let list_client = client(port, &list_key.access_key_id, &list_key.secret_access_key);
    let versions_client =
        client(port, &versions_key.access_key_id, &versions_key.secret_access_key);

    let mut out = format!(
        "hostPath S3 endpoint, aws-sdk-s3 over loopback, {} cores, {}\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if cfg!(debug_assertions) { "debug build" } else { "release build" }
    );
    // `--only listing`, `--only version-listing`, `--only lifecycle` or `--only web-identity`
    // measures that alone.
    if only.is_none() {
        small_objects(&s3, "bench", &mut out).await;
        quota_overhead(&quota_clients[0], &quota_clients[1], &mut out).await;
        large_object(&s3, "bench", scratch.path(), &mut out).await;
        multipart_completion(&s3, "bench", &mut out).await;
        // After the large object: its disk writeback would otherwise weigh on that figure.
        versioning_overhead(&versioning_clients[0], &versioning_clients[1], &mut out).await;
    }
    if only.as_deref().is_none_or(|o| o == "listing") {
        listing(&list_client, "bench-list", &mut out).await;
    }
    if only.as_deref().is_none_or(|o| o == "version-listing") {
        version_listing(&versions_client, "bench-list-versions", &mut out).await;
    }
    if only.as_deref().is_none_or(|o| o == "lifecycle") {
        lifecycle_pass(&store, &lifecycle_clients[0], &lifecycle_clients[1], &mut out).await;
    }
    if only.as_deref().is_none_or(|o| o == "web-identity") {
        let claim = ("bench", "bench-user");
        web_identity::measure(&store, port, claim, &s3, &mut out).await;
    }
    print!("{out}");
    if let Some(path) = output {
        std::fs::write(&path, &out).unwrap();
        println!("results written to {path}");
    }
}

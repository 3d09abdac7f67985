//! What running the S3 endpoint apart from the controller costs the controller: a claim's store
//! calls (look up, provision with its key, set the key's mode, read the record; then revoke and
//! delete) made in process and across the endpoint's Unix socket, one claim at a time for each
//! call's latency and several at once for claims per second. N claims (default 1,000,
//! `BENCH_CLAIMS`), `BENCH_WORKERS` at once (default 4, the controller's default). `make bench`
//! runs it and writes the results to `bench-store-link-results.txt`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hostpath_provisioner::store_link::server::serve_store;
use hostpath_provisioner::store_link::{RemoteStore, StoreLink, bind_socket};
use hostpath_provisioner::{BucketStore, Creator};
use s3_endpoint::store::KeyMode;
use test_support::bench::{env_number, output_arg, percentile};

/// The calls of one claim, in the order the backend makes them.
const CALLS: [&str; 6] = [
    "bucket_exists",
    "provision_bucket",
    "set_key_mode",
    "bucket_record",
    "revoke_keys",
    "delete_bucket",
];

/// Times `$body` as call `$name` of `$took`.
macro_rules! timed {
    ($took:expr, $name:expr, $body:expr) => {{
        let started = Instant::now();
        $body;
        $took.entry($name).or_default().push(started.elapsed());
    }};
}

/// How long each call of claim `i` took, by call.
async fn one_claim(link: &StoreLink, i: usize, took: &mut BTreeMap<&'static str, Vec<Duration>>) {
    let (bucket, user) = (format!("bench-{i}"), format!("claim-{i}"));
    let creator = Creator { user_id: &user, delete_with_claim: true };
    timed!(took, CALLS[0], assert!(!link.bucket_exists(&bucket).await.unwrap()));
    timed!(took, CALLS[1], link.provision_bucket(&bucket, creator).await.unwrap());
    timed!(took, CALLS[2], link.set_key_mode(&user, &bucket, KeyMode::ReadOnly).await.unwrap());
    timed!(took, CALLS[3], assert!(link.bucket_record(&bucket).await.unwrap().is_some()));
    timed!(took, CALLS[4], link.revoke_keys(&user).await.unwrap());
    timed!(took, CALLS[5], assert!(link.delete_bucket(&bucket, &user).await.unwrap()));
}

/// Each call's latency over `claims` claims made one at a time.
async fn latencies(link: &StoreLink, claims: usize) -> BTreeMap<&'static str, Vec<Duration>> {
    let mut took = BTreeMap::new();
    for i in 0..claims {
        one_claim(link, i, &mut took).await;
    }
    for durations in took.values_mut() {
        durations.sort();
    }
    took
}

/// Claims per second with `workers` claims' calls in flight at once.
async fn throughput(link: &StoreLink, claims: usize, workers: usize) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let link = link.clone();
            tokio::spawn(async move {
                let mut took = BTreeMap::new();
                for i in (w..claims).step_by(workers) {
                    one_claim(&link, claims + i, &mut took).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    claims as f64 / started.elapsed().as_secs_f64()
}

/// The store served on a socket under `dir` by this process, as the endpoint serves it.
async fn served(dir: &Path) -> StoreLink {
    let store = Arc::new(BucketStore::open(dir.join("root"), "bench-node").unwrap());
    let socket = dir.join("store.sock");
    let listener = bind_socket(&socket).unwrap();
    tokio::spawn(serve_store(listener, store, std::future::pending()));
    StoreLink::Remote(RemoteStore::connect(&socket, Duration::from_millis(10)).await)
}

#[tokio::main]
async fn main() {
    let output = output_arg();
    let claims = env_number("BENCH_CLAIMS", 1000);
    let workers = env_number("BENCH_WORKERS", 4);
    let (local_dir, remote_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let local = StoreLink::Local(Arc::new(
        BucketStore::open(local_dir.path().join("root"), "bench-node").unwrap(),
    ));
    let remote = served(remote_dir.path()).await;

    eprintln!("bench: {claims} claims' store calls in process, then across the socket");
    let (in_process, across) = (latencies(&local, claims).await, latencies(&remote, claims).await);
    let mut out = format!(
        "A claim's store calls in process and across the endpoint's socket: release build, {} \
         cores, {claims} claims\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    writeln!(out, "one claim at a time: p50 / p99 in ms, in process -> across the socket").unwrap();
    let ms = |d: &[Duration], p: f64| percentile(d, p) * 1000.0;
    for call in CALLS {
        let (a, b) = (&in_process[call], &across[call]);
        writeln!(
            out,
            "  {call:<17} {:7.3} / {:7.3}  ->  {:7.3} / {:7.3}  (+{:.3} ms at p50)",
            ms(a, 0.5),
            ms(a, 0.99),
            ms(b, 0.5),
            ms(b, 0.99),
            ms(b, 0.5) - ms(a, 0.5)
        )
        .unwrap();
    }
    let total = |took: &BTreeMap<&str, Vec<Duration>>| -> f64 {
        took.values().flatten().map(Duration::as_secs_f64).sum::<f64>() / claims as f64 * 1000.0
    };
    writeln!(
        out,
        "  a claim's six calls: {:.3} ms in process, {:.3} ms across the socket",
        total(&in_process),
        total(&across)
    )
    .unwrap();
    eprintln!("bench: {workers} claims at once");
    let (local_rate, remote_rate) =
        (throughput(&local, claims, workers).await, throughput(&remote, claims, workers).await);
    writeln!(
        out,
        "{workers} claims at once: {local_rate:.0} claims/s in process, {remote_rate:.0} claims/s \
         across the socket"
    )
    .unwrap();
    print!("{out}");
    if let Some(path) = output {
        std::fs::write(&path, &out).unwrap();
        eprintln!("bench: results written to {path}");
    }
}

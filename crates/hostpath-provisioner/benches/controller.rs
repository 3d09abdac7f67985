//! The controller at scale, on a real control plane with the release binary: N claims (default
//! 1,000, `BENCH_CLAIMS`) in 100 namespaces created at once, time until all are Bound, latency
//! from creation to Bound as a watch sees it, the provisioner's own API requests per claim by verb
//! and resource (from the apiserver's audit log, which names the user), the cost of a restart with
//! every claim bound, deletion, and the provisioner's memory. `make bench` runs it and writes the
//! results to `bench-controller-results.txt`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use test_support::bench::{
    AuditedPlane, create_all, delete_all, env_number, latencies, memory_mib, namespaces,
    output_arg, per_object, requests_since, wait_until,
};
use test_support::install_crds;
use tokio::process::{Child, Command};

const NAMESPACES: usize = 100;
const PROVISIONER_USER: &str = "bench-provisioner";
const PROVISIONER: &str = "bench.objectbucket.io/hostpath";
const LABEL: &str = "bench-claim";
/// How long the restarted provisioner is watched for requests.
const AFTER_RESTART: Duration = Duration::from_secs(60);

fn start_provisioner(root: &Path, kubeconfig: &Path, workers: usize, metrics: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"))
        .arg(format!("--root={}", root.display()))
        .arg(format!("--provisioner-name={PROVISIONER}"))
        .arg("--identity=bench-node")
        .arg(format!("--s3-listen=127.0.0.1:{}", test_support::free_port().unwrap()))
        .arg("--endpoint-host=127.0.0.1")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--metrics-address=127.0.0.1:{metrics}"))
        .arg(format!("--workers={workers}"))
        // Without the Lease's renewals, every request counted is about claims.
        .arg("--leader-elect=false")
        .env("RUST_LOG", "warn,kube_client::client::tls=error")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("starting hostpath-bucket-provisioner")
}

/// CPU seconds (user + system) the process has used, from the kernel's accounting.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which ends with the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}

/// Mean seconds of the backend's `operation` calls so far, from the provisioner's own metrics.
async fn backend_mean(metrics: u16, operation: &str) -> f64 {
    let body = reqwest_free_get(metrics, "/metrics").await;
    let value = |suffix: &str| -> f64 {
        body.lines()
            .find(|l| {
                l.starts_with(&format!("bucket_provisioner_provisioning_duration_seconds_{suffix}"))
                    && l.contains(&format!("operation=\"{operation}\""))
            })
            .and_then(|l| l.split_whitespace().last()?.parse().ok())
            .unwrap_or(0.0)
    };
    value("sum") / value("count").max(1.0)
}

/// Backend calls so far, from the provisioner's own metrics.
async fn backend_calls(metrics: u16) -> u64 {
    let body = reqwest_free_get(metrics, "/metrics").await;
    body.lines()
        .filter(|l| l.starts_with("bucket_provisioner_provisioning_duration_seconds_count"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Reconciles so far, from the provisioner's own metrics.
async fn reconciles(metrics: u16) -> u64 {
    let body = reqwest_free_get(metrics, "/metrics").await;
    body.lines()
        .find(|l| l.starts_with("bucket_provisioner_reconciles_total"))
        .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

async fn reqwest_free_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response
}

/// Records when each claim was first seen Bound, and when each was seen gone.
#[derive(Default)]
struct Seen {
    bound: HashMap<String, Instant>,
    gone: HashMap<String, Instant>,
}

fn key(claim: &ObjectBucketClaim) -> String {
    format!("{}/{}", claim.namespace().unwrap_or_default(), claim.name_any())
}

async fn watch_claims(client: Client, seen: Arc<Mutex<Seen>>) {
    let claims: Api<ObjectBucketClaim> = Api::all(client);
    let config = watcher::Config::default().labels(LABEL);
    let mut events = watcher(claims, config).boxed();
    while let Ok(Some(event)) = events.try_next().await {
        let now = Instant::now();
        let mut seen = seen.lock().unwrap();
        match event {
            watcher::Event::Apply(claim) | watcher::Event::InitApply(claim)
                if claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound) =>
            {
                seen.bound.entry(key(&claim)).or_insert(now);
            }
            watcher::Event::Delete(claim) => {
                seen.gone.insert(key(&claim), now);
            }
            _ => {}
        }
    }
}

#[tokio::main]
async fn main() {
    let output = output_arg();
    let claims = env_number("BENCH_CLAIMS", 1000);
    let workers = env_number("BENCH_WORKERS", 4);

    let AuditedPlane { plane: _plane, client, kubeconfig, audit } =
        AuditedPlane::start(PROVISIONER_USER).await;
    install_crds(&client).await.unwrap();

    let class = StorageClass {
        metadata: ObjectMeta { name: Some("bench".into()), ..Default::default() },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();
    let namespaces = namespaces(&client, "bench", NAMESPACES).await;

    let root = tempfile::tempdir().unwrap();
    let metrics = test_support::free_port().unwrap();
    let mut provisioner = start_provisioner(root.path(), &kubeconfig, workers, metrics);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watch = tokio::spawn(watch_claims(client.clone(), seen.clone()));
    // Let the provisioner list and watch before the burst, as a running one would have.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, mark) = requests_since(&audit, PROVISIONER_USER, 0);

    let mut out = format!(
        "Controller on a real control plane: hostPath backend, release build, {} cores, \
         {claims} claims in {NAMESPACES} namespaces, {workers} workers\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    eprintln!("bench: creating {claims} claims");
    let started = Instant::now();
    let created = create_all(&client, &namespaces, claims, |i| {
        let mut claim = ObjectBucketClaim::new(
            &format!("c-{i}"),
            ObjectBucketClaimSpec {
                storage_class_name: "bench".into(),
                generate_bucket_name: Some("bench".into()),
                ..Default::default()
            },
        );
        claim.metadata.labels = Some([(LABEL.to_owned(), "true".to_owned())].into());
        claim
    })
    .await;
    let creating = started.elapsed();
    wait_until("every claim to be Bound", Duration::from_secs(3600), || {
        seen.lock().unwrap().bound.len() >= claims
    })
    .await;
    let bound_at = *seen.lock().unwrap().bound.values().max().unwrap();
    let total = bound_at.duration_since(started);
    let (rss, peak) = memory_mib(provisioner.id().unwrap());
    let cpu = cpu_seconds(provisioner.id().unwrap());
    writeln!(out, "provisioning").unwrap();
    writeln!(
        out,
        "  created in {:.1} s; all Bound {:.1} s after the first create: {:.1} claims/s",
        creating.as_secs_f64(),
        total.as_secs_f64(),
        claims as f64 / total.as_secs_f64()
    )
    .unwrap();
    out.push_str(&latencies("creation to Bound", &created, &seen.lock().unwrap().bound));
    // Let the reconciles that our own writes cause run out before counting.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (requests, mark) = requests_since(&audit, PROVISIONER_USER, mark);
    out.push_str(&per_object(&requests, claims, "claim"));
    writeln!(
        out,
        "  reconciles per claim: {:.2}",
        reconciles(metrics).await as f64 / claims as f64
    )
    .unwrap();
    writeln!(out, "  provisioner memory: RSS {rss:.1} MiB, peak {peak:.1} MiB").unwrap();
    writeln!(
        out,
        "  provisioner CPU until all were Bound: {cpu:.1} s; backend provision call: {:.1} ms mean",
        backend_mean(metrics, "provision").await * 1000.0
    )
    .unwrap();

    eprintln!("bench: restarting the provisioner");
    provisioner.kill().await.unwrap();
    let (_, mark) = requests_since(&audit, PROVISIONER_USER, mark);
    let restarted = Instant::now();
    let mut provisioner = start_provisioner(root.path(), &kubeconfig, workers, metrics);
    tokio::time::sleep(AFTER_RESTART).await;
    let (requests, mark) = requests_since(&audit, PROVISIONER_USER, mark);
    let beyond_lists: Vec<_> =
        requests.iter().filter(|r| !matches!(r.verb.as_str(), "list" | "watch")).collect();
    let (rss, peak) = memory_mib(provisioner.id().unwrap());
    writeln!(out, "restart with {claims} claims bound").unwrap();
    writeln!(
        out,
        "  in the {:.0} s after it: {} backend calls, {} requests beside {} lists/watches ended, \
         {} reconciles",
        restarted.elapsed().as_secs_f64(),
        backend_calls(metrics).await,
        beyond_lists.len(),
        requests.len() - beyond_lists.len(),
        reconciles(metrics).await
    )
    .unwrap();
    writeln!(out, "  provisioner memory after the relist: RSS {rss:.1} MiB, peak {peak:.1} MiB")
        .unwrap();

    eprintln!("bench: deleting {claims} claims");
    let started = Instant::now();
    delete_all::<ObjectBucketClaim>(&client, &created).await;
    wait_until("every claim to be gone", Duration::from_secs(3600), || {
        seen.lock().unwrap().gone.len() >= claims
    })
    .await;
    let deleting = started.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (requests, _) = requests_since(&audit, PROVISIONER_USER, mark);
    writeln!(out, "deletion").unwrap();
    writeln!(
        out,
        "  all {claims} gone in {:.1} s: {:.1} claims/s",
        deleting.as_secs_f64(),
        claims as f64 / deleting.as_secs_f64()
    )
    .unwrap();
    out.push_str(&per_object(&requests, claims, "claim"));
    let buckets_left = std::fs::read_dir(root.path().join("buckets")).map_or(0, |d| d.count());
    writeln!(out, "  bucket directories left: {buckets_left}").unwrap();

    watch.abort();
    provisioner.kill().await.unwrap();
    print!("{out}");
    if let Some(path) = output {
        std::fs::write(&path, &out).unwrap();
        println!("results written to {path}");
    }
}

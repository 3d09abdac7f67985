//! The controller at scale, on a real control plane with the release binary: N claims (default
//! 1,000, `BENCH_CLAIMS`) in 100 namespaces created at once, time until all are Bound, latency
//! from creation to Bound as a watch sees it, the provisioner's own API requests per claim by verb
//! and resource (from the apiserver's audit log, which names the user), the cost of a restart with
//! every claim bound, deletion, and the provisioner's memory. `make bench` runs it and writes the
//! results to `bench-controller-results.txt`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use test_support::{ControlPlane, Options, TokenUser, install_crds};
use tokio::process::{Child, Command};

const NAMESPACES: usize = 100;
const PROVISIONER_USER: &str = "bench-provisioner";
const PROVISIONER: &str = "bench.objectbucket.io/hostpath";
const LABEL: &str = "bench-claim";
/// Requests in flight while creating or deleting claims, as a burst of users would.
const IN_FLIGHT: usize = 32;
/// How long the restarted provisioner is watched for requests.
const AFTER_RESTART: Duration = Duration::from_secs(60);

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_provisioner(root: &Path, kubeconfig: &Path, workers: usize, metrics: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"))
        .arg(format!("--root={}", root.display()))
        .arg(format!("--provisioner-name={PROVISIONER}"))
        .arg("--identity=bench-node")
        .arg(format!("--s3-listen=127.0.0.1:{}", free_port()))
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

fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
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

/// One request of the provisioner's, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Request {
    verb: String,
    resource: String,
}

impl Request {
    fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
    }

    fn is_read(&self) -> bool {
        self.verb == "get"
    }
}

/// The provisioner's requests in the audit log from byte `from` on; answers them and the offset
/// to read on from.
fn audited(log: &Path, from: u64) -> (Vec<Request>, u64) {
    let text = std::fs::read(log).unwrap_or_default();
    let start = (from as usize).min(text.len());
    let mut requests = Vec::new();
    for line in String::from_utf8_lossy(&text[start..]).lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if event["user"]["username"] != PROVISIONER_USER {
            continue;
        }
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or("").to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let verb = event["verb"].as_str().unwrap_or("").to_owned();
        requests.push(Request { verb, resource });
    }
    (requests, text.len() as u64)
}

fn per_claim(requests: &[Request], claims: usize, out: &mut String) {
    let writes = requests.iter().filter(|r| r.is_write()).count();
    let reads = requests.iter().filter(|r| r.is_read()).count();
    let lists = requests.iter().filter(|r| matches!(r.verb.as_str(), "list" | "watch")).count();
    let n = claims as f64;
    writeln!(
        out,
        "  API writes per claim: {:.2}   reads (GET) per claim: {:.2}   list/watch: {lists}",
        writes as f64 / n,
        reads as f64 / n
    )
    .unwrap();
    let mut by_kind: BTreeMap<&Request, usize> = BTreeMap::new();
    for request in requests.iter().filter(|r| r.is_write() || r.is_read()) {
        *by_kind.entry(request).or_default() += 1;
    }
    for (request, count) in by_kind {
        let (verb, resource) = (&request.verb, &request.resource);
        writeln!(out, "    {verb:>7} {resource:<32} {:6.2} per claim", count as f64 / n).unwrap();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64()
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

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    let mut last_report = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} did not happen within {limit:?}");
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!("bench: still waiting for {what} ({:.0} s)", started.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    let claims = env_number("BENCH_CLAIMS", 1000);
    let workers = env_number("BENCH_WORKERS", 4);

    let provisioner_token = format!("bench-{}", test_support::unique_suffix());
    let options = Options {
        audit: true,
        tokens: vec![TokenUser {
            token: provisioner_token.clone(),
            user: PROVISIONER_USER.into(),
            groups: vec!["system:masters".into()],
        }],
        ..Default::default()
    };
    let plane = ControlPlane::start_with(&options).expect("starting the control plane");
    let client = plane.client().await;
    install_crds(&client).await.unwrap();
    let kubeconfig = plane.kubeconfig_for_token(&provisioner_token).unwrap();
    let audit = plane.audit_log().expect("an audited control plane").to_owned();

    let class = StorageClass {
        metadata: ObjectMeta { name: Some("bench".into()), ..Default::default() },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();
    let namespaces: Vec<String> = (0..NAMESPACES).map(|i| format!("bench-{i}")).collect();
    for name in &namespaces {
        let namespace = Namespace {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }

    let root = tempfile::tempdir().unwrap();
    let metrics = free_port();
    let mut provisioner = start_provisioner(root.path(), &kubeconfig, workers, metrics);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watch = tokio::spawn(watch_claims(client.clone(), seen.clone()));
    // Let the provisioner list and watch before the burst, as a running one would have.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, mark) = audited(&audit, 0);

    let mut out = format!(
        "Controller on a real control plane: hostPath backend, release build, {} cores, \
         {claims} claims in {NAMESPACES} namespaces, {workers} workers\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    eprintln!("bench: creating {claims} claims");
    let started = Instant::now();
    let created: Vec<(String, Instant)> = futures::stream::iter(0..claims)
        .map(|i| {
            let client = client.clone();
            let namespace = namespaces[i % NAMESPACES].clone();
            async move {
                let api: Api<ObjectBucketClaim> = Api::namespaced(client, &namespace);
                let mut claim = ObjectBucketClaim::new(
                    &format!("c-{i}"),
                    ObjectBucketClaimSpec {
                        storage_class_name: "bench".into(),
                        generate_bucket_name: Some("bench".into()),
                        ..Default::default()
                    },
                );
                claim.metadata.labels = Some([(LABEL.to_owned(), "true".to_owned())].into());
                api.create(&PostParams::default(), &claim).await.unwrap();
                (format!("{namespace}/c-{i}"), Instant::now())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let creating = started.elapsed();
    wait_until("every claim to be Bound", Duration::from_secs(3600), || {
        seen.lock().unwrap().bound.len() >= claims
    })
    .await;
    let bound_at = *seen.lock().unwrap().bound.values().max().unwrap();
    let total = bound_at.duration_since(started);
    let mut latencies: Vec<Duration> = {
        let seen = seen.lock().unwrap();
        created.iter().map(|(key, at)| seen.bound[key].saturating_duration_since(*at)).collect()
    };
    latencies.sort();
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
    writeln!(
        out,
        "  creation to Bound: p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    )
    .unwrap();
    // Let the reconciles that our own writes cause run out before counting.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (requests, mark) = audited(&audit, mark);
    per_claim(&requests, claims, &mut out);
    writeln!(out, "  provisioner memory: RSS {rss:.1} MiB, peak {peak:.1} MiB").unwrap();
    writeln!(
        out,
        "  provisioner CPU until all were Bound: {cpu:.1} s; backend provision call: {:.1} ms mean",
        backend_mean(metrics, "provision").await * 1000.0
    )
    .unwrap();

    eprintln!("bench: restarting the provisioner");
    provisioner.kill().await.unwrap();
    let (_, mark) = audited(&audit, mark);
    let restarted = Instant::now();
    let mut provisioner = start_provisioner(root.path(), &kubeconfig, workers, metrics);
    tokio::time::sleep(AFTER_RESTART).await;
    let (requests, mark) = audited(&audit, mark);
    let beyond_lists: Vec<&Request> =
        requests.iter().filter(|r| !matches!(r.verb.as_str(), "list" | "watch")).collect();
    let (rss, peak) = memory_mib(provisioner.id().unwrap());
    writeln!(out, "restart with {claims} claims bound").unwrap();
    writeln!(
        out,
        "  in the {:.0} s after it: {} backend calls, {} requests beside {} lists/watches ended",
        restarted.elapsed().as_secs_f64(),
        backend_calls(metrics).await,
        beyond_lists.len(),
        requests.len() - beyond_lists.len()
    )
    .unwrap();
    writeln!(out, "  provisioner memory after the relist: RSS {rss:.1} MiB, peak {peak:.1} MiB")
        .unwrap();

    eprintln!("bench: deleting {claims} claims");
    let started = Instant::now();
    futures::stream::iter(created.iter().map(|(key, _)| key.clone()))
        .map(|key| {
            let client = client.clone();
            async move {
                let (namespace, name) = key.split_once('/').unwrap();
                let api: Api<ObjectBucketClaim> = Api::namespaced(client, namespace);
                api.delete(name, &DeleteParams::default()).await.unwrap();
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    wait_until("every claim to be gone", Duration::from_secs(3600), || {
        seen.lock().unwrap().gone.len() >= claims
    })
    .await;
    let deleting = started.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (requests, _) = audited(&audit, mark);
    writeln!(out, "deletion").unwrap();
    writeln!(
        out,
        "  all {claims} gone in {:.1} s: {:.1} claims/s",
        deleting.as_secs_f64(),
        claims as f64 / deleting.as_secs_f64()
    )
    .unwrap();
    per_claim(&requests, claims, &mut out);
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

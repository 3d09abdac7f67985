//! The COSI driver at scale, on a real control plane with the release binary serving COSI alone:
//! N buckets (default 1,000, `BENCH_COSI`) created and each granted one access over the socket,
//! 32 at a time, as sidecars would ask; time until all are ready, latency of each bucket's create
//! plus grant, the driver's own API requests per access (its tenancy check, from the audit log),
//! what the store holds afterwards, and its memory. `make bench` runs it beside the controller's benchmark of
//! objectbucket.io claims and writes the results to `bench-cosi-results.txt`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bucket_provisioner::bucket::standalone::cosi_account_id;
use cosi_driver::proto::v1alpha1 as pb;
use futures::StreamExt;
use hyper_util::rt::TokioIo;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use test_support::bench::{
    AuditedPlane, IN_FLIGHT, env_number, memory_mib, namespaces, output_arg, per_object,
    percentile, requests_since,
};
use test_support::cosi::install_stand_in_crds;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};
use tonic::transport::{Channel, Endpoint, Uri};

const DRIVER_USER: &str = "bench-cosi-driver";
const NAMESPACES: usize = 10;

fn cosi_api(admin: &Client, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("objectstorage.k8s.io", "v1alpha1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    match ns {
        Some(ns) => Api::namespaced_with(admin.clone(), ns, &resource),
        None => Api::all_with(admin.clone(), &resource),
    }
}

/// Bucket `i`'s name, and the account name of its access, with both objects made as the COSI
/// controller makes them (not measured: the driver is).
async fn objects(admin: &Client, namespaces: &[String], i: usize) -> (String, String) {
    let (name, ns) = (format!("bench-cosi-{i}"), &namespaces[i % namespaces.len()]);
    let bucket = serde_json::from_value::<DynamicObject>(json!({
        "apiVersion": "objectstorage.k8s.io/v1alpha1", "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"bucketClaim": {"namespace": ns, "name": name}}
    }))
    .unwrap();
    let buckets = cosi_api(admin, "Bucket", "buckets", None);
    buckets.create(&PostParams::default(), &bucket).await.unwrap();
    let access = serde_json::from_value::<DynamicObject>(json!({
        "apiVersion": "objectstorage.k8s.io/v1alpha1", "kind": "BucketAccess",
        "metadata": {"name": name}, "spec": {}
    }))
    .unwrap();
    let accesses = cosi_api(admin, "BucketAccess", "bucketaccesses", Some(ns));
    let made = accesses.create(&PostParams::default(), &access).await.unwrap();
    (name, format!("ba-{}", made.metadata.uid.unwrap()))
}

fn start_driver(root: &Path, socket: &Path, kubeconfig: &Path, metrics: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"))
        .arg(format!("--root={}", root.display()))
        .arg("--identity=bench-node")
        .arg(format!("--s3-listen=127.0.0.1:{}", test_support::free_port().unwrap()))
        .arg("--endpoint-host=127.0.0.1")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--metrics-address=127.0.0.1:{metrics}"))
        .arg("--leader-elect=false")
        .arg(format!("--cosi-endpoint=unix://{}", socket.display()))
        .arg("--cosi-only")
        .env("RUST_LOG", "warn,kube_client::client::tls=error")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("starting hostpath-bucket-provisioner")
}

async fn connect(socket: &Path) -> Channel {
    for _ in 0..600 {
        let path = socket.to_owned();
        let connector = tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        });
        let endpoint = Endpoint::from_static("http://cosi.invalid");
        if let Ok(channel) = endpoint.connect_with_connector(connector).await {
            return channel;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the COSI socket never answered")
}

/// One bucket made ready: created, then its access granted.
async fn create_and_grant(channel: Channel, name: String, account: String) -> Duration {
    let mut cosi = pb::provisioner_client::ProvisionerClient::new(channel);
    let start = Instant::now();
    let create = pb::DriverCreateBucketRequest { name, parameters: Default::default() };
    let bucket_id = cosi.driver_create_bucket(create).await.unwrap().into_inner().bucket_id;
    let grant = pb::DriverGrantBucketAccessRequest {
        bucket_id,
        name: account,
        authentication_type: pb::AuthenticationType::Key.into(),
        parameters: Default::default(),
    };
    cosi.driver_grant_bucket_access(grant).await.unwrap();
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let output = output_arg();
    let count = env_number("BENCH_COSI", 1000);
    let AuditedPlane { plane: _plane, client, kubeconfig, audit } =
        AuditedPlane::start(DRIVER_USER).await;
    install_stand_in_crds(&client).await.unwrap();
    let namespaces = namespaces(&client, "bench-cosi", NAMESPACES).await;
    let made: Vec<(String, String)> = futures::stream::iter(0..count)
        .map(|i| objects(&client, &namespaces, i))
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let root = tempfile::tempdir().unwrap();
    let socket = root.path().join("cosi.sock");
    let metrics = test_support::free_port().unwrap();
    let driver = start_driver(&root.path().join("store"), &socket, &kubeconfig, metrics);
    let channel = connect(&socket).await;
    let (_, mark) = requests_since(&audit, DRIVER_USER, 0);

    let accounts: Vec<String> = made.iter().map(|(_, account)| account.clone()).collect();
    let start = Instant::now();
    let mut latencies: Vec<Duration> = futures::stream::iter(made)
        .map(|(name, account)| create_and_grant(channel.clone(), name, account))
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let total = start.elapsed();
    latencies.sort();
    let (requests, _) = requests_since(&audit, DRIVER_USER, mark);
    let (rss, peak) = memory_mib(driver.id().unwrap());
    let store = hostpath_provisioner::BucketStore::open(root.path().join("store"), "bench-node");
    let store = store.unwrap();
    let buckets = store.bucket_names().await.unwrap().len();
    let keys: usize = accounts.iter().map(|a| store.keys_for_user(&cosi_account_id(a)).len()).sum();

    let mut out = String::new();
    writeln!(out, "COSI driver (hostPath, v1alpha1 over a unix socket, {IN_FLIGHT} at a time)")
        .unwrap();
    writeln!(
        out,
        "  {count} buckets created and granted one access each: all ready in {:.2} s \
         ({:.0} per second)",
        total.as_secs_f64(),
        count as f64 / total.as_secs_f64()
    )
    .unwrap();
    writeln!(
        out,
        "  create + grant of one bucket: p50 {:.3} s, p99 {:.3} s, max {:.3} s",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    )
    .unwrap();
    // What the backend holds afterwards: one bucket and one key per access, nothing repeated.
    writeln!(out, "  in the store: {buckets} buckets, {keys} keys").unwrap();
    out.push_str(&per_object(&requests, count, "access"));
    writeln!(out, "  driver memory: RSS {rss:.1} MiB, peak {peak:.1} MiB").unwrap();
    writeln!(out, "  (objectbucket.io claims on the same backend: bench-controller-results.txt)")
        .unwrap();
    print!("{out}");
    if let Some(path) = output {
        std::fs::write(&path, &out).unwrap();
    }
}

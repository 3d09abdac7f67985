//! The Garage provisioner at scale: N claims (default 1,000, `BENCH_CLAIMS`) against a real
//! three-node Garage cluster, driven by the library's controller in this process on the real
//! control plane: time until all are Bound, latency from creation to Bound, admin API calls per
//! claim (the backend counts every request it sends), then the same for their deletion.
//!
//! First, on the same cluster, Garage's admin API alone is driven with exactly the provisioner's
//! calls from as many tasks as the controller has workers (`BENCH_WORKERS`, default 4), and the
//! report ends with the provisioner's rate as a share of that one: the machine is shared, so
//! only figures measured in one run compare. `make bench` runs it and writes the results to
//! `bench-garage-results.txt`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use bucket_provisioner::kubernetes::health::Health;
use bucket_provisioner::kubernetes::telemetry::Metrics;
use bucket_provisioner::{ControllerConfig, run_controller};
use garage_provisioner::{GarageProvisioner, KubeCluster};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use test_support::bench::{
    create_all, delete_all, env_number, latencies, namespaces, output_arg, wait_until,
};
use test_support::garage::{GARAGE_REGION, GarageCluster};
use test_support::{ControlPlane, Deployed, client_with_crds, deployed_identity, unique_suffix};

#[path = "support/admin_alone.rs"]
mod admin_alone;

const NAMESPACES: usize = 20;
const LABEL: &str = "bench-garage-claim";

/// `namespace/name` of every claim with the label, and whether it is Bound.
async fn bound(client: &kube::Client) -> HashMap<String, bool> {
    let all: Api<ObjectBucketClaim> = Api::all(client.clone());
    let params = ListParams::default().labels(LABEL);
    all.list(&params)
        .await
        .map(|list| {
            list.into_iter()
                .map(|c| {
                    let phase = c.status.as_ref().and_then(|s| s.phase);
                    (
                        format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()),
                        phase == Some(ClaimPhase::Bound),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::main]
async fn main() {
    let claims = env_number("BENCH_CLAIMS", 1000);
    let workers = env_number("BENCH_WORKERS", 4);
    let garage = GarageCluster::start(3).await.expect("a three-node Garage cluster");
    // First Garage alone with the same calls from as many tasks as there are workers: what the
    // provisioner is measured against, on the same cluster, minutes apart at most.
    let (alone, alone_deleted) =
        admin_alone::run(&garage.nodes[0].admin_url(), &garage.admin_token, claims, workers).await;
    let client = client_with_crds().await;
    let prefix = format!("bench-garage-{}", unique_suffix());
    let spaces = namespaces(&client, &prefix, NAMESPACES).await;
    let secret = Secret {
        metadata: ObjectMeta { name: Some("garage-admin".into()), ..Default::default() },
        string_data: Some(BTreeMap::from([(
            "GARAGE_ADMIN_TOKEN".into(),
            garage.admin_token.clone(),
        )])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), &spaces[0])
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let provisioner = format!("bench.objectbucket.io/garage-{}", unique_suffix());
    let class_name = format!("{prefix}-class");
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(class_name.clone()), ..Default::default() },
        provisioner: provisioner.clone(),
        reclaim_policy: Some("Delete".into()),
        parameters: Some(BTreeMap::from([
            ("adminEndpoint".into(), garage.nodes[0].admin_url()),
            ("endpoint".into(), garage.nodes[0].s3_url()),
            ("region".into(), GARAGE_REGION.into()),
            ("secretName".into(), "garage-admin".into()),
            ("secretNamespace".into(), spaces[0].clone()),
        ])),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();

    let identity = deployed_identity(ControlPlane::shared(), Deployed::Garage).await.unwrap();
    let deployed = identity.client().await;
    let cluster = Arc::new(KubeCluster::new(deployed.clone()));
    let backend = Arc::new(GarageProvisioner::new(cluster.clone()).with_class_parameters(cluster));
    let mut config = ControllerConfig::new(provisioner.clone());
    config.workers = u16::try_from(workers).unwrap_or(4);
    let controller = tokio::spawn(run_controller(
        deployed,
        backend.clone(),
        config,
        Metrics::new(),
        Health::default(),
        std::future::pending::<()>(),
    ));

    let calls_before = backend.admin_calls();
    let started = Instant::now();
    let created = create_all(&client, &spaces, claims, |i| {
        let mut claim = ObjectBucketClaim::new(
            &format!("c{i}"),
            ObjectBucketClaimSpec {
                storage_class_name: class_name.clone(),
                generate_bucket_name: Some("bench".into()),
                ..Default::default()
            },
        );
        claim.metadata.labels = Some(BTreeMap::from([(LABEL.into(), "true".into())]));
        claim
    })
    .await;
    let created_in = started.elapsed();
    let mut seen: HashMap<String, Instant> = HashMap::new();
    let limit = Duration::from_secs(120 + claims as u64);
    let deadline = Instant::now() + limit;
    loop {
        let now = Instant::now();
        for (key, is_bound) in bound(&client).await {
            if is_bound {
                seen.entry(key).or_insert(now);
            }
        }
        if seen.len() >= claims {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {claims} claims Bound after {limit:?}",
            seen.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let all_bound = started.elapsed();
    let provision_calls = backend.admin_calls() - calls_before;

    let calls_before = backend.admin_calls();
    let deleting = Instant::now();
    delete_all::<ObjectBucketClaim>(&client, &created).await;
    let client_for_wait = client.clone();
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let gone = gone.clone();
        tokio::spawn(async move {
            loop {
                if bound(&client_for_wait).await.is_empty() {
                    gone.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    wait_until("every claim deleted", limit, || gone.load(std::sync::atomic::Ordering::Relaxed))
        .await;
    watcher.abort();
    let all_deleted = deleting.elapsed();
    let delete_calls = backend.admin_calls() - calls_before;
    controller.abort();

    let mut report = String::new();
    writeln!(report, "Garage provisioner: {claims} claims, {workers} workers, 3 Garage nodes (replication 3, sqlite), {NAMESPACES} namespaces").unwrap();
    writeln!(
        report,
        "  Garage's admin API alone, the same calls from {workers} tasks: {claims} claims in {:.1} s ({:.1} claims/s, {:.2} calls per claim; medians {})",
        alone.elapsed.as_secs_f64(),
        alone.rate(),
        alone.calls as f64 / claims as f64,
        alone.medians()
    )
    .unwrap();
    writeln!(
        report,
        "    their deletion: {:.1} s ({:.1} claims/s, {:.2} calls per claim; medians {})",
        alone_deleted.elapsed.as_secs_f64(),
        alone_deleted.rate(),
        alone_deleted.calls as f64 / claims as f64,
        alone_deleted.medians()
    )
    .unwrap();
    writeln!(
        report,
        "  created in {:.1} s; all Bound after {:.1} s ({:.1} claims/s)",
        created_in.as_secs_f64(),
        all_bound.as_secs_f64(),
        claims as f64 / all_bound.as_secs_f64()
    )
    .unwrap();
    report.push_str(&latencies("creation to Bound", &created, &seen));
    writeln!(
        report,
        "  admin API calls: {provision_calls} to provision ({:.2} per claim)",
        provision_calls as f64 / claims as f64
    )
    .unwrap();
    writeln!(
        report,
        "  all deleted after {:.1} s; admin API calls: {delete_calls} ({:.2} per claim)",
        all_deleted.as_secs_f64(),
        delete_calls as f64 / claims as f64
    )
    .unwrap();
    let provision_rate = claims as f64 / all_bound.as_secs_f64();
    let delete_rate = claims as f64 / all_deleted.as_secs_f64();
    writeln!(
        report,
        "  ratio to Garage alone: provisioning {:.0}% ({provision_rate:.1} / {:.1} claims/s), deletion {:.0}% ({delete_rate:.1} / {:.1} claims/s)",
        100.0 * provision_rate / alone.rate(),
        alone.rate(),
        100.0 * delete_rate / alone_deleted.rate(),
        alone_deleted.rate()
    )
    .unwrap();
    print!("{report}");
    if let Some(path) = output_arg() {
        std::fs::write(&path, &report).unwrap();
        println!("results written to {path}");
    }
    drop(garage);
}

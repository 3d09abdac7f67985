//! COSI as a user runs it on a real node: the upstream v0.2.2 CRDs and controller
//! (`objectstorage.k8s.io/v1alpha1`, what clusters run), `deploy/cosi/hostpath/` applied with
//! only its image references set (the hostPath driver and the upstream sidecar image in one pod,
//! talking over a socket on an emptyDir), a tenant's BucketClaim and BucketAccess, and a
//! consumer pod that knows nothing but the access Secret mounted as a volume. Then the Helm
//! chart with `cosi.enabled`: the same sidecar beside the chart's hostPath provisioner, serving
//! a driver name of its own to another consumer pod.
//!
//! Run by `make e2e` (root); the consumer pods' output is printed.

#[path = "cosi_support.rs"]
mod support;

use std::path::{Path, PathBuf};

use anyhow::Result;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, DeleteParams};
use node_tests::{Node, helm, image_values, s3_client, set_images, wait_rollout};
use support::{
    DriverPod, Used, assert_shared_socket, claim_access_and_consume, cosi_installed, driver_logs,
    until_cosi,
};
use test_support::cosi::CosiVersion;
use test_support::{Apply, apply_objects, read_manifests};

const NS: &str = "bucket-provisioner";
const DRIVER: &str = "hostpath-cosi-driver";
/// What the hostPath driver answers to (its default `--cosi-driver-name`).
const DRIVER_NAME: &str = "hostpath.bucket-provisioner.io";
const ROOT: &str = "/var/lib/bucket-provisioner-cosi";
const VERSION: CosiVersion = CosiVersion::V1Alpha1;

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// `deploy/cosi/hostpath/` as a user applies it, with only the image references set: the
/// driver and the sidecar in one pod; a tenant's claim and access, a consumer pod; deleting
/// the access revokes its key and removes its Secret, deleting the claim deletes the bucket.
#[tokio::test]
async fn deploy_cosi_hostpath_serves_a_pod_on_a_node() -> Result<()> {
    let node = Node::shared();
    let client = node.client().await;
    let controller = cosi_installed(node, VERSION).await;
    let mut deploy = read_manifests(&repo("deploy/cosi/hostpath"))?;
    for (_, object) in &mut deploy {
        set_images(object, node.images())?;
    }
    apply_objects(&client, &deploy, Apply::ForReal).await?;
    let pods = wait_rollout(&client, NS, DRIVER).await?;
    assert_eq!(pods.len(), 1, "one driver pod: {pods:?}");
    let pod = DriverPod { namespace: NS, name: &pods[0] };
    let spec = Api::<Pod>::namespaced(client.clone(), NS).get(pod.name).await?.spec.unwrap();
    let containers: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        containers,
        ["endpoint", "driver", "cosi-sidecar"],
        "the endpoint apart, the driver and the sidecar in one pod"
    );
    assert_shared_socket(pod.name, "hostpath-bucket-provisioner");

    let endpoint = "http://hostpath-cosi-s3.bucket-provisioner.svc:9000";
    let Used { tenant, bucket, keys } =
        claim_access_and_consume(VERSION, node, "hostpath-cosi", DRIVER_NAME, &pod, endpoint)
            .await?;
    let app = tenant.namespace.as_str();
    let stored = Path::new(ROOT).join("buckets").join(&bucket).join("hello.txt");
    assert!(stored.is_file(), "the object is on the node's disk at {}", stored.display());

    // Deleting the access revokes its key and removes its Secret; deleting the claim (class
    // policy Delete) deletes the bucket. Checked from this machine through the Service.
    let service = Api::<Service>::namespaced(client.clone(), NS).get("hostpath-cosi-s3").await?;
    let cluster_ip = service.spec.and_then(|s| s.cluster_ip).expect("a ClusterIP");
    let s3 = s3_client(
        &format!("http://{cluster_ip}:9000"),
        &keys.access_key_id,
        &keys.secret_access_key,
    );
    let waiting = (&client, &pod, controller);
    until_cosi("the access key to read through the Service", waiting, async || {
        s3.head_object().bucket(&bucket).key("hello.txt").send().await.ok()
    })
    .await;
    let accesses = VERSION.api(&tenant.client, "BucketAccess", Some(app));
    accesses.delete("photos", &DeleteParams::default()).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), app);
    until_cosi("the access's Secret to be deleted", waiting, async || {
        secrets.get_opt("photos-cosi").await.ok()?.is_none().then_some(())
    })
    .await;
    let refused = until_cosi("the deleted access's key to be refused", waiting, async || {
        let error = s3.head_object().bucket(&bucket).key("hello.txt").send().await.err()?;
        // A refusal, not a connection that failed.
        error.raw_response().map(|r| r.status().as_u16())
    })
    .await;
    assert!(matches!(refused, 401 | 403), "refused with HTTP {refused}");
    // As `kubectl delete` waits by default: the access is gone before its claim is deleted.
    until_cosi("the BucketAccess gone", waiting, async || {
        accesses.get_opt("photos").await.ok()?.is_none().then_some(())
    })
    .await;
    let claims = VERSION.api(&tenant.client, "BucketClaim", Some(app));
    claims.delete("photos", &DeleteParams::default()).await?;
    let dir = Path::new(ROOT).join("buckets").join(&bucket);
    until_cosi("the bucket deleted with its claim", waiting, async || {
        (!dir.exists()).then_some(())
    })
    .await;
    let bucket_objects = VERSION.api(&client, "Bucket", None);
    until_cosi("the Bucket object gone", waiting, async || {
        bucket_objects.get_opt(&bucket).await.ok()?.is_none().then_some(())
    })
    .await;

    // The sidecar, the driver and the controller did all of it with the deployed RBAC.
    let logs = driver_logs(&client, &pod).await;
    assert!(!logs.contains("forbidden"), "refused by RBAC:\n{logs}");
    let controller_log = controller.log_tail("controller", usize::MAX);
    assert!(!controller_log.contains("forbidden"), "{controller_log}");
    println!("COSI: access revoked, Secret removed, bucket {bucket} deleted with its claim");
    Ok(())
}

/// The Helm chart with `cosi.enabled` (the node's sidecar image, a driver name of its own, as
/// a second driver beside deploy/cosi's): its hostPath provisioner pod runs the sidecar beside
/// the provisioner, and a tenant's access through it serves a consumer pod.
#[tokio::test]
async fn helm_chart_with_cosi_serves_a_pod_on_a_node() -> Result<()> {
    const RELEASE_NS: &str = "buckets-chart";
    const PROVISIONER: &str = "hostpath-bucket-provisioner";
    const CHART_DRIVER: &str = "chart.hostpath.bucket-provisioner.io";
    let node = Node::shared();
    let client = node.client().await;
    cosi_installed(node, VERSION).await;
    let chart = repo("charts/bucket-provisioner");
    let values = format!(
        "{},cosi.enabled=true,cosi.sidecar.image={},cosi.hostpath.driverName={CHART_DRIVER}",
        image_values(node),
        node.images().cosi_sidecar
    );
    let install = ["install", "cosi", chart.to_str().unwrap(), "-n", RELEASE_NS];
    helm(node, &[&install[..], &["--create-namespace", "--set", &values, "--wait"]].concat());
    let pods = wait_rollout(&client, RELEASE_NS, PROVISIONER).await?;
    assert_eq!(pods.len(), 1, "one provisioner pod: {pods:?}");
    let pod = DriverPod { namespace: RELEASE_NS, name: &pods[0] };
    assert_shared_socket(pod.name, "hostpath-bucket-provisioner");

    let endpoint = format!("http://hostpath-s3.{RELEASE_NS}.svc:9000");
    let used = claim_access_and_consume(VERSION, node, "chart-cosi", CHART_DRIVER, &pod, &endpoint)
        .await?;
    let bucket = Path::new("/var/lib/bucket-provisioner/buckets").join(&used.bucket);
    assert!(bucket.join("hello.txt").is_file(), "the chart's root holds {}", bucket.display());
    let logs = driver_logs(&client, &pod).await;
    assert!(!logs.contains("forbidden"), "refused by the chart's RBAC:\n{logs}");
    println!("helm with cosi.enabled: the chart's pod served COSI access {}", used.keys.bucket);
    Ok(())
}

//! COSI `objectstorage.k8s.io/v1alpha2` on a real node: the CRDs and controller of upstream main
//! (pinned in `tests/cosi/build.sh`), and `deploy/cosi/hostpath/` as its comment says to run it
//! under v1alpha2, with the sidecar's image replaced by one built from main and nothing else
//! changed. A tenant's claim and ReadWrite access serve a consumer pod whose only configuration
//! is the access Secret's flat `COSI_S3_*` keys.
//!
//! A test binary of its own: a cluster holds one version of the COSI CRDs. Run by `make e2e`.

#[path = "cosi_support.rs"]
mod support;

use std::path::{Path, PathBuf};

use anyhow::Result;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use node_tests::{Node, s3_client, set_images, wait_rollout};
use support::{DriverPod, assert_shared_socket, claim_access_and_consume, cosi_installed};
use test_support::cosi::CosiVersion;
use test_support::{Apply, apply_objects, read_manifests};

const VERSION: CosiVersion = CosiVersion::V1Alpha2;

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

#[tokio::test]
async fn deploy_cosi_hostpath_serves_a_pod_under_v1alpha2() -> Result<()> {
    let node = Node::shared();
    let client = node.client().await;
    let controller = cosi_installed(node, VERSION).await;
    let mut deploy = read_manifests(&repo("deploy/cosi/hostpath"))?;
    for (_, object) in &mut deploy {
        set_images(object, node.images())?;
        let containers = object.data.pointer_mut("/spec/template/spec/containers");
        for container in containers.and_then(|c| c.as_array_mut()).into_iter().flatten() {
            if container["name"] == "cosi-sidecar" {
                container["image"] = node.images().cosi_sidecar_v1alpha2.clone().into();
            }
        }
    }
    apply_objects(&client, &deploy, Apply::ForReal).await?;
    let pods = wait_rollout(&client, "bucket-provisioner", "hostpath-cosi-driver").await?;
    assert_eq!(pods.len(), 1, "one driver pod: {pods:?}");
    let pod = DriverPod { namespace: "bucket-provisioner", name: &pods[0] };
    assert_shared_socket(pod.name, "hostpath-bucket-provisioner");

    let endpoint = "http://hostpath-cosi-s3.bucket-provisioner.svc:9000";
    let driver = "hostpath.bucket-provisioner.io";
    let used =
        claim_access_and_consume(VERSION, node, "hostpath-v2", driver, &pod, endpoint).await?;
    let stored = Path::new("/var/lib/bucket-provisioner-cosi/buckets").join(&used.bucket);
    assert!(stored.join("hello.txt").is_file(), "the object is on the node's disk");
    // The access is granted in the tenant's own namespace, and its key reads what the pod
    // wrote from this machine too, through the Service.
    let accesses = VERSION.api(&used.tenant.client, "BucketAccess", Some(&used.tenant.namespace));
    assert!(VERSION.access_ready(&accesses.get("photos").await?), "the access is granted");
    let service =
        Api::<Service>::namespaced(client.clone(), pod.namespace).get("hostpath-cosi-s3").await?;
    let cluster_ip = service.spec.and_then(|s| s.cluster_ip).expect("a ClusterIP");
    let (key, secret) = (&used.keys.access_key_id, &used.keys.secret_access_key);
    let s3 = s3_client(&format!("http://{cluster_ip}:9000"), key, secret);
    let waiting = (&client, &pod, controller);
    let read =
        support::until_cosi("the access key to read through the Service", waiting, async || {
            s3.get_object().bucket(&used.bucket).key("hello.txt").send().await.ok()
        })
        .await;
    let body = read.body.collect().await?.into_bytes();
    assert!(body.starts_with(b"hello from a claim"), "{body:?}");

    // The sidecar, the driver and the controller did it with the deployed RBAC.
    let logs = support::driver_logs(&client, &pod).await;
    assert!(!logs.contains("forbidden"), "refused by RBAC:\n{logs}");
    let controller_log = controller.log_tail("controller", usize::MAX);
    assert!(!controller_log.contains("forbidden"), "{controller_log}");
    println!("COSI v1alpha2: {} served to a pod through deploy/cosi/hostpath", used.bucket);
    Ok(())
}

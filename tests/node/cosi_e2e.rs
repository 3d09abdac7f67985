//! COSI as a user runs it on a real node: the upstream v0.2.2 CRDs and controller
//! (`objectstorage.k8s.io/v1alpha1`, what clusters run), `deploy/cosi/hostpath/` applied with
//! only its image references set (the hostPath driver and the upstream sidecar image in one pod,
//! talking over a socket on an emptyDir), a tenant's BucketClaim and BucketAccess, and a
//! consumer pod that knows nothing but the access Secret mounted as a volume. Then the Helm
//! chart with `cosi.enabled`: the same sidecar beside the chart's hostPath provisioner, serving
//! a driver name of its own to another consumer pod.
//!
//! Run by `make e2e` (root); the consumer pods' output is printed.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, Pod, PodSecurityContext, PodSpec, SeccompProfile, Secret,
    SecretVolumeSource, SecurityContext, Service, Volume, VolumeMount,
};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, LogParams, ObjectMeta};
use node_tests::{
    Node, helm, image_values, pod_processes, run_to_completion, s3_client, set_images, wait_rollout,
};
use serde_json::json;
use test_support::cosi::{CosiVersion, create, install_upstream};
use test_support::{
    Apply, CosiTenant, S3Access, Supervised, apply_objects, eventually, read_manifests,
};
use tokio::sync::OnceCell;

const NS: &str = "bucket-provisioner";
const DRIVER: &str = "hostpath-cosi-driver";
/// What the hostPath driver answers to (its default `--cosi-driver-name`).
const DRIVER_NAME: &str = "hostpath.bucket-provisioner.io";
const ROOT: &str = "/var/lib/bucket-provisioner-cosi";
const SOCKET: &str = "var/lib/cosi/cosi.sock";
const VERSION: CosiVersion = CosiVersion::V1Alpha1;

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// A driver pod: its namespace, name and the container that runs the provisioner.
struct DriverPod<'a> {
    namespace: &'a str,
    name: &'a str,
    container: &'a str,
}

/// The last lines both containers of the driver pod logged, for failure messages.
async fn driver_logs(client: &Client, pod: &DriverPod<'_>) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), pod.namespace);
    let mut text = String::new();
    for container in [pod.container, "cosi-sidecar"] {
        let params = LogParams {
            container: Some(container.into()),
            tail_lines: Some(40),
            ..Default::default()
        };
        let log = pods.logs(pod.name, &params).await.unwrap_or_else(|e| e.to_string());
        text.push_str(&format!("--- {} {container} ---\n{log}\n", pod.name));
    }
    text
}

/// Polls COSI object `name` until `check` holds, for up to three minutes (the v0.2.2 sidecar
/// retries a failed call with backoff); the error shows the last status and the pod's logs.
async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    check: impl Fn(&DynamicObject) -> bool,
    client: &Client,
    pod: &DriverPod<'_>,
) -> Result<DynamicObject> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let object = api.get_opt(name).await?;
        if let Some(object) = object.as_ref().filter(|o| check(o)) {
            return Ok(object.clone());
        }
        if tokio::time::Instant::now() > deadline {
            let status = object.map(|o| o.data["status"].clone());
            bail!("{name} not ready in 180s: {status:?}\n{}", driver_logs(client, pod).await);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A pod running the consumer with access Secret `secret` mounted at `/cosi` and told where
/// its `BucketInfo` is: no other configuration.
fn cosi_consumer_pod(name: &str, image: &str, secret: &str) -> Pod {
    Pod {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            containers: vec![Container {
                name: "app".into(),
                image: Some(image.into()),
                env: Some(vec![EnvVar {
                    name: "COSI_BUCKET_INFO".into(),
                    value: Some("/cosi/BucketInfo".into()),
                    ..Default::default()
                }]),
                volume_mounts: Some(vec![VolumeMount {
                    name: "cosi".into(),
                    mount_path: "/cosi".into(),
                    read_only: Some(true),
                    ..Default::default()
                }]),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    read_only_root_filesystem: Some(true),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".into()]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            volumes: Some(vec![Volume {
                name: "cosi".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The process running `program` in pod `pod` (its host name), as (pid, uid).
fn process_in(pod: &str, program: &str) -> (u32, u32) {
    let processes: Vec<_> = pod_processes(program)
        .into_iter()
        .filter(|(_, _, env)| env.get("HOSTNAME").map(String::as_str) == Some(pod))
        .collect();
    assert_eq!(processes.len(), 1, "one {program} process in pod {pod}: {processes:?}");
    let (pid, uid, _) = &processes[0];
    (*pid, *uid)
}

/// The upstream COSI installed as upstream says (CRDs, controller under its own RBAC), once for
/// every test of this binary.
async fn cosi_installed(node: &Node) -> &'static Supervised {
    static COSI: OnceCell<Supervised> = OnceCell::const_new();
    COSI.get_or_try_init(|| install_upstream(node.plane(), VERSION)).await.expect("installing COSI")
}

/// Asserts that the provisioner and the sidecar of `pod` run as the non-root user and see one
/// socket, the provisioner's, on the pod's emptyDir.
fn assert_shared_socket(pod: &str, program: &str) {
    let (driver_pid, driver_uid) = process_in(pod, program);
    let (sidecar_pid, sidecar_uid) = process_in(pod, "sidecar");
    assert_eq!((driver_uid, sidecar_uid), (65532, 65532), "both run as the non-root user");
    let socket = |pid: u32| std::fs::metadata(format!("/proc/{pid}/root/{SOCKET}")).unwrap();
    let (at_driver, at_sidecar) = (socket(driver_pid), socket(sidecar_pid));
    assert!(at_driver.file_type().is_socket(), "/{SOCKET} in the driver is a socket");
    assert_eq!((at_driver.dev(), at_driver.ino()), (at_sidecar.dev(), at_sidecar.ino()));
    println!("COSI driver pod {pod}: {program} and the upstream sidecar share /{SOCKET}");
}

/// What one tenant's use of a driver left: its namespace and client, the bucket, the keys.
struct Used {
    tenant: CosiTenant,
    bucket: String,
    keys: S3Access,
}

/// The administrator's classes for `driver` (named after `class`); a tenant, with rights in its
/// namespace only, claims a bucket and gets an access; a consumer pod with nothing but the
/// access Secret writes, reads and lists, and its output is printed.
async fn claim_access_and_consume(
    node: &Node,
    class: &str,
    driver: &str,
    pod: &DriverPod<'_>,
    endpoint: &str,
) -> Result<Used> {
    let client = node.client().await;
    let classes = VERSION.api(&client, "BucketClass", None);
    create(&classes, &VERSION.bucket_class(class, driver, "Delete", json!({}))).await?;
    let access_classes = VERSION.api(&client, "BucketAccessClass", None);
    let access_class = format!("{class}-keys");
    create(&access_classes, &VERSION.access_class(&access_class, driver, json!({}))).await?;
    let tenant = CosiTenant::new(node.plane(), class).await?;
    let app = tenant.namespace.clone();
    let claims = VERSION.api(&tenant.client, "BucketClaim", Some(&app));
    create(&claims, &VERSION.claim(&app, "photos", class)).await?;
    // Ready and bound: v0.2.2 can mark a claim ready before it names its Bucket.
    let ready = |c: &DynamicObject| VERSION.claim_ready(c) && VERSION.claim_bucket(c).is_some();
    let claim = wait_status(&claims, "photos", ready, &client, pod).await?;
    let bucket = VERSION.claim_bucket(&claim).expect("a ready claim names its Bucket");
    let accesses = VERSION.api(&tenant.client, "BucketAccess", Some(&app));
    let access = VERSION.access(&app, "photos", &access_class, "photos", "photos-cosi", "");
    create(&accesses, &access).await?;
    let granted = |a: &DynamicObject| VERSION.access_ready(a);
    wait_status(&accesses, "photos", granted, &client, pod).await?;
    let keys = VERSION.wait_access_secret(&tenant.client, &app, "photos-cosi").await;
    assert_eq!(keys.bucket, bucket, "v1alpha1 names the bucket after its Bucket object");
    assert_eq!(keys.endpoint, endpoint);

    let spec = cosi_consumer_pod("photos-consumer", &node.images().consumer, "photos-cosi");
    let used = run_to_completion(&client, &app, &spec).await?;
    println!("--- pod {app}/photos-consumer ({}), COSI access photos ---", used.phase);
    print!("{}", used.logs);
    assert_eq!(used.phase, "Succeeded", "{}", used.logs);
    assert!(used.logs.contains(&format!("consumer: wrote s3://{bucket}/hello.txt")));
    assert!(used.logs.contains("consumer: read it back"), "{}", used.logs);
    assert!(used.logs.contains("consumer: listed hello.txt"), "{}", used.logs);
    Ok(Used { tenant, bucket, keys })
}

/// `deploy/cosi/hostpath/` as a user applies it, with only the image references set: the
/// driver and the sidecar in one pod; a tenant's claim and access, a consumer pod; deleting
/// the access revokes its key and removes its Secret, deleting the claim deletes the bucket.
#[tokio::test]
async fn deploy_cosi_hostpath_serves_a_pod_on_a_node() -> Result<()> {
    let node = Node::shared();
    let client = node.client().await;
    let controller = cosi_installed(node).await;
    let mut deploy = read_manifests(&repo("deploy/cosi/hostpath"))?;
    for (_, object) in &mut deploy {
        set_images(object, node.images())?;
    }
    apply_objects(&client, &deploy, Apply::ForReal).await?;
    let pods = wait_rollout(&client, NS, DRIVER).await?;
    assert_eq!(pods.len(), 1, "one driver pod: {pods:?}");
    let pod = DriverPod { namespace: NS, name: &pods[0], container: "driver" };
    let spec = Api::<Pod>::namespaced(client.clone(), NS).get(pod.name).await?.spec.unwrap();
    let containers: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(containers, ["driver", "cosi-sidecar"], "the driver and the sidecar in one pod");
    assert_shared_socket(pod.name, "hostpath-bucket-provisioner");

    let endpoint = "http://hostpath-cosi-s3.bucket-provisioner.svc:9000";
    let Used { tenant, bucket, keys } =
        claim_access_and_consume(node, "hostpath-cosi", DRIVER_NAME, &pod, endpoint).await?;
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
    eventually("the access key to read through the Service", || async {
        s3.head_object().bucket(&bucket).key("hello.txt").send().await.ok()
    })
    .await;
    let accesses = VERSION.api(&tenant.client, "BucketAccess", Some(app));
    accesses.delete("photos", &DeleteParams::default()).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), app);
    eventually("the access's Secret to be deleted", || async {
        secrets.get_opt("photos-cosi").await.ok()?.is_none().then_some(())
    })
    .await;
    let refused = eventually("the deleted access's key to be refused", || async {
        let error = s3.head_object().bucket(&bucket).key("hello.txt").send().await.err()?;
        // A refusal, not a connection that failed.
        error.raw_response().map(|r| r.status().as_u16())
    })
    .await;
    assert!(matches!(refused, 401 | 403), "refused with HTTP {refused}");
    let claims = VERSION.api(&tenant.client, "BucketClaim", Some(app));
    claims.delete("photos", &DeleteParams::default()).await?;
    let dir = Path::new(ROOT).join("buckets").join(&bucket);
    eventually("the bucket deleted with its claim", || async { (!dir.exists()).then_some(()) })
        .await;
    let bucket_objects = VERSION.api(&client, "Bucket", None);
    eventually("the Bucket object gone", || async {
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
    cosi_installed(node).await;
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
    let pod = DriverPod { namespace: RELEASE_NS, name: &pods[0], container: "provisioner" };
    assert_shared_socket(pod.name, "hostpath-bucket-provisioner");

    let endpoint = format!("http://hostpath-s3.{RELEASE_NS}.svc:9000");
    let used = claim_access_and_consume(node, "chart-cosi", CHART_DRIVER, &pod, &endpoint).await?;
    let bucket = Path::new("/var/lib/bucket-provisioner/buckets").join(&used.bucket);
    assert!(bucket.join("hello.txt").is_file(), "the chart's root holds {}", bucket.display());
    let logs = driver_logs(&client, &pod).await;
    assert!(!logs.contains("forbidden"), "refused by the chart's RBAC:\n{logs}");
    println!("helm with cosi.enabled: the chart's pod served COSI access {}", used.keys.bucket);
    Ok(())
}

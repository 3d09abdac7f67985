//! COSI as a user runs it on a real node: the upstream v0.2.2 CRDs and controller
//! (`objectstorage.k8s.io/v1alpha1`, what clusters run), `deploy/cosi/hostpath/` applied with
//! only its image references set (the hostPath driver and the upstream sidecar image in one pod,
//! talking over a socket on an emptyDir), a tenant's BucketClaim and BucketAccess, and a
//! consumer pod that knows nothing but the access Secret mounted as a volume.
//!
//! Run by `make e2e` (root); the consumer pod's output is printed.

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
use node_tests::{Node, pod_processes, run_to_completion, s3_client, set_images, wait_rollout};
use serde_json::json;
use test_support::cosi::{CosiVersion, create, install_upstream};
use test_support::{Apply, CosiTenant, apply_objects, eventually, read_manifests};

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

/// The last lines both containers of the driver pod logged, for failure messages.
async fn driver_logs(client: &Client, pod: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut text = String::new();
    for container in ["driver", "cosi-sidecar"] {
        let params = LogParams {
            container: Some(container.into()),
            tail_lines: Some(40),
            ..Default::default()
        };
        let log = pods.logs(pod, &params).await.unwrap_or_else(|e| e.to_string());
        text.push_str(&format!("--- {pod} {container} ---\n{log}\n"));
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
    pod: &str,
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

/// The driver pod's two processes: each container's, found by program name in the node's pods.
fn process_of(program: &str) -> (u32, u32) {
    let processes = pod_processes(program);
    assert_eq!(processes.len(), 1, "one {program} process in a pod: {processes:?}");
    let (pid, uid, _) = &processes[0];
    (*pid, *uid)
}

#[tokio::test]
async fn hostpath_cosi_driver_serves_a_pod_on_a_node() -> Result<()> {
    let node = Node::shared();
    let client = node.client().await;

    // 1. COSI installed as upstream says (CRDs, controller under its own RBAC), then
    //    deploy/cosi/hostpath/ as a user applies it, with only the image references set.
    let controller = install_upstream(node.plane(), VERSION).await?;
    let mut deploy = read_manifests(&repo("deploy/cosi/hostpath"))?;
    for (_, object) in &mut deploy {
        set_images(object, node.images())?;
    }
    apply_objects(&client, &deploy, Apply::ForReal).await?;
    let pods = wait_rollout(&client, NS, DRIVER).await?;
    assert_eq!(pods.len(), 1, "one driver pod: {pods:?}");
    let pod_name = &pods[0];
    let pod = Api::<Pod>::namespaced(client.clone(), NS).get(pod_name).await?;
    let containers: Vec<_> =
        pod.spec.as_ref().unwrap().containers.iter().map(|c| &c.name).collect();
    assert_eq!(containers, ["driver", "cosi-sidecar"], "the driver and the sidecar in one pod");
    let (driver_pid, driver_uid) = process_of("hostpath-bucket-provisioner");
    let (sidecar_pid, sidecar_uid) = process_of("sidecar");
    assert_eq!((driver_uid, sidecar_uid), (65532, 65532), "both run as the non-root user");
    // Both containers see one socket: the driver's, on the pod's emptyDir.
    let socket = |pid: u32| std::fs::metadata(format!("/proc/{pid}/root/{SOCKET}"));
    let (at_driver, at_sidecar) = (socket(driver_pid)?, socket(sidecar_pid)?);
    assert!(at_driver.file_type().is_socket(), "/{SOCKET} in the driver is a socket");
    assert_eq!((at_driver.dev(), at_driver.ino()), (at_sidecar.dev(), at_sidecar.ino()));
    println!("COSI driver pod {pod_name}: driver and upstream sidecar share /{SOCKET}");

    // 2. The administrator's classes; a tenant, with rights in its namespace only, claims a
    //    bucket and asks for access.
    let classes = VERSION.api(&client, "BucketClass", None);
    create(&classes, &VERSION.bucket_class("hostpath-cosi", DRIVER_NAME, "Delete", json!({})))
        .await?;
    let access_classes = VERSION.api(&client, "BucketAccessClass", None);
    create(&access_classes, &VERSION.access_class("hostpath-cosi-keys", DRIVER_NAME, json!({})))
        .await?;
    let tenant = CosiTenant::new(node.plane(), "cosi-app").await?;
    let app = tenant.namespace.as_str();
    let claims = VERSION.api(&tenant.client, "BucketClaim", Some(app));
    create(&claims, &VERSION.claim(app, "photos", "hostpath-cosi")).await?;
    let ready = |c: &DynamicObject| VERSION.claim_ready(c);
    let claim = wait_status(&claims, "photos", ready, &client, pod_name).await?;
    let bucket = VERSION.claim_bucket(&claim).expect("a ready claim names its Bucket");
    let accesses = VERSION.api(&tenant.client, "BucketAccess", Some(app));
    let access = VERSION.access(app, "photos", "hostpath-cosi-keys", "photos", "photos-cosi", "");
    create(&accesses, &access).await?;
    let granted = |a: &DynamicObject| VERSION.access_ready(a);
    wait_status(&accesses, "photos", granted, &client, pod_name).await?;
    let keys = VERSION.wait_access_secret(&tenant.client, app, "photos-cosi").await;
    assert_eq!(keys.bucket, bucket, "v1alpha1 names the bucket after its Bucket object");
    assert_eq!(keys.endpoint, "http://hostpath-cosi-s3.bucket-provisioner.svc:9000");

    // 3. The consumer pod, with nothing but the Secret, writes, reads and lists.
    let spec = cosi_consumer_pod("photos-consumer", &node.images().consumer, "photos-cosi");
    let used = run_to_completion(&client, app, &spec).await?;
    println!("--- pod {app}/photos-consumer ({}), COSI access photos ---", used.phase);
    print!("{}", used.logs);
    assert_eq!(used.phase, "Succeeded", "{}", used.logs);
    assert!(used.logs.contains(&format!("consumer: wrote s3://{bucket}/hello.txt")));
    assert!(used.logs.contains("consumer: read it back"), "{}", used.logs);
    assert!(used.logs.contains("consumer: listed hello.txt"), "{}", used.logs);
    let stored = Path::new(ROOT).join("buckets").join(&bucket).join("hello.txt");
    assert!(stored.is_file(), "the object is on the node's disk at {}", stored.display());

    // 4. Deleting the access revokes its key and removes its Secret; deleting the claim (class
    //    policy Delete) deletes the bucket. Checked from this machine through the Service.
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
    let logs = driver_logs(&client, pod_name).await;
    assert!(!logs.contains("forbidden"), "refused by RBAC:\n{logs}");
    let controller_log = controller.log_tail("controller", usize::MAX);
    assert!(!controller_log.contains("forbidden"), "{controller_log}");
    println!("COSI: access revoked, Secret removed, bucket {bucket} deleted with its claim");
    Ok(())
}

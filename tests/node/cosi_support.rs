//! What the COSI tests on the node share: the driver pod's logs and processes, the upstream
//! COSI installed once per test binary, and a tenant's claim, access and consumer pod under
//! either version.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, Pod, PodSecurityContext, PodSpec,
    SeccompProfile, SecretKeySelector, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use kube::Client;
use kube::api::{Api, DynamicObject, LogParams, ObjectMeta};
use node_tests::{Node, is_split_endpoint, pod_processes, run_to_completion};
use serde_json::json;
use test_support::cosi::{CosiVersion, create, install_upstream};
use test_support::cosi_world::COSI_WAIT;
use test_support::{CosiTenant, S3Access, Supervised};
use tokio::sync::OnceCell;

/// Where the sidecar finds the driver, in both containers.
pub const SOCKET: &str = "var/lib/cosi/cosi.sock";

/// A driver pod: its namespace and name.
pub struct DriverPod<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// The last lines each container of the driver pod logged, for failure messages.
pub async fn driver_logs(client: &Client, pod: &DriverPod<'_>) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), pod.namespace);
    let mut text = String::new();
    // Every container the pod has: the hostPath S3 endpoint runs as one of its own.
    let spec = pods.get(pod.name).await.ok().and_then(|p| p.spec);
    let names: Vec<String> =
        spec.iter().flat_map(|s| &s.containers).map(|c| c.name.clone()).collect();
    for container in &names {
        let params = LogParams {
            container: Some(container.clone()),
            tail_lines: Some(40),
            ..Default::default()
        };
        let log = pods.logs(pod.name, &params).await.unwrap_or_else(|e| e.to_string());
        text.push_str(&format!("--- {} {container} ---\n{log}\n", pod.name));
    }
    text
}

/// Polls `check` until it yields a value, for up to [`COSI_WAIT`] (the upstream controller and
/// sidecar each retry a failed step with a growing backoff); a timeout shows the driver pod's
/// logs and the controller's.
pub async fn until_cosi<T>(
    what: &str,
    (client, pod, controller): (&Client, &DriverPod<'_>, &Supervised),
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + COSI_WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            let driver = driver_logs(client, pod).await;
            let controller = controller.log_tail("controller", 60);
            panic!("{what}: not within {COSI_WAIT:?}\n{driver}\n{controller}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Polls COSI object `name` until `check` holds, for up to [`COSI_WAIT`] (the sidecars retry
/// a failed call with backoff); the error shows the last status and the pod's logs.
pub async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    check: impl Fn(&DynamicObject) -> bool,
    client: &Client,
    pod: &DriverPod<'_>,
) -> Result<DynamicObject> {
    let deadline = tokio::time::Instant::now() + COSI_WAIT;
    loop {
        let object = api.get_opt(name).await?;
        if let Some(object) = object.as_ref().filter(|o| check(o)) {
            return Ok(object.clone());
        }
        if tokio::time::Instant::now() > deadline {
            let status = object.map(|o| o.data["status"].clone());
            bail!(
                "{name} not ready in {COSI_WAIT:?}: {status:?}\n{}",
                driver_logs(client, pod).await
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A pod running the consumer with nothing but access Secret `secret`: v1alpha1's mounted at
/// `/cosi` and the path of its `BucketInfo` given; v1alpha2's flat keys as the variables the
/// consumer reads, each from its key of the Secret.
pub fn cosi_consumer_pod(version: CosiVersion, name: &str, image: &str, secret: &str) -> Pod {
    let from_secret = |variable: &str, key: &str| EnvVar {
        name: variable.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (env, mounts, volumes) = match version {
        CosiVersion::V1Alpha1 => (
            vec![EnvVar {
                name: "COSI_BUCKET_INFO".into(),
                value: Some("/cosi/BucketInfo".into()),
                ..Default::default()
            }],
            vec![VolumeMount {
                name: "cosi".into(),
                mount_path: "/cosi".into(),
                read_only: Some(true),
                ..Default::default()
            }],
            vec![Volume {
                name: "cosi".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        ),
        CosiVersion::V1Alpha2 => (
            vec![
                from_secret("AWS_ENDPOINT_URL", "COSI_S3_ENDPOINT"),
                from_secret("AWS_REGION", "COSI_S3_REGION"),
                from_secret("AWS_ACCESS_KEY_ID", "COSI_S3_ACCESS_KEY_ID"),
                from_secret("AWS_SECRET_ACCESS_KEY", "COSI_S3_ACCESS_SECRET_KEY"),
                from_secret("BUCKET_NAME", "COSI_S3_BUCKET_ID"),
            ],
            Vec::new(),
            Vec::new(),
        ),
    };
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
                env: Some(env),
                volume_mounts: Some(mounts),
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
            volumes: Some(volumes),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The process running `program` in pod `pod` (its host name), as (pid, uid); of the hostPath
/// provisioner split in two, the controller.
fn process_in(pod: &str, program: &str) -> (u32, u32) {
    let processes: Vec<_> = pod_processes(program)
        .into_iter()
        .filter(|(_, _, env)| env.get("HOSTNAME").map(String::as_str) == Some(pod))
        .filter(|(pid, _, _)| !is_split_endpoint(*pid))
        .collect();
    assert_eq!(processes.len(), 1, "one {program} process in pod {pod}: {processes:?}");
    let (pid, uid, _) = &processes[0];
    (*pid, *uid)
}

/// The upstream COSI of `version` installed as upstream says (CRDs, controller under its own
/// RBAC), once for every test of this binary (a cluster holds one version).
pub async fn cosi_installed(node: &Node, version: CosiVersion) -> &'static Supervised {
    static COSI: OnceCell<Supervised> = OnceCell::const_new();
    COSI.get_or_try_init(|| install_upstream(node.plane(), version)).await.expect("installing COSI")
}

/// Asserts that the provisioner and the sidecar of `pod` run as the non-root user and see one
/// socket, the provisioner's, on the pod's emptyDir.
pub fn assert_shared_socket(pod: &str, program: &str) {
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
pub struct Used {
    /// The tenant.
    pub tenant: CosiTenant,
    /// The Bucket object's name.
    pub bucket: String,
    /// What the access Secret holds.
    pub keys: S3Access,
}

/// The administrator's classes for `driver` (named after `class`); a tenant, with rights in its
/// namespace only, claims a bucket and gets an access; a consumer pod with nothing but the
/// access Secret writes, reads and lists, and its output is printed.
pub async fn claim_access_and_consume(
    version: CosiVersion,
    node: &Node,
    class: &str,
    driver: &str,
    pod: &DriverPod<'_>,
    endpoint: &str,
) -> Result<Used> {
    let client = node.client().await;
    let classes = version.api(&client, "BucketClass", None);
    create(&classes, &version.bucket_class(class, driver, "Delete", json!({}))).await?;
    let access_classes = version.api(&client, "BucketAccessClass", None);
    let access_class = format!("{class}-keys");
    create(&access_classes, &version.access_class(&access_class, driver, json!({}))).await?;
    let tenant = CosiTenant::new(node.plane(), class).await?;
    let app = tenant.namespace.clone();
    let claims = version.api(&tenant.client, "BucketClaim", Some(&app));
    create(&claims, &version.claim(&app, "photos", class)).await?;
    // Ready, bound and protected: v0.2.2 can mark a claim ready before it names its Bucket,
    // and before its finalizer makes the claim's deletion delete the Bucket.
    let ready = |c: &DynamicObject| {
        version.claim_ready(c) && version.claim_bucket(c).is_some() && version.claim_protected(c)
    };
    let claim = wait_status(&claims, "photos", ready, &client, pod).await?;
    let bucket = version.claim_bucket(&claim).expect("a ready claim names its Bucket");
    let accesses = version.api(&tenant.client, "BucketAccess", Some(&app));
    let access =
        version.access(&app, "photos", &access_class, "photos", "photos-cosi", "ReadWrite");
    create(&accesses, &access).await?;
    let granted = |a: &DynamicObject| version.access_ready(a);
    wait_status(&accesses, "photos", granted, &client, pod).await?;
    let keys = version.wait_access_secret(&tenant.client, &app, "photos-cosi").await;
    assert_eq!(keys.bucket, bucket, "the bucket is named after its Bucket object");
    assert_eq!(keys.endpoint, endpoint);

    let image = &node.images().consumer;
    let spec = cosi_consumer_pod(version, "photos-consumer", image, "photos-cosi");
    let used = run_to_completion(&client, &app, &spec).await?;
    let api = version.version();
    println!("--- pod {app}/photos-consumer ({}), COSI {api} access photos ---", used.phase);
    print!("{}", used.logs);
    assert_eq!(used.phase, "Succeeded", "{}", used.logs);
    assert!(used.logs.contains(&format!("consumer: wrote s3://{bucket}/hello.txt")));
    assert!(used.logs.contains("consumer: read it back"), "{}", used.logs);
    assert!(used.logs.contains("consumer: listed hello.txt"), "{}", used.logs);
    Ok(Used { tenant, bucket, keys })
}

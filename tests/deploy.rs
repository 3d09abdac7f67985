//! Every manifest under `deploy/` (`deploy/cosi/` included), `examples/manifests/` and `examples/hostpath-volumes/` is
//! accepted by the real apiserver (server-side dry-run), as it would be by
//! `kubectl apply --dry-run=server`.

use std::path::Path;

use test_support::{Apply, apply_manifests, client_with_crds, read_manifests};

async fn dry_run(relative: &str) -> usize {
    let client = client_with_crds().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    apply_manifests(&client, &dir, Apply::DryRun).await.unwrap_or_else(|e| panic!("{e:#}"))
}

#[tokio::test]
async fn hostpath_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding, the TokenReview
    // ClusterRole and binding, the grants' admin ClusterRole; Deployment; Service; two
    // StorageClasses.
    assert_eq!(dry_run("deploy/hostpath").await, 15);
}

#[tokio::test]
async fn example_manifests_are_accepted() {
    assert_eq!(dry_run("examples/manifests").await, 4);
}

#[tokio::test]
async fn hostpath_volume_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding; DaemonSet;
    // StorageClass. Then the claim and the pod of the example.
    assert_eq!(dry_run("deploy/hostpath-volumes").await, 10);
    assert_eq!(dry_run("examples/hostpath-volumes").await, 2);
}

#[tokio::test]
async fn s3_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding, the grants' admin
    // ClusterRole; Deployment; the example owner Secret; two StorageClasses.
    assert_eq!(dry_run("deploy/s3").await, 13);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/s3");
    let objects = read_manifests(&dir).unwrap();
    let class =
        objects.iter().find(|(_, o)| o.types.as_ref().is_some_and(|t| t.kind == "StorageClass"));
    let provisioner = class.expect("deploy/s3 has a StorageClass").1.data["provisioner"].clone();
    assert_eq!(provisioner, s3_provisioner::DEFAULT_PROVISIONER_NAME, "it names the default");
}

#[tokio::test]
async fn garage_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding, the grants' admin
    // ClusterRole; Deployment; the example admin-token Secret; two StorageClasses.
    assert_eq!(dry_run("deploy/garage").await, 13);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/garage");
    let objects = read_manifests(&dir).unwrap();
    let classes: Vec<_> = objects
        .iter()
        .filter(|(_, o)| o.types.as_ref().is_some_and(|t| t.kind == "StorageClass"))
        .collect();
    assert_eq!(classes.len(), 2);
    for (_, class) in classes {
        assert_eq!(class.data["provisioner"], garage_provisioner::DEFAULT_PROVISIONER_NAME);
        // Every parameter is one the provisioner accepts (bucketName is the library's).
        let parameters = class.data["parameters"].as_object().unwrap();
        for name in parameters.keys().filter(|k| *k != "bucketName") {
            assert!(garage_provisioner::params::PARAMETERS.contains(&name.as_str()), "{name}");
        }
    }
}

#[tokio::test]
async fn cosi_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding; Deployment; and the
    // hostPath S3 Service, or the example owner/admin Secret.
    for backend in ["hostpath", "s3", "garage"] {
        assert_eq!(dry_run(&format!("deploy/cosi/{backend}")).await, 8, "{backend}");
    }
}

/// Every `deploy/cosi/` pod runs its driver and the upstream sidecar on one socket, on an
/// emptyDir both mount; either sidecar version finds it (v0.2.2 by `DRIVER_ADDR`, main by
/// `COSI_ENDPOINT`).
#[test]
fn cosi_driver_and_sidecar_share_a_socket() {
    const SOCKET: &str = "unix:///var/lib/cosi/cosi.sock";
    for backend in ["hostpath", "s3", "garage"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/cosi").join(backend);
        let objects = read_manifests(&dir).unwrap();
        let (_, deployment) = objects
            .iter()
            .find(|(_, o)| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
            .expect("a Deployment");
        let pod = &deployment.data["spec"]["template"]["spec"];
        let account = pod["serviceAccountName"].as_str().unwrap();
        assert_eq!(account, format!("{backend}-cosi-driver"));
        let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "cosi-socket");
        assert!(volume.expect("the socket volume")["emptyDir"].is_object(), "{backend}");
        let containers = pod["containers"].as_array().unwrap();
        let mounts_socket = |c: &serde_json::Value| {
            c["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["name"] == "cosi-socket" && m["mountPath"] == "/var/lib/cosi")
        };
        let driver = containers.iter().find(|c| c["name"] == "driver").expect("the driver");
        let flag = format!("--cosi-endpoint={SOCKET}");
        assert!(driver["args"].as_array().unwrap().iter().any(|a| *a == flag.as_str()));
        assert!(mounts_socket(driver), "{backend}");
        let sidecar = containers.iter().find(|c| c["name"] == "cosi-sidecar").expect("sidecar");
        assert!(mounts_socket(sidecar), "{backend}");
        let env = sidecar["env"].as_array().unwrap();
        for name in ["DRIVER_ADDR", "COSI_ENDPOINT"] {
            let var = env.iter().find(|e| e["name"] == name).expect(name);
            assert_eq!(var["value"], SOCKET, "{backend} {name}");
        }
    }
}

/// The image every provisioner container of `deploy/` names: the one `make image` builds and
/// `ctr images import` loads, so the manifests apply as they are. A versioned tag also keeps the
/// default pull policy at `IfNotPresent` (a `:latest` image is pulled on every start).
#[test]
fn deploy_names_the_image_make_image_builds() {
    let expected = format!("localhost/bucket-provisioner:{}", env!("CARGO_PKG_VERSION"));
    let dirs = [
        "deploy/hostpath",
        "deploy/hostpath-volumes",
        "deploy/s3",
        "deploy/garage",
        "deploy/cosi/hostpath",
        "deploy/cosi/s3",
        "deploy/cosi/garage",
    ];
    for dir in dirs {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        let mut provisioners = 0;
        for (file, object) in read_manifests(&path).unwrap() {
            let containers = &object.data["spec"]["template"]["spec"]["containers"];
            for container in containers.as_array().into_iter().flatten() {
                let image = container["image"].as_str().unwrap_or_default();
                if image.contains("bucket-provisioner") {
                    provisioners += 1;
                    assert_eq!(image, expected, "{}", file.display());
                }
            }
        }
        // The hostPath S3 endpoint runs as a container of its own beside the controller.
        let expected_containers = if dir.ends_with("hostpath") { 2 } else { 1 };
        assert_eq!(provisioners, expected_containers, "{dir}'s provisioner containers");
    }
}

/// The bucket controllers read Namespaces (a class may limit sharing across namespaces to those
/// of given labels), cluster-wide and read-only; nothing else of `deploy/` touches them.
#[test]
fn only_the_bucket_controllers_read_namespaces_and_none_writes_them() {
    let dirs = [
        ("deploy/hostpath", true),
        ("deploy/s3", true),
        ("deploy/garage", true),
        ("deploy/hostpath-volumes", false),
        ("deploy/cosi/hostpath", false),
        ("deploy/cosi/s3", false),
        ("deploy/cosi/garage", false),
    ];
    for (dir, reads) in dirs {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        let mut verbs = Vec::new();
        for (file, object) in read_manifests(&path).unwrap() {
            let kind = object.types.as_ref().map(|t| t.kind.as_str()).unwrap_or_default();
            for rule in object.data["rules"].as_array().into_iter().flatten() {
                let core = rule["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == ""));
                let resources = rule["resources"].as_array().into_iter().flatten();
                if core && resources.clone().any(|r| r == "namespaces" || r == "*") {
                    assert_eq!(kind, "ClusterRole", "{}", file.display());
                    let listed = rule["verbs"].as_array().unwrap().iter();
                    verbs.extend(listed.map(|v| v.as_str().unwrap().to_owned()));
                }
            }
        }
        let expected: Vec<String> = if reads {
            ["get", "list", "watch"].iter().map(|v| v.to_string()).collect()
        } else {
            Vec::new()
        };
        assert_eq!(verbs, expected, "{dir}");
    }
}

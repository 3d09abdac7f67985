//! The admission policy `deploy/hostpath-volumes/` ships (`40-own-volumes-policy.yaml`), on the
//! real control plane: the volume provisioner's ServiceAccount may create and delete only
//! hostPath volumes under its root pinned to the node its pod runs on, which the apiserver
//! records in the pod's bound token. A token bound to a pod on `node-a` makes `node-a`'s volume
//! and nothing else: not `hostPath: /`, not a volume pinned to `node-b`, not another node's
//! deletion; an unbound token (no node) makes nothing.
//!
//! The policy is applied as shipped but for the ServiceAccount it names, which here is one of
//! this test's own, so that the other tests' provisioners (whose tokens name no pod) are left
//! alone on the shared control plane.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeSpec, Pod, PodSpec, ServiceAccount, VolumeNodeAffinity,
};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use test_support::{
    Apply, ControlPlane, Deployed, apply_objects, deployed_identity, eventually,
    read_manifest_files, test_namespace, unique_suffix,
};

const DEPLOYED_USER: &str = "system:serviceaccount:bucket-provisioner:hostpath-volume-provisioner";
const ROOT: &str = "/var/lib/hostpath-volumes";

/// The shipped policy and binding, for ServiceAccount `user` and under names ending in `suffix`.
fn policy_for(user: &str, suffix: &str) -> Vec<(std::path::PathBuf, DynamicObject)> {
    let file = test_support::deploy_dir().join("hostpath-volumes/40-own-volumes-policy.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(DEPLOYED_USER), "the policy names the deployed ServiceAccount");
    let objects = read_manifest_files(&[file]).unwrap();
    objects
        .into_iter()
        .map(|(path, object)| {
            let mut value = serde_json::to_value(&object).unwrap();
            let renamed = format!("{}-{suffix}", object.name_any());
            value["metadata"]["name"] = renamed.clone().into();
            if value["spec"]["policyName"].is_string() {
                value["spec"]["policyName"] = renamed.replace("-binding", "").into();
            }
            let text = value.to_string().replace(DEPLOYED_USER, user);
            (path, serde_json::from_str(&text).unwrap())
        })
        .collect()
}

/// A hostPath PV at `path` pinned to `node`.
fn volume(name: &str, path: &str, node: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Mi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            host_path: Some(HostPathVolumeSource { path: path.into(), type_: None }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "kubernetes.io/hostname".into(),
                            operator: "In".into(),
                            values: Some(vec![node.into()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A client acting with `token`.
async fn client_with(plane: &ControlPlane, token: &str) -> Client {
    let mut config = kube::Config::new(plane.server().parse().unwrap());
    config.accept_invalid_certs = true;
    config.auth_info.token = Some(token.to_owned().into());
    Client::try_from(config).unwrap()
}

/// A token of ServiceAccount `account` of `ns`, bound to `pod` when given (as the kubelet's are).
async fn token(admin: &Client, ns: &str, account: &str, pod: Option<&Pod>) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(Vec::new()),
            expiration_seconds: Some(3600),
            bound_object_ref: pod.map(|pod| BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        }),
        ..Default::default()
    };
    let issued = accounts.create_token_request(account, &PostParams::default(), &request).await;
    issued.unwrap().status.and_then(|s| s.token).expect("a token")
}

#[tokio::test]
async fn the_volume_provisioner_makes_and_deletes_only_its_own_nodes_volumes_under_its_root() {
    let plane = ControlPlane::shared();
    let admin = plane.client().await;
    let ns = test_namespace(&admin, "own-volumes").await;
    let suffix = unique_suffix();
    // The deployed RBAC, bound to a ServiceAccount of this test.
    deployed_identity(plane, Deployed::HostPathVolumes).await.unwrap();
    let account = "pv-maker";
    let meta = ObjectMeta { name: Some(account.into()), ..Default::default() };
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    let post = PostParams::default();
    accounts.create(&post, &ServiceAccount { metadata: meta, ..Default::default() }).await.unwrap();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(format!("pv-maker-{suffix}")), ..Default::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "hostpath-volume-provisioner".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.clone()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&post, &binding).await.unwrap();
    let user = format!("system:serviceaccount:{ns}:{account}");
    apply_objects(&admin, &policy_for(&user, &suffix), Apply::ForReal).await.unwrap();

    // The provisioner's pod on node-a (no kubelet runs it; its token names the node all the same).
    let pod = Pod {
        metadata: ObjectMeta { name: Some("provisioner".into()), ..Default::default() },
        spec: Some(PodSpec {
            service_account_name: Some(account.into()),
            automount_service_account_token: Some(false),
            node_name: Some("node-a".into()),
            containers: vec![Container {
                name: "provisioner".into(),
                image: Some("example.invalid/provisioner".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = Api::<Pod>::namespaced(admin.clone(), &ns).create(&post, &pod).await.unwrap();
    let on_node_a = client_with(plane, &token(&admin, &ns, account, Some(&pod)).await).await;
    let unbound = client_with(plane, &token(&admin, &ns, account, None).await).await;
    let as_node_a: Api<PersistentVolume> = Api::all(on_node_a);
    let as_unbound: Api<PersistentVolume> = Api::all(unbound);
    let all: Api<PersistentVolume> = Api::all(admin.clone());

    // Policies take a moment to be enforced: until `hostPath: /` is refused.
    let escape = volume(&format!("escape-{suffix}"), "/", "node-a");
    let attempts = std::sync::atomic::AtomicU32::new(0);
    eventually("the policy to be enforced", || async {
        let n = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let probe = volume(&format!("probe-{suffix}-{n}"), "/", "node-a");
        match as_node_a.create(&post, &probe).await {
            Err(kube::Error::Api(e)) if e.message.contains("denied request") => Some(()),
            Err(_) => None,
            Ok(made) => {
                let _ = all.delete(&made.name_any(), &DeleteParams::default()).await;
                None
            }
        }
    })
    .await;
    let refused = |result: kube::Result<PersistentVolume>, says: &str| match result {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "a policy's refusal: {e:?}");
            assert!(e.message.contains(says), "{says}: {}", e.message);
        }
        other => panic!("refused ({says}) expected, got {other:?}"),
    };
    refused(as_node_a.create(&post, &escape).await, &format!("under {ROOT}/"));
    let beside = volume(&format!("beside-{suffix}"), "/var/lib/hostpath-volumes-x/a", "node-a");
    refused(as_node_a.create(&post, &beside).await, &format!("under {ROOT}/"));
    let elsewhere = volume(&format!("elsewhere-{suffix}"), &format!("{ROOT}/b"), "node-b");
    refused(as_node_a.create(&post, &elsewhere).await, "(node-a)");
    let own = volume(&format!("own-{suffix}"), &format!("{ROOT}/a"), "node-a");
    refused(as_unbound.create(&post, &own).await, "its token names no node");

    // Its own node's volume is made and deleted; another node's is not deleted.
    as_node_a.create(&post, &own).await.unwrap();
    all.create(&post, &elsewhere).await.unwrap();
    match as_node_a.delete(&elsewhere.name_any(), &DeleteParams::default()).await {
        Err(kube::Error::Api(e)) => assert!(e.message.contains("(node-a)"), "{e:?}"),
        other => panic!("deleting node-b's volume must be refused: {other:?}"),
    }
    as_node_a.delete(&own.name_any(), &DeleteParams::default()).await.unwrap();
    all.delete(&elsewhere.name_any(), &DeleteParams::default()).await.unwrap();
    for (_, object) in policy_for(&user, &suffix) {
        let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        let path = match kind.as_str() {
            "ValidatingAdmissionPolicy" => "validatingadmissionpolicies",
            _ => "validatingadmissionpolicybindings",
        };
        let resource = kube::api::ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind,
            plural: path.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
        let _ = api.delete(&object.name_any(), &DeleteParams::default()).await;
    }
}

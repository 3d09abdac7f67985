//! `hostpath-volume-provisioner` as a real process on a real control plane with
//! kube-controller-manager's PV binder. The test plays the scheduler (it sets
//! `volume.kubernetes.io/selected-node` as kube-scheduler does) and the pod (it writes into the
//! directory); `make e2e` runs the same with a real scheduler and kubelet.

use std::collections::BTreeMap;
use std::ops::Not;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use test_support::{
    ControlPlane, DEPLOY_NAMESPACE, Deployed, deployed_identity, init_tracing, program,
    test_namespace, unique_suffix, volumes,
};
use tokio::process::Child;

/// One provisioner process for `node`, with a root of its own; killed when dropped.
struct Instance {
    child: Child,
    root: tempfile::TempDir,
}

struct World {
    client: Client,
    ns: String,
    name: String,
    /// The provisioner's kubeconfig: the ServiceAccount of `deploy/hostpath-volumes/`.
    kubeconfig: PathBuf,
}

async fn world(prefix: &str) -> World {
    world_on(ControlPlane::shared(), prefix).await
}

/// A world on `plane`, whose provisioners act as `deploy/hostpath-volumes/` deploys them.
async fn world_on(plane: &ControlPlane, prefix: &str) -> World {
    init_tracing();
    let client = plane.client().await;
    let ns = test_namespace(&client, prefix).await;
    let identity = deployed_identity(plane, Deployed::HostPathVolumes).await.unwrap();
    let name = format!("hostpath-volume.test/{}", unique_suffix());
    World { client, ns, name, kubeconfig: identity.kubeconfig }
}

impl World {
    fn start(&self, node: &str, extra: &[&str]) -> Instance {
        let root = tempfile::tempdir().unwrap();
        Instance { child: self.start_in(root.path(), node, extra), root }
    }

    /// The provisioner process for `node` on `root`, as `deploy/hostpath-volumes/` runs it.
    fn start_in(&self, root: &Path, node: &str, extra: &[&str]) -> Child {
        let metrics = test_support::free_port().unwrap();
        program(env!("CARGO_BIN_EXE_hostpath-volume-provisioner"))
            .arg(format!("--root={}", root.display()))
            .arg(format!("--provisioner-name={}", self.name))
            .arg(format!("--node-name={node}"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--metrics-address=127.0.0.1:{metrics}"))
            // Several instances on one machine: usage metrics on a free port each.
            .arg("--usage-metrics-address=127.0.0.1:0")
            .args(
                extra
                    .iter()
                    .any(|a| a.starts_with("--leader-elect="))
                    .not()
                    .then_some("--leader-elect=false"),
            )
            .args(extra)
            .spawn()
            .expect("starting hostpath-volume-provisioner")
    }

    async fn class(&self, reclaim: &str, parameters: &[(&str, &str)]) -> String {
        let binding = Some("WaitForFirstConsumer");
        volumes::create_class(&self.client, &self.name, reclaim, binding, parameters).await
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// A claim of `class` that the scheduler placed on `node` (as it does for the first pod);
    /// answers the name its PV will have.
    async fn claim(&self, name: &str, class: &str, node: &str) -> String {
        let claim =
            volumes::claim(name, class, "64Mi", &[("volume.kubernetes.io/selected-node", node)]);
        let created = self.claims().create(&PostParams::default(), &claim).await.unwrap();
        format!("pvc-{}", created.uid().unwrap())
    }

    /// Waits for claim `name` to be Bound and answers its PV.
    async fn bound(&self, name: &str) -> PersistentVolume {
        let claim = volumes::wait_bound(&self.claims(), name).await;
        let pv = claim.spec.unwrap().volume_name.unwrap();
        self.volumes().get(&pv).await.unwrap()
    }

    async fn delete_claim(&self, name: &str) {
        self.claims().delete(name, &DeleteParams::default()).await.unwrap();
    }

    async fn gone(&self, pv: &str) {
        volumes::wait_volume_gone(&self.client, pv).await;
    }

    async fn event(&self, namespace: &str, name: &str, reason: &str) -> String {
        volumes::wait_event(&self.client, namespace, name, reason).await
    }
}

fn host_path(pv: &PersistentVolume) -> PathBuf {
    PathBuf::from(&pv.spec.as_ref().unwrap().host_path.as_ref().unwrap().path)
}

/// The seeds' story: a claim, a pod writing a file, the file on the host under the root; the
/// claim deleted, the directory gone under `Delete` and kept under `Retain`.
#[tokio::test]
async fn a_claim_gets_a_directory_that_goes_with_it_under_delete_and_stays_under_retain() {
    let world = world("hostpath-volumes").await;
    let node = world.start("node-a", &[]);
    let deleting = world.class("Delete", &[]).await;
    let pv_name = world.claim("data", &deleting, "node-a").await;
    let pv = world.bound("data").await;
    assert_eq!(pv.name_any(), pv_name);
    let dir = host_path(&pv);
    assert_eq!(dir, node.root.path().join(&pv_name), "the default pattern is the PV's name");
    assert!(dir.is_dir());
    let annotations = pv.annotations();
    assert_eq!(annotations["hostpath-volume.bucket-provisioner.io/identity"], "node-a");
    assert!(
        annotations["hostpath-volume.bucket-provisioner.io/capacity"].starts_with("not enforced: "),
        "{annotations:?}"
    );
    let spec = pv.spec.clone().unwrap();
    let term = &spec.node_affinity.unwrap().required.unwrap().node_selector_terms[0];
    let requirement = &term.match_expressions.as_ref().unwrap()[0];
    assert_eq!(
        (requirement.key.as_str(), requirement.values.as_deref()),
        ("kubernetes.io/hostname", Some(&["node-a".to_owned()][..]))
    );
    assert_eq!(spec.capacity.unwrap()["storage"], Quantity("64Mi".into()));
    let note = world.event(&world.ns, "data", "ProvisioningSucceeded").await;
    assert!(note.contains("its capacity is not enforced"), "{note}");
    std::fs::write(dir.join("hello.txt"), "written by a pod").unwrap();
    world.delete_claim("data").await;
    world.gone(&pv_name).await;
    assert!(!dir.exists(), "the directory went with the claim");

    let retaining = world.class("Retain", &[]).await;
    let kept_pv = world.claim("kept", &retaining, "node-a").await;
    let kept = host_path(&world.bound("kept").await);
    std::fs::write(kept.join("hello.txt"), "keep me").unwrap();
    world.delete_claim("kept").await;
    volumes::wait_phase(&world.client, &kept_pv, "Released").await;
    assert_eq!(std::fs::read_to_string(kept.join("hello.txt")).unwrap(), "keep me");
    // Deleting the retained PV by hand lets it go; the data stays on the host.
    world.volumes().delete(&kept_pv, &DeleteParams::default()).await.unwrap();
    world.gone(&kept_pv).await;
    assert_eq!(std::fs::read_to_string(kept.join("hello.txt")).unwrap(), "keep me");
}

#[tokio::test]
async fn the_reclaim_policy_override_keeps_what_the_class_would_delete() {
    let world = world("hostpath-override").await;
    let _node = world.start("node-a", &["--reclaim-policy=Retain"]);
    let class = world.class("Delete", &[]).await;
    let pv_name = world.claim("data", &class, "node-a").await;
    let pv = world.bound("data").await;
    let policy = pv.spec.as_ref().unwrap().persistent_volume_reclaim_policy.clone();
    assert_eq!(policy.as_deref(), Some("Retain"));
    let dir = host_path(&pv);
    world.delete_claim("data").await;
    volumes::wait_phase(&world.client, &pv_name, "Released").await;
    assert!(dir.is_dir(), "kept by the override");
}

/// Each node makes the volumes scheduled to it, and never touches another node's.
#[tokio::test]
async fn each_node_serves_its_own_claims_and_leaves_other_nodes_volumes_alone() {
    let world = world("hostpath-nodes").await;
    let a = world.start("node-a", &[]);
    let b = world.start("node-b", &[]);
    let class = world.class("Delete", &[("pathPattern", "{namespace}/{name}")]).await;
    world.claim("on-b", &class, "node-b").await;
    let pv = world.bound("on-b").await;
    assert_eq!(host_path(&pv), b.root.path().join(&world.ns).join("on-b"));
    assert!(!a.root.path().join(&world.ns).exists(), "node-a made nothing for it");
    assert_eq!(pv.annotations()["bucket-provisioner.io/node"], "node-b");

    // A released PV that node-a's controller considers (its node annotation) but that records
    // node-b's identity: node-a's backend refuses, and the directory it names stays.
    let victim = a.root.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("data"), "not node-a's to delete").unwrap();
    let name = format!("pvc-forged-{}", unique_suffix());
    let forged = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: pv.metadata.labels.clone(),
            annotations: Some(BTreeMap::from([
                ("pv.kubernetes.io/provisioned-by".to_owned(), world.name.clone()),
                ("bucket-provisioner.io/node".to_owned(), "node-a".to_owned()),
                ("hostpath-volume.bucket-provisioner.io/identity".to_owned(), "node-b".to_owned()),
            ])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Mi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some("Delete".into()),
            host_path: Some(HostPathVolumeSource {
                path: victim.display().to_string(),
                type_: None,
            }),
            // A claim that does not exist: the binder releases the volume.
            claim_ref: Some(ObjectReference {
                namespace: Some(world.ns.clone()),
                name: Some("gone".into()),
                uid: Some("00000000-0000-0000-0000-000000000000".into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    };
    world.volumes().create(&PostParams::default(), &forged).await.unwrap();
    let note = world.event("default", &name, "NotOurs").await;
    assert!(note.contains("node-b") && note.contains("left alone"), "{note}");
    assert!(world.volumes().get_opt(&name).await.unwrap().is_some(), "the PV stays");
    assert_eq!(std::fs::read_to_string(victim.join("data")).unwrap(), "not node-a's to delete");
    world.volumes().delete(&name, &DeleteParams::default()).await.unwrap();
}

/// Patterns that would leave the root, or let a claim take the directory of another
/// namespace's claim of the same name, are refused with a reason on the claim; nothing is made.
#[tokio::test]
async fn path_patterns_cannot_escape_the_root() {
    let world = world("hostpath-escape").await;
    let node = world.start("node-a", &[]);
    let patterns = [
        ("../{namespace}/{name}", "starts with '.'"),
        ("/etc/{namespace}/{name}", "empty segment"),
        ("{namespace}/../../{name}", "starts with '.'"),
        (".provisioner/{namespace}/{name}", "starts with '.'"),
        ("{name}", "{namespace} and {name}"),
        ("{namespace}-{name}", "{namespace} and {name}"),
    ];
    for (i, (pattern, why)) in patterns.into_iter().enumerate() {
        let class = world.class("Delete", &[("pathPattern", pattern)]).await;
        let claim = format!("escape-{i}");
        world.claim(&claim, &class, "node-a").await;
        let note = world.event(&world.ns, &claim, "InvalidParameters").await;
        assert!(note.contains("pathPattern") && note.contains(why), "{pattern}: {note}");
    }
    let parent = node.root.path().parent().unwrap();
    assert!(!parent.join(&world.ns).exists(), "made outside the root");
    assert!(!parent.join("escape-2").exists(), "made outside the root");
    assert!(!Path::new("/etc").join(&world.ns).exists());
    let mut made: Vec<String> = std::fs::read_dir(node.root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    assert_eq!(made, [".provisioner"], "nothing made in the root either");
    let records = node.root.path().join(".provisioner/volumes");
    assert_eq!(std::fs::read_dir(records).unwrap().count(), 0);

    // Unknown parameters and modes are the class's to fix, and say so.
    let class = world.class("Delete", &[("directoryMode", "rwx")]).await;
    world.claim("bad-mode", &class, "node-a").await;
    let note = world.event(&world.ns, "bad-mode", "InvalidParameters").await;
    assert!(note.contains("directoryMode"), "{note}");
}

/// A single instance (`--serve-immediate`) also serves classes that bind at once, on its node.
#[tokio::test]
async fn a_single_instance_serves_immediate_classes_on_its_node() {
    let world = world("hostpath-immediate").await;
    let node = world.start("node-a", &["--serve-immediate=true"]);
    let class = volumes::create_class(&world.client, &world.name, "Delete", None, &[]).await;
    let claim = volumes::claim("now", &class, "1Mi", &[]);
    world.claims().create(&PostParams::default(), &claim).await.unwrap();
    let pv = world.bound("now").await;
    assert!(host_path(&pv).starts_with(node.root.path()));
    assert_eq!(pv.annotations()["bucket-provisioner.io/node"], "node-a");
}

/// The process killed (SIGKILL) at arbitrary moments while a burst of claims is provisioned and
/// then deleted: each claim gets one PV and one directory, nothing is made twice or left behind
/// by a crash, and deletion removes every directory and record.
#[tokio::test]
async fn a_burst_of_claims_survives_repeated_crashes() {
    const CLAIMS: usize = 20;
    let world = world("hostpath-crash").await;
    let root = tempfile::tempdir().unwrap();
    let class = world.class("Delete", &[]).await;
    let mut process = world.start_in(root.path(), "node-a", &[]);
    let mut pvs = BTreeMap::new();
    for i in 0..CLAIMS {
        let name = format!("burst-{i}");
        pvs.insert(name.clone(), world.claim(&name, &class, "node-a").await);
    }
    for pause in [40, 80, 150, 300, 500, 800] {
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        process.kill().await.unwrap();
        process = world.start_in(root.path(), "node-a", &[]);
    }
    let listed = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    for (claim, pv_name) in &pvs {
        let pv = world.bound(claim).await;
        assert_eq!(&pv.name_any(), pv_name);
        assert_eq!(host_path(&pv), root.path().join(pv_name));
    }
    let mut expected: Vec<String> = pvs.values().cloned().collect();
    expected.push(".provisioner".into());
    expected.sort();
    assert_eq!(listed(root.path()), expected, "one directory per claim, none left by a crash");
    let records = root.path().join(".provisioner/volumes");
    assert_eq!(listed(&records).len(), CLAIMS, "one record per volume");

    for claim in pvs.keys() {
        world.delete_claim(claim).await;
    }
    for pause in [50, 200, 100, 400] {
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        process.kill().await.unwrap();
        process = world.start_in(root.path(), "node-a", &[]);
    }
    for pv in pvs.values() {
        world.gone(pv).await;
    }
    assert_eq!(listed(root.path()), [".provisioner"], "every directory went with its claim");
    assert_eq!(listed(&records), Vec::<String>::new(), "and every record");
    drop(process);
}

/// The provisioner as deployed, electing its node's leader, through a 30 s apiserver restart: a
/// claim made after it gets its PV within 10 s, from the same process, and a deleted claim's PV
/// goes once the binder releases it. The claim names the provisioner itself, as the controller
/// manager would: only the provisioner's own recovery is timed, not the controller manager's.
#[tokio::test]
async fn an_apiserver_restart_is_outlived_by_the_same_process() {
    const AFTER_RECOVERY: Duration = Duration::from_secs(10);
    let mut plane = ControlPlane::start().expect("starting a control plane of our own");
    let world = world_on(&plane, "volumes-restart").await;
    let lease_namespace = format!("--leader-election-namespace={DEPLOY_NAMESPACE}");
    let mut node = world.start("node-a", &["--leader-elect=true", &lease_namespace]);
    let pid = node.child.id();
    let class = world.class("Delete", &[]).await;
    let before = world.claim("before", &class, "node-a").await;
    world.bound("before").await;

    plane.stop_apiserver().unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    plane.start_apiserver().unwrap();

    let recovered = Instant::now();
    let annotations = [
        ("volume.kubernetes.io/selected-node", "node-a"),
        ("volume.kubernetes.io/storage-provisioner", world.name.as_str()),
    ];
    let claim = volumes::claim("after", &class, "64Mi", &annotations);
    let created = world.claims().create(&PostParams::default(), &claim).await.unwrap();
    let pv = format!("pvc-{}", created.uid().unwrap());
    let volumes = world.volumes();
    let made = tokio::time::timeout(AFTER_RECOVERY, async {
        while volumes.get_opt(&pv).await.ok().flatten().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    assert!(made.await.is_ok(), "a claim made after the restart got no PV within 10 s");
    eprintln!("PV made {:?} after the apiserver was back", recovered.elapsed());
    world.delete_claim("before").await;
    // Releasing the PV is kube-controller-manager's part, after its own watches came back
    // (their backoff reaches 30 s): waited for apart, so that what is timed next is ours.
    let volumes = world.volumes();
    let released = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let pv = volumes.get_opt(&before).await.ok().flatten();
            let phase = pv.as_ref().and_then(|v| v.status.as_ref()?.phase.clone());
            if pv.is_none() || phase.as_deref() == Some("Released") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    assert!(released.await.is_ok(), "kube-controller-manager never released {before}");
    eprintln!("PV released {:?} after the apiserver was back", recovered.elapsed());
    world.gone(&before).await;
    assert!(node.child.try_wait().unwrap().is_none(), "the process is the one started");
    assert_eq!(node.child.id(), pid);
}

/// The apiserver refuses a claim's PersistentVolume (an admission policy, as a cluster's own
/// rules might): the directory made for it does not outlive the claim, and a new claim of the
/// same name (the same path, under a pattern of names) gets its volume once the refusal goes.
#[tokio::test]
async fn a_volume_whose_persistent_volume_was_refused_leaves_nothing_behind() {
    use k8s_openapi::api::admissionregistration::v1::{
        MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
        ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
        ValidatingAdmissionPolicySpec, Validation,
    };
    let world = world("vol-refused").await;
    let node = world.start("node-a", &[]);
    let class = world.class("Delete", &[("pathPattern", "{namespace}/{name}")]).await;
    let policy_name = format!("refuse-pv-{}", unique_suffix());
    let refused_claim = "refused";
    let policy = ValidatingAdmissionPolicy {
        metadata: ObjectMeta { name: Some(policy_name.clone()), ..Default::default() },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".into()),
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec![String::new()]),
                    api_versions: Some(vec!["v1".into()]),
                    operations: Some(vec!["CREATE".into()]),
                    resources: Some(vec!["persistentvolumes".into()]),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            validations: Some(vec![Validation {
                expression: format!(
                    "!has(object.spec.claimRef) || object.spec.claimRef.namespace != '{}' || \
                     object.spec.claimRef.name != '{refused_claim}'",
                    world.ns
                ),
                message: Some("refused by the test's admission policy".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(world.client.clone());
    policies.create(&PostParams::default(), &policy).await.unwrap();
    let binding = ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta { name: Some(policy_name.clone()), ..Default::default() },
        spec: ValidatingAdmissionPolicyBindingSpec {
            policy_name: policy_name.clone(),
            validation_actions: vec!["Deny".into()],
            ..Default::default()
        },
    };
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(world.client.clone());
    bindings.create(&PostParams::default(), &binding).await.unwrap();

    let dir = node.root.path().join(&world.ns).join(refused_claim);
    // Policies take a moment to be enforced: the claim is made once a PV like its own is
    // refused. Its directory then comes and goes with each refused attempt.
    let probe = PersistentVolume {
        metadata: ObjectMeta { name: Some(format!("probe-{policy_name}")), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Mi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            host_path: Some(HostPathVolumeSource { path: "/nowhere".into(), type_: None }),
            claim_ref: Some(ObjectReference {
                namespace: Some(world.ns.clone()),
                name: Some(refused_claim.into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    test_support::eventually("the admission policy to be enforced", || async {
        match world.volumes().create(&PostParams::default(), &probe).await {
            Err(_) => Some(()),
            Ok(made) => {
                let _ = world.volumes().delete(&made.name_any(), &DeleteParams::default()).await;
                None
            }
        }
    })
    .await;
    world.claim(refused_claim, &class, "node-a").await;
    let refusal = world.event(&world.ns, refused_claim, "KubernetesApiError").await;
    assert!(refusal.contains("admission policy"), "{refusal}");
    world.delete_claim(refused_claim).await;
    test_support::eventually("the refused claim's directory to be gone", || async {
        (!dir.exists()).then_some(())
    })
    .await;

    policies.delete(&policy_name, &DeleteParams::default()).await.unwrap();
    bindings.delete(&policy_name, &DeleteParams::default()).await.unwrap();
    // The same name again: the same path, free.
    test_support::eventually("a claim of the same name to be provisioned", || async {
        let claims = world.claims();
        if claims.get_opt(refused_claim).await.unwrap().is_none() {
            world.claim(refused_claim, &class, "node-a").await;
        }
        let claim = claims.get(refused_claim).await.ok()?;
        claim.spec?.volume_name.filter(|v| !v.is_empty()).map(drop)
    })
    .await;
    assert!(dir.is_dir(), "the same path serves the new claim");
}

//! The volume controller on a real control plane with kube-controller-manager's PV binder, driving
//! an in-memory backend that records its calls and can be held in the middle of `provision`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use provisioner_runtime::health::Health;
use provisioner_runtime::telemetry::Metrics;
use test_support::{
    ControlPlane, eventually, init_tracing, test_namespace, unique_suffix, volumes,
};
use tokio::sync::Semaphore;
use volume_provisioner::BackendError;
use volume_provisioner::{
    ANNOTATION_PROVISIONED_BY, FINALIZER, ProvisionedVolume, VolumeControllerConfig, VolumeOptions,
    VolumeProvisioner, run_volume_controller,
};

/// Volumes in memory: the names of the assets that exist, and a gate `provision` passes only
/// with a permit (all permits are there unless a test takes them).
#[derive(Clone)]
struct Memory {
    assets: Arc<Mutex<BTreeSet<String>>>,
    deleted: Arc<Mutex<Vec<String>>>,
    /// Volumes whose `provision` has begun (and may be waiting at the gate).
    started: Arc<Mutex<BTreeSet<String>>>,
    gate: Arc<Semaphore>,
}

impl Memory {
    fn new() -> Self {
        Memory {
            assets: Arc::default(),
            deleted: Arc::default(),
            started: Arc::default(),
            gate: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
        }
    }

    fn assets(&self) -> BTreeSet<String> {
        self.assets.lock().unwrap().clone()
    }
}

impl VolumeProvisioner for Memory {
    fn validate(&self, options: &VolumeOptions) -> Result<(), BackendError> {
        match options.parameters.keys().find(|k| *k != "speed") {
            Some(key) => Err(BackendError::invalid_parameter(format!("unknown parameter {key}"))),
            None => Ok(()),
        }
    }

    async fn provision(&self, options: &VolumeOptions) -> Result<ProvisionedVolume, BackendError> {
        if options.parameters.get("speed").is_some_and(|s| s == "panic") {
            panic!("a defect of the backend at speed panic");
        }
        self.started.lock().unwrap().insert(options.pv_name.clone());
        let _permit = self.gate.acquire().await.unwrap();
        self.assets.lock().unwrap().insert(options.pv_name.clone());
        Ok(ProvisionedVolume {
            spec: PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource {
                    path: format!("/memory/{}", options.pv_name),
                    type_: None,
                }),
                ..Default::default()
            },
            annotations: BTreeMap::from([("memory/made".to_owned(), "yes".to_owned())]),
            note: Some("kept in memory only".into()),
        })
    }

    async fn delete(&self, volume: &PersistentVolume) -> Result<(), BackendError> {
        self.assets.lock().unwrap().remove(&volume.name_any());
        self.deleted.lock().unwrap().push(volume.name_any());
        Ok(())
    }
}

struct World {
    client: Client,
    ns: String,
    provisioner: String,
    backend: Memory,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn world(prefix: &str) -> World {
    init_tracing();
    let client = ControlPlane::shared().client().await;
    let ns = test_namespace(&client, prefix).await;
    let provisioner = format!("volumes.test/{}", unique_suffix());
    let backend = Memory::new();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut config = VolumeControllerConfig::new(&provisioner);
    config.backoff_initial = std::time::Duration::from_millis(200);
    tokio::spawn(run_volume_controller(
        client.clone(),
        backend.clone(),
        config,
        Metrics::new(),
        Health::default(),
        async {
            let _ = stopped.await;
        },
    ));
    World { client, ns, provisioner, backend, _stop: stop }
}

impl World {
    async fn class(&self, reclaim: &str, parameters: &[(&str, &str)]) -> String {
        volumes::create_class(&self.client, &self.provisioner, reclaim, None, parameters).await
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn claim(&self, name: &str, class: &str) -> PersistentVolumeClaim {
        let claim = volumes::claim(name, class, "1Gi", &[]);
        self.claims().create(&PostParams::default(), &claim).await.unwrap()
    }

    async fn bound(&self, name: &str) -> PersistentVolumeClaim {
        volumes::wait_bound(&self.claims(), name).await
    }

    async fn gone(&self, pv: &str) {
        volumes::wait_volume_gone(&self.client, pv).await;
    }
}

#[tokio::test]
async fn a_claim_gets_a_pre_bound_volume_and_its_release_deletes_the_asset() {
    let world = world("volumes-bind").await;
    let class = world.class("Delete", &[("speed", "fast")]).await;
    let created = world.claim("data", &class).await;
    let claim = world.bound("data").await;
    let pv_name = format!("pvc-{}", created.uid().unwrap());
    assert_eq!(claim.spec.unwrap().volume_name.as_deref(), Some(pv_name.as_str()));
    let pv = Api::<PersistentVolume>::all(world.client.clone()).get(&pv_name).await.unwrap();
    assert_eq!(pv.annotations()[ANNOTATION_PROVISIONED_BY], world.provisioner);
    assert_eq!(pv.annotations()["memory/made"], "yes");
    assert!(pv.finalizers().iter().any(|f| f == FINALIZER), "{:?}", pv.finalizers());
    let spec = pv.spec.unwrap();
    assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
    assert_eq!(spec.mount_options, Some(vec!["noatime".into()]));
    assert_eq!(spec.claim_ref.unwrap().uid, created.uid());
    assert_eq!(world.backend.assets(), BTreeSet::from([pv_name.clone()]));
    let note = volumes::wait_event(&world.client, &world.ns, "data", "ProvisioningSucceeded").await;
    assert!(note.ends_with("kept in memory only"), "{note}");
    world.claims().delete("data", &DeleteParams::default()).await.unwrap();
    world.gone(&pv_name).await;
    assert!(world.backend.assets().is_empty(), "the asset went before the PV");
    assert_eq!(*world.backend.deleted.lock().unwrap(), [pv_name]);
}

#[tokio::test]
async fn retained_volumes_stay_and_bad_parameters_are_reported() {
    let world = world("volumes-retain").await;
    let class = world.class("Retain", &[]).await;
    let created = world.claim("kept", &class).await;
    world.bound("kept").await;
    let pv_name = format!("pvc-{}", created.uid().unwrap());
    world.claims().delete("kept", &DeleteParams::default()).await.unwrap();
    volumes::wait_phase(&world.client, &pv_name, "Released").await;
    // Deleting a retained PV by hand lets it go and keeps the asset.
    let api: Api<PersistentVolume> = Api::all(world.client.clone());
    api.delete(&pv_name, &DeleteParams::default()).await.unwrap();
    world.gone(&pv_name).await;
    assert_eq!(world.backend.assets(), BTreeSet::from([pv_name]));
    assert!(world.backend.deleted.lock().unwrap().is_empty());

    let bad = world.class("Delete", &[("colour", "blue")]).await;
    world.claim("refused", &bad).await;
    let note = volumes::wait_event(&world.client, &world.ns, "refused", "InvalidParameters").await;
    assert!(note.contains("unknown parameter colour"), "{note}");
}

#[tokio::test]
async fn a_claim_deleted_mid_provision_leaves_no_volume_behind() {
    let world = world("volumes-midway").await;
    let class = world.class("Delete", &[]).await;
    // Hold every provision until the claim is gone.
    let held = world.backend.gate.acquire_many(Semaphore::MAX_PERMITS as u32).await.unwrap();
    let created = world.claim("brief", &class).await;
    let pv_name = format!("pvc-{}", created.uid().unwrap());
    eventually("provision to begin", || async {
        world.backend.started.lock().unwrap().contains(&pv_name).then_some(())
    })
    .await;
    world.claims().delete("brief", &DeleteParams::default()).await.unwrap();
    eventually("the claim gone", || async {
        world.claims().get_opt("brief").await.ok()?.is_none().then_some(())
    })
    .await;
    drop(held);
    // The asset is made after the claim went; its PV is released at once and both go.
    eventually("the asset made and deleted", || async {
        world.backend.deleted.lock().unwrap().contains(&pv_name).then_some(())
    })
    .await;
    world.gone(&pv_name).await;
    assert!(world.backend.assets().is_empty());
}

/// A backend that keeps the default `expand` refuses every growth: the claim says so once
/// (`VolumeResizeFailed`, `ControllerResizeInfeasible`) and the PV keeps its capacity.
#[tokio::test]
async fn a_backend_that_cannot_expand_marks_a_grown_claim_infeasible() {
    let world = world("volumes-expand").await;
    let class = world.class("Delete", &[]).await;
    let expandable = serde_json::json!({"allowVolumeExpansion": true});
    Api::<StorageClass>::all(world.client.clone())
        .patch(&class, &PatchParams::default(), &Patch::Merge(&expandable))
        .await
        .unwrap();
    let created = world.claim("data", &class).await;
    world.bound("data").await;
    let grow = serde_json::json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
    world.claims().patch("data", &PatchParams::default(), &Patch::Merge(&grow)).await.unwrap();
    let note = volumes::wait_event(&world.client, &world.ns, "data", "VolumeResizeFailed").await;
    assert!(note.contains("cannot expand volumes"), "{note}");
    let claims = world.claims();
    eventually("the claim marked infeasible", || async {
        let status = claims.get("data").await.ok()?.status?;
        let state = status.allocated_resource_statuses?.get("storage")?.clone();
        let capacity = status.capacity?.get("storage")?.0.clone();
        (state == "ControllerResizeInfeasible" && capacity == "1Gi").then_some(())
    })
    .await;
    let pv_name = format!("pvc-{}", created.uid().unwrap());
    let pv = Api::<PersistentVolume>::all(world.client.clone()).get(&pv_name).await.unwrap();
    assert_eq!(pv.spec.unwrap().capacity.unwrap()["storage"].0, "1Gi");
}

/// A backend that panics on one claim fails that claim (an InternalError Event naming the
/// panic) and the controller goes on with the next.
#[tokio::test]
async fn a_panic_on_one_claim_fails_that_claim_and_the_controller_goes_on() {
    let world = world("volumes-panic").await;
    let broken = world.class("Delete", &[("speed", "panic")]).await;
    world.claim("boom", &broken).await;
    let note = volumes::wait_event(&world.client, &world.ns, "boom", "InternalError").await;
    assert!(note.contains("a defect of the backend at speed panic"), "{note}");
    let class = world.class("Delete", &[]).await;
    world.claim("next", &class).await;
    world.bound("next").await;
}

//! Claims, classes and the waits that tests of volume provisioners share.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::{eventually, unique_suffix};

/// A ReadWriteOnce claim `name` of `class` asking for `size`, with `annotations`.
pub fn claim(
    name: &str,
    class: &str,
    size: &str,
    annotations: &[(&str, &str)],
) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(
                annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), Quantity(size.into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// Creates a StorageClass with a unique name for `provisioner` and answers its name.
pub async fn create_class(
    client: &Client,
    provisioner: &str,
    reclaim: &str,
    binding_mode: Option<&str>,
    parameters: &[(&str, &str)],
) -> String {
    let name = format!("volumes-{}", unique_suffix());
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
        provisioner: provisioner.into(),
        reclaim_policy: Some(reclaim.into()),
        volume_binding_mode: binding_mode.map(Into::into),
        mount_options: Some(vec!["noatime".into()]),
        parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("creating a StorageClass");
    name
}

/// Waits until claim `name` is Bound, and answers it.
pub async fn wait_bound(claims: &Api<PersistentVolumeClaim>, name: &str) -> PersistentVolumeClaim {
    eventually(&format!("claim {name} Bound"), || async {
        let claim = claims.get_opt(name).await.ok()??;
        (claim.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(claim)
    })
    .await
}

/// Waits until PV `name` is in `phase`.
pub async fn wait_phase(client: &Client, name: &str, phase: &str) {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    eventually(&format!("volume {name} {phase}"), || async {
        let pv = volumes.get_opt(name).await.ok()??;
        (pv.status?.phase.as_deref() == Some(phase)).then_some(())
    })
    .await
}

/// Waits until PV `name` is gone.
pub async fn wait_volume_gone(client: &Client, name: &str) {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    eventually(&format!("volume {name} gone"), || async {
        volumes.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await
}

/// Waits for an Event with `reason` about object `name` in `namespace` (`default` for
/// cluster-scoped objects) and answers its note.
pub async fn wait_event(client: &Client, namespace: &str, name: &str, reason: &str) -> String {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    eventually(&format!("Event {reason} about {name}"), || async {
        let listed = events.list(&Default::default()).await.ok()?;
        listed.items.into_iter().find_map(|e| {
            let about = e.regarding.as_ref()?.name.as_deref() == Some(name);
            (about && e.reason.as_deref() == Some(reason)).then(|| e.note.unwrap_or_default())
        })
    })
    .await
}

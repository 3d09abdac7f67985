//! Applying the project's YAML manifests to the test control plane, as `kubectl apply` would.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, ResourceExt};
use serde::Deserialize;

/// The name of the file that `kubectl apply -k` reads; it lists manifests and is none itself.
pub const KUSTOMIZATION: &str = "kustomization.yaml";

/// Every object in the `.yaml` files of `dir` (sorted by file name, [`KUSTOMIZATION`] left out),
/// with the file it came from.
pub fn read_manifests(dir: &Path) -> Result<Vec<(PathBuf, DynamicObject)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .filter(|p| p.file_name().is_some_and(|name| name != KUSTOMIZATION))
        .collect();
    files.sort();
    read_manifest_files(&files)
}

/// Every object in `files`, in order, with the file it came from.
pub fn read_manifest_files(files: &[PathBuf]) -> Result<Vec<(PathBuf, DynamicObject)>> {
    let mut objects = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_yaml::Value::deserialize(document)?;
            if value.is_null() {
                continue;
            }
            let object: DynamicObject = serde_yaml::from_value(value)
                .with_context(|| format!("{}: not a Kubernetes object", file.display()))?;
            objects.push((file.clone(), object));
        }
    }
    Ok(objects)
}

/// How [`apply_manifests`] sends objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Server-side dry-run create: validated and admitted, never stored.
    DryRun,
    /// Server-side apply, for real.
    ForReal,
}

/// Sends every object in `dir` to the apiserver. Namespaces are always created for real (the
/// objects in them need them). Returns how many objects were sent.
pub async fn apply_manifests(client: &Client, dir: &Path, mode: Apply) -> Result<usize> {
    let objects = read_manifests(dir)?;
    apply_objects(client, &objects, mode).await?;
    Ok(objects.len())
}

/// Sends `objects` (as from [`read_manifests`], perhaps edited) to the apiserver, in order, the
/// way [`apply_manifests`] does.
pub async fn apply_objects(
    client: &Client,
    objects: &[(PathBuf, DynamicObject)],
    mode: Apply,
) -> Result<()> {
    for (file, object) in objects {
        let types = object.types.as_ref().ok_or_else(|| anyhow!("{}: no kind", file.display()))?;
        let gvk = GroupVersionKind::try_from(types)?;
        let (resource, capabilities) = pinned_kind(client, &gvk)
            .await
            .with_context(|| format!("{}: {} is not served", file.display(), types.kind))?;
        let name = object.name_any();
        let described = || format!("{}: {} {name:?} was rejected", file.display(), types.kind);
        if gvk.kind == "Namespace" {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            if namespaces.get_opt(&name).await?.is_none() {
                let namespace =
                    Namespace { metadata: object.metadata.clone(), ..Default::default() };
                match namespaces.create(&PostParams::default(), &namespace).await {
                    // Made meanwhile by another test applying the same manifests.
                    Err(kube::Error::Api(status)) if status.is_already_exists() => {}
                    created => {
                        created.with_context(described)?;
                    }
                }
            }
            continue;
        }
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => {
                let ns = object.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(client.clone(), ns, &resource)
            }
        };
        match mode {
            Apply::DryRun => {
                let params = PostParams { dry_run: true, ..Default::default() };
                api.create(&params, object).await.with_context(described)?;
            }
            Apply::ForReal => {
                let params = PatchParams::apply("bucket-provisioner-tests").force();
                api.patch(&name, &params, &Patch::Apply(object)).await.with_context(described)?;
            }
        }
    }
    Ok(())
}

//! A pod on the real node writing into a hostPath volume held to its claim's capacity: below it
//! the writes succeed, past it they fail (`EDQUOT` on a btrfs subvolume, `ENOSPC` on a
//! loop-mounted image); the claim grows while the pod runs, and the pod then writes past the old
//! limit. The volume provisioner runs as deployed: the image, `deploy/hostpath-volumes/` with the
//! changes its DaemonSet's comments name for enforced capacity (privileged, Bidirectional mount
//! propagation, the host's /dev), on a btrfs filesystem and on images the test makes on loop
//! devices; the kubelet and kube-scheduler are real.
//!
//! Run by `make e2e` (root).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::FutureExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use node_tests::{Node, pod_ready, set_images};
use test_support::{
    Apply, apply_objects, eventually, read_manifests, test_namespace, unique_suffix,
};

/// The namespace of `deploy/hostpath-volumes/`.
const NS: &str = "bucket-provisioner";

fn run(program: &str, args: &[&std::ffi::OsStr]) -> Result<()> {
    let status = Command::new(program).args(args).status().with_context(|| program.to_owned())?;
    anyhow::ensure!(status.success(), "{program} {args:?}: {status}");
    Ok(())
}

/// How one story's volume is made, and what the pod writes.
struct Story {
    prefix: &'static str,
    parameters: &'static [(&'static str, &'static str)],
    size: &'static str,
    below_mib: u64,
    past_mib: u64,
    grown: &'static str,
    more_mib: u64,
    refusal: &'static str,
}

/// The shell the pod runs: below, past, then (once the test says the claim grew) more.
fn script(story: &Story) -> String {
    format!(
        "dd if=/dev/zero of=/data/below bs=1M count={below} conv=fsync 2>/dev/null \
           && echo 'BELOW OK' || echo 'BELOW FAILED'; \
         if out=$(dd if=/dev/zero of=/data/past bs=1M count={past} conv=fsync 2>&1); \
           then echo 'PAST WRITTEN'; else echo \"PAST REFUSED: $out\"; fi; \
         while [ ! -e /data/grown ]; do sleep 0.2; done; \
         if out=$(dd if=/dev/zero of=/data/more bs=1M count={more} conv=fsync 2>&1); \
           then echo 'GROWN OK'; else echo \"GROWN FAILED: $out\"; fi",
        below = story.below_mib,
        past = story.past_mib,
        more = story.more_mib,
    )
}

async fn pod_logs(pods: &Api<Pod>, name: &str) -> String {
    pods.logs(name, &LogParams::default()).await.unwrap_or_default()
}

async fn story(node: &Node, root: &Path, story: Story) -> Result<()> {
    let client: Client = node.client().await;
    let ns = test_namespace(&client, story.prefix).await;
    let name = format!("capacity.test/{}", unique_suffix());
    let provisioner = DeployedProvisioner::start(node, &client, &name, root).await?;
    let outcome =
        AssertUnwindSafe(held_to_capacity(node, &client, &ns, &name, story)).catch_unwind().await;
    if !matches!(outcome, Ok(Ok(()))) {
        println!("--- {} ---\n{}", provisioner.pod, provisioner.logs().await);
    }
    provisioner.stop().await?;
    outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// `deploy/hostpath-volumes/` (without its StorageClass) with its DaemonSet made to serve
/// `provisioner` under `root` with enforced capacity, as its comments say.
struct DeployedProvisioner {
    client: Client,
    name: String,
    pod: String,
}

impl DeployedProvisioner {
    async fn start(node: &Node, client: &Client, provisioner: &str, root: &Path) -> Result<Self> {
        let name = format!("volumes-{}", unique_suffix());
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/hostpath-volumes");
        let mut objects = read_manifests(&dir)?;
        objects.retain(|(_, o)| o.types.as_ref().is_none_or(|t| t.kind != "StorageClass"));
        for (_, object) in &mut objects {
            set_images(object, node.images())?;
            if object.types.as_ref().is_some_and(|t| t.kind == "DaemonSet") {
                object.metadata.name = Some(name.clone());
                enforce_capacity(&mut object.data, &name, provisioner, root);
            }
        }
        // The policy holding the provisioner to its own volumes names the root, which moves with
        // the DaemonSet's, as its comments say; a policy of each story's own, so that stories
        // side by side keep their roots.
        let objects: Vec<_> = objects
            .into_iter()
            .map(|(file, object)| (file, own_volumes_policy(object, &name, provisioner, root)))
            .collect();
        apply_objects(client, &objects, Apply::ForReal).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        let ours = ListParams::default().labels(&format!("app.kubernetes.io/name={name}"));
        let deadline = tokio::time::Instant::now() + node_tests::POD_WAIT;
        loop {
            let listed = pods.list(&ours).await?;
            if let Some(pod) = listed.items.iter().find(|p| pod_ready(p)) {
                let pod = pod.name_any();
                return Ok(Self { client: client.clone(), name, pod });
            }
            if tokio::time::Instant::now() > deadline {
                let pods: Vec<_> = listed.items.iter().map(|p| (p.name_any(), &p.status)).collect();
                anyhow::bail!("no Ready pod of DaemonSet {name}: {pods:?}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn logs(&self) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        pods.logs(&self.pod, &LogParams::default()).await.unwrap_or_default()
    }

    /// Deletes the DaemonSet and waits until its pod is gone.
    async fn stop(self) -> Result<()> {
        let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), NS);
        sets.delete(&self.name, &DeleteParams::foreground()).await?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        eventually("the provisioner pod gone", || async {
            pods.get_opt(&self.pod).await.ok()?.is_none().then_some(())
        })
        .await;
        Ok(())
    }
}

/// `object` as this story applies it: the own-volumes policy and its binding named after the
/// story's DaemonSet `name` and holding it to `root`; anything else as it is. Stories side by
/// side share the deployed ServiceAccount, so each story's policy also looks only at the volumes
/// of its own `provisioner` (its other checks are the shipped ones).
fn own_volumes_policy(
    object: DynamicObject,
    name: &str,
    provisioner: &str,
    root: &Path,
) -> DynamicObject {
    let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
    if !kind.starts_with("ValidatingAdmissionPolicy") {
        return object;
    }
    let shipped = object.metadata.name.clone().unwrap_or_default();
    let text = serde_json::to_string(&object).unwrap();
    let text = text
        .replace(&shipped, &format!("{name}-own-volumes"))
        .replace("/var/lib/hostpath-volumes/", &format!("{}/", root.display()));
    let mut object: DynamicObject = serde_json::from_str(&text).unwrap();
    let conditions = object.data.get_mut("spec").and_then(|s| s.get_mut("matchConditions"));
    if let Some(conditions) = conditions.and_then(|c| c.as_array_mut()) {
        let pv = "(request.operation == 'DELETE' ? oldObject : object)";
        let key = "'pv.kubernetes.io/provisioned-by'";
        conditions.push(serde_json::json!({
            "name": "this-story",
            "expression": format!(
                "has({pv}.metadata.annotations) && {key} in {pv}.metadata.annotations && \
                 {pv}.metadata.annotations[{key}] == '{provisioner}'"
            ),
        }));
    }
    object
}

/// The DaemonSet's pod spec changed as its comments say for enforced capacity, serving
/// `provisioner` under `root`, its pods labelled `name`.
fn enforce_capacity(data: &mut serde_json::Value, name: &str, provisioner: &str, root: &Path) {
    let labels = serde_json::json!({ "app.kubernetes.io/name": name });
    data["spec"]["selector"]["matchLabels"] = labels.clone();
    data["spec"]["template"]["metadata"]["labels"] = labels;
    let pod = &mut data["spec"]["template"]["spec"];
    let root = root.display().to_string();
    pod["volumes"] = serde_json::json!([
        { "name": "volumes", "hostPath": { "path": root, "type": "DirectoryOrCreate" } },
        { "name": "dev", "hostPath": { "path": "/dev", "type": "Directory" } },
    ]);
    let container = &mut pod["containers"][0];
    container["args"] =
        serde_json::json!([format!("--root={root}"), format!("--provisioner-name={provisioner}")]);
    container["securityContext"] = serde_json::json!({
        "runAsUser": 0, "runAsGroup": 0, "privileged": true, "readOnlyRootFilesystem": true,
    });
    container["volumeMounts"] = serde_json::json!([
        { "name": "volumes", "mountPath": root, "mountPropagation": "Bidirectional" },
        { "name": "dev", "mountPath": "/dev" },
    ]);
}

/// The story's class, claim and writer pod, against the provisioner answering to `name`.
async fn held_to_capacity(
    node: &Node,
    client: &Client,
    ns: &str,
    name: &str,
    story: Story,
) -> Result<()> {
    let class_name = format!("capacity-{}", unique_suffix());
    let class: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class_name},
        "provisioner": name, "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true,
        "parameters": story.parameters.iter().copied().collect::<std::collections::BTreeMap<_, _>>(),
    }))?;
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class_name,
                 "resources": {"requests": {"storage": story.size}}},
    }))?;
    claims.create(&PostParams::default(), &claim).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "writer"},
        "spec": {
            "restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{
                "name": "writer", "image": node.images().busybox, "imagePullPolicy": "Never",
                "command": ["sh", "-c", script(&story)],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;

    // The pod ran into the limit: the write below it went in, the one past it was refused.
    let deadline = tokio::time::Instant::now() + node_tests::POD_WAIT;
    let logs = loop {
        let logs = pod_logs(&pods, "writer").await;
        if logs.contains("PAST") {
            break logs;
        }
        if tokio::time::Instant::now() > deadline {
            let pod = pods.get("writer").await?;
            anyhow::bail!("the writer never got past its first writes: {:?}\n{logs}", pod.status);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("--- {ns}/writer before growing ---\n{logs}");
    assert!(logs.contains("BELOW OK"), "{logs}");
    assert!(logs.contains("PAST REFUSED: ") && logs.contains(story.refusal), "{logs}");

    // Grown while the pod runs: PV and claim show it, and the pod writes past the old limit.
    let bound = claims.get("data").await?;
    let pv_name = bound.spec.and_then(|s| s.volume_name).context("the claim is bound")?;
    let grow = serde_json::json!({"spec": {"resources": {"requests": {"storage": story.grown}}}});
    claims.patch("data", &PatchParams::default(), &Patch::Merge(&grow)).await?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let pv = eventually("PV and claim at the new size", || async {
        let pv = volumes.get(&pv_name).await.ok()?;
        let claim = claims.get("data").await.ok()?;
        let on_pv = pv.spec.as_ref()?.capacity.as_ref()?.get("storage")?.0 == story.grown;
        let on_claim = claim.status?.capacity?.get("storage")?.0 == story.grown;
        (on_pv && on_claim).then_some(pv)
    })
    .await;
    let path = PathBuf::from(pv.spec.unwrap().host_path.unwrap().path);
    std::fs::write(path.join("grown"), "")?;
    let finished = eventually("the writer finished", || async {
        let pod = pods.get("writer").await.ok()?;
        let phase = pod.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    })
    .await;
    let logs = pod_logs(&pods, "writer").await;
    println!("--- {ns}/writer ({finished}) ---\n{logs}");
    assert!(logs.contains("GROWN OK"), "{logs}");
    assert!(path.join("below").is_file(), "the pod's file is on the host");
    println!(
        "{}: {}",
        pv.metadata.name.unwrap_or_default(),
        pv.metadata.annotations.unwrap_or_default()["hostpath-volume.bucket-provisioner.io/capacity"]
    );
    Ok(())
}

/// A btrfs filesystem on a loop device, mounted under a temporary directory.
struct Btrfs(tempfile::TempDir);

impl Drop for Btrfs {
    fn drop(&mut self) {
        let _ = run("umount", &["-l".as_ref(), self.0.path().join("mnt").as_os_str()]);
    }
}

#[tokio::test]
async fn a_pod_is_held_to_its_btrfs_volume_and_writes_more_once_it_grew() -> Result<()> {
    let node = Node::shared();
    let dir = tempfile::tempdir()?;
    let image = dir.path().join("fs.img");
    // Allocated, not sparse: a host disk that fills during the run must not pass for the quota.
    run("fallocate", &["-l".as_ref(), "512MiB".as_ref(), image.as_os_str()])?;
    run("mkfs.btrfs", &["-q".as_ref(), image.as_os_str()])?;
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt)?;
    run("mount", &["-o".as_ref(), "loop".as_ref(), image.as_os_str(), mnt.as_os_str()])?;
    let fs = Btrfs(dir);
    // Bidirectional propagation needs the volumes' mount shared (as systemd makes `/`).
    run("mount", &["--make-shared".as_ref(), mnt.as_os_str()])?;
    let story_ = Story {
        prefix: "node-btrfs",
        parameters: &[],
        size: "32Mi",
        below_mib: 16,
        past_mib: 64,
        grown: "96Mi",
        more_mib: 48,
        refusal: "Disk quota exceeded",
    };
    story(node, &fs.0.path().join("mnt/volumes"), story_).await
}

#[tokio::test]
async fn a_pod_is_held_to_its_loop_volume_and_writes_more_once_it_grew() -> Result<()> {
    let node = Node::shared();
    let root = tempfile::tempdir()?;
    let story_ = Story {
        prefix: "node-loop",
        parameters: &[("backing", "loop"), ("fsType", "xfs")],
        size: "300Mi",
        below_mib: 100,
        past_mib: 400,
        grown: "400Mi",
        more_mib: 48,
        refusal: "No space left on device",
    };
    // Bidirectional propagation needs the root on a shared mount (as systemd makes `/`): here
    // a mount of its own.
    let root_path = root.path().as_os_str();
    run("mount", &["--bind".as_ref(), root_path, root_path])?;
    let _unmount = UnmountBeneath(root.path().to_owned());
    run("mount", &["--make-shared".as_ref(), root_path])?;
    story(node, root.path(), story_).await
}

/// Unmounts (lazily) every mount beneath a directory, then the directory's own, when dropped,
/// however the test ends; then unseals the volumes' mount points (immutable while nothing is
/// mounted on them), which would otherwise keep the directory, and the images in it, on disk.
struct UnmountBeneath(PathBuf);

impl Drop for UnmountBeneath {
    fn drop(&mut self) {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let beneath = format!("{}/", self.0.display());
        for point in mountinfo.lines().filter_map(|l| l.split(' ').nth(4)) {
            if point.starts_with(&beneath) {
                let _ = run("umount", &["-l".as_ref(), point.as_ref()]);
            }
        }
        let _ = run("umount", &["-l".as_ref(), self.0.as_os_str()]);
        for entry in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = run("chattr", &["-i".as_ref(), entry.path().as_os_str()]);
            }
        }
    }
}

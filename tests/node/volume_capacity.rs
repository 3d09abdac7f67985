//! A pod on the real node writing into a hostPath volume held to its claim's capacity: below it
//! the writes succeed, past it they fail (`EDQUOT` on a btrfs subvolume, `ENOSPC` on a
//! loop-mounted image); the claim grows while the pod runs, and the pod then writes past the old
//! limit. The volume provisioner runs on the host as the deployed ServiceAccount (the image has
//! no filesystem programs), on a btrfs filesystem and on images the test makes on loop devices;
//! the kubelet and kube-scheduler are real.
//!
//! Run by `make e2e` (root), which sets `BUCKET_PROVISIONER_VOLUME_BIN` to the provisioner binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, LogParams, Patch, PatchParams, PostParams};
use node_tests::{NODE_NAME, Node};
use test_support::{Deployed, deployed_identity, eventually, test_namespace, unique_suffix};

/// The provisioner binary `make e2e` built.
const VOLUME_BIN_ENV: &str = "BUCKET_PROVISIONER_VOLUME_BIN";

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
    let binary = std::env::var(VOLUME_BIN_ENV)
        .with_context(|| format!("{VOLUME_BIN_ENV} must name hostpath-volume-provisioner"))?;
    let client: Client = node.client().await;
    let ns = test_namespace(&client, story.prefix).await;
    let identity = deployed_identity(node.plane(), Deployed::HostPathVolumes).await?;
    let name = format!("capacity.test/{}", unique_suffix());
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let _provisioner = tokio::process::Command::new(&binary)
        .arg(format!("--root={}", root.display()))
        .arg(format!("--provisioner-name={name}"))
        .arg(format!("--node-name={NODE_NAME}"))
        .arg(format!("--kubeconfig={}", identity.kubeconfig.display()))
        .arg(format!("--metrics-address={}", free()))
        .arg(format!("--usage-metrics-address={}", free()))
        .arg("--leader-elect=false")
        .kill_on_drop(true)
        .spawn()
        .context("starting hostpath-volume-provisioner")?;

    let class_name = format!("capacity-{}", unique_suffix());
    let class: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class_name},
        "provisioner": name, "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true,
        "parameters": story.parameters.iter().copied().collect::<std::collections::BTreeMap<_, _>>(),
    }))?;
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class_name,
                 "resources": {"requests": {"storage": story.size}}},
    }))?;
    claims.create(&PostParams::default(), &claim).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
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
    std::fs::File::create(&image)?.set_len(512 << 20)?;
    run("mkfs.btrfs", &["-q".as_ref(), image.as_os_str()])?;
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt)?;
    run("mount", &["-o".as_ref(), "loop".as_ref(), image.as_os_str(), mnt.as_os_str()])?;
    let fs = Btrfs(dir);
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
    let _unmount = UnmountBeneath(root.path().to_owned());
    story(node, root.path(), story_).await
}

/// Unmounts (lazily) every mount beneath a directory when dropped, however the test ends.
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
    }
}

//! Capacities held, grown and cleaned up, with the real `hostpath-volume-provisioner` process (as
//! its deployed ServiceAccount) on a real control plane: on a btrfs filesystem the test makes on
//! a loop device, and in the loop mode (images under an ordinary directory). The test plays the
//! scheduler and the pod; `make e2e` has a real kubelet.
//!
//! Needs root, loop devices and the filesystem programs (`tests/volumes/install.sh`, which
//! `make test` runs): without them these tests fail, saying what is missing.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use hostpath_volume_provisioner::backing::Backing;
use hostpath_volume_provisioner::btrfs;
use hostpath_volume_provisioner::loopback;
use hostpath_volume_provisioner::store::{Ownership, VolumeStore};
use hostpath_volume_provisioner::tools::{CRASH_AT, run};
use hostpath_volume_provisioner::usage::ANNOTATION_USED_BYTES;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use test_support::{
    ControlPlane, Deployed, deployed_identity, eventually, init_tracing, program, test_namespace,
    unique_suffix, volumes,
};
use tokio::process::Child;

mod scratch;

use scratch::{
    Btrfs, FULL, MIB, Unmount, UnmountBeneath, as_pod, fill, fill_as_pod, listed,
    require_root_and_tools,
};

struct World {
    client: Client,
    ns: String,
    name: String,
    kubeconfig: PathBuf,
}

async fn world(prefix: &str) -> World {
    require_root_and_tools();
    init_tracing();
    let plane = ControlPlane::shared();
    let client = plane.client().await;
    let ns = test_namespace(&client, prefix).await;
    let identity = deployed_identity(plane, Deployed::HostPathVolumes).await.unwrap();
    let name = format!("hostpath-volume.test/{}", unique_suffix());
    World { client, ns, name, kubeconfig: identity.kubeconfig }
}

/// A provisioner process and the address of its usage metrics.
struct Process {
    child: Child,
    usage: std::net::SocketAddr,
}

impl World {
    /// The provisioner for node-a on `root`, aborting at `crash_at` if given.
    fn start(&self, root: &Path, crash_at: Option<&str>) -> Process {
        self.start_with(root, crash_at, &[])
    }

    /// [`World::start`] with `extra` arguments.
    fn start_with(&self, root: &Path, crash_at: Option<&str>, extra: &[&str]) -> Process {
        let free =
            || std::net::SocketAddr::from(([127, 0, 0, 1], test_support::free_port().unwrap()));
        let (metrics, usage) = (free(), free());
        let mut command = program(env!("CARGO_BIN_EXE_hostpath-volume-provisioner"));
        command
            .arg(format!("--root={}", root.display()))
            .arg(format!("--provisioner-name={}", self.name))
            .arg("--node-name=node-a")
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--metrics-address={metrics}"))
            .arg(format!("--usage-metrics-address={usage}"))
            .arg("--usage-interval-seconds=1")
            .arg("--leader-elect=false")
            .args(extra);
        if let Some(step) = crash_at {
            command.env(CRASH_AT, step);
        }
        Process { child: command.spawn().expect("starting hostpath-volume-provisioner"), usage }
    }

    /// A class that binds on the first consumer and allows expansion.
    async fn class(&self, reclaim: &str, parameters: &[(&str, &str)]) -> String {
        let name = format!("capacity-{}", unique_suffix());
        let class = StorageClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            provisioner: self.name.clone(),
            reclaim_policy: Some(reclaim.into()),
            volume_binding_mode: Some("WaitForFirstConsumer".into()),
            allow_volume_expansion: Some(true),
            parameters: Some(
                parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ),
            ..Default::default()
        };
        Api::<StorageClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
        name
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// A claim of `size` placed on node-a; answers its PV's name.
    async fn claim(&self, name: &str, class: &str, size: &str) -> String {
        let annotations = [("volume.kubernetes.io/selected-node", "node-a")];
        let claim = volumes::claim(name, class, size, &annotations);
        let created = self.claims().create(&PostParams::default(), &claim).await.unwrap();
        format!("pvc-{}", created.uid().unwrap())
    }

    async fn bound(&self, name: &str) -> PersistentVolume {
        let claim = volumes::wait_bound(&self.claims(), name).await;
        self.volumes().get(&claim.spec.unwrap().volume_name.unwrap()).await.unwrap()
    }

    async fn grow(&self, name: &str, size: &str) {
        let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": size}}}});
        self.claims().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    /// Waits until both the PV and the claim show `size`, and the resize marks are gone.
    async fn grown(&self, name: &str, pv: &str, size: &str) {
        let (claims, pvs) = (self.claims(), self.volumes());
        eventually(&format!("claim {name} and {pv} at {size}"), || async {
            let claim = claims.get(name).await.ok()?;
            let status = claim.status?;
            let pv = pvs.get(pv).await.ok()?;
            let on_pv = pv.spec?.capacity?.get("storage")?.0 == size;
            let on_claim = status.capacity?.get("storage")?.0 == size;
            let marks = status.allocated_resource_statuses.is_some_and(|s| !s.is_empty())
                || status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Resizing");
            (on_pv && on_claim && !marks).then_some(())
        })
        .await;
    }

    async fn delete_claim(&self, name: &str) {
        self.claims().delete(name, &DeleteParams::default()).await.unwrap();
    }

    /// Waits until the usage metric of `pv` reaches `at_least` bytes (it is read every second,
    /// so an earlier reading may be older than the last write).
    async fn usage_reaches(&self, process: &Process, pv: &str, at_least: u64) {
        let url = format!("http://{}/metrics", process.usage);
        eventually(&format!("usage of {pv} at {at_least} bytes"), || async {
            let text = http_get(&url).await?;
            let line = format!("hostpath_volume_used_bytes{{pv=\"{pv}\"}} ");
            let used: u64 = text.lines().find_map(|l| l.strip_prefix(&line)?.parse().ok())?;
            (used >= at_least).then_some(())
        })
        .await
    }
}

/// A plain HTTP GET of `url`'s body, without a client library.
async fn http_get(url: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/')?;
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let request = format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    Some(answer.split_once("\r\n\r\n")?.1.to_owned())
}

fn host_path(pv: &PersistentVolume) -> PathBuf {
    PathBuf::from(&pv.spec.as_ref().unwrap().host_path.as_ref().unwrap().path)
}

fn capacity_annotation(pv: &PersistentVolume) -> String {
    pv.annotations()["hostpath-volume.bucket-provisioner.io/capacity"].clone()
}

/// Waits until the process ends by itself (a crash point) and answers how.
async fn ended(process: &mut Process) -> ExitStatus {
    tokio::time::timeout(Duration::from_secs(60), process.child.wait())
        .await
        .expect("the provisioner did not stop at its crash point")
        .unwrap()
}

/// The btrfs story: each claim a subvolume held to its capacity by a quota group limit; grown
/// with the claim; gone with it under Delete, kept under Retain.
#[tokio::test]
async fn btrfs_claims_are_held_to_their_capacity_grow_and_go() {
    let world = world("capacity-btrfs").await;
    let fs = Btrfs::new();
    let root = fs.mount_point().join("volumes");
    let process = world.start(&root, None);
    let class = world.class("Delete", &[]).await;
    let pv_name = world.claim("data", &class, "32Mi").await;
    let pv = world.bound("data").await;
    let dir = host_path(&pv);
    assert!(btrfs::is_subvolume(&dir).unwrap(), "the volume is a subvolume");
    let annotation = capacity_annotation(&pv);
    assert!(annotation.contains("btrfs quota group"), "{annotation}");
    let note = volumes::wait_event(&world.client, &world.ns, "data", "ProvisioningSucceeded").await;
    assert!(note.contains("enforced by a btrfs quota group limit"), "{note}");
    assert_eq!(fill(&dir.join("below"), 16), Ok(16), "below the capacity, writes succeed");
    let (written, errno) = fill(&dir.join("past"), 40).unwrap_err();
    assert!(FULL.contains(&errno) && written < 17, "stopped at {written} MiB: {errno}");
    std::fs::remove_file(dir.join("past")).unwrap();
    world.usage_reaches(&process, &pv_name, 16 * MIB).await;
    let pvs = world.volumes();
    eventually("the usage on the PV", || async {
        let pv = pvs.get(&pv_name).await.ok()?;
        let used: u64 = pv.annotations().get(ANNOTATION_USED_BYTES)?.parse().ok()?;
        (used >= 16 * MIB).then_some(())
    })
    .await;

    // A claim kube-controller-manager handed to another resizer is left to it.
    let resizer = |name: Option<&str>| {
        serde_json::json!({"metadata": {"annotations": {
            "volume.kubernetes.io/storage-resizer": name,
        }}})
    };
    let params = PatchParams::default();
    let other = Patch::Merge(resizer(Some("csi.example.com")));
    world.claims().patch("data", &params, &other).await.unwrap();
    world.grow("data", "64Mi").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(btrfs::qgroup_of(&dir).unwrap().unwrap().limit, Some(32 * MIB), "not ours");
    let pv = world.volumes().get(&pv_name).await.unwrap();
    assert_eq!(pv.spec.unwrap().capacity.unwrap()["storage"].0, "32Mi");
    // Named ours (as it is for CSI drivers), it grows.
    let ours = Patch::Merge(resizer(Some(world.name.as_str())));
    world.claims().patch("data", &params, &ours).await.unwrap();
    world.grow("data", "96Mi").await;
    world.grown("data", &pv_name, "96Mi").await;
    assert_eq!(btrfs::qgroup_of(&dir).unwrap().unwrap().limit, Some(96 * MIB));
    assert_eq!(fill(&dir.join("more"), 48), Ok(48), "past the old limit after growing");
    let note =
        volumes::wait_event(&world.client, &world.ns, "data", "VolumeResizeSuccessful").await;
    // (Named ours, it grew to 64Mi, asked while it was another's, or at once to 96Mi.)
    assert!(note.contains("expanded from 32Mi to "), "{note}");

    let id = btrfs::subvolume_id(&dir).unwrap();
    world.delete_claim("data").await;
    volumes::wait_volume_gone(&world.client, &pv_name).await;
    assert!(!dir.exists(), "the subvolume went with the claim");
    assert!(btrfs::qgroups(&root).unwrap().iter().all(|g| g.id != id), "and its quota group");

    let retaining = world.class("Retain", &[]).await;
    let kept_pv = world.claim("kept", &retaining, "16Mi").await;
    let kept = host_path(&world.bound("kept").await);
    std::fs::write(kept.join("keep"), "me").unwrap();
    world.delete_claim("kept").await;
    volumes::wait_phase(&world.client, &kept_pv, "Released").await;
    world.volumes().delete(&kept_pv, &DeleteParams::default()).await.unwrap();
    volumes::wait_volume_gone(&world.client, &kept_pv).await;
    assert!(btrfs::is_subvolume(&kept).unwrap(), "Retain keeps the subvolume");
    assert_eq!(std::fs::read_to_string(kept.join("keep")).unwrap(), "me");
    drop(process);
}

/// A volume made before volume groups (its limit on the subvolume's own quota group, and a
/// subvolume a pod made inside it holding more) is given its group when the provisioner
/// starts; from then on, for it and for every new claim, a subvolume a pod makes inside its
/// volume counts against the volume once the provisioner's own sweep finds it: the usage metric
/// counts it, and writes past the capacity fail.
#[tokio::test]
async fn btrfs_subvolumes_made_inside_volumes_count_from_old_volumes_on() {
    let world = world("capacity-nesting").await;
    let fs = Btrfs::new();
    let root = fs.mount_point().join("volumes");
    let store = VolumeStore::open(root.clone(), "node-a".into()).unwrap();
    btrfs::enable_quota(&root).unwrap();
    let open = Ownership { mode: 0o777, owner: None };
    let backing = Backing::Subvolume { id: None, limited: true };
    store.make("pvc-old", Path::new("pvc-old"), "ns/old", open, backing, Some(64 * MIB)).unwrap();
    let old = root.join("pvc-old");
    // As volumes were made before: no volume group, the limit on the subvolume's own group.
    let id = btrfs::subvolume_id(&old).unwrap();
    let (own, family) = (format!("0/{id}"), format!("1/{id}"));
    let qgroup = |args: &[&str]| {
        let root = root.to_str().unwrap();
        run("btrfs", ["qgroup"].iter().chain(args).chain([&root]))
    };
    let _ = qgroup(&["remove", &own, &family]);
    let _ = qgroup(&["destroy", &family]);
    qgroup(&["limit", "64M", &own]).unwrap();
    let nest = old.join("nest");
    as_pod("btrfs", &[Path::new("subvolume"), Path::new("create"), &nest]).unwrap();
    assert_eq!(fill_as_pod(&nest.join("early"), 32), Ok(32), "nothing counts it yet");

    let process = world.start(&root, None);
    world.usage_reaches(&process, "pvc-old", 32 * MIB).await;
    let groups = btrfs::qgroups(&root).unwrap();
    let group = |level, wanted| groups.iter().find(|g| (g.level, g.id) == (level, wanted));
    assert_eq!(group(1, id).map(|g| g.limit), Some(Some(64 * MIB)), "moved up: {groups:?}");
    assert_eq!(group(0, id).map(|g| g.limit), Some(None), "and lifted below: {groups:?}");
    let (late, why) = fill_as_pod(&nest.join("late"), 64).unwrap_err();
    assert!(why.contains("Disk quota exceeded") && late <= 32, "{late} MiB went in: {why}");

    let class = world.class("Delete", &[]).await;
    let pv_name = world.claim("data", &class, "64Mi").await;
    let dir = host_path(&world.bound("data").await);
    let nest = dir.join("nest");
    as_pod("btrfs", &[Path::new("subvolume"), Path::new("create"), &nest]).unwrap();
    assert_eq!(fill_as_pod(&nest.join("a"), 16), Ok(16));
    world.usage_reaches(&process, &pv_name, 16 * MIB).await;
    let (late, why) = fill_as_pod(&nest.join("b"), 64).unwrap_err();
    assert!(why.contains("Disk quota exceeded") && late <= 48, "{late} MiB went in: {why}");
    world.delete_claim("data").await;
    volumes::wait_volume_gone(&world.client, &pv_name).await;
    assert!(!dir.exists(), "the volume went with the subvolume inside it");
    kill(process).await;
    store.remove("pvc-old").unwrap();
    let groups = btrfs::qgroups(&root).unwrap();
    assert!(groups.iter().all(|g| (g.level, g.id) == (0, 5)), "no group left: {groups:?}");
}

/// On btrfs with quotas off and `--btrfs-quota=existing`, volumes are subvolumes whose capacity
/// is truthfully not enforced: the PV and the Event say why.
#[tokio::test]
async fn btrfs_without_quotas_says_the_capacity_is_not_enforced() {
    let world = world("capacity-noquota").await;
    let fs = Btrfs::new();
    let root = fs.mount_point().join("volumes");
    std::fs::create_dir_all(&root).unwrap();
    let process = world.start_with(&root, None, &["--btrfs-quota=existing"]);
    let class = world.class("Delete", &[]).await;
    world.claim("data", &class, "16Mi").await;
    let pv = world.bound("data").await;
    assert!(btrfs::is_subvolume(&host_path(&pv)).unwrap());
    let annotation = capacity_annotation(&pv);
    assert!(annotation.starts_with("not enforced: btrfs quotas are off"), "{annotation}");
    let note = volumes::wait_event(&world.client, &world.ns, "data", "ProvisioningSucceeded").await;
    assert!(note.contains("its capacity is not enforced: btrfs quotas are off"), "{note}");
    assert!(!btrfs::quota_enabled(&root), "quotas left as they were");
    kill(process).await;
}

/// An ext4 image cannot grow while mounted without CAP_SYS_RESOURCE (which these machines do not
/// give): the claim is marked `ControllerResizeInfeasible` with a reason, once, and left so until
/// its request changes. Where the capability is there, it grows.
#[tokio::test]
async fn an_ext4_image_that_cannot_grow_marks_its_claim_infeasible_once() {
    let world = world("capacity-ext4").await;
    let root_dir = tempfile::tempdir().unwrap();
    let _unmount = UnmountBeneath(root_dir.path().to_owned());
    let process = world.start(root_dir.path(), None);
    let class = world.class("Delete", &[("backing", "loop")]).await;
    let pv_name = world.claim("data", &class, "16Mi").await;
    world.bound("data").await;
    world.grow("data", "32Mi").await;
    let claims = world.claims();
    let outcome = eventually("the expansion done or refused", || async {
        let status = claims.get("data").await.ok()?.status?;
        if status.capacity.as_ref()?.get("storage")?.0 == "32Mi" {
            return Some(None);
        }
        let state = status.allocated_resource_statuses?.get("storage")?.clone();
        (state == "ControllerResizeInfeasible").then_some(Some(state))
    })
    .await;
    if outcome.is_none() {
        eprintln!("this machine grows mounted ext4 filesystems (CAP_SYS_RESOURCE)");
        world.grown("data", &pv_name, "32Mi").await;
        return kill(process).await;
    }
    let note = volumes::wait_event(&world.client, &world.ns, "data", "VolumeResizeFailed").await;
    assert!(note.contains("CAP_SYS_RESOURCE") && note.contains("xfs"), "{note}");
    let pv = world.volumes().get(&pv_name).await.unwrap();
    assert_eq!(pv.spec.unwrap().capacity.unwrap()["storage"].0, "16Mi", "the PV did not grow");
    // Refused once: no write wakes the claim again and again.
    let before = claims.get("data").await.unwrap().resource_version();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(claims.get("data").await.unwrap().resource_version(), before, "left alone");
    kill(process).await;
}

/// The loop story: an xfs image per claim mounted on its directory, holding it to its size;
/// grown online with the claim; unmounted and removed under Delete, kept under Retain. A
/// request below the PV's capacity is refused, and nothing shrinks.
#[tokio::test]
async fn loop_claims_are_held_to_their_image_grow_online_and_go() {
    let world = world("capacity-loop").await;
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path().to_owned();
    let process = world.start(&root, None);
    let class = world.class("Delete", &[("backing", "loop"), ("fsType", "xfs")]).await;
    let pv_name = world.claim("data", &class, "300Mi").await;
    let pv = world.bound("data").await;
    let dir = host_path(&pv);
    let _unmount = Unmount(dir.clone());
    let mount = loopback::mounted_at(&dir).expect("the image is mounted on the volume");
    assert_eq!(mount.fs_type, "xfs");
    assert!(capacity_annotation(&pv).contains("xfs image"), "{}", capacity_annotation(&pv));
    assert_eq!(fill(&dir.join("below"), 150), Ok(150), "below the capacity, writes succeed");
    let (written, errno) = fill(&dir.join("past"), 300).unwrap_err();
    assert!(FULL.contains(&errno), "stopped at {written} MiB: {errno}");
    world.usage_reaches(&process, &pv_name, 150 * MIB).await;

    // Full at its old size: only growing lets more in.
    world.grow("data", "400Mi").await;
    world.grown("data", &pv_name, "400Mi").await;
    assert_eq!(fill(&dir.join("more"), 64), Ok(64), "past the old size after growing");

    // A node restart: the provisioner gone, the mount gone; started again, it mounts the
    // image before serving anything.
    kill(process).await;
    hostpath_volume_provisioner::tools::run("umount", [&dir]).unwrap();
    assert!(!dir.join("more").exists());
    // Until the image is back, nobody writes where it would hide the files: not even root (a
    // pod the kubelet started first).
    let early = std::fs::write(dir.join("early"), b"lost").unwrap_err();
    assert_eq!(early.raw_os_error(), Some(1), "EPERM on the sealed mount point: {early}");
    let process = world.start(&root, None);
    eventually("the image mounted again", || async { dir.join("more").exists().then_some(()) })
        .await;

    // An administrator's PV that says more than the claim: asking less than it is a shrink.
    let pvs = world.volumes();
    let bigger = serde_json::json!({"spec": {"capacity": {"storage": "1Gi"}}});
    pvs.patch(&pv_name, &PatchParams::default(), &Patch::Merge(&bigger)).await.unwrap();
    world.grow("data", "500Mi").await;
    let note = volumes::wait_event(&world.client, &world.ns, "data", "VolumeResizeFailed").await;
    assert!(note.contains("never shrunk"), "{note}");
    let image = loopback::image_path(&root, &pv_name);
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 400 * MIB, "nothing shrank or grew");

    world.delete_claim("data").await;
    volumes::wait_volume_gone(&world.client, &pv_name).await;
    assert!(loopback::mounted_at(&dir).is_none() && !dir.exists(), "unmounted and removed");
    assert!(!image.exists(), "the image went too");

    let retaining = world.class("Retain", &[("backing", "loop")]).await;
    let kept_pv = world.claim("kept", &retaining, "16Mi").await;
    let kept = host_path(&world.bound("kept").await);
    let _unmount_kept = Unmount(kept.clone());
    world.delete_claim("kept").await;
    volumes::wait_phase(&world.client, &kept_pv, "Released").await;
    world.volumes().delete(&kept_pv, &DeleteParams::default()).await.unwrap();
    volumes::wait_volume_gone(&world.client, &kept_pv).await;
    assert!(loopback::mounted_at(&kept).is_some(), "Retain keeps the mount");
    assert!(loopback::image_path(&root, &kept_pv).exists(), "and the image");
    drop(process);
}

/// What a crash test needs to know of a backing.
struct Steps {
    /// The crash points of provisioning, expansion and deletion, in their order.
    provision: &'static [&'static str],
    expand: &'static [&'static str],
    delete: &'static [&'static str],
    /// The claims' size, in MiB.
    size_mib: u64,
    /// Whether the volume at a directory was made whole.
    whole: fn(&Path) -> bool,
}

/// Stops `process` with SIGKILL and waits until it is gone.
async fn kill(mut process: Process) {
    process.child.kill().await.unwrap();
}

/// The process stopped dead (abort: no unwinding, as a SIGKILL stops it) right after each step
/// of provisioning, expansion and deletion, then started again: every claim gets its volume,
/// grows and goes, and nothing (mount, image, subvolume, quota group, record) is left or lost.
async fn crash_at_every_step(
    world: &World,
    root: &Path,
    parameters: &[(&str, &str)],
    steps: Steps,
) {
    let _unmount = UnmountBeneath(root.to_owned());
    let class = world.class("Delete", parameters).await;
    let size = format!("{}Mi", steps.size_mib);
    let mut made = Vec::new();
    for (i, step) in steps.provision.iter().enumerate() {
        let claim = format!("p{i}");
        let mut process = world.start(root, Some(step));
        let pv = world.claim(&claim, &class, &size).await;
        assert!(!ended(&mut process).await.success(), "{step}: aborted there");
        let process = world.start(root, None);
        let dir = host_path(&world.bound(&claim).await);
        kill(process).await;
        assert!((steps.whole)(&dir), "{step}: the volume was finished after the crash");
        made.push((claim, pv, dir));
    }
    let (claim, pv, _) = made[0].clone();
    let mut mib = steps.size_mib;
    for step in steps.expand {
        mib += 16;
        let grown = format!("{mib}Mi");
        let mut process = world.start(root, Some(step));
        world.grow(&claim, &grown).await;
        assert!(!ended(&mut process).await.success(), "{step}: aborted there");
        let process = world.start(root, None);
        world.grown(&claim, &pv, &grown).await;
        kill(process).await;
    }
    for ((claim, pv, dir), step) in made.iter().zip(steps.delete) {
        let mut process = world.start(root, Some(step));
        world.delete_claim(claim).await;
        assert!(!ended(&mut process).await.success(), "{step}: aborted there");
        let process = world.start(root, None);
        volumes::wait_volume_gone(&world.client, pv).await;
        kill(process).await;
        assert!(!dir.exists(), "{step}: the volume went after the crash");
    }
    let process = world.start(root, None);
    for (claim, pv, _) in made.iter().skip(steps.delete.len()) {
        world.delete_claim(claim).await;
        volumes::wait_volume_gone(&world.client, pv).await;
    }
    kill(process).await;
    assert_eq!(listed(root), [".provisioner"], "no volume left");
    assert_eq!(listed(&root.join(".provisioner/volumes")), Vec::<String>::new(), "no record");
    assert_eq!(listed(&root.join(".provisioner/images")), Vec::<String>::new(), "no image");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let root_text = root.display().to_string();
    assert!(!mountinfo.contains(&format!("{root_text}/")), "no mount left:\n{mountinfo}");
}

/// SIGKILL at arbitrary moments while a burst of btrfs claims is provisioned, grown and
/// deleted (between the library's steps too: PV written, claim status not yet): every claim is
/// Bound, grown on PV, claim and quota group, and gone with nothing left.
#[tokio::test]
async fn btrfs_claims_grow_and_go_through_repeated_kills() {
    const CLAIMS: usize = 8;
    let world = world("kill-btrfs").await;
    let fs = Btrfs::new();
    let root = fs.mount_point().join("volumes");
    let class = world.class("Delete", &[]).await;
    let mut process = world.start(&root, None);
    let mut pvs = Vec::new();
    for i in 0..CLAIMS {
        pvs.push((format!("k{i}"), world.claim(&format!("k{i}"), &class, "16Mi").await));
    }
    let restart = |process: Process| async {
        kill(process).await;
        world.start(&root, None)
    };
    for pause in [30, 90, 200, 400] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        process = restart(process).await;
    }
    for (claim, _) in &pvs {
        world.bound(claim).await;
        world.grow(claim, "48Mi").await;
    }
    for pause in [20, 60, 150, 300] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        process = restart(process).await;
    }
    for (claim, pv) in &pvs {
        world.grown(claim, pv, "48Mi").await;
        let dir = host_path(&world.volumes().get(pv).await.unwrap());
        assert_eq!(btrfs::qgroup_of(&dir).unwrap().unwrap().limit, Some(48 * MIB), "{claim}");
        world.delete_claim(claim).await;
    }
    for pause in [40, 120, 250] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        process = restart(process).await;
    }
    for (_, pv) in &pvs {
        volumes::wait_volume_gone(&world.client, pv).await;
    }
    kill(process).await;
    assert_eq!(listed(&root), [".provisioner"], "no subvolume left");
    assert_eq!(listed(&root.join(".provisioner/volumes")), Vec::<String>::new(), "no record");
    let groups = btrfs::qgroups(&root).unwrap();
    assert!(groups.iter().all(|g| (g.level, g.id) == (0, 5)), "no quota group left: {groups:?}");
}

#[tokio::test]
async fn loop_volumes_survive_a_crash_at_every_step() {
    let world = world("crash-loop").await;
    let root_dir = tempfile::tempdir().unwrap();
    let steps = Steps {
        provision: &["provision:recorded", "loop:formatted", "loop:mounted"],
        expand: &["expand:grown", "expand:limited"],
        delete: &["delete:unmounted", "delete:image", "delete:unrecorded"],
        size_mib: 300,
        whole: |dir| loopback::mounted_at(dir).is_some(),
    };
    let parameters = [("backing", "loop"), ("fsType", "xfs")];
    crash_at_every_step(&world, root_dir.path(), &parameters, steps).await;
}

#[tokio::test]
async fn btrfs_volumes_survive_a_crash_at_every_step() {
    let world = world("crash-btrfs").await;
    let fs = Btrfs::new();
    let root = fs.mount_point().join("volumes");
    let steps = Steps {
        provision: &["provision:recorded", "btrfs:created", "btrfs:grouped", "btrfs:limited"],
        expand: &["expand:limited"],
        delete: &["delete:subvolume", "delete:unrecorded"],
        size_mib: 16,
        whole: |dir| {
            btrfs::is_subvolume(dir).unwrap_or(false)
                && btrfs::qgroup_of(dir).ok().flatten().is_some_and(|g| g.limit.is_some())
        },
    };
    crash_at_every_step(&world, &root, &[], steps).await;
    let groups = btrfs::qgroups(&root).unwrap();
    assert!(
        groups.iter().all(|g| (g.level, g.id) == (0, 5)),
        "no quota group left but the top level's: {groups:?}"
    );
}

//! The volume provisioner at scale, on a real control plane with the PV binder and the release
//! binary: N claims (default 1,000, `BENCH_CLAIMS`) in 100 namespaces created at once, each placed
//! on the provisioner's node as kube-scheduler places a `WaitForFirstConsumer` claim; time until
//! all are Bound, latency from creation to Bound as a watch sees it, the provisioner's own API
//! requests per claim (audit log), its memory, and then deletion of every claim until every PV
//! and directory is gone. `make bench` runs it and writes `bench-volumes-results.txt`.
//!
//! Three modes, each on a control plane of its own (`BENCH_VOLUME_MODES`, default all, comma
//! separated): `directory` (plain directories), `btrfs` (subvolumes with quota group limits, on
//! a btrfs filesystem the bench makes on a loop device) and `loop` (an ext4 image per claim,
//! loop-mounted). The btrfs and loop modes need root, loop devices and the filesystem programs
//! (`tests/volumes/install.sh`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use test_support::bench::{
    AuditedPlane, create_all, delete_all, env_number, latencies, memory_mib, namespaces,
    output_arg, per_object, requests_since, wait_until,
};
use test_support::{program, volumes};
use tokio::process::Child;

const NAMESPACES: usize = 100;
const USER: &str = "bench-volume-provisioner";
const PROVISIONER: &str = "bench.bucket-provisioner.io/hostpath-volume";
const NODE: &str = "bench-node";
const LABEL: &str = "bench-volume";
/// Longest wait for the claims to bind or their volumes to go.
const LIMIT: Duration = Duration::from_secs(3600);

/// What the volumes are made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Directory,
    Btrfs,
    Loop,
}

impl Mode {
    fn parse(text: &str) -> Self {
        match text.trim() {
            "directory" => Self::Directory,
            "btrfs" => Self::Btrfs,
            "loop" => Self::Loop,
            other => panic!("BENCH_VOLUME_MODES: unknown mode {other:?} (directory, btrfs, loop)"),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Directory => "plain directories",
            Self::Btrfs => "btrfs subvolumes with quota group limits",
            Self::Loop => "loop-mounted ext4 images",
        }
    }

    /// The claims' size: the smallest image worth formatting for loop.
    fn size(self) -> &'static str {
        match self {
            Self::Loop => "16Mi",
            _ => "1Mi",
        }
    }
}

/// Runs `program` with `args`, failing the bench if it fails.
fn run(program: &str, args: &[&std::ffi::OsStr]) {
    let status = std::process::Command::new(program).args(args).status();
    assert!(status.is_ok_and(|s| s.success()), "{program} {args:?} failed");
}

/// A btrfs filesystem on a loop device, for the btrfs mode; unmounted when dropped.
struct BtrfsScratch(tempfile::TempDir);

impl BtrfsScratch {
    fn new(claims: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("fs.img");
        let size = (512 << 20) + claims as u64 * (1 << 20);
        std::fs::File::create(&image).unwrap().set_len(size).unwrap();
        run("mkfs.btrfs", &["-q".as_ref(), image.as_os_str()]);
        let mount_point = dir.path().join("mnt");
        std::fs::create_dir(&mount_point).unwrap();
        run("mount", &["-o".as_ref(), "loop".as_ref(), image.as_os_str(), mount_point.as_os_str()]);
        Self(dir)
    }

    fn root(&self) -> std::path::PathBuf {
        self.0.path().join("mnt/volumes")
    }
}

impl Drop for BtrfsScratch {
    fn drop(&mut self) {
        let mount_point = self.0.path().join("mnt");
        run("umount", &["-l".as_ref(), mount_point.as_os_str()]);
    }
}

fn start_provisioner(root: &Path, kubeconfig: &Path, workers: usize) -> Child {
    let metrics = test_support::free_port().unwrap();
    program(env!("CARGO_BIN_EXE_hostpath-volume-provisioner"))
        .arg("--usage-metrics-address=off")
        .arg(format!("--root={}", root.display()))
        .arg(format!("--provisioner-name={PROVISIONER}"))
        .arg(format!("--node-name={NODE}"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--metrics-address=127.0.0.1:{metrics}"))
        .arg(format!("--workers={workers}"))
        // Without the Lease's renewals, every request counted is about claims.
        .arg("--leader-elect=false")
        .spawn()
        .expect("starting hostpath-volume-provisioner")
}

/// When each claim was first seen Bound, and when each PV was first seen and seen gone.
#[derive(Default)]
struct Seen {
    bound: HashMap<String, Instant>,
    volumes_made: HashMap<String, Instant>,
    volumes_gone: HashMap<String, Instant>,
}

async fn watch(client: Client, seen: Arc<Mutex<Seen>>) {
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client);
    let claim_events = watcher(claims, watcher::Config::default().labels(LABEL)).boxed();
    let volume_events = watcher(volumes, watcher::Config::default()).boxed();
    let seen_ = seen.clone();
    let claims = claim_events.try_for_each(move |event| {
        let seen = seen_.clone();
        async move {
            if let watcher::Event::Apply(claim) | watcher::Event::InitApply(claim) = event
                && claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
            {
                let key = format!("{}/{}", claim.namespace().unwrap_or_default(), claim.name_any());
                seen.lock().unwrap().bound.entry(key).or_insert_with(Instant::now);
            }
            Ok(())
        }
    });
    let volumes = volume_events.try_for_each(move |event| {
        let seen = seen.clone();
        async move {
            let mut seen = seen.lock().unwrap();
            match event {
                watcher::Event::Apply(pv) | watcher::Event::InitApply(pv) => {
                    seen.volumes_made.entry(pv.name_any()).or_insert_with(Instant::now);
                }
                watcher::Event::Delete(pv) => {
                    seen.volumes_gone.insert(pv.name_any(), Instant::now());
                }
                _ => {}
            }
            Ok(())
        }
    });
    let _ = futures::join!(claims, volumes);
}

fn claim(i: usize, size: &str) -> PersistentVolumeClaim {
    // Placed on our node, as kube-scheduler places the first pod of a WaitForFirstConsumer claim.
    let selected = [("volume.kubernetes.io/selected-node", NODE)];
    let mut claim = volumes::claim(&format!("c-{i}"), "bench", size, &selected);
    claim.metadata.labels = Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())]));
    claim
}

#[tokio::main]
async fn main() {
    let output = output_arg();
    let claims = env_number("BENCH_CLAIMS", 1000);
    let workers = env_number("BENCH_WORKERS", 4);
    let modes =
        std::env::var("BENCH_VOLUME_MODES").unwrap_or_else(|_| "directory,btrfs,loop".into());
    let mut out = String::new();
    for mode in modes.split(',').map(Mode::parse) {
        out.push_str(&bench(mode, claims, workers).await);
    }
    print!("{out}");
    if let Some(path) = output {
        std::fs::write(&path, &out).unwrap();
        println!("results written to {path}");
    }
}

/// One mode's run, on a control plane of its own; answers its report.
async fn bench(mode: Mode, claims: usize, workers: usize) -> String {
    let AuditedPlane { plane: _plane, client, kubeconfig, audit } = AuditedPlane::start(USER).await;
    let class = StorageClass {
        metadata: ObjectMeta { name: Some("bench".into()), ..Default::default() },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        parameters: (mode == Mode::Loop)
            .then(|| BTreeMap::from([("backing".to_owned(), "loop".to_owned())])),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();
    let namespaces = namespaces(&client, "bench", NAMESPACES).await;

    let scratch = tempfile::tempdir().unwrap();
    let btrfs = (mode == Mode::Btrfs).then(|| BtrfsScratch::new(claims));
    let root_path = btrfs.as_ref().map_or_else(|| scratch.path().to_owned(), BtrfsScratch::root);
    std::fs::create_dir_all(&root_path).unwrap();
    let mut provisioner = start_provisioner(&root_path, &kubeconfig, workers);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watching = tokio::spawn(watch(client.clone(), seen.clone()));
    // Let the provisioner list and watch before the burst, as a running one would have.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, mark) = requests_since(&audit, USER, 0);

    let mut out = format!(
        "Volume provisioner on a real control plane with the PV binder: hostPath volumes as {}, \
         {} build, {} cores, {claims} claims of {} in {NAMESPACES} namespaces, {workers} \
         workers\n",
        mode.describe(),
        if cfg!(debug_assertions) { "debug" } else { "release" },
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        mode.size()
    );
    eprintln!("bench: creating {claims} claims");
    let started = Instant::now();
    let created = create_all(&client, &namespaces, claims, |i| claim(i, mode.size())).await;
    let creating = started.elapsed();
    wait_until("every claim to be Bound", LIMIT, || seen.lock().unwrap().bound.len() >= claims)
        .await;
    let bound_at = *seen.lock().unwrap().bound.values().max().unwrap();
    let total = bound_at.duration_since(started);
    let (rss, peak) = memory_mib(provisioner.id().unwrap());
    writeln!(out, "provisioning").unwrap();
    writeln!(
        out,
        "  created in {:.1} s; all Bound {:.1} s after the first create: {:.1} claims/s \
         ({:.1} s per 100 claims)",
        creating.as_secs_f64(),
        total.as_secs_f64(),
        claims as f64 / total.as_secs_f64(),
        total.as_secs_f64() * 100.0 / claims as f64
    )
    .unwrap();
    out.push_str(&latencies("creation to Bound", &created, &seen.lock().unwrap().bound));
    // The provisioner's own part: each claim's PV made (pvc-<uid>), before the binder binds.
    let made: Vec<Instant> = seen.lock().unwrap().volumes_made.values().copied().collect();
    let made_at = made.iter().max().map_or(Duration::ZERO, |at| at.duration_since(started));
    writeln!(
        out,
        "  all {} PVs made {:.1} s after the first create: {:.1} volumes/s (each after the \
         binder handed its claim over); binding is the binder's, at kube-controller-manager's \
         default client rate of 20 requests/s",
        made.len(),
        made_at.as_secs_f64(),
        made.len() as f64 / made_at.as_secs_f64()
    )
    .unwrap();
    // Let the reconciles that the binder's writes cause run out before counting.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (requests, mark) = requests_since(&audit, USER, mark);
    out.push_str(&per_object(&requests, claims, "claim"));
    let directories = std::fs::read_dir(&root_path).map_or(0, |d| d.count()) - 1;
    writeln!(out, "  directories made: {directories}").unwrap();
    writeln!(out, "  provisioner memory: RSS {rss:.1} MiB, peak {peak:.1} MiB").unwrap();

    eprintln!("bench: deleting {claims} claims");
    let volume_names: Vec<String> = {
        let listed = Api::<PersistentVolume>::all(client.clone()).list(&Default::default()).await;
        listed.unwrap().items.iter().map(|pv| pv.name_any()).collect()
    };
    let started = Instant::now();
    delete_all::<PersistentVolumeClaim>(&client, &created).await;
    wait_until("every volume to be gone", LIMIT, || {
        let seen = seen.lock().unwrap();
        volume_names.iter().all(|pv| seen.volumes_gone.contains_key(pv))
    })
    .await;
    let deleting = started.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (requests, _) = requests_since(&audit, USER, mark);
    writeln!(out, "deletion (reclaimPolicy Delete)").unwrap();
    writeln!(
        out,
        "  all {} volumes gone {:.1} s after the first claim deletion: {:.1} volumes/s",
        volume_names.len(),
        deleting.as_secs_f64(),
        volume_names.len() as f64 / deleting.as_secs_f64()
    )
    .unwrap();
    out.push_str(&per_object(&requests, claims, "claim"));
    let left = std::fs::read_dir(&root_path).map_or(0, |d| d.count()) - 1;
    writeln!(out, "  directories left: {left}").unwrap();
    let images = std::fs::read_dir(root_path.join(".provisioner/images")).map_or(0, |d| d.count());
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounts = mountinfo.matches(&format!("{}/", root_path.display())).count();
    writeln!(out, "  images left: {images}; mounts left: {mounts}").unwrap();

    watching.abort();
    provisioner.kill().await.unwrap();
    drop(btrfs);
    out
}

//! The btrfs and loop backings on real filesystems: a btrfs filesystem made by the test on a loop
//! device, and images under an ordinary directory. Writes below a volume's capacity succeed,
//! writes past it fail with `EDQUOT` / `ENOSPC`; growing it lets more in; removing it leaves no
//! subvolume, quota group, mount, loop device or image.
//!
//! Needs root, loop devices and the filesystem programs (`tests/volumes/install.sh`, which
//! `make test` runs): without them these tests fail, saying what is missing.

use std::path::Path;

use hostpath_volume_provisioner::backing::{self, Backing};
use hostpath_volume_provisioner::btrfs;
use hostpath_volume_provisioner::loopback::{self, FsType};
use hostpath_volume_provisioner::overcommit::Overcommit;
use hostpath_volume_provisioner::store::{Ownership, StoreError, VolumeStore};
use hostpath_volume_provisioner::tools::run;

mod scratch;

use scratch::{
    Btrfs, FULL, MIB, Unmount, as_pod, fill, fill_as_pod, listed, require_root_and_tools,
};

const OPEN: Ownership = Ownership { mode: 0o777, owner: None };

#[test]
fn btrfs_volumes_are_subvolumes_held_to_their_capacity_grown_and_removed() {
    let fs = Btrfs::new();
    let root = fs.mount_point().join("volumes");
    let store = VolumeStore::open(root.clone(), "node-a".into()).unwrap();
    btrfs::enable_quota(&root).unwrap();
    let backing = Backing::Subvolume { id: None, limited: true };
    let record = store
        .make("pvc-1", Path::new("ns/data"), "ns/data", OPEN, backing, Some(32 * MIB))
        .unwrap();
    let dir = root.join("ns/data");
    assert!(btrfs::is_subvolume(&dir).unwrap(), "the volume is a subvolume");
    let Backing::Subvolume { id: Some(id), .. } = store.record("pvc-1").unwrap().backing else {
        panic!("the subvolume id is recorded: {record:?}")
    };
    let group = btrfs::qgroup_of(&dir).unwrap().unwrap();
    assert_eq!((group.id, group.limit), (id, Some(32 * MIB)));

    assert_eq!(fill(&dir.join("below"), 16), Ok(16), "below the capacity, writes succeed");
    let (written, errno) = fill(&dir.join("past"), 40).unwrap_err();
    assert!(FULL.contains(&errno) && written < 17, "stopped at {written} MiB with errno {errno}");
    run("sync", [] as [&str; 0]).unwrap();
    let used = backing::used_bytes(&store, &store.record("pvc-1").unwrap()).unwrap();
    assert!(used >= 16 * MIB, "usage is the quota group's: {used}");

    // Made again (a retry): the same subvolume, data kept.
    store.make("pvc-1", Path::new("ns/data"), "ns/data", OPEN, backing, Some(32 * MIB)).unwrap();
    assert!(dir.join("below").exists());

    std::fs::remove_file(dir.join("past")).unwrap();
    backing_grow(&store, "pvc-1", 96 * MIB);
    assert_eq!(btrfs::qgroup_of(&dir).unwrap().unwrap().limit, Some(96 * MIB));
    assert_eq!(fill(&dir.join("more"), 48), Ok(48), "past the old limit after growing");
    let shrink = backing::grow(&store, "pvc-1", 8 * MIB);
    assert!(shrink.unwrap_err().to_string().contains("shrinking"), "never shrunk");

    // Subvolumes a pod made inside its volume (no privilege needed) go with it.
    std::fs::create_dir(dir.join("deep")).unwrap();
    for nested in ["deep/inner", "deep/inner/innermost"] {
        run("btrfs", ["subvolume".as_ref(), "create".as_ref(), dir.join(nested).as_os_str()])
            .unwrap();
    }
    store.remove("pvc-1").unwrap();
    assert!(!dir.exists() && !root.join("ns").exists(), "subvolume and its parent gone");
    let groups = btrfs::qgroups(&root).unwrap();
    assert!(groups.iter().all(|g| g.id != id), "its quota group is gone: {groups:?}");
    assert_eq!(listed(&root.join(".provisioner/volumes")), Vec::<String>::new());
}

/// A pod runs `btrfs subvolume create` inside its volume (as it may, unprivileged) and writes
/// there: the new subvolume's bytes count against the volume's capacity from the sweep after
/// its creation on (here the one that reading the usage runs), so the volume holds at most its
/// capacity plus what went into subvolumes made since the last sweep. Deleting the volume takes
/// every nested subvolume and quota group with it, even below one the pod made read-only.
#[test]
fn subvolumes_a_pod_makes_inside_its_volume_count_against_its_capacity() {
    let fs = Btrfs::new();
    let root = fs.mount_point().join("volumes");
    let store = VolumeStore::open(root.clone(), "node-a".into()).unwrap();
    btrfs::enable_quota(&root).unwrap();
    let backing = Backing::Subvolume { id: None, limited: true };
    store.make("pvc-1", Path::new("pvc-1"), "ns/data", OPEN, backing, Some(64 * MIB)).unwrap();
    let dir = root.join("pvc-1");
    let nest = dir.join("nest");
    let used = |store: &VolumeStore| {
        run("sync", [] as [&str; 0]).unwrap();
        hostpath_volume_provisioner::usage::collect(store)["pvc-1"].used
    };

    as_pod("btrfs", &[Path::new("subvolume"), Path::new("create"), &nest]).unwrap();
    assert!(btrfs::is_subvolume(&nest).unwrap(), "the pod made a subvolume");
    // Before any sweep the pod writes into it: nothing yet counts this.
    assert_eq!(fill_as_pod(&nest.join("early"), 32), Ok(32));
    let after_sweep = used(&store);
    assert!(after_sweep >= 32 * MIB, "the usage counts the nested subvolume: {after_sweep}");
    // Swept: the volume is held to its capacity across both subvolumes.
    let (late, why) = fill_as_pod(&nest.join("late"), 64).unwrap_err();
    assert!(why.contains("Disk quota exceeded"), "{why}");
    assert!(late <= 32, "{late} MiB went in past the 32 MiB written: over the capacity");
    let total = used(&store);
    assert!(total <= 64 * MIB + MIB, "the volume holds {total} bytes, over its 64 MiB");
    as_pod("rm", &[&nest.join("late")]).unwrap();

    // A subvolume made inside the nested one after the sweep: until the next sweep, only what
    // goes into it escapes the limit.
    let deeper = nest.join("deeper");
    as_pod("btrfs", &[Path::new("subvolume"), Path::new("create"), &deeper]).unwrap();
    let escaped = fill_as_pod(&deeper.join("a"), 48).unwrap_or_else(|(mib, _)| mib);
    let total = used(&store);
    assert!(total >= (32 + escaped) * MIB, "counted once swept: {total}");
    assert!(total <= (64 + escaped + 1) * MIB, "{total} bytes: over the capacity by more");
    let more = fill_as_pod(&deeper.join("b"), 16);
    assert!(matches!(more, Err((0, _))), "nothing more goes in once swept: {more:?}");
    let group = btrfs::qgroup_of(&dir).unwrap().unwrap();
    assert_eq!((group.level, group.limit), (1, Some(64 * MIB)), "the limit is on the group");

    // The pod makes the nested subvolume read-only, with one inside it, and fills the volume
    // again: the volume still goes.
    as_pod("rm", &[&deeper.join("a")]).unwrap();
    let ro = [Path::new("property"), Path::new("set"), Path::new("-ts"), &nest];
    as_pod("btrfs", &[&ro[..], &[Path::new("ro"), Path::new("true")]].concat()).unwrap();
    assert!(fill_as_pod(&dir.join("full"), 64).is_err(), "full again");
    store.remove("pvc-1").unwrap();
    assert!(!dir.exists(), "the volume and every subvolume inside it went");
    let groups = btrfs::qgroups(&root).unwrap();
    assert!(
        groups.iter().all(|g| g.level == 0 && g.id == 5),
        "no quota group left but the top level's: {groups:?}"
    );
}

fn backing_grow(store: &VolumeStore, volume: &str, bytes: u64) {
    backing::grow(store, volume, bytes).unwrap();
}

fn loop_volume(fs: FsType, capacity_mib: u64) {
    require_root_and_tools();
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path().to_owned();
    let _unmount = Unmount(root.join("pvc-1"));
    let store = VolumeStore::open(root.clone(), "node-a".into()).unwrap();
    let backing = Backing::Loop { fs };
    let capacity = capacity_mib * MIB;
    store.make("pvc-1", Path::new("pvc-1"), "ns/data", OPEN, backing, Some(capacity)).unwrap();
    let dir = root.join("pvc-1");
    let image = loopback::image_path(&root, "pvc-1");
    let mount = loopback::mounted_at(&dir).expect("the image is mounted on the volume");
    assert_eq!(mount.fs_type, fs.as_str());
    assert_eq!(std::fs::metadata(&image).unwrap().len(), capacity);
    let sparse = std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&image).unwrap()) * 512;
    assert!(sparse < capacity, "the image is sparse ({sparse} bytes allocated)");

    let half = capacity_mib / 2;
    assert_eq!(fill(&dir.join("below"), half), Ok(half), "below the capacity, writes succeed");
    let (written, errno) = fill(&dir.join("past"), capacity_mib).unwrap_err();
    assert!(FULL.contains(&errno) && written < capacity_mib, "stopped at {written} MiB: {errno}");
    let used = backing::used_bytes(&store, &store.record("pvc-1").unwrap()).unwrap();
    assert!(used >= half * MIB, "usage is the mounted filesystem's: {used}");
    std::fs::remove_file(dir.join("past")).unwrap();

    match backing::grow(&store, "pvc-1", 2 * capacity) {
        Ok(()) => {
            assert_eq!(std::fs::metadata(&image).unwrap().len(), 2 * capacity);
            let (_, size) = loopback::usage(&dir).unwrap();
            assert!(size > capacity, "the mounted filesystem grew: {size}");
            assert_eq!(
                fill(&dir.join("more"), capacity_mib),
                Ok(capacity_mib),
                "past the old size"
            );
            assert_eq!(store.record("pvc-1").unwrap().capacity, Some(2 * capacity));
        }
        // ext4 without CAP_SYS_RESOURCE (as on these machines): refused for good, and the
        // volume still holds to its old size.
        Err(StoreError::CannotGrow(why)) if fs == FsType::Ext4 => {
            assert!(why.contains("CAP_SYS_RESOURCE") && why.contains("xfs"), "{why}");
            assert_eq!(store.record("pvc-1").unwrap().capacity, Some(capacity));
            assert!(fill(&dir.join("more"), capacity_mib).is_err(), "still held to its size");
            std::fs::remove_file(dir.join("more")).unwrap();
        }
        Err(e) => panic!("growing a {fs:?} volume: {e}"),
    }

    // A node restart: the mount is gone; the provisioner mounts the image again at start.
    run("umount", [&dir]).unwrap();
    assert!(!dir.join("below").exists());
    assert_eq!(backing::remount_all(&store), 1);
    assert!(dir.join("below").exists(), "the data is back on the volume");
    assert_eq!(backing::remount_all(&store), 0, "mounted once only");

    let device = loopback::mounted_at(&dir).unwrap().source;
    store.remove("pvc-1").unwrap();
    assert!(loopback::mounted_at(&dir).is_none(), "unmounted");
    assert!(!dir.exists() && !image.exists(), "directory and image gone");
    let attached = run("losetup", ["-j".as_ref(), image.as_os_str()]).unwrap();
    assert!(attached.trim().is_empty(), "loop device {device} let go: {attached}");
    assert_eq!(listed(&root.join(".provisioner/volumes")), Vec::<String>::new());
}

#[test]
fn ext4_loop_volumes_are_held_to_their_image_grown_remounted_and_removed() {
    loop_volume(FsType::Ext4, 24);
}

#[test]
fn xfs_loop_volumes_are_held_to_their_image_grown_remounted_and_removed() {
    loop_volume(FsType::Xfs, 300);
}

/// Images and mounts left by a provision stopped half way are finished by the retry, or
/// removed by a delete: a half-formatted image is never mounted.
#[test]
fn half_made_loop_volumes_are_finished_or_removed() {
    require_root_and_tools();
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path().to_owned();
    let _unmount = Unmount(root.join("pvc-1"));
    let store = VolumeStore::open(root.clone(), "node-a".into()).unwrap();
    let backing = Backing::Loop { fs: FsType::Ext4 };
    store.make("pvc-1", Path::new("pvc-1"), "ns/a", OPEN, backing, Some(16 * MIB)).unwrap();
    // As if the process stopped while formatting: a temporary image, nothing mounted.
    run("umount", [root.join("pvc-1")]).unwrap();
    std::fs::rename(
        loopback::image_path(&root, "pvc-1"),
        root.join(".provisioner/images/.pvc-1.img.tmp"),
    )
    .unwrap();
    store.make("pvc-1", Path::new("pvc-1"), "ns/a", OPEN, backing, Some(16 * MIB)).unwrap();
    assert!(loopback::mounted_at(&root.join("pvc-1")).is_some(), "finished by the retry");
    store.remove("pvc-1").unwrap();
    assert_eq!(listed(&root.join(".provisioner/images")), Vec::<String>::new());
    assert!(loopback::mounted_at(&root.join("pvc-1")).is_none());
}

/// Sparse images may promise a root more than it has: three 256 MiB images on a 512 MiB
/// filesystem. One fits and says nothing; with three, what they may still take is more than is
/// free, and the warning says by how much (it goes into the claim's `ProvisioningSucceeded`
/// Event and the log); none is refused.
#[test]
fn loop_images_that_overcommit_their_root_are_told_not_refused() {
    require_root_and_tools();
    let fs = Btrfs::new();
    let root = fs.mount_point();
    let store = VolumeStore::open(root.clone(), "node-a".into()).unwrap();
    let backing = Backing::Loop { fs: FsType::Ext4 };
    let mut unmounts = Vec::new();
    for (i, volume) in ["pvc-1", "pvc-2", "pvc-3"].into_iter().enumerate() {
        unmounts.push(Unmount(root.join(volume)));
        store.make(volume, Path::new(volume), "ns/data", OPEN, backing, Some(256 * MIB)).unwrap();
        let overcommit = Overcommit::of(&root).unwrap();
        if i == 0 {
            assert_eq!(overcommit.warning(), None, "one image fits: {overcommit:?}");
        }
        assert!(overcommit.promised > 200 * MIB * (i as u64 + 1), "{overcommit:?}");
    }
    let overcommit = Overcommit::of(&root).unwrap();
    let warning = overcommit.warning().expect("three images overcommit 512 MiB");
    assert!(warning.contains("overcommitted") && warning.contains("ENOSPC"), "{warning}");
    assert!(overcommit.free < 512 * MIB && overcommit.promised > overcommit.free, "{overcommit:?}");
    for volume in ["pvc-1", "pvc-2", "pvc-3"] {
        store.remove(volume).unwrap();
    }
    assert_eq!(Overcommit::of(&root).unwrap().promised, 0, "removed images promise nothing");
}

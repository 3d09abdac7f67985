//! What a volume is made of, and the steps that make, grow and remove each kind, in an order
//! where the process may stop after any step and a retry finishes the work:
//!
//! | backing | make | grow | remove |
//! |---|---|---|---|
//! | directory | record; directories | record | directory; record |
//! | btrfs subvolume | record; parent directories; subvolume; its id recorded; volume group (`1/<id>`) holding its qgroup; limit on the volume group; mode and owner | volume group limit; record | nested subvolumes added to the volume group; nested subvolumes and the subvolume; wait for the cleaner; their qgroups and the volume group; directory; record |
//! | loop image | record; directories; image formatted under a temporary name, renamed; mount point sealed (immutable); mounted; mode and owner | image file; loop device; filesystem; record | unmount (the loop device goes with it); mount point unsealed; image; directory; record |
//!
//! The record (`.provisioner/volumes/<pv>.json`) is written before anything else and removed
//! after everything else, so nothing this provisioner makes is ever without one: a crash leaves
//! at most a volume that the next call (a retry of the same PV) finishes or removes.

use std::path::Path;

pub use crate::backing_kind::Backing;
use crate::btrfs;
use crate::loopback::{self, FsType};
use crate::nesting;
use crate::store::{Ownership, Record, StoreError, VolumeStore};
use crate::tools::crash_point;

impl VolumeStore {
    /// Makes the volume `volume` at `path` (relative to the root) with `backing` and
    /// `capacity`, or finds the one an earlier call made; answers its record. A volume recorded
    /// already keeps its recorded path, backing and capacity. The record is written first (the
    /// intent), so that every step after it is found and finished, or undone, by a retry.
    pub fn make(
        &self,
        volume: &str,
        path: &Path,
        claim: &str,
        ownership: Ownership,
        backing: Backing,
        capacity: Option<u64>,
    ) -> Result<Record, StoreError> {
        let record = self.record_intent(volume, path, claim, backing, capacity)?;
        make(self, volume, &record, ownership)?;
        Ok(record)
    }

    /// Removes what the backing made (subvolume and its quota group; mount and image), then the
    /// directory recorded for `volume` with everything in it, then empty directories above it
    /// that the path pattern made, then the record. A volume without a record counts as
    /// removed; one recorded by another identity is refused.
    pub fn remove(&self, volume: &str) -> Result<(), StoreError> {
        let Some(record) = self.removable(volume)? else { return Ok(()) };
        remove(self, volume, &record)?;
        self.remove_recorded(volume, &record)
    }
}

/// Makes what `record` describes for `volume`, finishing whatever an earlier call began.
pub(crate) fn make(
    store: &VolumeStore,
    volume: &str,
    record: &Record,
    ownership: Ownership,
) -> Result<(), StoreError> {
    match record.backing {
        Backing::Directory => store.make_dirs(&record.path, ownership),
        Backing::Subvolume { id, limited } => {
            if let Some(parent) = record.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                store.make_dirs(parent, Ownership { mode: 0o755, owner: None })?;
            }
            let path = store.checked_path(&record.path)?;
            btrfs::create_subvolume(&path)?;
            crash_point("btrfs:created");
            let id = match id {
                Some(id) => id,
                None => {
                    let id = btrfs::subvolume_id(&path)?;
                    let mut updated = record.clone();
                    updated.backing = Backing::Subvolume { id: Some(id), limited };
                    store.write_record(volume, &updated)?;
                    id
                }
            };
            if limited {
                // The limit is on the volume's group, which subvolumes made inside it join.
                btrfs::make_volume_group(store.root(), id)?;
                crash_point("btrfs:grouped");
                if let Some(capacity) = record.capacity {
                    btrfs::set_limit(store.root(), btrfs::volume_group(id), Some(capacity))?;
                    crash_point("btrfs:limited");
                }
            }
            store.apply_ownership(&record.path, ownership)
        }
        Backing::Loop { fs } => {
            // An earlier attempt may have sealed the mount point before it stopped.
            if let Ok(target) = store.checked_path(&record.path) {
                loopback::unseal(&target)?;
            }
            store.make_dirs(&record.path, ownership)?;
            let capacity = record.capacity.ok_or_else(|| {
                StoreError::Refused("a loop-backed volume needs a capacity".into())
            })?;
            let image = loopback::make_image(store.root(), volume, capacity, fs)?;
            let target = store.checked_path(&record.path)?;
            loopback::mount(&image, &target, fs)?;
            crash_point("loop:mounted");
            store.apply_ownership(&record.path, ownership)
        }
    }
}

/// Removes what the backing of `record` made for `volume` (not the directory nor the record).
pub(crate) fn remove(store: &VolumeStore, volume: &str, record: &Record) -> Result<(), StoreError> {
    match record.backing {
        Backing::Directory => Ok(()),
        Backing::Subvolume { id, .. } => {
            let path = match store.checked_path(&record.path) {
                Ok(path) => path,
                // The directories above are gone: so is the subvolume.
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let id = match (id, btrfs::is_subvolume(&path)) {
                (Some(id), _) => Some(id),
                (None, Ok(true)) => Some(btrfs::subvolume_id(&path)?),
                (None, _) => None,
            };
            // Without an id no subvolume was made, or it is gone.
            if let Some(id) = id {
                // Subvolumes made since the last sweep join the group first, so that their
                // groups are found and destroyed even if this stops half way.
                if btrfs::quota_enabled(store.root()) && btrfs::is_subvolume(&path).unwrap_or(false)
                {
                    nesting::enclose(store.root(), id)?;
                }
                btrfs::delete_subvolume(store.root(), &path, id)?;
            }
            Ok(())
        }
        Backing::Loop { .. } => {
            if let Ok(target) = store.checked_path(&record.path) {
                loopback::unmount(&target)?;
            }
            crash_point("delete:unmounted");
            loopback::remove_image(store.root(), volume)?;
            crash_point("delete:image");
            Ok(())
        }
    }
}

/// Holds `volume` to `bytes` from now on; refuses to shrink it.
pub fn grow(store: &VolumeStore, volume: &str, bytes: u64) -> Result<(), StoreError> {
    let Some(record) = store.record(volume) else {
        return Err(StoreError::Refused(format!("volume {volume} has no record on this node")));
    };
    if let Some(current) = record.capacity
        && bytes < current
    {
        return Err(StoreError::Refused(format!(
            "volume {volume} holds {current} bytes; shrinking it to {bytes} is not supported"
        )));
    }
    match record.backing {
        Backing::Directory | Backing::Subvolume { limited: false, .. } => {}
        Backing::Subvolume { limited: true, id } => {
            let id = match id {
                Some(id) => id,
                None => btrfs::subvolume_id(&store.checked_path(&record.path)?)?,
            };
            btrfs::make_volume_group(store.root(), id)?;
            btrfs::set_limit(store.root(), btrfs::volume_group(id), Some(bytes))?;
        }
        Backing::Loop { fs } => {
            let target = store.checked_path(&record.path)?;
            match loopback::grow(store.root(), volume, &target, bytes, fs) {
                // The kernel grows a mounted ext4 only for CAP_SYS_RESOURCE.
                Err(e) if fs == FsType::Ext4 && e.message.contains("Permission denied") => {
                    return Err(StoreError::CannotGrow(format!(
                        "growing the mounted ext4 filesystem of volume {volume} was refused \
                         ({e}): the kernel grows a mounted ext4 only for a process with \
                         CAP_SYS_RESOURCE; give the provisioner that capability, or use \
                         fsType xfs, which grows without it"
                    )));
                }
                grown => grown?,
            }
        }
    }
    crash_point("expand:limited");
    store.set_capacity(volume, bytes)
}

/// Mounts the images of every loop-backed volume recorded by this identity again, after the
/// node or the provisioner restarted; answers how many were mounted now. A volume that cannot be
/// mounted is logged (as an error) and skipped, so that the others are served.
pub fn remount_all(store: &VolumeStore) -> usize {
    let mut mounted = 0;
    for (volume, record) in store.records() {
        let Backing::Loop { fs } = record.backing else { continue };
        if record.identity != store.identity() {
            continue;
        }
        let image = loopback::image_path(store.root(), &volume);
        let remount = || -> Result<bool, StoreError> {
            if !image.exists() || !store.exists(&record.path)? {
                // Never made whole, or half removed: the retry of its provision or delete
                // finishes.
                return Ok(false);
            }
            let target = store.checked_path(&record.path)?;
            if loopback::mounted_at(&target).is_some() {
                return Ok(false);
            }
            loopback::mount(&image, &target, fs)?;
            Ok(true)
        };
        match remount() {
            Ok(true) => mounted += 1,
            Ok(false) => {}
            Err(e) => tracing::error!(volume = %volume, error = %e,
                "the volume's image could not be mounted again"),
        }
    }
    mounted
}

/// Bytes used in `volume`, as the mechanism holding it to its capacity counts them: the volume
/// group's referenced bytes on btrfs (the volume's and those of subvolumes made inside it), the
/// mounted filesystem's used blocks for an image. `None` for a plain directory, and for a volume
/// not (yet) made whole.
pub fn used_bytes(store: &VolumeStore, record: &Record) -> Option<u64> {
    used_bytes_in(store, record, None)
}

/// [`used_bytes`], with the quota groups of the root's filesystem listed already (one listing
/// for every volume rather than one per volume).
pub fn used_bytes_in(
    store: &VolumeStore,
    record: &Record,
    groups: Option<&[btrfs::QuotaGroup]>,
) -> Option<u64> {
    let path = store.checked_path(&record.path).ok()?;
    match record.backing {
        Backing::Directory | Backing::Subvolume { limited: false, .. } => None,
        // The volume's group: the volume and the subvolumes made inside it.
        Backing::Subvolume { limited: true, id } => match (groups, id) {
            (Some(groups), Some(id)) => {
                let find = |wanted| groups.iter().find(|g| g.qgroup() == wanted);
                find(btrfs::volume_group(id))
                    .or_else(|| find(btrfs::QgroupId::subvolume(id)))
                    .map(|g| g.referenced)
            }
            _ => btrfs::qgroup_of(&path).ok().flatten().map(|g| g.referenced),
        },
        Backing::Loop { .. } => loopback::usage(&path).map(|(used, _)| used),
    }
}

//! Volumes as btrfs subvolumes held to their capacity by a quota group limit, through Debian's
//! `btrfs` program (btrfs-progs).
//!
//! Each subvolume gets the quota group `0/<subvolume id>` from the kernel once quotas are on.
//! Each volume also gets a group of its own one level up, `1/<its subvolume id>`, holding its
//! `0/<id>` and the groups of the subvolumes a pod makes inside it ([`crate::nesting`] finds and
//! adds those); that group's `max_rfer` limit is the volume's capacity, so a write past it, in
//! the volume or in any subvolume of the group, fails with `EDQUOT` ("Disk quota exceeded").
//! Deleting a subvolume leaves its quota group until the cleaner is done with it: the delete
//! commits at once (so the cleaner starts), waits for it (`btrfs subvolume sync`) and destroys
//! the groups if the kernel has not already.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::btrfs_output::parse_subvolumes;
pub use crate::btrfs_output::{QgroupId, QuotaGroup, Subvolume, parse_qgroups};
use crate::tools::{ToolError, run};

/// The inode number of every subvolume's top directory (`BTRFS_FIRST_FREE_OBJECTID`).
const SUBVOLUME_INODE: u64 = 256;

/// Turns quotas on for the btrfs filesystem holding `root` (nothing if they are on already).
pub fn enable_quota(root: &Path) -> Result<(), ToolError> {
    if quota_enabled(root) {
        return Ok(());
    }
    run("btrfs", [Path::new("quota").as_os_str(), "enable".as_ref(), root.as_os_str()]).map(drop)
}

/// Whether quotas are on for the btrfs filesystem holding `root`.
pub fn quota_enabled(root: &Path) -> bool {
    run("btrfs", ["qgroup".as_ref(), "show".as_ref(), root.as_os_str()]).is_ok()
}

/// Whether `path` is the top of a subvolume (a directory, on btrfs, with inode 256).
pub fn is_subvolume(path: &Path) -> std::io::Result<bool> {
    let meta = std::fs::symlink_metadata(path)?;
    Ok(meta.is_dir() && meta.ino() == SUBVOLUME_INODE)
}

/// Makes the subvolume `path`, unless it is one already. Something else there is an error.
pub fn create_subvolume(path: &Path) -> Result<(), ToolError> {
    match is_subvolume(path) {
        Ok(true) => return Ok(()),
        Ok(false) => {
            return Err(ToolError {
                command: "btrfs subvolume create".into(),
                message: format!("{} exists and is not a subvolume", path.display()),
                missing: false,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(looking_at(path, e)),
    }
    run("btrfs", ["subvolume".as_ref(), "create".as_ref(), path.as_os_str()]).map(drop)
}

/// The id of the subvolume `path`.
pub fn subvolume_id(path: &Path) -> Result<u64, ToolError> {
    let out = run("btrfs", ["inspect-internal".as_ref(), "rootid".as_ref(), path.as_os_str()])?;
    out.trim().parse().map_err(|_| ToolError {
        command: format!("btrfs inspect-internal rootid {}", path.display()),
        message: format!("not a subvolume id: {out:?}"),
        missing: false,
    })
}

/// The group a volume's limit is on: `1/<id>` of the volume's subvolume `id`, holding the
/// volume's own `0/<id>` and every subvolume made inside it.
pub fn volume_group(id: u64) -> QgroupId {
    QgroupId { level: 1, id }
}

/// Makes the group of the volume whose subvolume is `id` and puts the subvolume's own group in
/// it; each step is skipped if done already.
pub fn make_volume_group(root: &Path, id: u64) -> Result<(), ToolError> {
    let group = volume_group(id).to_string();
    match run("btrfs", ["qgroup".as_ref(), "create".as_ref(), group.as_ref(), root.as_os_str()]) {
        Err(e) if !e.message.contains("File exists") => return Err(e),
        _ => {}
    }
    assign(root, QgroupId::subvolume(id), volume_group(id))
}

/// Makes `child` a member of `parent`. Where the kernel cannot add the child's bytes to the
/// parent's at once (the child shares extents, as a snapshot does), btrfs-progs starts a rescan.
pub fn assign(root: &Path, child: QgroupId, parent: QgroupId) -> Result<(), ToolError> {
    let (child, parent) = (child.to_string(), parent.to_string());
    let args =
        ["qgroup".as_ref(), "assign".as_ref(), child.as_ref(), parent.as_ref(), root.as_os_str()];
    match run("btrfs", args) {
        Err(e) if !e.message.contains("File exists") => Err(e),
        _ => Ok(()),
    }
}

/// Limits what `group` references to `bytes`, or lifts its limit (`None`).
pub fn set_limit(root: &Path, group: QgroupId, bytes: Option<u64>) -> Result<(), ToolError> {
    let bytes = bytes.map_or_else(|| "none".to_owned(), |b| b.to_string());
    let group = group.to_string();
    let args =
        ["qgroup".as_ref(), "limit".as_ref(), bytes.as_ref(), group.as_ref(), root.as_os_str()];
    run("btrfs", args).map(drop)
}

/// Every quota group of the filesystem holding `root`, of every level, with its parents.
pub fn qgroups(root: &Path) -> Result<Vec<QuotaGroup>, ToolError> {
    let args = [
        "qgroup".as_ref(),
        "show".as_ref(),
        "--raw".as_ref(),
        "-r".as_ref(),
        "-p".as_ref(),
        root.as_os_str(),
    ];
    run("btrfs", args).map(|text| parse_qgroups(&text))
}

/// The group holding the subvolume `path` to its capacity: its volume group where there is one,
/// else its own (as volumes made before volume groups were).
pub fn qgroup_of(path: &Path) -> Result<Option<QuotaGroup>, ToolError> {
    let id = subvolume_id(path)?;
    let groups = qgroups(path)?;
    let find = |wanted: QgroupId| groups.iter().find(|g| g.qgroup() == wanted).cloned();
    Ok(find(volume_group(id)).or_else(|| find(QgroupId::subvolume(id))))
}

/// Every subvolume of the filesystem holding `root`, with the subvolume it sits in.
pub fn subvolumes(root: &Path) -> Result<Vec<Subvolume>, ToolError> {
    let args = ["subvolume".as_ref(), "list".as_ref(), "-p".as_ref(), root.as_os_str()];
    run("btrfs", args).map(|text| parse_subvolumes(&text))
}

/// Deletes the subvolume `path` (if there) with id `id` and the subvolumes inside it, waits
/// until the filesystem is done with them, and destroys the volume's group and its members'
/// groups where the kernel left them. Every step may be repeated: the members of the volume's
/// group name the nested subvolumes after they are gone.
pub fn delete_subvolume(root: &Path, path: &Path, id: u64) -> Result<(), ToolError> {
    match is_subvolume(path) {
        Ok(true) => match delete_one(path) {
            // A pod made subvolumes inside its volume (unprivileged users may): those go
            // first, deepest first. No pod uses the volume any more when it is deleted. A pod
            // may have made one read-only (its owner may), which keeps what is inside it.
            Err(e) if e.message.contains("Directory not empty") => {
                let mut nested = nested_subvolumes(path);
                nested.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
                // Changing a flag takes a little space, which a full volume's limit refuses
                // (to root too); the volume is going, and its limit with it.
                if quota_enabled(root) {
                    for group in [volume_group(id), QgroupId::subvolume(id)] {
                        absent_is_done(set_limit(root, group, None).map(|()| String::new()))?;
                    }
                }
                for inner in nested.iter().chain([&path.to_owned()]) {
                    set_writable(inner)?;
                }
                for inner in &nested {
                    delete_one(inner)?;
                }
                delete_one(path)?;
            }
            deleted => deleted?,
        },
        Ok(false) => {
            return Err(ToolError {
                command: "btrfs subvolume delete".into(),
                message: format!("{} is not a subvolume; it is left as it is", path.display()),
                missing: false,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(looking_at(path, e)),
    }
    crate::tools::crash_point("delete:subvolume");
    let enabled = quota_enabled(root);
    let family = volume_group(id);
    let members: Vec<u64> = match enabled {
        true => qgroups(root)?
            .into_iter()
            .filter(|g| g.level == 0 && g.id != id && g.parents.contains(&family))
            .map(|g| g.id)
            .collect(),
        false => Vec::new(),
    };
    // `btrfs subvolume sync` waits for ever on a subvolume that is not deleted: only those that
    // are no longer listed are waited for.
    let live: std::collections::BTreeSet<u64> = subvolumes(root)?.iter().map(|s| s.id).collect();
    if live.contains(&id) {
        return Err(ToolError {
            command: "btrfs subvolume delete".into(),
            message: format!("subvolume {id} is still there after {} was deleted", path.display()),
            missing: false,
        });
    }
    let gone: Vec<String> = std::iter::once(id)
        .chain(members.iter().copied().filter(|m| !live.contains(m)))
        .map(|m| m.to_string())
        .collect();
    let mut args = vec!["subvolume".as_ref(), "sync".as_ref(), root.as_os_str()];
    args.extend(gone.iter().map(std::ffi::OsStr::new));
    run("btrfs", args)?;
    if !enabled {
        tracing::debug!("quotas are off: no quota group to destroy");
        return Ok(());
    }
    for member in members {
        if live.contains(&member) {
            // Not inside the volume (someone else put it in the group): it only leaves.
            let (child, parent) = (QgroupId::subvolume(member).to_string(), family.to_string());
            let args = ["qgroup".as_ref(), "remove".as_ref(), child.as_ref(), parent.as_ref()];
            absent_is_done(run("btrfs", args.into_iter().chain([root.as_os_str()])))?;
        } else {
            destroy(root, QgroupId::subvolume(member))?;
        }
    }
    destroy(root, QgroupId::subvolume(id))?;
    destroy(root, family)
}

/// Destroys `group`, if there.
fn destroy(root: &Path, group: QgroupId) -> Result<(), ToolError> {
    let group = group.to_string();
    absent_is_done(run(
        "btrfs",
        ["qgroup".as_ref(), "destroy".as_ref(), group.as_ref(), root.as_os_str()],
    ))
}

/// Success, or the failure of a step whose object was gone already.
fn absent_is_done(result: Result<String, ToolError>) -> Result<(), ToolError> {
    match result {
        Err(e) if !e.message.contains("No such file or directory") => Err(e),
        _ => Ok(()),
    }
}

/// Lets the subvolume `path` be changed again if a pod made it read-only.
fn set_writable(path: &Path) -> Result<(), ToolError> {
    let args = ["property".as_ref(), "set".as_ref(), "-ts".as_ref(), path.as_os_str()];
    run("btrfs", args.into_iter().chain(["ro".as_ref(), "false".as_ref()])).map(drop)
}

/// Deletes the subvolume `path`, committed at once: the cleaner starts dropping it now, not at
/// the next periodic commit (up to 30 s later), so a wait for it is short.
fn delete_one(path: &Path) -> Result<(), ToolError> {
    run("btrfs", ["subvolume".as_ref(), "delete".as_ref(), "-c".as_ref(), path.as_os_str()])
        .map(drop)
}

/// The subvolumes beneath `top` (not `top` itself), found without following links.
fn nested_subvolumes(top: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![top.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            if is_subvolume(&path).unwrap_or(false) {
                found.push(path.clone());
            }
            dirs.push(path);
        }
    }
    found
}

/// The error of looking at `path` to tell what it is.
fn looking_at(path: &Path, error: std::io::Error) -> ToolError {
    ToolError {
        command: format!("looking at {}", path.display()),
        message: error.to_string(),
        missing: false,
    }
}

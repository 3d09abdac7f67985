//! Volumes as btrfs subvolumes held to their capacity by a quota group limit, through Debian's
//! `btrfs` program (btrfs-progs).
//!
//! Each subvolume gets the quota group `0/<subvolume id>` from the kernel once quotas are on; its
//! `max_rfer` limit is the volume's capacity, so a write past it fails with `EDQUOT` ("Disk quota
//! exceeded"). Deleting the subvolume leaves its quota group until the cleaner is done with it:
//! the delete commits at once (so the cleaner starts), waits for it (`btrfs subvolume sync`) and
//! destroys the group if the kernel has not already.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

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

/// Limits what the subvolume `path` references to `bytes`.
pub fn set_limit(path: &Path, bytes: u64) -> Result<(), ToolError> {
    run(
        "btrfs",
        ["qgroup".as_ref(), "limit".as_ref(), bytes.to_string().as_ref(), path.as_os_str()],
    )
    .map(drop)
}

/// One quota group as `btrfs qgroup show --raw -r` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaGroup {
    /// The subvolume id (the `0/<id>` of the group).
    pub id: u64,
    /// Bytes referenced.
    pub referenced: u64,
    /// The limit on referenced bytes, if any.
    pub limit: Option<u64>,
}

/// Parses `btrfs qgroup show --raw -r` output.
pub fn parse_qgroups(text: &str) -> Vec<QuotaGroup> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next()?.strip_prefix("0/")?.parse().ok()?;
            let referenced = fields.next()?.parse().ok()?;
            let _exclusive = fields.next()?;
            let limit = fields.next()?.parse().ok();
            Some(QuotaGroup { id, referenced, limit })
        })
        .collect()
}

/// Every level-0 quota group of the filesystem holding `root`.
pub fn qgroups(root: &Path) -> Result<Vec<QuotaGroup>, ToolError> {
    let args =
        ["qgroup".as_ref(), "show".as_ref(), "--raw".as_ref(), "-r".as_ref(), root.as_os_str()];
    run("btrfs", args).map(|text| parse_qgroups(&text))
}

/// The quota group of the subvolume `path`.
pub fn qgroup_of(path: &Path) -> Result<Option<QuotaGroup>, ToolError> {
    let id = subvolume_id(path)?;
    let args = [
        "qgroup".as_ref(),
        "show".as_ref(),
        "--raw".as_ref(),
        "-r".as_ref(),
        "-f".as_ref(),
        path.as_os_str(),
    ];
    let text = run("btrfs", args)?;
    Ok(parse_qgroups(&text).into_iter().find(|g| g.id == id))
}

/// Deletes the subvolume `path` (if there) with id `id`, waits until the filesystem is done
/// with it, and destroys its quota group if the kernel left one. Every step may be repeated.
pub fn delete_subvolume(root: &Path, path: &Path, id: u64) -> Result<(), ToolError> {
    match is_subvolume(path) {
        Ok(true) => match delete_one(path) {
            // A pod made subvolumes inside its volume (unprivileged users may): those go
            // first, deepest first. No pod uses the volume any more when it is deleted.
            Err(e) if e.message.contains("Directory not empty") => {
                let mut nested = nested_subvolumes(path);
                nested.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
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
    let id_text = id.to_string();
    run("btrfs", ["subvolume".as_ref(), "sync".as_ref(), root.as_os_str(), id_text.as_ref()])?;
    let group = format!("0/{id}");
    match run("btrfs", ["qgroup".as_ref(), "destroy".as_ref(), group.as_ref(), root.as_os_str()]) {
        Ok(_) => Ok(()),
        Err(e) if e.message.contains("No such file or directory") => Ok(()),
        Err(e) if !quota_enabled(root) => {
            tracing::debug!(error = %e, "quotas are off: no quota group to destroy");
            Ok(())
        }
        Err(e) => Err(e),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_groups_are_read_from_raw_output() {
        let text = "\
Qgroupid    Referenced    Exclusive  Max referenced   Path 
--------    ----------    ---------  --------------   ---- 
0/5              16384        16384            none   <toplevel>
0/256         20955136     20955136        20971520   v1
1/100             4096         4096            none   <under>
";
        assert_eq!(
            parse_qgroups(text),
            [
                QuotaGroup { id: 5, referenced: 16384, limit: None },
                QuotaGroup { id: 256, referenced: 20955136, limit: Some(20971520) },
            ]
        );
    }
}

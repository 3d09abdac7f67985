//! Whether the filesystem under the root could enforce a plain directory's capacity, said
//! honestly: a hostPath directory is only a directory, and nothing stops a pod from filling the
//! disk unless the filesystem enforces a project quota on it. (Volumes that are btrfs subvolumes
//! or loop-mounted images are held to their capacity: see [`crate::backing`].)
//!
//! Project quotas need XFS mounted with `prjquota`/`pquota` or ext4 with the `project` and
//! `quota` features mounted with `prjquota`, on a kernel built with quota support. This
//! provisioner does not set project quotas itself: it finds out what the root's filesystem is and
//! says on every PV and in every `ProvisioningSucceeded` Event that the requested capacity is
//! not enforced, and why.

use std::path::{Path, PathBuf};

/// One line of `/proc/self/mountinfo`, as far as it matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The filesystem type (`ext4`, `xfs`, `overlay`, ...).
    pub fs_type: String,
    /// The device or source.
    pub source: String,
    /// The per-mount and per-superblock options together.
    pub options: Vec<String>,
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Some(value) = std::str::from_utf8(&bytes[i + 1..i + 4])
                .ok()
                .and_then(|octal| u8::from_str_radix(octal, 8).ok())
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mounts in a mountinfo text, in its order.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split(' ').collect();
            let after: Vec<&str> = after.split(' ').collect();
            let mut options: Vec<String> = fields.get(5)?.split(',').map(str::to_owned).collect();
            options.extend(after.get(2).unwrap_or(&"").split(',').map(str::to_owned));
            Some(Mount {
                mount_point: PathBuf::from(unescape(fields.get(4)?)),
                fs_type: (*after.first()?).to_owned(),
                source: unescape(after.get(1).unwrap_or(&"")),
                options,
            })
        })
        .collect()
}

/// The mount that holds `path` (already canonical): the last mounted at its longest prefix.
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| path.starts_with(&m.mount_point))
        .max_by_key(|(i, m)| (m.mount_point.components().count(), *i))
        .map(|(_, m)| m)
}

/// What the root's filesystem can do about capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// The filesystem is mounted with project quotas, which could hold each volume to its
    /// capacity; this provisioner does not set them.
    QuotaCapable(String),
    /// The filesystem cannot enforce a capacity per directory.
    Unsupported(String),
}

impl Enforcement {
    /// Why the capacity is not enforced.
    pub fn reason(&self) -> &str {
        match self {
            Self::QuotaCapable(why) | Self::Unsupported(why) => why,
        }
    }

    /// What to tell the claim's owner.
    pub fn note(&self) -> String {
        format!("its capacity is not enforced: {}", self.reason())
    }
}

/// What `mount` (holding `root`) can do about capacity.
pub fn enforcement(root: &Path, mount: Option<&Mount>) -> Enforcement {
    let Some(mount) = mount else {
        return Enforcement::Unsupported(format!(
            "no mount holding {} was found in /proc/self/mountinfo",
            root.display()
        ));
    };
    let has = |names: &[&str]| mount.options.iter().any(|o| names.contains(&o.as_str()));
    let project = match mount.fs_type.as_str() {
        "xfs" => has(&["prjquota", "pquota", "prjjquota"]),
        "ext4" => has(&["prjquota"]),
        _ => false,
    };
    let place = format!(
        "{} is on {} ({}, mounted at {})",
        root.display(),
        mount.fs_type,
        mount.source,
        mount.mount_point.display()
    );
    if project {
        Enforcement::QuotaCapable(format!(
            "{place} with project quotas, but this provisioner does not set them"
        ))
    } else if matches!(mount.fs_type.as_str(), "xfs" | "ext4") {
        Enforcement::Unsupported(format!("{place} without project quotas (prjquota)"))
    } else {
        Enforcement::Unsupported(format!("{place}, which has no project quotas"))
    }
}

/// What the filesystem of `root` (an existing directory) can do, from this process's mounts.
pub fn probe(root: &Path) -> Enforcement {
    enforcement(root, root_mount(root).as_ref())
}

/// The mount holding `root` (an existing directory), from this process's mounts.
pub fn root_mount(root: &Path) -> Option<Mount> {
    let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|text| parse_mountinfo(&text))
        .unwrap_or_default();
    mount_of(&mounts, &canonical).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
30 22 0:25 / /sys rw,nosuid - sysfs sysfs rw
41 22 7:0 / /var/lib/volumes rw,relatime - xfs /dev/loop0 rw,attr2,inode64,prjquota
42 22 7:1 / /srv/ext\\040disk rw,relatime - ext4 /dev/loop1 rw,prjquota
43 22 7:2 / /srv/plain rw,relatime - xfs /dev/loop2 rw,attr2,noquota
44 43 7:3 / /srv/plain rw,relatime - tmpfs tmpfs rw,size=1024k
";

    #[test]
    fn the_longest_and_latest_mount_holds_a_path() {
        let mounts = parse_mountinfo(MOUNTINFO);
        assert_eq!(mounts.len(), 6);
        let of = |p: &str| mount_of(&mounts, Path::new(p)).unwrap().mount_point.clone();
        assert_eq!(of("/var/lib/volumes/pvc-1"), PathBuf::from("/var/lib/volumes"));
        assert_eq!(of("/var/lib/volumesx"), PathBuf::from("/"));
        assert_eq!(of("/srv/ext disk/a"), PathBuf::from("/srv/ext disk"));
        assert_eq!(mount_of(&mounts, Path::new("/srv/plain")).unwrap().fs_type, "tmpfs");
    }

    #[test]
    fn only_project_quota_mounts_could_enforce_a_capacity() {
        let mounts = parse_mountinfo(MOUNTINFO);
        let at = |p: &str| enforcement(Path::new(p), mount_of(&mounts, Path::new(p)));
        assert!(matches!(at("/var/lib/volumes"), Enforcement::QuotaCapable(_)));
        assert!(matches!(at("/srv/ext disk"), Enforcement::QuotaCapable(_)));
        let Enforcement::Unsupported(why) = at("/var/tmp") else { panic!() };
        assert_eq!(
            why,
            "/var/tmp is on ext4 (/dev/vda, mounted at /) without project quotas (prjquota)"
        );
        let Enforcement::Unsupported(why) = at("/srv/plain") else { panic!() };
        assert!(why.contains("tmpfs"), "{why}");
        assert!(at("/srv/plain").note().starts_with("its capacity is not enforced: "));
    }
}

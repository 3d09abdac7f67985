//! Filesystems for the tests, made on loop devices, and what the tests do with them.

#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use hostpath_volume_provisioner::loopback;
use hostpath_volume_provisioner::tools::run;

pub const MIB: u64 = 1 << 20;
/// `EDQUOT` and `ENOSPC`.
pub const FULL: [i32; 2] = [122, 28];

/// Fails the test, saying why, unless it runs as root with the filesystem programs.
pub fn require_root_and_tools() {
    assert!(
        run("id", ["-u"]).is_ok_and(|uid| uid.trim() == "0"),
        "these tests make filesystems on loop devices and mount them: run them as root (CI does)"
    );
    for tool in ["btrfs", "mkfs.btrfs", "mkfs.ext4", "mkfs.xfs", "losetup", "mount"] {
        assert!(
            run("sh", ["-c", &format!("command -v {tool}")]).is_ok(),
            "{tool} is missing: run tests/volumes/install.sh (make test does)"
        );
    }
    assert!(Path::new("/dev/loop-control").exists(), "no loop devices (/dev/loop-control)");
}

/// A btrfs filesystem on a loop device, mounted under a temporary directory; unmounted when
/// dropped.
pub struct Btrfs {
    dir: tempfile::TempDir,
}

impl Btrfs {
    pub fn new() -> Self {
        require_root_and_tools();
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("fs.img");
        std::fs::File::create(&image).unwrap().set_len(512 * MIB).unwrap();
        run("mkfs.btrfs", [Path::new("-q"), &image]).unwrap();
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        run("mount", [Path::new("-o"), Path::new("loop"), &image, &dir.path().join("mnt")])
            .unwrap();
        Self { dir }
    }

    pub fn mount_point(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        let _ = run("umount", ["-l".as_ref(), self.mount_point().as_os_str()]);
    }
}

/// Writes `mib` MiB into `path` and syncs; answers how many MiB went in, or the error's errno.
pub fn fill(path: &Path, mib: u64) -> Result<u64, (u64, i32)> {
    let mut file = std::fs::File::create(path).map_err(|e| (0, e.raw_os_error().unwrap_or(0)))?;
    let chunk = vec![0x5a_u8; MIB as usize];
    for written in 0..mib {
        file.write_all(&chunk).map_err(|e| (written, e.raw_os_error().unwrap_or(0)))?;
    }
    file.sync_all().map_err(|e| (mib, e.raw_os_error().unwrap_or(0)))?;
    Ok(mib)
}

/// The uid (and gid) a pod runs as in these tests: not root, with no capability.
pub const POD_UID: u32 = 65532;

/// Runs `command` with `args` as [`POD_UID`], as a pod would; answers its standard output, or
/// its standard error if it failed.
pub fn as_pod(command: &str, args: &[&Path]) -> Result<String, String> {
    let id = POD_UID.to_string();
    let output = std::process::Command::new("setpriv")
        .args([format!("--reuid={id}"), format!("--regid={id}"), "--clear-groups".into()])
        .arg(command)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .expect("running setpriv");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if output.status.success() { Ok(text(&output.stdout)) } else { Err(text(&output.stderr)) }
}

/// Writes `mib` MiB into `path` as [`POD_UID`] and syncs; answers how many MiB went in, or how
/// many did and what stopped the rest.
pub fn fill_as_pod(path: &Path, mib: u64) -> Result<u64, (u64, String)> {
    let of = format!("of={}", path.display());
    let count = format!("count={mib}");
    let args = ["if=/dev/zero", &of, "bs=1M", &count, "conv=fsync"].map(Path::new);
    match as_pod("dd", &args) {
        Ok(_) => Ok(mib),
        Err(why) => {
            let whole = why
                .lines()
                .find_map(|l| l.strip_suffix(" records out")?.split('+').next()?.parse().ok())
                .unwrap_or(0);
            Err((whole, why))
        }
    }
}

pub fn listed(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|e| e.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Unmounts what a failed test left mounted under its root (lazily), before the root goes.
pub struct Unmount(pub PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        if loopback::mounted_at(&self.0).is_some() {
            let _ = run("umount", ["-l".as_ref(), self.0.as_os_str()]);
        }
        // The mount point is sealed while nothing is mounted on it: unsealed, the root can go.
        let _ = loopback::unmount(&self.0);
    }
}

/// Unmounts (lazily) every mount beneath a root when dropped: what a failed test left.
pub struct UnmountBeneath(pub PathBuf);

impl Drop for UnmountBeneath {
    fn drop(&mut self) {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for mount in hostpath_volume_provisioner::capacity::parse_mountinfo(&text) {
            if mount.mount_point.starts_with(&self.0) && mount.mount_point != self.0 {
                let _ = run("umount", ["-l".as_ref(), mount.mount_point.as_os_str()]);
                let _ = loopback::unmount(&mount.mount_point);
            }
        }
    }
}

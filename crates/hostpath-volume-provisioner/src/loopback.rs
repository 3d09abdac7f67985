//! Volumes as filesystem images: a sparse file per volume, `<root>/.provisioner/images/<pv>.img`,
//! formatted ext4 or xfs (Debian's e2fsprogs / xfsprogs) and mounted through a loop device on
//! the volume's directory. The image's size is the capacity: a write past it fails with
//! `ENOSPC`. Growing it grows the file, tells the loop device (`losetup -c`) and resizes the
//! mounted filesystem online (`resize2fs`, `xfs_growfs`).
//!
//! Every step is safe to repeat and named after the PV: an image is formatted under a temporary
//! name and renamed only once whole, a mount is looked up in `/proc/self/mountinfo` before it is
//! made, and `mount -o loop` lets the loop device go with the unmount (autoclear).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::capacity::{Mount, parse_mountinfo};
use crate::tools::{ToolError, crash_point, run};

/// Where the images are, under the root.
pub const IMAGES: &str = ".provisioner/images";

/// The filesystem in an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsType {
    /// ext4 (`mkfs.ext4`, grown with `resize2fs`).
    #[default]
    Ext4,
    /// xfs (`mkfs.xfs`, grown with `xfs_growfs`); at least 300 MiB.
    Xfs,
}

impl FsType {
    /// The StorageClass value (`ext4`, `xfs`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ext4" => Some(Self::Ext4),
            "xfs" => Some(Self::Xfs),
            _ => None,
        }
    }

    /// The name, as `mount` and the StorageClass say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ext4 => "ext4",
            Self::Xfs => "xfs",
        }
    }

    /// The smallest image `mkfs` formats.
    pub fn minimum(self) -> u64 {
        match self {
            Self::Ext4 => 8 << 20,
            Self::Xfs => 300 << 20,
        }
    }
}

/// The image of `volume` under `root`.
pub fn image_path(root: &Path, volume: &str) -> PathBuf {
    root.join(IMAGES).join(format!("{volume}.img"))
}

fn temporary_path(root: &Path, volume: &str) -> PathBuf {
    root.join(IMAGES).join(format!(".{volume}.img.tmp"))
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> ToolError {
    move |e| ToolError { command: what, message: e.to_string(), missing: false }
}

/// Makes the formatted image of `volume` with `bytes` (sparse), unless it exists. Formatted under
/// a temporary name first: an image under its own name is always whole.
pub fn make_image(root: &Path, volume: &str, bytes: u64, fs: FsType) -> Result<PathBuf, ToolError> {
    let image = image_path(root, volume);
    if image.exists() {
        return Ok(image);
    }
    let dir = root.join(IMAGES);
    std::fs::create_dir_all(&dir).map_err(io_error(format!("making {}", dir.display())))?;
    let temporary = temporary_path(root, volume);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temporary)
        .map_err(io_error(format!("making {}", temporary.display())))?;
    file.set_len(bytes).map_err(io_error(format!("sizing {}", temporary.display())))?;
    drop(file);
    match fs {
        // No blocks reserved for root: the claim gets what it asked for.
        Fs::Ext4 => run(
            "mkfs.ext4",
            ["-q", "-F", "-m", "0", "-E", "nodiscard"]
                .iter()
                .map(Path::new)
                .chain([temporary.as_path()]),
        )?,
        Fs::Xfs => {
            run("mkfs.xfs", ["-q", "-f", "-K"].iter().map(Path::new).chain([temporary.as_path()]))?
        }
    };
    crash_point("loop:formatted");
    std::fs::File::open(&temporary)
        .and_then(|f| f.sync_all())
        .map_err(io_error(format!("syncing {}", temporary.display())))?;
    std::fs::rename(&temporary, &image).map_err(io_error(format!("naming {}", image.display())))?;
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(format!("syncing {}", dir.display())))?;
    Ok(image)
}

type Fs = FsType;

/// The mount on exactly `target` (an absolute, link-free path), if any: the last one there.
pub fn mounted_at(target: &Path) -> Option<Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    parse_mountinfo(&text).into_iter().rev().find(|m| m.mount_point == target)
}

/// Mounts `image` (of `fs`) on `target` through a loop device, unless something is mounted there
/// already.
pub fn mount(image: &Path, target: &Path, fs: FsType) -> Result<(), ToolError> {
    if mounted_at(target).is_some() {
        return Ok(());
    }
    seal(target, true)?;
    let args = [
        "-t".as_ref(),
        fs.as_str().as_ref(),
        "-o".as_ref(),
        "loop".as_ref(),
        image.as_os_str(),
        target.as_os_str(),
    ];
    run("mount", args).map(drop)
}

/// Unmounts `target` if it is mounted (the loop device goes with it), and lets its directory
/// be changed and removed again.
pub fn unmount(target: &Path) -> Result<(), ToolError> {
    if mounted_at(target).is_some() {
        run("umount", [target.as_os_str()])?;
    }
    seal(target, false)
}

/// Lets the mount point `target` be changed again (its mode and owner set, say) while no image
/// is mounted on it; a no-op while one is.
pub fn unseal(target: &Path) -> Result<(), ToolError> {
    if mounted_at(target).is_some() {
        return Ok(());
    }
    seal(target, false)
}

/// Makes the directory `target` (a mount point with nothing mounted) immutable, or not. Sealed,
/// nobody can write into it, root included: a pod the kubelet starts before the image is
/// mounted again (after a node restart) is refused (`EPERM`) instead of writing files the image
/// would then hide. A filesystem without the flag (tmpfs) is left as it is.
fn seal(target: &Path, sealed: bool) -> Result<(), ToolError> {
    use rustix::fs::{IFlags, Mode, OFlags};
    use rustix::io::Errno;
    let what = || {
        format!(
            "{} the immutable flag of {}",
            if sealed { "setting" } else { "clearing" },
            target.display()
        )
    };
    let failed = |e: Errno| ToolError { command: what(), message: e.to_string(), missing: false };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = match rustix::fs::open(target, flags, Mode::empty()) {
        Ok(dir) => dir,
        Err(Errno::NOENT) if !sealed => return Ok(()),
        Err(e) => return Err(failed(e)),
    };
    let current = match rustix::fs::ioctl_getflags(&dir) {
        Ok(current) => current,
        Err(Errno::NOTTY | Errno::OPNOTSUPP | Errno::INVAL) => return Ok(()),
        Err(e) => return Err(failed(e)),
    };
    let wanted = if sealed { current | IFlags::IMMUTABLE } else { current - IFlags::IMMUTABLE };
    if wanted == current {
        return Ok(());
    }
    rustix::fs::ioctl_setflags(&dir, wanted).map_err(failed)
}

/// Removes the image of `volume` and any half-made one.
pub fn remove_image(root: &Path, volume: &str) -> Result<(), ToolError> {
    for path in [image_path(root, volume), temporary_path(root, volume)] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(format!("removing {}", path.display()))(e)),
        }
    }
    Ok(())
}

/// Grows the image of `volume` to `bytes` and the filesystem mounted from it on `target` with
/// it. Never shrinks; repeated, it finishes a growth an earlier call began.
pub fn grow(
    root: &Path,
    volume: &str,
    target: &Path,
    bytes: u64,
    fs: FsType,
) -> Result<(), ToolError> {
    let image = image_path(root, volume);
    mount(&image, target, fs)?;
    let file = OpenOptions::new()
        .write(true)
        .open(&image)
        .map_err(io_error(format!("opening {}", image.display())))?;
    let size = file.metadata().map_err(io_error(format!("looking at {}", image.display())))?.len();
    if size < bytes {
        file.set_len(bytes).map_err(io_error(format!("growing {}", image.display())))?;
        file.sync_all().map_err(io_error(format!("syncing {}", image.display())))?;
    }
    drop(file);
    crash_point("expand:grown");
    let mount = mounted_at(target).ok_or_else(|| ToolError {
        command: "growing".into(),
        message: format!("{} is not mounted", target.display()),
        missing: false,
    })?;
    run("losetup", ["-c", mount.source.as_str()])?;
    match fs {
        Fs::Ext4 => run("resize2fs", [mount.source.as_str()])?,
        Fs::Xfs => run("xfs_growfs", [target.as_os_str()])?,
    };
    Ok(())
}

/// Bytes used and the size of the filesystem mounted on `target`.
pub fn usage(target: &Path) -> Option<(u64, u64)> {
    mounted_at(target)?;
    let stat = rustix::fs::statvfs(target).ok()?;
    let used = stat.f_blocks.saturating_sub(stat.f_bfree) * stat.f_frsize;
    Some((used, stat.f_blocks * stat.f_frsize))
}

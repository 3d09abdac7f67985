//! The programs the btrfs and loop modes run (`btrfs`, `mkfs.ext4`, `mkfs.xfs`, `mount`,
//! `umount`, `losetup`, `resize2fs`, `xfs_growfs`), and the crash points of the tests.
//!
//! # Crash points (tests only)
//! With `HOSTPATH_VOLUME_CRASH_AT=<step>` in its environment the process aborts (no unwinding,
//! no clean-up: as a SIGKILL would stop it) the first time it reaches `<step>`, right after that
//! step's effect is on disk. `tests/capacity.rs` uses it to stop the provisioner after every
//! step and check that a restart heals it. Nothing else sets it. The steps:
//!
//! | step | after |
//! |---|---|
//! | `provision:recorded` | the volume's record is written (nothing else made yet) |
//! | `btrfs:created` | the subvolume exists (its id not yet recorded, no limit) |
//! | `btrfs:grouped` | the volume group exists and holds the subvolume's group (no limit yet) |
//! | `btrfs:limited` | the volume group's limit is set |
//! | `loop:formatted` | the image is formatted under its temporary name |
//! | `loop:mounted` | the image is mounted on the volume's directory |
//! | `expand:grown` | the image file is grown (loop device and filesystem not yet) |
//! | `expand:limited` | the backing holds the new size (the record not yet updated) |
//! | `delete:subvolume` | the subvolume and those inside it are deleted (their quota groups not yet) |
//! | `delete:unmounted` | the image is unmounted (not yet removed) |
//! | `delete:image` | the image is removed (the directory and record not yet) |
//! | `delete:unrecorded` | the record is removed (last step) |

use std::ffi::OsStr;
use std::process::Command;
use std::sync::LazyLock;

/// The environment variable naming the step to abort at.
pub const CRASH_AT: &str = "HOSTPATH_VOLUME_CRASH_AT";

static CRASH_STEP: LazyLock<Option<String>> =
    LazyLock::new(|| std::env::var(CRASH_AT).ok().filter(|s| !s.is_empty()));

/// Aborts the process if [`CRASH_AT`] names `step`. A no-op otherwise.
pub fn crash_point(step: &str) {
    if CRASH_STEP.as_deref() == Some(step) {
        eprintln!("{CRASH_AT}={step}: aborting here, as a test asked");
        std::process::abort();
    }
}

/// A program that failed or could not be started.
#[derive(Debug, thiserror::Error)]
#[error("{command}: {message}")]
pub struct ToolError {
    /// The command line.
    pub command: String,
    /// What it said on stderr (or why it did not run).
    pub message: String,
    /// Whether the program could not be found at all.
    pub missing: bool,
}

/// Runs `program` with `args` and answers its standard output; fails with its standard error.
pub fn run<I, S>(program: &str, args: I) -> Result<String, ToolError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let command = std::iter::once(program.to_owned())
        .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    let output = Command::new(program).args(&args).env("LC_ALL", "C").output().map_err(|e| {
        let missing = e.kind() == std::io::ErrorKind::NotFound;
        let message = if missing {
            format!("{program} is not installed (it comes with Debian's btrfs-progs, e2fsprogs, xfsprogs or util-linux)")
        } else {
            e.to_string()
        };
        ToolError { command: command.clone(), message, missing }
    })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        let message = if stderr.is_empty() { output.status.to_string() } else { stderr };
        Err(ToolError { command, message, missing: false })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_errors_and_missing_programs_are_told_apart() {
        assert_eq!(run("echo", ["a", "b"]).unwrap(), "a b\n");
        let failed = run("sh", ["-c", "echo oops >&2; exit 3"]).unwrap_err();
        assert_eq!(failed.message, "oops");
        assert!(!failed.missing);
        let missing = run("no-such-program-here", ["x"]).unwrap_err();
        assert!(missing.missing && missing.message.contains("not installed"), "{missing}");
    }
}

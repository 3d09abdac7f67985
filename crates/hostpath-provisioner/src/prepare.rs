//! Handing the bucket root to the provisioner's user before it starts.
//!
//! A hostPath directory that the kubelet creates belongs to root, and `fsGroup` is not applied to
//! hostPath volumes, so a non-root provisioner could not write there. The binary itself does the
//! hand-over (`--prepare-root-for UID:GID`), run as an init container from the same image with
//! only the CHOWN and FOWNER capabilities: no second image is needed.

use std::fmt;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::Path;
use std::str::FromStr;

/// The mode the root gets: the buckets and keys in it are the provisioner's alone.
pub const ROOT_MODE: u32 = 0o700;

/// A numeric user and group, written `UID:GID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl FromStr for Owner {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (uid, gid) = text
            .split_once(':')
            .ok_or_else(|| format!("{text:?} is not UID:GID (numbers, e.g. 65532:65532)"))?;
        let number = |part: &str, what: &str| match part.parse::<u32>() {
            // chown(2) reads this id as "leave it unchanged": the root would stay root's.
            Ok(u32::MAX) => Err(format!(
                "{what} {part:?} in {text:?} is the id chown reads as \"unchanged\"; use another"
            )),
            Ok(id) => Ok(id),
            Err(_) => Err(format!("{what} {part:?} in {text:?} is not a number")),
        };
        Ok(Owner { uid: number(uid, "user id")?, gid: number(gid, "group id")? })
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uid, self.gid)
    }
}

/// Creates `root` if it is missing, then gives it to `owner` with mode 0700. Only the root
/// directory itself changes: what is inside already belongs to the provisioner. Running it again
/// changes nothing.
pub fn prepare_root(root: &Path, owner: Owner) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    // The mode first: once the directory is the owner's, changing it would need FOWNER as well.
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(ROOT_MODE))?;
    chown(root, Some(owner.uid), Some(owner.gid))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn owner_parses_uid_and_gid_and_names_what_is_wrong() {
        assert_eq!("65532:65533".parse(), Ok(Owner { uid: 65532, gid: 65533 }));
        assert_eq!(Owner { uid: 1, gid: 2 }.to_string(), "1:2");
        let missing = "65532".parse::<Owner>().unwrap_err();
        assert!(missing.contains("not UID:GID"), "{missing}");
        let bad_group = "65532:staff".parse::<Owner>().unwrap_err();
        assert!(bad_group.contains("group id \"staff\""), "{bad_group}");
    }

    #[test]
    fn the_id_chown_reads_as_unchanged_is_refused() {
        for text in ["4294967295:0", "0:4294967295"] {
            let refused = text.parse::<Owner>().unwrap_err();
            assert!(refused.contains("unchanged"), "{text}: {refused}");
        }
        assert_eq!("4294967294:0".parse(), Ok(Owner { uid: u32::MAX - 1, gid: 0 }));
    }

    #[test]
    fn the_root_is_created_with_mode_0700_and_the_owner_given() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("buckets/root");
        // Our own ids: chown to them needs no privilege, so this runs as any user.
        let me = std::fs::metadata(dir.path()).unwrap();
        let owner = Owner { uid: me.uid(), gid: me.gid() };
        prepare_root(&root, owner).unwrap();
        let made = std::fs::metadata(&root).unwrap();
        assert!(made.is_dir());
        assert_eq!(made.mode() & 0o7777, ROOT_MODE);
        assert_eq!((made.uid(), made.gid()), (owner.uid, owner.gid));

        // An existing root with other bits is set right, and its contents are left alone.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(root.join("kept"), b"data").unwrap();
        prepare_root(&root, owner).unwrap();
        assert_eq!(std::fs::metadata(&root).unwrap().mode() & 0o7777, ROOT_MODE);
        assert_eq!(std::fs::read(root.join("kept")).unwrap(), b"data");
    }

    #[test]
    fn a_root_that_cannot_be_made_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"").unwrap();
        let owner = Owner { uid: 0, gid: 0 };
        assert!(prepare_root(&file.join("root"), owner).is_err());
    }

    proptest::proptest! {
        /// `--prepare-root-for` takes any text without a panic, and what it accepts prints back
        /// as the same owner.
        #[test]
        fn any_owner_text_is_judged_and_reads_back(
            text in proptest::prop_oneof![
                proptest::prelude::any::<String>(),
                "[+-]?(429496729[0-9]|[0-9]{0,11}):?[+-]?(429496729[0-9]|[0-9]{0,11}):?",
            ],
        ) {
            if let Ok(owner) = text.parse::<Owner>() {
                proptest::prop_assert!(owner.uid != u32::MAX && owner.gid != u32::MAX);
                proptest::prop_assert_eq!(owner.to_string().parse::<Owner>(), Ok(owner));
            }
        }
    }
}

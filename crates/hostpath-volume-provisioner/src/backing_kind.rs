//! What a volume is made of: the kind the store records, and what enforces its capacity.

use serde::{Deserialize, Serialize};

use crate::loopback::FsType;

/// What a volume is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Backing {
    /// A plain directory: nothing holds it to a capacity.
    #[default]
    Directory,
    /// A btrfs subvolume with a quota group limit (when quotas are on), on a group that also
    /// holds the subvolumes made inside it.
    Subvolume {
        /// Its subvolume id, recorded once it exists, so that its quota group can be found after
        /// the subvolume is gone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
        /// Whether quotas were on to limit it.
        limited: bool,
    },
    /// A loop-mounted image file.
    Loop {
        /// The filesystem in the image.
        fs: FsType,
    },
}

impl Backing {
    /// What enforces the capacity of a volume of this backing, for the capacity annotation.
    pub fn enforcement(&self) -> Option<String> {
        match self {
            Self::Directory | Self::Subvolume { limited: false, .. } => None,
            Self::Subvolume { limited: true, .. } => Some(
                "enforced by a btrfs quota group limit on the volume's subvolume and the \
                 subvolumes made inside it"
                    .into(),
            ),
            Self::Loop { fs } => Some(format!(
                "enforced by the size of the volume's {} image, loop-mounted",
                fs.as_str()
            )),
        }
    }
}

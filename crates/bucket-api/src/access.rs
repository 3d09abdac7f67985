//! Access modes: what a claim's credentials may do with its bucket.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a claim's credentials may do with its bucket.
///
/// `ReadWrite` is the widest; `ReadOnly` and `WriteOnly` are both narrower than it and neither
/// is narrower than the other.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum AccessMode {
    /// Read, list, write and delete objects.
    #[default]
    ReadWrite,
    /// Read and list objects; nothing that writes or deletes.
    ReadOnly,
    /// Write objects (multipart uploads included); no reads, no listings.
    WriteOnly,
}

impl AccessMode {
    /// Every mode, widest first.
    pub const ALL: [AccessMode; 3] = [Self::ReadWrite, Self::ReadOnly, Self::WriteOnly];

    /// The mode as claims and StorageClasses write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadWrite => "ReadWrite",
            Self::ReadOnly => "ReadOnly",
            Self::WriteOnly => "WriteOnly",
        }
    }

    /// Reads a mode written exactly as [`AccessMode::as_str`] writes it.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == value)
    }

    /// Whether everything `other` allows is allowed by `self`.
    pub fn covers(self, other: AccessMode) -> bool {
        self == Self::ReadWrite || self == other
    }

    /// Whether objects may be read and listed.
    pub fn reads(self) -> bool {
        self != Self::WriteOnly
    }

    /// Whether objects may be written.
    pub fn writes(self) -> bool {
        self != Self::ReadOnly
    }
}

impl std::fmt::Display for AccessMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_covers_both_narrow_modes_and_they_do_not_cover_each_other() {
        use AccessMode::*;
        assert!(ReadWrite.covers(ReadOnly) && ReadWrite.covers(WriteOnly));
        assert!(!ReadOnly.covers(WriteOnly) && !WriteOnly.covers(ReadOnly));
        assert!(!ReadOnly.covers(ReadWrite) && ReadOnly.covers(ReadOnly));
        for mode in AccessMode::ALL {
            assert_eq!(AccessMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(AccessMode::parse("readonly"), None);
    }
}

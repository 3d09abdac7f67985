//! What an access key may do in the buckets it reaches.

use serde::{Deserialize, Serialize};

/// What an access key may do in its buckets. Key records hold it by these names.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KeyMode {
    /// Read, list, write and delete objects.
    #[default]
    ReadWrite,
    /// Read and list objects; nothing that writes or deletes.
    ReadOnly,
    /// Write objects (multipart uploads included); no reads, no listings.
    WriteOnly,
}

impl KeyMode {
    /// The mode's name, as key records and error messages write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadWrite => "ReadWrite",
            Self::ReadOnly => "ReadOnly",
            Self::WriteOnly => "WriteOnly",
        }
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

impl std::fmt::Display for KeyMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_name_each_mode_as_it_is_displayed() {
        for mode in [KeyMode::ReadWrite, KeyMode::ReadOnly, KeyMode::WriteOnly] {
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{mode}\""));
            assert_eq!(serde_json::from_str::<KeyMode>(&json).unwrap(), mode);
        }
    }
}

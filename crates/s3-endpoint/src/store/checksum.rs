//! The additional checksums of S3 (CRC32, CRC32C, CRC64NVME, SHA-1, SHA-256): computed while
//! a body streams to disk, compared with what the client sent, and kept with the object.

use std::fmt;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha1::Digest as _;

/// One of the checksum algorithms S3 defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChecksumAlgorithm {
    /// CRC-32 (ISO-HDLC), as zlib computes it.
    Crc32,
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// CRC-64/NVME.
    Crc64Nvme,
    /// SHA-1.
    Sha1,
    /// SHA-256.
    Sha256,
}

impl ChecksumAlgorithm {
    /// Every algorithm, in the order S3 documents them.
    pub const ALL: [Self; 5] =
        [Self::Crc32, Self::Crc32c, Self::Crc64Nvme, Self::Sha1, Self::Sha256];

    /// The name S3 uses (`CRC32`, `SHA256`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Crc32 => "CRC32",
            Self::Crc32c => "CRC32C",
            Self::Crc64Nvme => "CRC64NVME",
            Self::Sha1 => "SHA1",
            Self::Sha256 => "SHA256",
        }
    }

    /// The algorithm named `name`, in any letter case.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(name))
    }

    /// The header (or trailer) carrying a value of this algorithm.
    pub fn header(self) -> &'static str {
        match self {
            Self::Crc32 => "x-amz-checksum-crc32",
            Self::Crc32c => "x-amz-checksum-crc32c",
            Self::Crc64Nvme => "x-amz-checksum-crc64nvme",
            Self::Sha1 => "x-amz-checksum-sha1",
            Self::Sha256 => "x-amz-checksum-sha256",
        }
    }

    /// Length in bytes of a raw checksum.
    pub fn raw_len(self) -> usize {
        match self {
            Self::Crc32 | Self::Crc32c => 4,
            Self::Crc64Nvme => 8,
            Self::Sha1 => 20,
            Self::Sha256 => 32,
        }
    }

    /// Whether a multipart object can carry a whole-object checksum of this algorithm (the
    /// CRCs can be combined from the parts' values, hashes cannot).
    pub fn is_crc(self) -> bool {
        matches!(self, Self::Crc32 | Self::Crc32c | Self::Crc64Nvme)
    }

    /// Decodes a base64 value, checking that it has this algorithm's length.
    pub fn decode(self, value: &str) -> Option<Vec<u8>> {
        let raw = base64::engine::general_purpose::STANDARD.decode(value.trim()).ok()?;
        (raw.len() == self.raw_len()).then_some(raw)
    }

    fn crc(self) -> Option<crc_fast::CrcAlgorithm> {
        match self {
            Self::Crc32 => Some(crc_fast::CrcAlgorithm::Crc32IsoHdlc),
            Self::Crc32c => Some(crc_fast::CrcAlgorithm::Crc32Iscsi),
            Self::Crc64Nvme => Some(crc_fast::CrcAlgorithm::Crc64Nvme),
            Self::Sha1 | Self::Sha256 => None,
        }
    }
}

impl fmt::Display for ChecksumAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a checksum covers the object's bytes or, for multipart objects, the parts'
/// checksums (S3's `ChecksumType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChecksumType {
    /// The checksum of the whole object's bytes.
    #[default]
    FullObject,
    /// The checksum of the parts' raw checksums, suffixed `-<parts>`.
    Composite,
}

impl ChecksumType {
    /// The name S3 uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::FullObject => "FULL_OBJECT",
            Self::Composite => "COMPOSITE",
        }
    }

    /// The type named `name`, in any letter case.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::FullObject, Self::Composite]
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }
}

/// A checksum kept with an object or part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksum {
    /// Its algorithm.
    pub algorithm: ChecksumAlgorithm,
    /// The base64 value as S3 shows it (with `-<parts>` for composite ones).
    pub value: String,
    /// What it covers.
    #[serde(default)]
    pub kind: ChecksumType,
}

/// What the client said the body's checksum is.
pub enum ExpectedChecksum {
    /// Nothing to compare with: the checksum is computed and kept.
    Compute,
    /// Sent up front, in a header (base64).
    Value(String),
    /// Sent after the body, in an aws-chunked trailer: read once the body has ended.
    Trailer(Box<dyn FnOnce() -> Option<String> + Send>),
}

impl fmt::Debug for ExpectedChecksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Compute => f.write_str("Compute"),
            Self::Value(v) => f.debug_tuple("Value").field(v).finish(),
            Self::Trailer(_) => f.write_str("Trailer"),
        }
    }
}

/// A checksum to compute over a body and, when the client sent one, verify.
#[derive(Debug)]
pub struct ChecksumCheck {
    /// The algorithm.
    pub algorithm: ChecksumAlgorithm,
    /// The client's value, if any.
    pub expected: ExpectedChecksum,
}

/// A running checksum of one algorithm.
pub(crate) enum Hasher {
    Crc(ChecksumAlgorithm, crc_fast::Digest),
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Hasher {
    pub fn new(algorithm: ChecksumAlgorithm) -> Self {
        match algorithm.crc() {
            Some(crc) => Self::Crc(algorithm, crc_fast::Digest::new(crc)),
            None if algorithm == ChecksumAlgorithm::Sha1 => Self::Sha1(sha1::Sha1::new()),
            None => Self::Sha256(sha2::Sha256::new()),
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        match self {
            Self::Crc(_, digest) => digest.update(data),
            Self::Sha1(hash) => hash.update(data),
            Self::Sha256(hash) => hash.update(data),
        }
    }

    /// The raw checksum, big-endian for CRCs as S3 encodes them.
    pub fn finalize(self) -> Vec<u8> {
        match self {
            Self::Crc(algorithm, digest) => crc_bytes(algorithm, digest.finalize()),
            Self::Sha1(hash) => hash.finalize().to_vec(),
            Self::Sha256(hash) => hash.finalize().to_vec(),
        }
    }
}

fn crc_bytes(algorithm: ChecksumAlgorithm, crc: u64) -> Vec<u8> {
    let bytes = crc.to_be_bytes();
    bytes[bytes.len() - algorithm.raw_len()..].to_vec()
}

/// Base64 as S3 shows checksums.
pub(crate) fn encode(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// The checksum of `algorithm` over `data`.
#[cfg(test)]
pub(crate) fn checksum_of(algorithm: ChecksumAlgorithm, data: &[u8]) -> Vec<u8> {
    let mut hasher = Hasher::new(algorithm);
    hasher.update(data);
    hasher.finalize()
}

/// The whole-object CRC of parts given as (raw CRC, length), without reading their bytes.
pub(crate) fn combine_crcs(
    algorithm: ChecksumAlgorithm,
    parts: &[(Vec<u8>, u64)],
) -> Option<Vec<u8>> {
    let crc = algorithm.crc()?;
    let mut combined: Option<u64> = None;
    for (raw, len) in parts {
        let mut word = [0u8; 8];
        word[8 - raw.len()..].copy_from_slice(raw);
        let value = u64::from_be_bytes(word);
        combined = Some(match combined {
            None => value,
            Some(so_far) => crc_fast::checksum_combine(crc, so_far, value, *len),
        });
    }
    Some(crc_bytes(algorithm, combined.unwrap_or(0)))
}

/// The composite checksum of parts' raw checksums: the checksum of their concatenation.
pub(crate) fn composite(algorithm: ChecksumAlgorithm, parts: &[Vec<u8>]) -> String {
    let mut hasher = Hasher::new(algorithm);
    for raw in parts {
        hasher.update(raw);
    }
    format!("{}-{}", encode(&hasher.finalize()), parts.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The check values of each CRC over "123456789".
        let data = b"123456789";
        assert_eq!(checksum_of(ChecksumAlgorithm::Crc32, data), 0xCBF4_3926u32.to_be_bytes());
        assert_eq!(checksum_of(ChecksumAlgorithm::Crc32c, data), 0xE306_9283u32.to_be_bytes());
        assert_eq!(
            checksum_of(ChecksumAlgorithm::Crc64Nvme, data),
            0xAE8B_1486_0A79_9888u64.to_be_bytes()
        );
        assert_eq!(
            encode(&checksum_of(ChecksumAlgorithm::Sha256, b"")),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        assert_eq!(
            encode(&checksum_of(ChecksumAlgorithm::Sha1, b"")),
            "2jmj7l5rSw0yVb/vlWAYkK/YBwk="
        );
    }

    #[test]
    fn crcs_combine_like_the_whole() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for algorithm in
            [ChecksumAlgorithm::Crc32, ChecksumAlgorithm::Crc32c, ChecksumAlgorithm::Crc64Nvme]
        {
            let parts: Vec<_> =
                data.chunks(3000).map(|c| (checksum_of(algorithm, c), c.len() as u64)).collect();
            assert_eq!(combine_crcs(algorithm, &parts).unwrap(), checksum_of(algorithm, &data));
        }
        assert!(combine_crcs(ChecksumAlgorithm::Sha256, &[]).is_none());
    }

    #[test]
    fn names_and_decoding() {
        assert_eq!(ChecksumAlgorithm::from_name("crc64nvme"), Some(ChecksumAlgorithm::Crc64Nvme));
        assert_eq!(ChecksumAlgorithm::from_name("md5"), None);
        assert!(ChecksumAlgorithm::Crc32.decode("AAAAAA==").is_some());
        assert!(ChecksumAlgorithm::Crc32.decode("AAAAAAAA").is_none(), "6 bytes is not a CRC32");
        assert!(ChecksumAlgorithm::Crc32.decode("not base64!").is_none());
    }
}

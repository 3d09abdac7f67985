//! S3 protocol rules as clients rely on them, checked with the AWS SDK (or, where the SDK
//! cannot send the request, a hand-signed one) over loopback: a module per family of rules, in
//! one test binary.

#[path = "../common/mod.rs"]
mod common;

mod bucket_tagging;
mod checksums;
mod conditions;
mod lifecycle;
mod object_lock_answers;
mod operations;
mod part_copy_versions;
mod public_access_block;
mod signing;
mod tag_order;
mod version_ids;

use base64::Engine as _;

/// S3's smallest part size, for every part but the last.
const PART: usize = 5 * 1024 * 1024;

fn b64(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

//! The stamp that says which version of its key an object is: its id as clients name it, and
//! the order that sorts the versions of a key by creation from the disk alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The id of the version written while versioning is suspended, or before it was ever set.
pub const NULL_VERSION: &str = "null";

/// The order of objects written before versioning was set: older than any other.
const LEGACY_ORDER: &str = "000000000000000000000000";

/// Which version of its key an object is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct VersionStamp {
    /// The id clients name it by: its order, or `null`.
    pub id: String,
    /// Sorts versions of one key by creation, newest last (24 hex digits: nanoseconds, then
    /// random).
    pub order: String,
    /// A delete marker: no bytes, the key reads as deleted while it is the newest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
}

/// The last time part handed out, so that orders only grow within a process.
static LAST_ORDER: AtomicU64 = AtomicU64::new(0);

impl VersionStamp {
    /// A stamp newer than `newest_order` (and than every stamp made before in this process);
    /// `null` for the null version.
    pub(super) fn fresh(null: bool, newest_order: Option<&str>) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let floor = newest_order
            .and_then(|o| o.get(..16))
            .and_then(|o| u64::from_str_radix(o, 16).ok())
            .map_or(0, |t| t + 1);
        let wanted = u64::try_from(now).unwrap_or(u64::MAX).max(floor);
        let previous = LAST_ORDER.fetch_max(wanted, Ordering::SeqCst);
        let time =
            if previous >= wanted { LAST_ORDER.fetch_add(1, Ordering::SeqCst) + 1 } else { wanted };
        let order = format!("{time:016x}{:08x}", rand::random::<u32>());
        let id = if null { NULL_VERSION.to_owned() } else { order.clone() };
        Self { id, order, delete_marker: false }
    }

    /// The stamp of an object written before versioning was set.
    pub(super) fn legacy() -> Self {
        Self { id: NULL_VERSION.to_owned(), order: LEGACY_ORDER.to_owned(), delete_marker: false }
    }

    /// When it was made, from its order (markers have no data file to tell).
    pub(super) fn made(&self) -> SystemTime {
        let nanos = self.order.get(..16).and_then(|o| u64::from_str_radix(o, 16).ok());
        UNIX_EPOCH + Duration::from_nanos(nanos.unwrap_or(0))
    }
}

/// Whether `id` could name a version: `null` or an id this store makes. Anything else is
/// refused as S3 does ("Invalid version id specified").
pub fn valid_version_id(id: &str) -> bool {
    id == NULL_VERSION || (id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

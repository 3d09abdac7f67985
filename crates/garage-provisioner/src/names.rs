//! Every name the provisioner gives in Garage, derived from what tenants cannot choose.
//!
//! - A claim's access key has an id derived from the claim's user id (from the claim UID the
//!   apiserver assigns), so a retry finds the key an earlier attempt made instead of making a
//!   second one.
//! - The provisioner's own key has a fixed id. It is never handed out; it holds every permission
//!   on the buckets the provisioner creates, which it uses to empty them before deletion.
//! - The ownership record of a bucket is a *local alias* in that key's namespace,
//!   `<user id>.<delete|retain>`: who created the bucket and under which reclaim policy. Only
//!   the admin API writes local aliases into a key's namespace, and no tenant ever holds the
//!   provisioner's key or the admin token, so no tenant can forge or remove the record. Garage
//!   drops the alias with the bucket.

use bucket_api::ReclaimPolicy;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix of every key id the provisioner makes, as Garage's own ids start with `GK`.
const KEY_ID_PREFIX: &str = "GK";

/// The name of the provisioner's own key.
pub const SERVICE_KEY_NAME: &str = "bucket-provisioner";

fn key_id(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    format!("{KEY_ID_PREFIX}{}", &hex::encode(digest)[..24])
}

/// The access key id of the claim with `user_id`.
pub fn claim_key_id(user_id: &str) -> String {
    key_id(&format!("bucket-provisioner claim key {user_id}"))
}

/// The access key id of the provisioner's own key.
pub fn service_key_id() -> String {
    key_id("bucket-provisioner service key")
}

/// A fresh secret for a key: 32 random bytes as hex, as Garage makes its own.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The ownership record of a bucket created by `user_id` under `policy`.
pub fn ownership_alias(user_id: &str, policy: ReclaimPolicy) -> String {
    let policy = match policy {
        ReclaimPolicy::Delete => "delete",
        ReclaimPolicy::Retain => "retain",
    };
    format!("{user_id}.{policy}")
}

/// What an ownership record says: the creator's user id and its reclaim policy.
pub fn read_ownership_alias(alias: &str) -> Option<(&str, ReclaimPolicy)> {
    let (user_id, policy) = alias.rsplit_once('.')?;
    let policy = match policy {
        "delete" => ReclaimPolicy::Delete,
        "retain" => ReclaimPolicy::Retain,
        _ => return None,
    };
    Some((user_id, policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_and_valid_for_garage() {
        let id = claim_key_id("obc-0a1b");
        assert_eq!(id, claim_key_id("obc-0a1b"), "a retry finds the same key");
        assert_ne!(id, claim_key_id("obc-0a1c"));
        assert_ne!(id, service_key_id());
        assert_eq!(id.len(), 26);
        assert!(id.starts_with("GK") && id[2..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(new_secret(), new_secret());
        assert_eq!(new_secret().len(), 64);
    }

    #[test]
    fn ownership_aliases_round_trip_and_are_valid_bucket_names() {
        let user = "obc-6f1c2f0e-8d1e-4a43-9d55-3c0b8c1f4a2b";
        let alias = ownership_alias(user, ReclaimPolicy::Retain);
        assert!(alias.len() <= 63, "Garage takes aliases of bucket-name length");
        assert_eq!(read_ownership_alias(&alias), Some((user, ReclaimPolicy::Retain)));
        assert_eq!(read_ownership_alias(&format!("{user}.keep")), None);
        assert_eq!(read_ownership_alias("photos"), None);
    }
}

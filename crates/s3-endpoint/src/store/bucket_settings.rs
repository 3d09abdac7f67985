//! Who may change a bucket's bucket-wide settings through S3: lifecycle rules (which delete
//! objects), CORS rules (what every browser page may do), versioning, object lock (a default
//! retention, a legal hold), the bucket's tags and its public access block. They belong to the
//! bucket's creator and the operator, within what the creator's StorageClass allows: a key of a
//! claim sharing the bucket may not change them, so it leaves nothing behind when it goes, and
//! the creator's own key changes only the settings the provisioner recorded as allowed.

use serde::{Deserialize, Serialize};

use super::records::{AccessKey, BucketRecord};
use super::{BucketStore, KeyMode, StoreError};

/// A bucket-wide setting a key may be allowed to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketSetting {
    /// Lifecycle rules.
    Lifecycle,
    /// CORS rules.
    Cors,
    /// Versioning.
    Versioning,
    /// Object lock: the default retention, and legal holds on objects.
    ObjectLock,
    /// Tags, the public access block, policies and anything else that configures the whole
    /// bucket, which no class gates.
    Other,
}

impl BucketSetting {
    /// Its name in refusals.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lifecycle => "lifecycle rules",
            Self::Cors => "CORS rules",
            Self::Versioning => "versioning",
            Self::ObjectLock => "object lock settings",
            Self::Other => "bucket-wide settings",
        }
    }
}

/// Which settings the creator's keys may change, as its StorageClass allows. Records written
/// before this was recorded have none, and let the creator change every setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settable {
    /// Lifecycle rules (`allowLifecycle`).
    pub lifecycle: bool,
    /// CORS rules (`allowCors`).
    pub cors: bool,
    /// Versioning (`allowVersioning`).
    pub versioning: bool,
    /// Object lock settings and legal holds (`allowObjectLock`).
    pub object_lock: bool,
}

impl Settable {
    /// Whether `setting` is among them.
    pub fn allows(self, setting: BucketSetting) -> bool {
        match setting {
            BucketSetting::Lifecycle => self.lifecycle,
            BucketSetting::Cors => self.cors,
            BucketSetting::Versioning => self.versioning,
            BucketSetting::ObjectLock => self.object_lock,
            BucketSetting::Other => true,
        }
    }
}

/// Why `key` may not change `setting` of bucket `record`, or `None` when it may: it must be a
/// full-access key of the claim that created the bucket, and the setting one its class allows.
pub fn refusal(
    record: Option<&BucketRecord>,
    key: &AccessKey,
    setting: BucketSetting,
) -> Option<String> {
    let what = setting.as_str();
    let Some(record) = record.filter(|r| r.creator.as_deref() == Some(key.user_id.as_str())) else {
        return Some(format!(
            "{what} belong to the bucket's creator and the operator; this key shares the bucket"
        ));
    };
    if key.mode != KeyMode::ReadWrite {
        return Some(format!(
            "this key has {} access, which does not allow changing {what}",
            key.mode
        ));
    }
    match record.settable {
        Some(settable) if !settable.allows(setting) => {
            Some(format!("the bucket's StorageClass does not let its claims change {what}"))
        }
        _ => None,
    }
}

impl BucketStore {
    /// Records which settings the keys of `user_id`, which created `bucket`, may change.
    /// Only the creating claim may: anyone else is [`StoreError::NotCreator`]. Writes the record
    /// only when it changes.
    pub async fn set_bucket_settable(
        &self,
        bucket: &str,
        user_id: &str,
        settable: Settable,
    ) -> Result<(), StoreError> {
        let (bucket, user_id) = (bucket.to_owned(), user_id.to_owned());
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                let record = tx.state.created_by(&bucket, &user_id)?;
                if record.settable != Some(settable) {
                    tx.put_bucket(BucketRecord { settable: Some(settable), ..record.clone() });
                }
                Ok(())
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Quota;

    fn record(creator: Option<&str>, settable: Option<Settable>) -> BucketRecord {
        BucketRecord {
            name: "b".into(),
            owner: "node".into(),
            created_by_provisioner: creator.is_some(),
            created_unix: 0,
            creator: creator.map(Into::into),
            delete_with_claim: true,
            quota: Quota::default(),
            location: None,
            settable,
        }
    }

    fn key(user: &str, mode: KeyMode) -> AccessKey {
        AccessKey {
            access_key_id: "id".into(),
            secret_access_key: "secret".into(),
            buckets: vec!["b".into()],
            user_id: user.into(),
            quota: Quota::default(),
            mode,
            generation: 0,
            web_identity: None,
            session_token: None,
        }
    }

    const ALL: [BucketSetting; 5] = [
        BucketSetting::Lifecycle,
        BucketSetting::Cors,
        BucketSetting::Versioning,
        BucketSetting::ObjectLock,
        BucketSetting::Other,
    ];

    #[test]
    fn a_sharer_changes_nothing_and_the_operators_buckets_belong_to_no_key() {
        let owners = record(Some("owner"), None);
        for setting in ALL {
            let sharer = refusal(Some(&owners), &key("sharer", KeyMode::ReadWrite), setting);
            assert!(sharer.unwrap().contains("shares the bucket"));
            let operators = record(None, None);
            assert!(
                refusal(Some(&operators), &key("owner", KeyMode::ReadWrite), setting).is_some()
            );
            assert!(refusal(None, &key("owner", KeyMode::ReadWrite), setting).is_some());
        }
    }

    #[test]
    fn the_creator_needs_full_access_and_its_classs_leave() {
        let gated = record(Some("owner"), Some(Settable { cors: true, ..Settable::default() }));
        let owner = key("owner", KeyMode::ReadWrite);
        assert_eq!(refusal(Some(&gated), &owner, BucketSetting::Cors), None);
        assert_eq!(refusal(Some(&gated), &owner, BucketSetting::Other), None);
        for setting in
            [BucketSetting::Lifecycle, BucketSetting::Versioning, BucketSetting::ObjectLock]
        {
            let refused = refusal(Some(&gated), &owner, setting).unwrap();
            assert!(refused.contains("StorageClass"), "{refused}");
        }
        for mode in [KeyMode::ReadOnly, KeyMode::WriteOnly] {
            assert!(refusal(Some(&gated), &key("owner", mode), BucketSetting::Cors).is_some());
        }
        let before = record(Some("owner"), None);
        for setting in ALL {
            assert_eq!(refusal(Some(&before), &owner, setting), None, "records from before");
        }
    }
}

//! Which web identities may trade their tokens for sessions of a claim's key: recorded on the
//! key by whoever provisions it (from records tenants cannot write), never by the S3 or STS
//! front.

use serde::{Deserialize, Serialize};

use super::records::claim_keys;
use super::{AccessKey, BucketStore, StoreError};

/// The longest session a role grants when its provisioner names none: one hour, as AWS.
pub const DEFAULT_MAX_SESSION_SECS: u32 = 3600;

/// The web identities a claim's key lets assume its role, and for how long.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebIdentityAccess {
    /// Subjects of tokens that may assume the role, e.g.
    /// `system:serviceaccount:<namespace>:<name>`; compared exactly.
    pub subjects: Vec<String>,
    /// The longest session the role grants, in seconds (0: [`DEFAULT_MAX_SESSION_SECS`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_session_secs: u32,
    /// The key's own secret is refused: only sessions reach the bucket.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sessions_only: bool,
}

fn is_zero(secs: &u32) -> bool {
    *secs == 0
}

impl WebIdentityAccess {
    /// Whether a token with this subject may assume the role.
    pub fn admits(&self, subject: &str) -> bool {
        self.subjects.iter().any(|s| s == subject)
    }

    /// The longest session the role grants, in seconds.
    pub fn max_session_secs(&self) -> u32 {
        match self.max_session_secs {
            0 => DEFAULT_MAX_SESSION_SECS,
            secs => secs,
        }
    }
}

impl BucketStore {
    /// Sets (or with `None` removes) the web identities that may assume the role of `user_id`'s
    /// key(s) on `bucket`. Sessions already minted follow at once: a subject dropped here ends
    /// its sessions on their next request.
    pub async fn set_web_identity(
        &self,
        user_id: &str,
        bucket: &str,
        access: Option<WebIdentityAccess>,
    ) -> Result<(), StoreError> {
        let (user_id, bucket) = (user_id.to_owned(), bucket.to_owned());
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                for key in claim_keys(tx, &user_id, &bucket)? {
                    if key.web_identity != access {
                        tx.put_key(AccessKey { web_identity: access.clone(), ..key });
                    }
                }
                Ok(())
            })
        })
        .await
    }

    /// The current key of the role `user_id` (its newest that lets web identities in), with
    /// what it lets assume it; `None` when the user has no such key.
    pub fn role(&self, user_id: &str) -> Option<(AccessKey, WebIdentityAccess)> {
        let state = self.inner.read();
        let ids = state.keys_of_user(user_id);
        let keys = ids.iter().filter_map(|id| state.keys.get(id));
        let key = keys.filter(|k| k.web_identity.is_some()).max_by_key(|k| k.generation)?;
        let access = key.web_identity.clone()?;
        Some((key.clone(), access))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_admits_exactly_the_subjects_it_names() {
        let access = WebIdentityAccess {
            subjects: vec!["system:serviceaccount:a:app".into()],
            ..Default::default()
        };
        assert!(access.admits("system:serviceaccount:a:app"));
        assert!(!access.admits("system:serviceaccount:a:app2"));
        assert!(!access.admits("system:serviceaccount:b:app"));
        assert!(!access.admits(""));
        assert_eq!(access.max_session_secs(), DEFAULT_MAX_SESSION_SECS);
    }
}

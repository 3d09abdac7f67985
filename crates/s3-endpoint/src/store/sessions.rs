//! Short-lived session keys, minted when a web identity assumes a claim's role (see
//! [`crate::sts`]). A session holds no access of its own: it stands for its role's current key
//! and the subject it was minted for, and is worth what that key is worth at each request. So a
//! key revoked or narrowed, or the subject dropped from it, ends or narrows its sessions on their
//! next request, not at their expiry.
//!
//! Sessions are kept in memory and each in a file of its own, so that an endpoint restarted in
//! the middle of a session's life does not cut its pods off until their SDK renews it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use rand::Rng;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::durable::{file_change, persist_all, read_all, unix_now};
use super::records::random_secret;
use super::{AccessKey, BucketStore, StoreError};

/// Most sessions alive at once; past it, expired ones are dropped, then minting is refused.
pub const MAX_SESSIONS: usize = 100_000;

/// One session key, as minted.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// The access key id the client signs with (`ASIA…`, as AWS's temporary keys).
    pub access_key_id: String,
    /// The secret the client signs with.
    pub secret_access_key: String,
    /// What every request signed with this key must carry as `x-amz-security-token`.
    pub session_token: String,
    /// The role: the user id of the claim whose key it stands for.
    pub user_id: String,
    /// The subject of the token it was traded for.
    pub subject: String,
    /// The uid of the identity behind the subject (a ServiceAccount's), as the token's issuer
    /// vouched; an identity deleted, or made again under the same name, ends the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_uid: Option<String>,
    /// When it ends, in seconds since the Unix epoch.
    pub expires_unix: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("access_key_id", &self.access_key_id)
            .field("user_id", &self.user_id)
            .field("subject", &self.subject)
            .field("expires_unix", &self.expires_unix)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Whether `token` is this session's token (compared in constant time).
    pub fn token_matches(&self, token: &str) -> bool {
        self.session_token.as_bytes().ct_eq(token.as_bytes()).into()
    }
}

/// The sessions alive, by access key id, and the directory of their files.
#[derive(Debug)]
pub(super) struct Sessions {
    dir: PathBuf,
    live: RwLock<HashMap<String, Session>>,
    /// What the binary last heard of each identity: its uid while it exists, `None` once it is
    /// gone. A session of an identity gone, or of another uid, is worth nothing, even one
    /// minted after the news (its issuer may vouch for a stale token a moment longer).
    identities: RwLock<HashMap<String, Option<String>>>,
}

impl Sessions {
    /// The sessions under `dir` that have not ended; the files of those that have are removed.
    pub(super) fn load(dir: &Path) -> Result<Self, StoreError> {
        let now = unix_now();
        let mut live = HashMap::new();
        let mut ended = Vec::new();
        for session in read_all::<Session>(dir)? {
            if session.expires_unix <= now {
                ended.push(file_change::<Session>(dir, &session.access_key_id, None)?);
            } else {
                live.insert(session.access_key_id.clone(), session);
            }
        }
        persist_all(&ended)?;
        let identities = RwLock::default();
        Ok(Self { dir: dir.to_owned(), live: RwLock::new(live), identities })
    }

    /// Keeps the sessions `keep` says to, and forgets the others (their files too); answers how
    /// many ended.
    fn retain(&self, keep: impl Fn(&Session) -> bool) -> Result<usize, StoreError> {
        let ended: Vec<String> = {
            let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
            let ended: Vec<String> =
                live.values().filter(|s| !keep(s)).map(|s| s.access_key_id.clone()).collect();
            for id in &ended {
                live.remove(id);
            }
            ended
        };
        // Refused from the moment they left the map; their files go outside the lock every
        // request reads.
        let removals: Result<Vec<_>, _> =
            ended.iter().map(|id| file_change::<Session>(&self.dir, id, None)).collect();
        persist_all(&removals?)?;
        Ok(ended.len())
    }

    fn len(&self) -> usize {
        self.live.read().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn get(&self, access_key_id: &str) -> Option<Session> {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        let session = live.get(access_key_id).filter(|s| s.expires_unix > unix_now())?;
        self.current(session).then(|| session.clone())
    }

    /// Whether the identity `session` was minted for is, as far as the binary heard, still there
    /// under the same uid.
    fn current(&self, session: &Session) -> bool {
        let identities = self.identities.read().unwrap_or_else(PoisonError::into_inner);
        match identities.get(&session.subject) {
            None => true,
            Some(None) => false,
            Some(Some(uid)) => session.subject_uid.as_ref().is_none_or(|minted| minted == uid),
        }
    }

    /// Records `session` durably, making room by dropping ended sessions when (about) full.
    fn insert(&self, session: Session) -> Result<(), StoreError> {
        if self.len() >= MAX_SESSIONS {
            let now = unix_now();
            self.retain(|s| s.expires_unix > now)?;
            if self.len() >= MAX_SESSIONS {
                return Err(StoreError::InvalidArgument(format!(
                    "{MAX_SESSIONS} sessions are alive; try again once some have ended"
                )));
            }
        }
        // Durable before anyone can use it, and written outside the lock every request reads.
        persist_all(&[file_change(&self.dir, &session.access_key_id, Some(&session))?])?;
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        live.insert(session.access_key_id.clone(), session);
        Ok(())
    }
}

/// A new access key id for a session: `ASIA` and 16 upper-case letters and digits.
fn session_key_id() -> String {
    let tail: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .map(|c| char::from(c).to_ascii_uppercase())
        .take(16)
        .collect();
    format!("ASIA{tail}")
}

/// A new session token: 64 random letters and digits.
fn session_token() -> String {
    rand::rng().sample_iter(rand::distr::Alphanumeric).take(64).map(char::from).collect()
}

impl BucketStore {
    /// Mints a session of the role `user_id` for `subject`, ending at `expires_unix`. The caller
    /// has checked that the role admits the subject (see [`BucketStore::role`]).
    pub async fn mint_session(
        &self,
        user_id: &str,
        (subject, subject_uid): (&str, Option<&str>),
        expires_unix: u64,
    ) -> Result<Session, StoreError> {
        let session = Session {
            access_key_id: session_key_id(),
            secret_access_key: random_secret(),
            session_token: session_token(),
            user_id: user_id.to_owned(),
            subject: subject.to_owned(),
            subject_uid: subject_uid.map(str::to_owned),
            expires_unix,
        };
        let minted = session.clone();
        self.blocking(move |store| store.inner.sessions.insert(minted)).await?;
        Ok(session)
    }

    /// Records what the binary heard of identity `subject`: its `uid` while it exists, `None`
    /// once it is gone. Its sessions of another uid, or all once it is gone, are refused from
    /// now on, as are any minted later for them.
    pub fn identity_heard(&self, subject: &str, uid: Option<String>) {
        let mut identities =
            self.inner.sessions.identities.write().unwrap_or_else(PoisonError::into_inner);
        identities.insert(subject.to_owned(), uid);
    }

    /// Ends every session `keep` does not keep (an identity deleted, say), at once; answers how
    /// many ended.
    pub async fn retain_sessions(
        &self,
        keep: impl Fn(&Session) -> bool + Send + 'static,
    ) -> Result<usize, StoreError> {
        self.blocking(move |store| store.inner.sessions.retain(keep)).await
    }

    /// The session with this access key id, while it has not ended.
    pub fn session(&self, access_key_id: &str) -> Option<Session> {
        self.inner.sessions.get(access_key_id)
    }

    /// What the session `access_key_id` may do now: its role's current key, under the session's
    /// id and secret, with its token to check; `None` once it ended, its role is gone, or the role
    /// no longer admits its subject.
    pub(super) fn session_key(&self, access_key_id: &str) -> Option<AccessKey> {
        let session = self.session(access_key_id)?;
        let (key, access) = self.role(&session.user_id)?;
        if !access.admits(&session.subject) {
            return None;
        }
        Some(AccessKey {
            access_key_id: session.access_key_id,
            secret_access_key: session.secret_access_key,
            session_token: Some(session.session_token),
            web_identity: None,
            ..key
        })
    }
}

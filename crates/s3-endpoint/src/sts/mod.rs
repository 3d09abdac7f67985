//! STS `AssumeRoleWithWebIdentity` on the endpoint's own address, as MinIO and Ceph answer it:
//! a pod trades its ServiceAccount token for a short-lived session key of its claim's role.
//!
//! The endpoint knows no Kubernetes: whoever runs it hands it an [`IdentityVerifier`] that says
//! whose a token is (the hostPath provisioner asks the apiserver with a `TokenReview`). The role
//! is a claim's key, named by its user id; the subjects it admits are recorded on the key by the
//! provisioner (see [`crate::store::WebIdentityAccess`]), never taken from the request. The session
//! ends at the earliest of the duration asked for (default one hour), the role's longest session
//! and the token's own expiry; and it is worth what the role's key is worth at each request (see
//! [`crate::store::Session`]).
//!
//! `request` parses what the SDKs send, `answer` writes what they read, and `review_cache`
//! spares the identity provider a burst of requests for one token.

mod answer;
mod request;
mod review_cache;

use std::sync::Arc;

use crate::store::{BucketStore, Session};
pub use answer::{Granted, StsError};
pub use request::{AssumeRoleWithWebIdentity, DURATION_RANGE, MAX_TOKEN_LEN, parse};
pub use review_cache::RememberingVerifier;

/// Longest form body taken: the longest token and room for the other fields.
pub const MAX_BODY_LEN: usize = MAX_TOKEN_LEN + 4096;

/// Whose a token is, as the identity provider vouches.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerifiedIdentity {
    /// The subject, e.g. `system:serviceaccount:<namespace>:<name>`.
    pub subject: String,
    /// The audience the token was checked for.
    pub audience: String,
    /// When the token expires, in seconds since the Unix epoch.
    pub expires_unix: u64,
    /// The uid of the identity behind the subject, if the provider says: sessions end when an
    /// identity of that uid is gone (see [`crate::store::BucketStore::retain_sessions`]).
    pub uid: Option<String>,
}

/// Why a token was not vouched for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Unverified {
    /// Not a token of the provider, for another audience, of a deleted pod, or forged.
    Invalid(String),
    /// Past its expiry.
    Expired,
    /// The provider could not be asked; trying again may help.
    Unreachable(String),
}

/// Checks web identity tokens with their issuer; never by parsing alone.
#[async_trait::async_trait]
pub trait IdentityVerifier: Send + Sync + 'static {
    /// Whose `token` is, or why it is not vouched for.
    async fn verify(&self, token: &str) -> Result<VerifiedIdentity, Unverified>;
}

/// Answers `AssumeRoleWithWebIdentity` for the roles of `store`.
#[derive(Clone)]
pub struct WebIdentitySts {
    store: Arc<BucketStore>,
    verifier: Arc<dyn IdentityVerifier>,
}

impl std::fmt::Debug for WebIdentitySts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebIdentitySts").finish_non_exhaustive()
    }
}

/// A session granted, with what its answer names.
#[derive(Clone, Debug)]
pub struct Assumed {
    /// The session minted.
    pub session: Session,
    /// The request it answers.
    pub request: AssumeRoleWithWebIdentity,
    /// Whose token it was.
    pub identity: VerifiedIdentity,
}

impl Assumed {
    /// The answer document.
    pub fn to_xml(&self, request_id: &str) -> String {
        let granted = Granted {
            role_arn: &self.request.role_arn,
            session_name: &self.request.role_session_name,
            subject: &self.identity.subject,
            audience: &self.identity.audience,
        };
        answer::granted_xml(&self.session, &granted, request_id)
    }
}

impl WebIdentitySts {
    /// Sessions of `store`'s roles for tokens `verifier` vouches for.
    pub fn new(store: Arc<BucketStore>, verifier: Arc<dyn IdentityVerifier>) -> Self {
        Self { store, verifier }
    }

    /// Answers one form-encoded request at `now` (seconds since the Unix epoch).
    pub async fn assume(&self, form: &[u8], now: u64) -> Result<Assumed, StsError> {
        let request = parse(form)?;
        let identity = match self.verifier.verify(&request.web_identity_token).await {
            Ok(identity) => identity,
            Err(Unverified::Invalid(why)) => return Err(StsError::invalid_token(&why)),
            Err(Unverified::Expired) => return Err(StsError::expired_token()),
            Err(Unverified::Unreachable(why)) => {
                tracing::warn!(error = %why, "could not verify a web identity token");
                return Err(StsError::idp_unreachable());
            }
        };
        if identity.expires_unix <= now {
            return Err(StsError::expired_token());
        }
        let Some((_, access)) = self.store.role(&request.role_name) else {
            return Err(StsError::not_authorized());
        };
        if !access.admits(&identity.subject) {
            return Err(StsError::not_authorized());
        }
        let longest = access.max_session_secs();
        let asked = match request.duration_seconds {
            Some(asked) if asked > longest => {
                return Err(StsError::validation(
                    "The requested DurationSeconds exceeds the MaxSessionDuration set for this \
                     role.",
                ));
            }
            Some(asked) => asked,
            None => longest.min(crate::store::DEFAULT_MAX_SESSION_SECS),
        };
        let expires_unix = now.saturating_add(u64::from(asked)).min(identity.expires_unix);
        let session = self
            .store
            .mint_session(
                &request.role_name,
                (&identity.subject, identity.uid.as_deref()),
                expires_unix,
            )
            .await
            .map_err(|e| StsError::unavailable(&e.to_string()))?;
        tracing::info!(role = %request.role_name, subject = %identity.subject, uid = ?identity.uid,
            session = %session.access_key_id, expires_unix, "session granted to a web identity");
        Ok(Assumed { session, request, identity })
    }
}

//! Answers of an [`IdentityVerifier`] remembered for a short while, so that a burst of
//! `AssumeRoleWithWebIdentity` with one token (a pod's workers each starting an SDK client)
//! costs its identity provider one request.
//!
//! Only tokens vouched for are remembered, by their SHA-256 (never the token), until the
//! earliest of the token's expiry and [`REMEMBERED_FOR`]: a token the provider would refuse from
//! now on (its pod deleted) is taken for at most that long. Refusals and unreachable providers
//! are never remembered. At most [`CAPACITY`] answers are held; when full, the ones already
//! past their time go, then the oldest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::{IdentityVerifier, Unverified, VerifiedIdentity};

/// The longest an answer is remembered.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(30);
/// The most answers held at once.
pub const CAPACITY: usize = 10_000;

/// `verifier` with its answers remembered (see the module's documentation).
pub struct RememberingVerifier<V> {
    verifier: V,
    answers: Mutex<HashMap<[u8; 32], (VerifiedIdentity, u64)>>,
    clock: fn() -> u64,
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl<V: IdentityVerifier> RememberingVerifier<V> {
    /// Remembers what `verifier` vouches for.
    pub fn new(verifier: V) -> Self {
        Self::with_clock(verifier, unix_now)
    }

    fn with_clock(verifier: V, clock: fn() -> u64) -> Self {
        Self { verifier, answers: Mutex::default(), clock }
    }

    fn remembered(&self, key: &[u8; 32], now: u64) -> Option<VerifiedIdentity> {
        let answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let (identity, until) = answers.get(key)?;
        (now < *until).then(|| identity.clone())
    }

    fn remember(&self, key: [u8; 32], identity: &VerifiedIdentity, now: u64) {
        let until = identity.expires_unix.min(now.saturating_add(REMEMBERED_FOR.as_secs()));
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        if answers.len() >= CAPACITY {
            answers.retain(|_, (_, kept_until)| now < *kept_until);
        }
        if answers.len() >= CAPACITY {
            let oldest = answers.iter().min_by_key(|(_, (_, until))| *until).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                answers.remove(&oldest);
            }
        }
        answers.insert(key, (identity.clone(), until));
    }
}

#[async_trait::async_trait]
impl<V: IdentityVerifier> IdentityVerifier for RememberingVerifier<V> {
    async fn verify(&self, token: &str) -> Result<VerifiedIdentity, Unverified> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(identity) = self.remembered(&key, (self.clock)()) {
            return Ok(identity);
        }
        let identity = self.verifier.verify(token).await?;
        self.remember(key, &identity, (self.clock)());
        Ok(identity)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    static NOW: AtomicU64 = AtomicU64::new(1_000);
    fn test_clock() -> u64 {
        NOW.load(Ordering::SeqCst)
    }

    /// Vouches for tokens starting with `ok` (expiring at 1,100) and counts its requests.
    #[derive(Default)]
    struct Counting(AtomicU64);

    #[async_trait::async_trait]
    impl IdentityVerifier for Counting {
        async fn verify(&self, token: &str) -> Result<VerifiedIdentity, Unverified> {
            self.0.fetch_add(1, Ordering::SeqCst);
            match token.starts_with("ok") {
                true => Ok(VerifiedIdentity {
                    subject: format!("system:serviceaccount:ns:{token}"),
                    audience: "a".into(),
                    expires_unix: 1_100,
                    uid: None,
                }),
                false => Err(Unverified::Invalid("no".into())),
            }
        }
    }

    /// One test, as the clock is shared: a burst costs one request; refusals are asked each
    /// time; an answer goes after 30 s or at the token's expiry, whichever comes first; and the
    /// memory holds at most its capacity.
    #[tokio::test]
    async fn answers_are_remembered_briefly_and_refusals_never() {
        let verifier = RememberingVerifier::with_clock(Counting::default(), test_clock);
        for _ in 0..50 {
            assert_eq!(
                verifier.verify("ok-a").await.unwrap().subject,
                "system:serviceaccount:ns:ok-a"
            );
        }
        assert_eq!(verifier.verifier.0.load(Ordering::SeqCst), 1, "a burst costs one request");
        for _ in 0..3 {
            assert!(verifier.verify("bad").await.is_err());
        }
        assert_eq!(verifier.verifier.0.load(Ordering::SeqCst), 4, "refusals are asked each time");

        NOW.store(1_029, Ordering::SeqCst);
        verifier.verify("ok-a").await.unwrap();
        assert_eq!(verifier.verifier.0.load(Ordering::SeqCst), 4);
        NOW.store(1_030, Ordering::SeqCst);
        verifier.verify("ok-a").await.unwrap();
        assert_eq!(verifier.verifier.0.load(Ordering::SeqCst), 5, "asked again after 30 s");
        // Remembered at 1,090 for at most the token's life: until 1,100, not 1,120.
        NOW.store(1_090, Ordering::SeqCst);
        verifier.verify("ok-b").await.unwrap();
        NOW.store(1_100, Ordering::SeqCst);
        verifier.verify("ok-b").await.unwrap();
        assert_eq!(verifier.verifier.0.load(Ordering::SeqCst), 7, "never past the token's expiry");

        NOW.store(1_000, Ordering::SeqCst);
        for i in 0..CAPACITY + 10 {
            verifier.verify(&format!("ok-{i}")).await.unwrap();
        }
        assert!(verifier.answers.lock().unwrap().len() <= CAPACITY);
    }
}

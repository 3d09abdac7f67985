//! Web identity tokens checked by the apiserver itself: a `TokenReview` for the audience the
//! provisioner names, which refuses forged and re-signed tokens, tokens for other audiences,
//! expired ones and those bound to a pod that is gone. The token's expiry is read from its
//! payload to bound a session once the apiserver has vouched for it, and to name the reason
//! (expired) once it has refused it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use s3_endpoint::sts::{IdentityVerifier, MAX_TOKEN_LEN, Unverified, VerifiedIdentity};

/// The audience pods' projected tokens carry unless `--web-identity-audience` says otherwise.
pub const DEFAULT_AUDIENCE: &str = "objectbucket.io";

/// Asks the apiserver whose a token is.
#[derive(Clone)]
pub struct TokenReviewer {
    client: Client,
    audience: String,
}

impl std::fmt::Debug for TokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewer").field("audience", &self.audience).finish_non_exhaustive()
    }
}

impl TokenReviewer {
    /// Reviews tokens through `client` for `audience`.
    pub fn new(client: Client, audience: impl Into<String>) -> Self {
        Self { client, audience: audience.into() }
    }
}

#[async_trait::async_trait]
impl IdentityVerifier for TokenReviewer {
    async fn verify(&self, token: &str) -> Result<VerifiedIdentity, Unverified> {
        // Only something shaped like a JWT is worth a request to the apiserver.
        let claims = claims_of(token)
            .ok_or_else(|| Unverified::Invalid("the token is not a JSON web token".into()))?;
        let expires_unix = claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| Unverified::Invalid("the token has no expiry".into()))?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answered = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Unverified::Unreachable(format!("TokenReview: {e}")))?;
        let status = answered.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            // A refused token past its own expiry is answered as expired, as AWS answers it;
            // either way nothing is granted.
            if expires_unix <= unix_now() {
                return Err(Unverified::Expired);
            }
            let why = status.error.unwrap_or_else(|| "the token was not authenticated".into());
            return Err(Unverified::Invalid(why));
        }
        if !status.audiences.unwrap_or_default().contains(&self.audience) {
            return Err(Unverified::Invalid(format!("the token is not for {}", self.audience)));
        }
        let user = status.user.unwrap_or_default();
        // The apiserver may leave the uid out of its answer; the vouched-for token carries it.
        let from_token =
            claims.pointer("/kubernetes.io/serviceaccount/uid").and_then(|v| v.as_str());
        let uid = user.uid.filter(|u| !u.is_empty()).or(from_token.map(str::to_owned));
        let subject = user.username.unwrap_or_default();
        if !subject.starts_with("system:serviceaccount:") {
            return Err(Unverified::Invalid("the token is not a ServiceAccount's".into()));
        }
        let audience = self.audience.clone();
        Ok(VerifiedIdentity { subject, audience, expires_unix, uid })
    }
}

fn unix_now() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since_epoch.map_or(0, |d| d.as_secs())
}

/// The `exp` claim of a JWT's payload, unverified: read only to bound a session, after the
/// apiserver vouched for the token.
pub fn expiry_of(token: &str) -> Option<u64> {
    claims_of(token)?.get("exp")?.as_u64()
}

/// The claims of a JWT's payload, unverified.
fn claims_of(token: &str) -> Option<serde_json::Value> {
    if token.len() > MAX_TOKEN_LEN {
        return None;
    }
    let mut parts = token.split('.');
    let (Some(_header), Some(payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice::<serde_json::Value>(&bytes).ok().filter(|c| c.is_object())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn jwt(payload: &str) -> String {
        format!("eyJhbGciOiJSUzI1NiJ9.{}.c2ln", URL_SAFE_NO_PAD.encode(payload))
    }

    #[test]
    fn the_expiry_is_read_from_a_jwt_and_nothing_else() {
        assert_eq!(expiry_of(&jwt(r#"{"exp":1700000000,"sub":"x"}"#)), Some(1_700_000_000));
        assert_eq!(expiry_of(&jwt(r#"{"sub":"x"}"#)), None);
        assert_eq!(expiry_of(&jwt(r#"{"exp":"soon"}"#)), None);
        assert_eq!(expiry_of(&jwt("not json")), None);
        assert_eq!(expiry_of("a.b"), None);
        assert_eq!(expiry_of("a.b.c.d"), None);
        assert_eq!(expiry_of(""), None);
    }

    proptest! {
        #[test]
        fn any_token_text_is_answered_never_a_panic(token in ".{0,400}") {
            let _ = expiry_of(&token);
        }
    }
}

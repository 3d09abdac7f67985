//! ServiceAccounts of the tests' identities, and the tokens they act with.

use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};

/// How long the issued tokens stay valid: longer than any suite runs.
const TOKEN_SECONDS: i64 = 48 * 3600;

/// Makes ServiceAccount `name` in `namespace` (if missing).
pub(crate) async fn ensure_service_account(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    if accounts.get_opt(name).await?.is_none() {
        let account = ServiceAccount {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        };
        accounts.create(&PostParams::default(), &account).await?;
    }
    Ok(())
}

/// A token the apiserver issues for ServiceAccount `name` of `namespace`.
pub(crate) async fn service_account_token(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(Vec::new()),
            expiration_seconds: Some(TOKEN_SECONDS),
            ..Default::default()
        }),
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("issuing a token for ServiceAccount {namespace}/{name}"))?;
    issued.status.and_then(|s| s.token).context("the TokenRequest answered no token")
}

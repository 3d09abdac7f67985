//! A tenant as a cluster has one: an identity whose rights end at its own namespace, where it
//! writes claims, Secrets and ConfigMaps and nothing else.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use test_support::{ControlPlane, test_namespace};

use super::{Env, Tenant};

const ACCOUNT: &str = "tenant";

fn rule(group: &str, resources: &[&str]) -> PolicyRule {
    let verbs = ["get", "list", "watch", "create", "update", "patch", "delete"];
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

impl Env {
    /// A new namespace and a tenant acting in it as a ServiceAccount of its own, allowed to
    /// write claims, Secrets and ConfigMaps there and nothing anywhere else. On the shared
    /// control plane.
    pub async fn scoped_tenant(&self, prefix: &str) -> Tenant {
        let ns = test_namespace(&self.client, prefix).await;
        let meta = || ObjectMeta { name: Some(ACCOUNT.into()), ..Default::default() };
        let post = PostParams::default();
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &ns);
        accounts
            .create(&post, &ServiceAccount { metadata: meta(), ..Default::default() })
            .await
            .unwrap();
        let role = Role {
            metadata: meta(),
            rules: Some(vec![
                rule("objectbucket.io", &["objectbucketclaims"]),
                rule("", &["secrets", "configmaps"]),
            ]),
        };
        Api::<Role>::namespaced(self.client.clone(), &ns).create(&post, &role).await.unwrap();
        let binding = RoleBinding {
            metadata: meta(),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Role".into(),
                name: ACCOUNT.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: ACCOUNT.into(),
                namespace: Some(ns.clone()),
                ..Default::default()
            }]),
        };
        let bindings = Api::<RoleBinding>::namespaced(self.client.clone(), &ns);
        bindings.create(&post, &binding).await.unwrap();
        let request = TokenRequest {
            spec: Some(TokenRequestSpec { audiences: Some(Vec::new()), ..Default::default() }),
            ..Default::default()
        };
        let issued = accounts.create_token_request(ACCOUNT, &post, &request).await.unwrap();
        let token = issued.status.and_then(|s| s.token).expect("a token");
        let path = ControlPlane::shared().kubeconfig_for_token(&token).unwrap();
        let file = Kubeconfig::read_from(&path).unwrap();
        let options = KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(file, &options).await.unwrap();
        Tenant::new(&Client::try_from(config).unwrap(), ns)
    }
}

//! Buckets without long-lived keys, on the real control plane with the provisioner as deployed:
//! a claim names its namespace's ServiceAccounts, and a consumer holding nothing but a projected
//! token (minted with the TokenRequest API, as the kubelet mints it) and the claim's ConfigMap
//! trades the token for a session on the endpoint's STS and uses the bucket. Each wrong token is
//! refused with the code AWS's STS gives, the apiserver deciding whose a token is; and each
//! change to the claim (its mode narrowed, its ServiceAccount dropped, the claim deleted) reaches
//! sessions already handed out on their next request.

mod harness;

use std::collections::BTreeMap;
use std::path::Path;

use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bucket_api::contract::config_web_identity::{
    AWS_ENDPOINT_URL_STS, AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, TOKEN_PATH,
};
use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use harness::*;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, ServiceAccount};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use test_support::eventually;

const AUDIENCE: &str = "objectbucket.io";

fn spec(class: &str, config: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        generate_bucket_name: Some("keyless".into()),
        additional_config: Some(
            config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ),
        ..Default::default()
    }
}

async fn service_account(env: &Env, ns: &str, name: &str) {
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client.clone(), ns);
    let meta = ObjectMeta { name: Some(name.into()), ..Default::default() };
    accounts
        .create(&PostParams::default(), &ServiceAccount { metadata: meta, ..Default::default() })
        .await
        .unwrap();
}

/// A token for ServiceAccount `name` of `ns` with `audience`, optionally bound to a pod, as the
/// kubelet asks for a projected one.
async fn token(env: &Env, ns: &str, name: &str, audience: &str, pod: Option<&Pod>) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client.clone(), ns);
    let bound_object_ref = pod.map(|pod| BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
    });
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![audience.into()]),
            expiration_seconds: Some(600),
            bound_object_ref,
        }),
        ..Default::default()
    };
    let issued = accounts.create_token_request(name, &PostParams::default(), &request).await;
    issued.unwrap().status.and_then(|s| s.token).expect("a token")
}

/// The claim's ConfigMap, as a pod's `envFrom` reads it.
async fn config_of(tenant: &Tenant, claim: &str) -> BTreeMap<String, String> {
    let maps: Api<ConfigMap> = Api::namespaced(tenant.client.clone(), &tenant.ns);
    maps.get(claim).await.unwrap().data.unwrap_or_default()
}

fn sts(config: &BTreeMap<String, String>) -> aws_sdk_sts::Client {
    let conf = aws_sdk_sts::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_sts::config::Region::new(config["AWS_REGION"].clone()))
        .endpoint_url(&config[AWS_ENDPOINT_URL_STS])
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_sts::Client::from_conf(conf)
}

/// A session of `role` for `token`, or STS's error code.
async fn assume(
    config: &BTreeMap<String, String>,
    role: &str,
    token: &str,
) -> Result<aws_sdk_s3::Client, String> {
    let answer = sts(config)
        .assume_role_with_web_identity()
        .role_arn(role)
        .role_session_name("test")
        .web_identity_token(token)
        .send()
        .await
        .map_err(|e| e.code().unwrap_or("<no code>").to_owned())?;
    let c = answer.credentials.unwrap();
    let credentials = Credentials::new(
        c.access_key_id,
        c.secret_access_key,
        Some(c.session_token),
        None,
        "session",
    );
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new(config["AWS_REGION"].clone()))
        .endpoint_url(&config["AWS_ENDPOINT_URL"])
        .force_path_style(true)
        .credentials_provider(credentials)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    Ok(aws_sdk_s3::Client::from_conf(conf))
}

async fn put(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    let body = ByteStream::from_static(b"data");
    let sent = s3.put_object().bucket(bucket).key(key).body(body).send().await;
    sent.map(drop).map_err(|e| e.code().unwrap_or("<no code>").to_owned())
}

async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    let got = s3.get_object().bucket(bucket).key(key).send().await;
    got.map(drop).map_err(|e| e.code().unwrap_or("<no code>").to_owned())
}

/// The moto venv's Python, which has boto3.
fn python() -> std::path::PathBuf {
    let venv = std::env::var_os("BUCKET_PROVISIONER_MOTO_VENV").expect(
        "BUCKET_PROVISIONER_MOTO_VENV is not set: run tests/moto/install.sh and export its path, \
         as `make test` does",
    );
    Path::new(&venv).join("bin/python")
}

/// Runs the boto3 consumer with nothing but the ConfigMap and the token file; its output.
async fn boto3_consumer(config: &BTreeMap<String, String>, token_file: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web_identity/consumer.py");
    let mut command = std::process::Command::new(python());
    command.arg(script).env_clear().env("PATH", "/usr/bin:/bin");
    command.env("AWS_CONFIG_FILE", "/dev/null").env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
    command.envs(config).env(AWS_WEB_IDENTITY_TOKEN_FILE, token_file);
    let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the boto3 consumer failed:\n{stdout}\n{stderr}");
    stdout
}

/// A tool the Makefile builds into the cache, named by `variable`, or built now by `script`
/// (relative to the repository) when the variable is unset, as when one test runs alone.
fn tool(variable: &str, script: &str) -> std::path::PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return path.into();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(script);
    let out = std::process::Command::new("bash").arg(&script).output().unwrap();
    assert!(out.status.success(), "{}: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.lines().last().expect("the script printed a path").trim().into()
}

/// Runs `program args` with nothing but the ConfigMap and the token file; its output.
async fn keyless_run(
    program: std::path::PathBuf,
    args: &[String],
    config: &BTreeMap<String, String>,
    token_file: &Path,
) -> String {
    let mut command = std::process::Command::new(&program);
    command.args(args).env_clear().env("PATH", "/usr/bin:/bin").env("HOME", "/nonexistent");
    command.env("AWS_CONFIG_FILE", "/dev/null").env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
    command.envs(config).env(AWS_WEB_IDENTITY_TOKEN_FILE, token_file);
    let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} failed:\n{stdout}\n{stderr}", program.display());
    stdout
}

#[tokio::test]
async fn the_aws_cli_and_the_go_sdk_use_a_keyless_claim_with_nothing_but_its_config_map() {
    let env = Env::new("hp-wi-sdk").await;
    let _provisioner = env.start("node-a");
    let only = env.class(&[("webIdentity", "only")], "Delete").await;
    let tenant = env.scoped_tenant("hp-wi-sdk").await;
    service_account(&env, &tenant.ns, "app").await;
    tenant.create("data", spec(&only, &[("serviceAccountName", "app")])).await;
    tenant.wait("data", ClaimPhase::Bound, "Bound").await;
    let config = config_of(&tenant, "data").await;
    let bucket = config["BUCKET_NAME"].clone();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token(&env, &tenant.ns, "app", AUDIENCE, None).await).unwrap();

    // The AWS SDK for Go v2, through its default configuration.
    let go = tool("BUCKET_PROVISIONER_GO_CONSUMER", "tests/web-identity/go-consumer/build.sh");
    let out = keyless_run(go, &[], &config, &token_file).await;
    assert!(out.contains("wrote\nread\nlisted from-go\nsession ASIA"), "{out}");

    // The AWS CLI: a copy up, a listing, a copy down.
    let aws = tool("BUCKET_PROVISIONER_AWSCLI", "tests/web-identity/awscli/install.sh");
    let local = dir.path().join("note.txt");
    std::fs::write(&local, "from the cli").unwrap();
    let up = [
        "s3".to_owned(),
        "cp".to_owned(),
        local.display().to_string(),
        format!("s3://{bucket}/from-cli"),
    ];
    keyless_run(aws.clone(), &up, &config, &token_file).await;
    let listed = keyless_run(
        aws.clone(),
        &["s3".into(), "ls".into(), format!("s3://{bucket}/")],
        &config,
        &token_file,
    )
    .await;
    assert!(listed.contains("from-cli") && listed.contains("from-go"), "{listed}");
    let down = dir.path().join("back.txt");
    let copy = [
        "s3".to_owned(),
        "cp".to_owned(),
        format!("s3://{bucket}/from-cli"),
        down.display().to_string(),
    ];
    keyless_run(aws, &copy, &config, &token_file).await;
    assert_eq!(std::fs::read_to_string(&down).unwrap(), "from the cli");
}

#[tokio::test]
async fn a_consumer_with_only_a_projected_token_uses_its_claims_bucket() {
    let env = Env::new("hp-wi").await;
    let _provisioner = env.start("node-a");
    let only = env.class(&[("webIdentity", "only"), ("webIdentityMaxSession", "15m")], "Delete");
    let only = only.await;
    let tenant = env.scoped_tenant("hp-wi-a").await;
    for account in ["app", "other"] {
        service_account(&env, &tenant.ns, account).await;
    }
    tenant.create("data", spec(&only, &[("serviceAccountName", "app")])).await;
    tenant.wait("data", ClaimPhase::Bound, "Bound").await;

    // No key anywhere: no Secret, and the ConfigMap says what the SDKs need.
    assert!(tenant.secret("data").await.is_none(), "a keyless claim has no Secret");
    let config = config_of(&tenant, "data").await;
    assert_eq!(config[AWS_WEB_IDENTITY_TOKEN_FILE], TOKEN_PATH);
    assert!(config[AWS_ROLE_ARN].starts_with("arn:aws:iam::"), "{config:?}");
    assert_eq!(config[AWS_ENDPOINT_URL_STS], config["AWS_ENDPOINT_URL"]);
    assert!(config.contains_key("AWS_REGION"));
    let bucket = config["BUCKET_NAME"].clone();

    // boto3 with nothing but the ConfigMap and the token file.
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token(&env, &tenant.ns, "app", AUDIENCE, None).await).unwrap();
    let out = boto3_consumer(&config, &token_file).await;
    assert!(out.contains("wrote\nread\nlisted\nsession ASIA"), "{out}");

    // The AWS SDK for Rust's STS client, and the session it gets, on the same bucket.
    let role = config[AWS_ROLE_ARN].clone();
    let app = token(&env, &tenant.ns, "app", AUDIENCE, None).await;
    let s3 = assume(&config, &role, &app).await.unwrap();
    put(&s3, &bucket, "from-rust").await.unwrap();
    get(&s3, &bucket, "from-boto3").await.unwrap();
}

#[tokio::test]
async fn every_token_but_the_claims_own_is_refused_as_sts_refuses_it() {
    let env = Env::new("hp-wi-refused").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[("webIdentity", "allowed")], "Delete").await;
    let (a, b) = (env.scoped_tenant("hp-wi-ra").await, env.scoped_tenant("hp-wi-rb").await);
    for tenant in [&a, &b] {
        for account in ["app", "other"] {
            service_account(&env, &tenant.ns, account).await;
        }
        tenant.create("data", spec(&class, &[("serviceAccountName", "app")])).await;
        tenant.wait("data", ClaimPhase::Bound, "Bound").await;
    }
    let (config_a, config_b) = (config_of(&a, "data").await, config_of(&b, "data").await);
    let (role_a, role_b) = (&config_a[AWS_ROLE_ARN], &config_b[AWS_ROLE_ARN]);
    assert_ne!(role_a, role_b);
    // Where the class allows both, the claim has its key as well.
    assert!(a.secret("data").await.is_some());

    let own = token(&env, &a.ns, "app", AUDIENCE, None).await;
    let session = assume(&config_a, role_a, &own).await.expect("the claim's own token");
    put(&session, &config_a["BUCKET_NAME"], "k").await.unwrap();
    // A's session is nothing on B's bucket.
    assert_eq!(put(&session, &config_b["BUCKET_NAME"], "k").await.unwrap_err(), "AccessDenied");

    let refused = |token: String, role: String| {
        let config = config_a.clone();
        async move { assume(&config, &role, &token).await.err() }
    };
    let other_account = token(&env, &a.ns, "other", AUDIENCE, None).await;
    assert_eq!(refused(other_account, role_a.clone()).await.as_deref(), Some("AccessDenied"));
    let other_namespace = token(&env, &b.ns, "app", AUDIENCE, None).await;
    assert_eq!(refused(other_namespace, role_a.clone()).await.as_deref(), Some("AccessDenied"));
    // A's own token with B's role.
    assert_eq!(refused(own.clone(), role_b.clone()).await.as_deref(), Some("AccessDenied"));
    let other_audience = token(&env, &a.ns, "app", "sts.amazonaws.com", None).await;
    let code = refused(other_audience, role_a.clone()).await;
    assert_eq!(code.as_deref(), Some("InvalidIdentityToken"));
    assert_eq!(
        refused(forged(&own, &b.ns), role_a.clone()).await.as_deref(),
        Some("InvalidIdentityToken"),
        "a token whose payload was rewritten"
    );
    assert_eq!(
        refused("not-a-jwt".into(), role_a.clone()).await.as_deref(),
        Some("InvalidIdentityToken")
    );
    // Signed again with the apiserver's own key: kept as it was, it is the claim's token; with
    // its life moved into the past, it is expired, as AWS says.
    assume(&config_a, role_a, &resigned(&own, |_| {})).await.expect("re-signed as it was");
    let an_hour_ago = jiff::Timestamp::now().as_second() - 3600;
    let expired = resigned(&own, |claims| {
        claims["exp"] = an_hour_ago.into();
        claims["iat"] = (an_hour_ago - 600).into();
        claims["nbf"] = (an_hour_ago - 600).into();
    });
    assert_eq!(refused(expired, role_a.clone()).await.as_deref(), Some("ExpiredTokenException"));

    // A token bound to a pod that is gone.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &a.ns);
    let pod = Pod {
        metadata: ObjectMeta { name: Some("consumer".into()), ..Default::default() },
        spec: Some(PodSpec {
            service_account_name: Some("app".into()),
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "c".into(),
                image: Some("consumer".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    let bound = token(&env, &a.ns, "app", AUDIENCE, Some(&pod)).await;
    assume(&config_a, role_a, &bound).await.expect("while its pod is there");
    pods.delete("consumer", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .unwrap();
    eventually("the pod to be gone", || async {
        pods.get_opt("consumer").await.unwrap().is_none().then_some(())
    })
    .await;
    // The apiserver's view of its pods may lag the deletion a moment.
    eventually("the token of the deleted pod to be refused", || async {
        let code = refused(bound.clone(), role_a.clone()).await;
        (code.as_deref() == Some("InvalidIdentityToken")).then_some(())
    })
    .await;
}

/// `token` with its payload's subject rewritten to `namespace`, its signature kept.
fn forged(token: &str, namespace: &str) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let payload = URL_SAFE_NO_PAD.decode(parts[1]).unwrap();
    let mut claims: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    claims["sub"] = format!("system:serviceaccount:{namespace}:app").into();
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap());
    format!("{}.{payload}.{}", parts[0], parts[2])
}

/// `token` with its claims changed by `change` and signed again (RS256) with the shared control
/// plane's ServiceAccount signing key.
fn resigned(token: &str, change: impl FnOnce(&mut serde_json::Value)) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let payload = URL_SAFE_NO_PAD.decode(parts[1]).unwrap();
    let mut claims: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    change(&mut claims);
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap());
    let signed = format!("{}.{payload}", parts[0]);
    let key = test_support::ControlPlane::shared().file_path("sa.key");
    let mut openssl = std::process::Command::new("openssl")
        .args(["dgst", "-sha256", "-binary", "-sign"])
        .arg(&key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl");
    std::io::Write::write_all(&mut openssl.stdin.take().unwrap(), signed.as_bytes()).unwrap();
    let out = openssl.wait_with_output().unwrap();
    assert!(out.status.success(), "openssl dgst -sign failed");
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(out.stdout))
}

#[tokio::test]
async fn narrowing_dropping_or_deleting_the_claim_reaches_its_sessions() {
    let env = Env::new("hp-wi-revoke").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[("webIdentity", "only")], "Delete").await;
    let tenant = env.scoped_tenant("hp-wi-rv").await;
    for account in ["app", "other"] {
        service_account(&env, &tenant.ns, account).await;
    }
    tenant.create("data", spec(&class, &[("serviceAccountName", "app,other")])).await;
    tenant.wait("data", ClaimPhase::Bound, "Bound").await;
    let config = config_of(&tenant, "data").await;
    let (role, bucket) = (config[AWS_ROLE_ARN].clone(), config["BUCKET_NAME"].clone());
    let app_token = token(&env, &tenant.ns, "app", AUDIENCE, None).await;
    let app = assume(&config, &role, &app_token).await.unwrap();
    let other_token = token(&env, &tenant.ns, "other", AUDIENCE, None).await;
    let other = assume(&config, &role, &other_token).await.unwrap();
    put(&app, &bucket, "k").await.unwrap();

    // Narrowed to ReadOnly: every session reads and no longer writes.
    let read_only =
        serde_json::json!({ "serviceAccountName": "app,other", "accessMode": "ReadOnly" });
    patch_config(&tenant, read_only).await;
    eventually("the sessions to be read-only", || async {
        (put(&app, &bucket, "k2").await == Err("AccessDenied".into())).then_some(())
    })
    .await;
    assert_eq!(put(&other, &bucket, "k2").await.unwrap_err(), "AccessDenied");
    get(&app, &bucket, "k").await.unwrap();

    // `app` dropped from the claim: its session ends, `other`'s goes on.
    let dropped = serde_json::json!({ "serviceAccountName": "other", "accessMode": "ReadOnly" });
    patch_config(&tenant, dropped).await;
    eventually("app's session to end", || async {
        get(&app, &bucket, "k").await.is_err().then_some(())
    })
    .await;
    get(&other, &bucket, "k").await.unwrap();

    // The claim deleted: every session of it ends.
    tenant.delete("data").await;
    eventually("the claim to be gone", || async {
        tenant.claims.get_opt("data").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(get(&other, &bucket, "k").await.is_err());
}

async fn patch_config(tenant: &Tenant, config: serde_json::Value) {
    let patch = serde_json::json!({ "spec": { "additionalConfig": config } });
    let params = kube::api::PatchParams::default();
    tenant.claims.patch("data", &params, &kube::api::Patch::Merge(&patch)).await.unwrap();
}

#[tokio::test]
async fn a_class_decides_whether_claims_may_or_must_name_service_accounts() {
    let env = Env::new("hp-wi-gate").await;
    let _provisioner = env.start("node-a");
    let keys = env.class(&[], "Delete").await;
    let only = env.class(&[("webIdentity", "only")], "Delete").await;
    let tenant = env.scoped_tenant("hp-wi-gate").await;
    tenant.create("asks", spec(&keys, &[("serviceAccountName", "app")])).await;
    let refused = tenant.wait("asks", ClaimPhase::Failed, "InvalidParameters").await;
    assert!(message(&refused).contains("webIdentity"), "{}", message(&refused));
    tenant.create("keyed", spec(&only, &[])).await;
    let refused = tenant.wait("keyed", ClaimPhase::Failed, "InvalidParameters").await;
    assert!(message(&refused).contains("serviceAccountName"), "{}", message(&refused));
    tenant.create("bad-name", spec(&only, &[("serviceAccountName", "App:x")])).await;
    tenant.wait("bad-name", ClaimPhase::Failed, "InvalidParameters").await;
    // Nothing was made for any of them.
    for name in ["asks", "keyed", "bad-name"] {
        assert!(tenant.secret(name).await.is_none());
    }
}

fn message(claim: &ObjectBucketClaim) -> String {
    let conditions = claim.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().map(|c| c.message).collect::<Vec<_>>().join("; ")
}

#[tokio::test]
async fn deleting_the_service_account_ends_its_sessions() {
    let env = Env::new("hp-wi-sa").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[("webIdentity", "only")], "Delete").await;
    let tenant = env.scoped_tenant("hp-wi-sa").await;
    service_account(&env, &tenant.ns, "app").await;
    tenant.create("data", spec(&class, &[("serviceAccountName", "app")])).await;
    tenant.wait("data", ClaimPhase::Bound, "Bound").await;
    let config = config_of(&tenant, "data").await;
    let (role, bucket) = (config[AWS_ROLE_ARN].clone(), config["BUCKET_NAME"].clone());
    let app_token = token(&env, &tenant.ns, "app", AUDIENCE, None).await;
    let session = assume(&config, &role, &app_token).await.unwrap();
    put(&session, &bucket, "k").await.unwrap();

    let accounts: Api<ServiceAccount> = Api::namespaced(env.client.clone(), &tenant.ns);
    accounts.delete("app", &DeleteParams::default()).await.unwrap();
    eventually("the deleted ServiceAccount's session to end", || async {
        put(&session, &bucket, "k").await.is_err().then_some(())
    })
    .await;
    // Made again under the same name: the old token is refused by the apiserver, and a new
    // one gets a new session.
    service_account(&env, &tenant.ns, "app").await;
    // A session from the old token, while the apiserver may still vouch for it, is worth
    // nothing: the ServiceAccount it was minted for is gone.
    if let Ok(stale) = assume(&config, &role, &app_token).await {
        eventually("a session of the old token to be refused", || async {
            put(&stale, &bucket, "k").await.is_err().then_some(())
        })
        .await;
    }
    let again = token(&env, &tenant.ns, "app", AUDIENCE, None).await;
    let session = assume(&config, &role, &again).await.unwrap();
    put(&session, &bucket, "k").await.unwrap();
}

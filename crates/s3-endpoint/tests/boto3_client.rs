//! The endpoint's bucket features through a second real S3 client besides the AWS SDK for Rust:
//! boto3 (Python), from the moto venv (`BUCKET_PROVISIONER_MOTO_VENV`, made by
//! `tests/moto/install.sh`). Each test starts the endpoint, runs one script of `tests/boto3/`
//! against it with the keys in its environment, and reads back through the SDK what the script
//! left, so the two clients agree on the same state.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use aws_sdk_s3::types::BucketVersioningStatus;
use common::Server;
use s3_endpoint::{AccessKey, AdminCredentials, Creator};

const ADMIN_ID: &str = "BOTOADMIN";
const ADMIN_SECRET: &str = "boto-admin-secret-0123456789";

/// The venv's Python; a clear failure, never a skip, when the venv is missing.
fn python() -> PathBuf {
    let Some(venv) = std::env::var_os("BUCKET_PROVISIONER_MOTO_VENV") else {
        panic!(
            "BUCKET_PROVISIONER_MOTO_VENV is not set: run tests/moto/install.sh (it installs boto3 \
             in ~/.cache/bucket-provisioner/moto-venv) and export that path, as `make test` does"
        );
    };
    let python = Path::new(&venv).join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run tests/moto/install.sh to make the venv",
        python.display()
    );
    python
}

/// Runs `tests/boto3/<script>` with `env` and answers its output; fails with its output unless
/// it exits 0 having passed every check.
async fn run(script: &str, env: Vec<(&'static str, String)>) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/boto3").join(script);
    let mut command = Command::new(python());
    // No stray AWS settings of the machine: only what the script is given.
    command.arg(&path).env("AWS_CONFIG_FILE", "/dev/null");
    command.env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null").env("PYTHONDONTWRITEBYTECODE", "1");
    command.envs(env);
    // The server runs on this runtime: wait for the script off it.
    let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    let name = script.trim_end_matches(".py");
    assert!(
        out.status.success() && stdout.contains(&format!("all checks passed: {name}")),
        "{script} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// The environment naming the endpoint, `bucket` and the owner's key.
fn env_for(server: &Server, bucket: &str, owner: &AccessKey) -> Vec<(&'static str, String)> {
    vec![
        ("S3_ENDPOINT", format!("http://{}", server.addr)),
        ("S3_BUCKET", bucket.to_owned()),
        ("OWNER_KEY_ID", owner.access_key_id.clone()),
        ("OWNER_SECRET", owner.secret_access_key.clone()),
    ]
}

/// How many lines the script printed as checked.
fn checks(output: &str) -> usize {
    output.lines().filter(|l| l.starts_with("checked: ")).count()
}

#[tokio::test]
async fn tagging_and_cors_through_boto3() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("tags", "obc-tags").await;
    let output = run("tagging_cors.py", env_for(&server, "tags", &key)).await;
    assert!(checks(&output) >= 25, "{output}");

    let s3 = server.client(&key);
    let got = s3.get_object_tagging().bucket("tags").key("retagged").send().await.unwrap();
    let tags: Vec<_> = got.tag_set().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(tags, [("only", "this")]);
    let cors = s3.get_bucket_cors().bucket("tags").send().await.unwrap();
    let [rule] = cors.cors_rules() else { panic!("{cors:?}") };
    assert_eq!(
        (rule.allowed_origins(), rule.allowed_methods()),
        (&["*".into()][..], &["GET".into()][..])
    );
}

#[tokio::test]
async fn lifecycle_through_boto3() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("rules", "obc-rules").await;
    let output = run("lifecycle.py", env_for(&server, "rules", &key)).await;
    assert!(checks(&output) >= 7, "{output}");

    let s3 = server.client(&key);
    let got = s3.get_bucket_lifecycle_configuration().bucket("rules").send().await.unwrap();
    let [rule] = got.rules() else { panic!("{got:?}") };
    assert_eq!((rule.id(), rule.expiration().and_then(|e| e.days())), (Some("tmp"), Some(1)));
}

#[tokio::test]
async fn versioning_through_boto3() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("versions", "obc-versions").await;
    let output = run("versioning.py", env_for(&server, "versions", &key)).await;
    assert!(checks(&output) >= 51, "{output}");

    let s3 = server.client(&key);
    let state = s3.get_bucket_versioning().bucket("versions").send().await.unwrap();
    assert_eq!(state.status(), Some(&BucketVersioningStatus::Suspended));
    let listed = s3.list_object_versions().bucket("versions").prefix("a").send().await.unwrap();
    let ids: Vec<_> = listed.versions().iter().map(|v| v.version_id().unwrap()).collect();
    assert_eq!((ids.len(), ids[0]), (3, "null"), "{listed:?}");
}

#[tokio::test]
async fn object_lock_through_boto3() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    server.store.set_admin(Some(AdminCredentials::new(ADMIN_ID, ADMIN_SECRET).unwrap()));
    // A claim's lock bucket as the provisioner makes it: the creating claim's key is the owner's.
    let creator = Creator { user_id: "obc-owner", delete_with_claim: true };
    let (_, owner) = server.store.provision_bucket("locked", creator).await.unwrap();
    server.store.enable_object_lock("locked").await.unwrap();
    let other = server.store.issue_key("obc-other", "locked").await.unwrap();
    let mut env = env_for(&server, "locked", &owner);
    env.extend([
        ("OTHER_KEY_ID", other.access_key_id.clone()),
        ("OTHER_SECRET", other.secret_access_key.clone()),
        ("ADMIN_KEY_ID", ADMIN_ID.to_owned()),
        ("ADMIN_SECRET", ADMIN_SECRET.to_owned()),
    ]);
    let output = run("object_lock.py", env).await;
    assert!(checks(&output) >= 29, "{output}");

    // The compliance version boto3 could not remove is there for the SDK too.
    let s3 = server.client(&owner);
    let listed = s3.list_object_versions().bucket("locked").prefix("comp").send().await.unwrap();
    let [version] = listed.versions() else { panic!("{listed:?}") };
    let id = version.version_id().unwrap();
    let got = s3.get_object_retention().bucket("locked").key("comp").version_id(id).send().await;
    assert_eq!(got.unwrap().retention().unwrap().mode().unwrap().as_str(), "COMPLIANCE");
}

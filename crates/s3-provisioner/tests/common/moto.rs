//! A real moto server (S3 and IAM) with IAM authorization enforced, one per test.
//!
//! moto skips authorization for its first `INITIAL_NO_AUTH_ACTION_COUNT` requests; the three
//! bootstrap requests create an administrator with a key, and from then on every request must be
//! signed by a known key and allowed by that user's policies.
//!
//! The server runs under [`Supervised`], so it never outlives the test process.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{BehaviorVersion, Region, SharedHttpClient};
use bucket_provisioner::Credentials;
use s3_provisioner::iam;
use serde_json::json;

use test_support::Supervised;

/// Environment variable naming the moto venv (set by `make test`).
pub const VENV_ENV: &str = "BUCKET_PROVISIONER_MOTO_VENV";

/// Requests moto serves before it starts enforcing IAM: exactly the bootstrap below.
const BOOTSTRAP_REQUESTS: u32 = 3;

/// A policy that allows everything.
pub const ALLOW_ALL: &str =
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;

/// A running moto server. Dropping it stops the server.
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Keys of a user allowed everything.
    pub admin: Credentials,
    process: Supervised,
    http: SharedHttpClient,
}

/// The venv holding `moto_server`: from `make`, or installed (once per machine) by the project's
/// script, which also knows the default location.
fn venv() -> PathBuf {
    if let Some(dir) = std::env::var_os(VENV_ENV).map(PathBuf::from)
        && dir.join("bin/moto_server").is_file()
    {
        return dir;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/moto/install.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(output.status.success(), "{} failed; see its output above", script.display());
    let stdout = String::from_utf8(output.stdout).expect("install.sh prints a path");
    PathBuf::from(stdout.lines().last().expect("install.sh printed the venv").trim())
}

impl Moto {
    /// Starts a server on a free loopback port and creates its administrator.
    pub async fn start() -> Moto {
        let moto = Self::spawn();
        moto.bootstrap().await
    }

    fn spawn() -> Moto {
        let server = venv().join("bin/moto_server");
        // Port 0: the server binds a free port itself and logs it, so no other process can take
        // the port between choosing and binding it.
        let bootstrap = BOOTSTRAP_REQUESTS.to_string();
        let dir = tempfile::Builder::new().prefix("moto-").tempdir().unwrap().keep();
        let argv = [
            server.display().to_string(),
            "-H".into(),
            "127.0.0.1".into(),
            "-p".into(),
            "0".into(),
        ];
        let process = Supervised::start(
            &dir,
            &[("moto", argv.to_vec())],
            &[("INITIAL_NO_AUTH_ACTION_COUNT", &bootstrap)],
        )
        .expect("starting moto");
        let mut moto = Moto {
            endpoint: String::new(),
            admin: Credentials { access_key_id: String::new(), secret_access_key: String::new() },
            process,
            http: aws_smithy_http_client::Builder::new().build_http(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            if let Some(port) = moto.logged_port() {
                break port;
            }
            assert!(Instant::now() < deadline, "moto did not start in time:\n{}", moto.log_tail());
            std::thread::sleep(Duration::from_millis(50));
        };
        moto.endpoint = format!("http://127.0.0.1:{port}");
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto did not listen in time:\n{}", moto.log_tail());
            std::thread::sleep(Duration::from_millis(50));
        }
        moto
    }

    /// The port from the server's "Running on http://127.0.0.1:PORT" line.
    fn logged_port(&self) -> Option<u16> {
        let log = std::fs::read_to_string(self.process.log("moto")).ok()?;
        let rest = log.split("Running on http://127.0.0.1:").nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    }

    async fn bootstrap(mut self) -> Moto {
        // Any key signs these; moto does not check them yet.
        let anyone =
            Credentials { access_key_id: "bootstrap".into(), secret_access_key: "x".into() };
        let iam = self.iam(&anyone);
        iam.create_user().user_name("admin").send().await.expect("creating the moto admin");
        iam.put_user_policy()
            .user_name("admin")
            .policy_name("everything")
            .policy_document(ALLOW_ALL)
            .send()
            .await
            .expect("allowing the moto admin everything");
        let key = iam.create_access_key().user_name("admin").send().await.unwrap();
        let key = key.access_key().unwrap();
        self.admin = Credentials {
            access_key_id: key.access_key_id().into(),
            secret_access_key: key.secret_access_key().into(),
        };
        self
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        self.process.log_tail("moto", 40)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.endpoint.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// An S3 client signing with `keys` in `region`.
    pub fn s3_in(&self, keys: &Credentials, region: &str) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region.to_string()))
            .endpoint_url(&self.endpoint)
            .force_path_style(true)
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                &keys.access_key_id,
                &keys.secret_access_key,
                None,
                None,
                "test",
            ))
            .http_client(self.http.clone())
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    /// An S3 client signing with `keys` in us-east-1.
    pub fn s3(&self, keys: &Credentials) -> aws_sdk_s3::Client {
        self.s3_in(keys, "us-east-1")
    }

    /// An IAM client signing with `keys`.
    pub fn iam(&self, keys: &Credentials) -> aws_sdk_iam::Client {
        let config = aws_sdk_iam::Config::builder()
            .behavior_version(aws_sdk_iam::config::BehaviorVersion::latest())
            .region(aws_sdk_iam::config::Region::new("us-east-1"))
            .endpoint_url(&self.endpoint)
            .credentials_provider(aws_sdk_iam::config::Credentials::new(
                &keys.access_key_id,
                &keys.secret_access_key,
                None,
                None,
                "test",
            ))
            .http_client(self.http.clone())
            .build();
        aws_sdk_iam::Client::from_conf(config)
    }

    /// A user `name` allowed `actions` on every resource (moto authorizes IAM actions on "*"
    /// only), with a key.
    pub async fn user_allowed(&self, name: &str, actions: &[&str]) -> Credentials {
        let policy = serde_json::json!({ "Version": "2012-10-17",
            "Statement": [{ "Effect": "Allow", "Action": actions, "Resource": "*" }] });
        self.user_with_policy(name, &policy.to_string()).await
    }

    /// Creates user `name` allowed what `policy` allows, and returns a key of it.
    pub async fn user_with_policy(&self, name: &str, policy: &str) -> Credentials {
        let iam = self.iam(&self.admin);
        iam.create_user().user_name(name).send().await.unwrap();
        iam.put_user_policy()
            .user_name(name)
            .policy_name("test")
            .policy_document(policy)
            .send()
            .await
            .unwrap();
        let created = iam.create_access_key().user_name(name).send().await.unwrap();
        let key = created.access_key().unwrap();
        Credentials {
            access_key_id: key.access_key_id().into(),
            secret_access_key: key.secret_access_key().into(),
        }
    }

    /// An owner allowed exactly what the book's S3 chapter lists (moto authorizes IAM actions on
    /// "*" only, so the resources are not narrowed here).
    pub async fn least_privileged_owner(&self, name: &str) -> Credentials {
        let policy = json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Action": s3_provisioner::owner::OWNER_ACTIONS,
                "Resource": "*"
            }]
        });
        self.user_with_policy(name, &policy.to_string()).await
    }

    /// An owner allowed what the book's S3 chapter lists, adoption from the Go aws-s3-provisioner
    /// included: the owner a takeover switches to.
    pub async fn takeover_owner(&self, name: &str) -> Credentials {
        let mut actions: Vec<&str> = s3_provisioner::owner::OWNER_ACTIONS.to_vec();
        actions.extend(s3_provisioner::legacy::LEGACY_OWNER_ACTIONS);
        let policy = json!({"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]});
        self.user_with_policy(name, &policy.to_string()).await
    }

    /// An owner allowed all of S3 but nothing in IAM.
    pub async fn s3_only_owner(&self, name: &str) -> Credentials {
        let policy = json!({
            "Version": "2012-10-17",
            "Statement": [{ "Effect": "Allow", "Action": "s3:*", "Resource": "*" }]
        });
        self.user_with_policy(name, &policy.to_string()).await
    }

    /// The IAM users made for the claim with `user_id` (by the provisioner's naming).
    pub async fn users_for(&self, user_id: &str) -> Vec<String> {
        let wanted = iam::user_name(user_id);
        let users = self.iam(&self.admin).list_users().send().await.unwrap();
        users.users().iter().map(|u| u.user_name().to_string()).filter(|n| *n == wanted).collect()
    }

    /// Every user the provisioner made (under its IAM path).
    pub async fn provisioned_users(&self) -> Vec<String> {
        let users = self.iam(&self.admin).list_users().send().await.unwrap();
        users
            .users()
            .iter()
            .filter(|u| u.path() == iam::USER_PATH)
            .map(|u| u.user_name().to_string())
            .collect()
    }

    /// The access key ids of `user` (empty when the user does not exist).
    pub async fn access_keys(&self, user: &str) -> Vec<String> {
        match self.iam(&self.admin).list_access_keys().user_name(user).send().await {
            Ok(out) => out
                .access_key_metadata()
                .iter()
                .filter_map(|k| k.access_key_id().map(String::from))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Whether `user` exists.
    pub async fn user_exists(&self, user: &str) -> bool {
        self.iam(&self.admin).get_user().user_name(user).send().await.is_ok()
    }

    /// Whether `bucket` exists.
    pub async fn bucket_exists(&self, bucket: &str) -> bool {
        self.s3(&self.admin).head_bucket().bucket(bucket).send().await.is_ok()
    }

    /// Creates `bucket` in `region` (its `LocationConstraint`) as the administrator, holding
    /// `objects` (key = body).
    pub async fn existing_bucket_in(&self, region: &str, bucket: &str, objects: &[&str]) {
        use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
        let s3 = self.s3_in(&self.admin, region);
        let location = CreateBucketConfiguration::builder()
            .location_constraint(BucketLocationConstraint::from(region))
            .build();
        let create = s3.create_bucket().bucket(bucket).create_bucket_configuration(location);
        create.send().await.unwrap();
        for key in objects {
            let body = key.as_bytes().to_vec().into();
            s3.put_object().bucket(bucket).key(*key).body(body).send().await.unwrap();
        }
    }

    /// Creates `bucket` in us-east-1 as the administrator, holding `objects` (key = body).
    pub async fn existing_bucket(&self, bucket: &str, objects: &[&str]) {
        let s3 = self.s3(&self.admin);
        s3.create_bucket().bucket(bucket).send().await.unwrap();
        for key in objects {
            s3.put_object()
                .bucket(bucket)
                .key(*key)
                .body(key.as_bytes().to_vec().into())
                .send()
                .await
                .unwrap();
        }
    }

    /// The keys in `bucket`, listed as the administrator.
    pub async fn object_keys(&self, bucket: &str) -> Vec<String> {
        let listed = self.s3(&self.admin).list_objects_v2().bucket(bucket).send().await.unwrap();
        listed.contents().iter().filter_map(|o| o.key().map(String::from)).collect()
    }
}

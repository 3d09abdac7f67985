//! `make demo`: a local control plane and the hostPath provisioner on a temporary root, then
//! 1. a new bucket: a StorageClass and a claim, and a consumer that uses the claim exactly as a
//!    pod with `envFrom` would; deleting the claim removes the bucket;
//! 2. an existing bucket (brownfield): the operator creates it with the operator credential, a
//!    claim is granted it, and deleting the claim leaves the bucket and its data.
//!
//! Every step says what it does; any failure ends the demo with a non-zero exit.
//! Usage: `demo <path of hostpath-bucket-provisioner> <path of the consumer example>`

use std::collections::BTreeMap;
use std::error::Error;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use test_support::ControlPlane;
use tokio::process::Command;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const PROVISIONER: &str = "hostpath.objectbucket.io/bucket";
const NAMESPACE: &str = "demo";
const OPERATOR_KEY: &str = "demo-operator";
const OPERATOR_SECRET: &str = "demo-operator-secret";

fn step(text: &str) {
    println!("\n==> {text}");
}

async fn wait_until<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..600 {
        if let Some(value) = check().await {
            return Ok(value);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("timed out waiting for {what}").into())
}

#[tokio::main]
async fn main() {
    if let Err(e) = demo().await {
        eprintln!("\ndemo failed: {e}");
        std::process::exit(1);
    }
    println!("\ndemo: done; everything it started has been stopped and removed");
}

/// What the demo works with once the provisioner runs.
struct Demo {
    client: Client,
    claims: Api<ObjectBucketClaim>,
    consumer: String,
    root: tempfile::TempDir,
    s3_port: u16,
}

async fn demo() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(provisioner_bin), Some(consumer)) = (args.next(), args.next()) else {
        return Err("usage: demo <hostpath-bucket-provisioner> <consumer>".into());
    };

    step("starting a local control plane: etcd, kube-apiserver, kube-controller-manager");
    let plane = ControlPlane::start()?;
    let client = plane.client().await;
    client.apiserver_version().await?;
    println!("    ready; kubeconfig at {}", plane.kubeconfig_path().display());

    step("installing the ObjectBucketClaim and ObjectBucket CRDs from crds/");
    test_support::install_crds(&client).await?;

    let root = tempfile::Builder::new().prefix("demo-buckets-").tempdir()?;
    let operator_file = root.path().join("operator.env");
    let credentials =
        format!("AWS_ACCESS_KEY_ID={OPERATOR_KEY}\nAWS_SECRET_ACCESS_KEY={OPERATOR_SECRET}\n");
    std::fs::write(&operator_file, credentials)?;
    std::fs::set_permissions(&operator_file, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    let s3_port = test_support::free_port()?;
    step(&format!(
        "starting hostpath-bucket-provisioner: buckets under {}, S3 on 127.0.0.1:{s3_port}",
        root.path().display()
    ));
    let mut provisioner = Command::new(&provisioner_bin)
        .arg(format!("--root={}", root.path().display()))
        .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
        .arg(format!("--s3-listen=127.0.0.1:{s3_port}"))
        .arg("--endpoint-host=127.0.0.1")
        .arg("--metrics-address=127.0.0.1:0")
        .arg("--leader-elect=false")
        .arg("--identity=demo-node")
        .arg(format!("--admin-credentials-file={}", operator_file.display()))
        // The local apiserver's certificate is self-signed; that warning is expected here.
        .env("RUST_LOG", "warn,kube_client::client::tls=error")
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {provisioner_bin}: {e}"))?;

    let namespace = Namespace {
        metadata: ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    let claims = Api::namespaced(client.clone(), NAMESPACE);
    let demo = Demo { client, claims, consumer, root, s3_port };
    demo.new_bucket().await?;
    demo.existing_bucket().await?;

    step("stopping the provisioner and the control plane");
    provisioner.kill().await?;
    drop(plane);
    Ok(())
}

impl Demo {
    async fn new_bucket(&self) -> Result<()> {
        step("a new bucket: StorageClass demo-bucket (reclaimPolicy Delete) and claim photos");
        self.storage_class("demo-bucket", BTreeMap::new()).await?;
        self.claim("photos", "demo-bucket", Some("photos")).await?;
        let bound = self.wait_bound("photos").await?;
        let env = self.environment("photos").await?;
        self.run_consumer(&env).await?;

        let bucket = bound.spec.bucket_name.unwrap_or_default();
        let directory = self.root.path().join("buckets").join(&bucket);
        println!("    the bucket is the directory {}", directory.display());
        step("deleting claim photos; the Delete policy removes the bucket");
        self.delete_claim("photos").await?;
        if directory.exists() {
            return Err(format!(
                "{} still exists after its claim was deleted",
                directory.display()
            )
            .into());
        }
        println!("    {} is gone", directory.display());
        Ok(())
    }

    async fn existing_bucket(&self) -> Result<()> {
        step("an existing bucket: the operator creates shared-data with the operator credential");
        let operator = operator_client(self.s3_port);
        operator.create_bucket().bucket("shared-data").send().await?;
        let welcome = ByteStream::from_static(b"put here by the operator");
        operator.put_object().bucket("shared-data").key("welcome.txt").body(welcome).send().await?;
        println!("    created s3://shared-data holding welcome.txt");

        step("StorageClass demo-shared (parameter bucketName: shared-data) and claim reader");
        let parameters = BTreeMap::from([("bucketName".to_string(), "shared-data".to_string())]);
        self.storage_class("demo-shared", parameters).await?;
        self.claim("reader", "demo-shared", None).await?;
        self.wait_bound("reader").await?;
        let env = self.environment("reader").await?;
        self.run_consumer(&env).await?;

        step("deleting claim reader: its key is revoked, the operator's bucket and data stay");
        self.delete_claim("reader").await?;
        let listed = operator.list_objects_v2().bucket("shared-data").send().await?;
        for object in listed.contents() {
            println!("    still in s3://shared-data: {}", object.key().unwrap_or(""));
        }
        if listed.contents().len() != 2 {
            return Err("the operator's bucket lost objects when its claim was deleted".into());
        }
        Ok(())
    }

    async fn storage_class(&self, name: &str, parameters: BTreeMap<String, String>) -> Result<()> {
        let class = StorageClass {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            provisioner: PROVISIONER.into(),
            reclaim_policy: Some("Delete".into()),
            parameters: Some(parameters),
            ..Default::default()
        };
        Api::<StorageClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await?;
        Ok(())
    }

    async fn claim(&self, name: &str, class: &str, generate: Option<&str>) -> Result<()> {
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.into(),
            generate_bucket_name: generate.map(Into::into),
            ..Default::default()
        };
        self.claims.create(&PostParams::default(), &ObjectBucketClaim::new(name, spec)).await?;
        Ok(())
    }

    async fn wait_bound(&self, name: &str) -> Result<ObjectBucketClaim> {
        step(&format!("waiting for claim {name} to be Bound"));
        let bound = wait_until("the claim to be Bound", || async {
            let claim = self.claims.get(name).await.ok()?;
            (claim.status.as_ref()?.phase == Some(ClaimPhase::Bound)).then_some(claim)
        })
        .await?;
        for condition in bound.status.iter().flat_map(|s| &s.conditions) {
            let (kind, status, reason) = (&condition.type_, &condition.status, &condition.reason);
            println!("    {kind}={status} {reason}: {}", condition.message);
        }
        println!("    ObjectBucket {}", bound.spec.object_bucket_name.as_deref().unwrap_or(""));
        Ok(bound)
    }

    /// What `envFrom` on the claim's Secret and ConfigMap hands a pod (secrets shortened).
    async fn environment(&self, name: &str) -> Result<BTreeMap<String, String>> {
        step(&format!("claim {name}'s Secret and ConfigMap, as envFrom hands them to a pod"));
        let secret = Api::<Secret>::namespaced(self.client.clone(), NAMESPACE).get(name).await?;
        let config = Api::<ConfigMap>::namespaced(self.client.clone(), NAMESPACE).get(name).await?;
        let mut env = BTreeMap::new();
        for (key, value) in secret.data.unwrap_or_default() {
            let value = String::from_utf8(value.0)?;
            println!("    Secret    {key}={}…", &value[..value.len().min(4)]);
            env.insert(key, value);
        }
        for (key, value) in config.data.unwrap_or_default() {
            println!("    ConfigMap {key}={value}");
            env.insert(key, value);
        }
        Ok(env)
    }

    async fn run_consumer(&self, env: &BTreeMap<String, String>) -> Result<()> {
        step("running the consumer with only those variables in its environment");
        let status = Command::new(&self.consumer).env_clear().envs(env).status().await?;
        if !status.success() {
            return Err(format!("the consumer failed ({status})").into());
        }
        Ok(())
    }

    async fn delete_claim(&self, name: &str) -> Result<()> {
        self.claims.delete(name, &DeleteParams::default()).await?;
        wait_until("the claim to be gone", || async {
            self.claims.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await
    }
}

fn operator_client(s3_port: u16) -> aws_sdk_s3::Client {
    let credentials =
        aws_sdk_s3::config::Credentials::new(OPERATOR_KEY, OPERATOR_SECRET, None, None, "demo");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{s3_port}"))
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

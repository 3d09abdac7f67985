//! The COSI driver of `hostpath-bucket-provisioner` (run as deployed, `--cosi-only`) killed at
//! every crash point of create, grant, revoke and delete: the sidecar's retry after the restart
//! gets the same answer, and nothing leaks (one bucket, one key per access) or stays behind.

mod harness;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use bucket_provisioner::kubernetes::crash_point::COSI_STEPS;
use cosi_driver::proto::v1alpha1 as pb;
use cosi_driver::v1alpha1::secret_keys;
use harness::{Env, Provisioner, get, put, s3_with};
use hostpath_provisioner::BucketStore;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use test_support::cosi::install_stand_in_crds;
use test_support::{DEPLOY_NAMESPACE, Deployed, WAIT, unique_suffix};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Response, Status};

type Cosi = pb::provisioner_client::ProvisionerClient<Channel>;

/// What the driver's tenancy check reads, granted to the deployed ServiceAccount.
async fn grant_cosi_reads(admin: &Client) {
    let name = format!("hostpath-cosi-reads-{}", unique_suffix());
    let role = serde_json::from_value::<ClusterRole>(json!({
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": ["objectstorage.k8s.io"], "resources": ["buckets"], "verbs": ["get"]},
            {"apiGroups": ["objectstorage.k8s.io"], "resources": ["bucketaccesses"], "verbs": ["list"]}
        ]
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding = serde_json::from_value::<ClusterRoleBinding>(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{
            "kind": "ServiceAccount",
            "name": Deployed::HostPath.service_account(),
            "namespace": DEPLOY_NAMESPACE
        }]
    }))
    .unwrap();
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone());
    bindings.create(&PostParams::default(), &binding).await.unwrap();
}

fn cosi_api(admin: &Client, kind: &str, plural: &str) -> (Client, ApiResource) {
    let gvk = GroupVersionKind::gvk("objectstorage.k8s.io", "v1alpha1", kind);
    (admin.clone(), ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// The Bucket object the controller makes for a claim in `namespace`.
async fn bucket_object(admin: &Client, name: &str, namespace: &str) {
    let (client, resource) = cosi_api(admin, "Bucket", "buckets");
    let object = serde_json::from_value::<DynamicObject>(json!({
        "apiVersion": "objectstorage.k8s.io/v1alpha1", "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {"bucketClaim": {"namespace": namespace, "name": "claim"}}
    }))
    .unwrap();
    let api = Api::<DynamicObject>::all_with(client, &resource);
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A BucketAccess in `namespace`; answers the account name the sidecar sends for it.
async fn access_object(admin: &Client, namespace: &str) -> String {
    let (client, resource) = cosi_api(admin, "BucketAccess", "bucketaccesses");
    let object = serde_json::from_value::<DynamicObject>(json!({
        "apiVersion": "objectstorage.k8s.io/v1alpha1", "kind": "BucketAccess",
        "metadata": {"name": format!("access-{}", unique_suffix())},
        "spec": {}
    }))
    .unwrap();
    let api = Api::<DynamicObject>::namespaced_with(client, namespace, &resource);
    let made = api.create(&PostParams::default(), &object).await.unwrap();
    format!("ba-{}", made.metadata.uid.unwrap())
}

/// The binary serving COSI alone, restarted (without a crash point) whenever a call kills it.
struct Driver<'a> {
    env: &'a Env,
    identity: String,
    socket: PathBuf,
    process: Provisioner,
    /// The calls a crash point stopped.
    crashed: Vec<String>,
}

impl<'a> Driver<'a> {
    /// Starts the binary on `env`'s root with a store identity of its own, set to abort at
    /// `step`.
    fn start(env: &'a Env, step: &str) -> Self {
        let socket = env.root.path().join("cosi.sock");
        let identity = format!("cosi-crash-{}", unique_suffix());
        let process = spawn(env, &identity, &socket, step);
        Driver { env, identity, socket, process, crashed: Vec::new() }
    }

    fn restart(&mut self) {
        self.process = spawn(self.env, &self.identity, &self.socket, "");
    }

    async fn connect(&self) -> Cosi {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let socket = self.socket.clone();
            let connector = tower::service_fn(move |_: Uri| {
                let socket = socket.clone();
                async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
            });
            let endpoint = Endpoint::from_static("http://cosi.invalid");
            match endpoint.connect_with_connector(connector).await {
                Ok(channel) => return Cosi::new(channel),
                Err(e) if tokio::time::Instant::now() > deadline => panic!("COSI socket: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Makes the call; if a crash point killed the process, restarts it and repeats the call,
    /// as the sidecar does, which must then succeed.
    async fn call<T, F, Fut>(&mut self, what: &str, call: F) -> T
    where
        F: Fn(Cosi) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        match call(self.connect().await).await {
            Ok(answer) => return answer.into_inner(),
            Err(status) => {
                let exited = self.process.exited(Duration::from_secs(10)).await;
                assert!(exited.is_some(), "{what} failed with the process alive: {status:?}");
            }
        }
        self.crashed.push(what.to_owned());
        self.restart();
        let answer = call(self.connect().await).await;
        answer.unwrap_or_else(|e| panic!("{what} repeated after a restart: {e:?}")).into_inner()
    }
}

/// The binary serving COSI alone on `socket`, aborting at `step` (none if empty).
fn spawn(env: &Env, identity: &str, socket: &std::path::Path, step: &str) -> Provisioner {
    let endpoint = format!("--cosi-endpoint=unix://{}", socket.display());
    env.start_crashing_with(identity, step, &["--leader-elect=false", &endpoint, "--cosi-only"])
}

/// The store as the restarted process finds it: read from its files.
fn store(env: &Env) -> BucketStore {
    BucketStore::open(env.root.path().to_owned(), "reader").unwrap()
}

/// Endpoint, id, secret of a grant's answer.
fn key_of(answer: &pb::DriverGrantBucketAccessResponse) -> (String, String) {
    let secrets = &answer.credentials[secret_keys::S3].secrets;
    (secrets[secret_keys::ACCESS_KEY_ID].clone(), secrets[secret_keys::ACCESS_SECRET_KEY].clone())
}

#[tokio::test]
async fn the_driver_killed_at_every_step_finishes_the_work_and_leaks_nothing() {
    test_support::init_tracing();
    let env = Env::new("cosi-crash").await;
    install_stand_in_crds(&env.client).await.unwrap();
    grant_cosi_reads(&env.client).await;
    let mut stopped = Vec::new();
    for step in COSI_STEPS {
        let bucket = format!("cosi-crash-{}", unique_suffix());
        let mut driver = Driver::start(&env, step);
        let create = || pb::DriverCreateBucketRequest {
            name: bucket.clone(),
            parameters: HashMap::from([("maxObjects".to_owned(), "10".to_owned())]),
        };
        let created = driver
            .call("create", |mut c| {
                let request = create();
                async move { c.driver_create_bucket(request).await }
            })
            .await;
        let again =
            driver.connect().await.driver_create_bucket(create()).await.unwrap().into_inner();
        assert_eq!(again, created, "{step}: a repeated create answers the same bucket id");
        assert_eq!(store(&env).bucket_names().await.unwrap(), vec![bucket.clone()], "{step}");
        assert!(env.bucket_dir(&bucket).is_dir(), "{step}: the bucket's directory is made");

        bucket_object(&env.client, &bucket, &env.ns).await;
        let account = access_object(&env.client, &env.ns).await;
        let grant = || pb::DriverGrantBucketAccessRequest {
            bucket_id: created.bucket_id.clone(),
            name: account.clone(),
            authentication_type: pb::AuthenticationType::Key.into(),
            parameters: HashMap::new(),
        };
        let granted = driver
            .call("grant", |mut c| {
                let request = grant();
                async move { c.driver_grant_bucket_access(request).await }
            })
            .await;
        let again = driver.connect().await.driver_grant_bucket_access(grant()).await.unwrap();
        assert_eq!(again.into_inner(), granted, "{step}: a repeated grant answers the same key");
        let (key, secret) = key_of(&granted);
        let s3 = s3_with(env.port, &key, &secret);
        put(&s3, &bucket, "after-crash.txt", b"kept").await.unwrap();
        assert_eq!(get(&s3, &bucket, "after-crash.txt").await.unwrap(), b"kept");
        let keys = store(&env).keys_for_user(&granted.account_id);
        assert_eq!(keys.len(), 1, "{step}: one key per access");

        let revoke = || pb::DriverRevokeBucketAccessRequest {
            bucket_id: created.bucket_id.clone(),
            account_id: granted.account_id.clone(),
            revoke_access_context: HashMap::new(),
        };
        driver
            .call("revoke", |mut c| {
                let request = revoke();
                async move { c.driver_revoke_bucket_access(request).await }
            })
            .await;
        driver.connect().await.driver_revoke_bucket_access(revoke()).await.unwrap();
        assert!(store(&env).keys_for_user(&granted.account_id).is_empty(), "{step}");
        let refused = put(&s3, &bucket, "revoked.txt", b"no").await;
        assert_eq!(refused, Err("InvalidAccessKeyId".to_owned()), "{step}: the key is gone");

        let delete = || pb::DriverDeleteBucketRequest {
            bucket_id: created.bucket_id.clone(),
            delete_context: HashMap::new(),
        };
        driver
            .call("delete", |mut c| {
                let request = delete();
                async move { c.driver_delete_bucket(request).await }
            })
            .await;
        driver.connect().await.driver_delete_bucket(delete()).await.unwrap();
        let left = store(&env);
        assert!(left.bucket_names().await.unwrap().is_empty(), "{step}: no bucket is left");
        assert!(left.bucket_record(&bucket).is_none(), "{step}: nor its record");
        assert!(!env.bucket_dir(&bucket).exists(), "{step}: nor its directory");
        assert!(driver.process.is_running(), "{step}: the restarted process still serves");
        stopped.push((step, driver.crashed.clone()));
        driver.process.kill().await;
    }
    // Each crash point was reached (and killed the process) by exactly one call.
    let expected = [
        ("bucket:recorded", "create"),
        ("cosi:bucket-created", "create"),
        ("cosi:key-issued", "grant"),
        ("cosi:key-revoked", "revoke"),
        ("bucket:keys-removed", "delete"),
        ("bucket:data-removed", "delete"),
        ("cosi:bucket-deleted", "delete"),
    ];
    let stopped: Vec<(&str, Vec<String>)> = stopped;
    let expected: Vec<(&str, Vec<String>)> =
        expected.iter().map(|(s, c)| (*s, vec![(*c).to_owned()])).collect();
    assert_eq!(stopped, expected, "every crash point stopped the call it belongs to");
}

//! A driver as deployed, over a real socket: the hostPath backend on a store under a temporary
//! directory, its S3 endpoint serving on loopback, the COSI server on a unix socket, and a tonic
//! client of each version dialling it.

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use bucket_api::ReclaimPolicy;
use bucket_provisioner::{BucketOptions, Provisioner, user_id_for_claim};
use cosi_driver::Driver;
use cosi_driver::proto::{v1alpha1, v1alpha2};
use hostpath_provisioner::{BucketStore, HostPathConfig, HostPathProvisioner};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tonic::transport::{Channel, Endpoint, Uri};

/// Everything a test talks to; all of it stops when dropped.
pub struct Harness {
    pub store: Arc<BucketStore>,
    pub backend: Arc<HostPathProvisioner>,
    pub s3: SocketAddr,
    pub channel: Channel,
    _stop: Vec<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

pub const DRIVER: &str = "hostpath.bucket-provisioner.io";

impl Harness {
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// A driver checking every grant with `lookup`.
    pub async fn start_with(lookup: Option<Arc<dyn cosi_driver::Lookup>>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(BucketStore::open(dir.path().join("root"), "test-identity").unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s3 = listener.local_addr().unwrap();
        let (stop_s3, s3_stopped) = oneshot::channel::<()>();
        tokio::spawn(s3_endpoint::serve(listener, store.clone(), async move {
            let _ = s3_stopped.await;
        }));
        let config = HostPathConfig {
            host: "127.0.0.1".into(),
            port: s3.port(),
            region: "us-east-1".into(),
        };
        let backend = Arc::new(HostPathProvisioner::new(store.clone(), config));
        // A stale file where the socket goes: the server replaces it.
        let socket: PathBuf = dir.path().join("run/cosi/cosi.sock");
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        std::fs::write(&socket, b"stale").unwrap();
        let mut driver = Driver::new(backend.clone(), DRIVER).unwrap();
        if let Some(lookup) = lookup {
            driver = driver.with_lookup(lookup);
        }
        let listener = cosi_driver::bind(&format!("unix://{}", socket.display())).unwrap();
        let (stop_cosi, cosi_stopped) = oneshot::channel::<()>();
        tokio::spawn(cosi_driver::serve_on(driver, listener, async move {
            let _ = cosi_stopped.await;
        }));
        let channel =
            Endpoint::from_static("http://cosi.invalid")
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let socket = socket.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?))
                    }
                }))
                .await
                .unwrap();
        Harness { store, backend, s3, channel, _stop: vec![stop_s3, stop_cosi], _dir: dir }
    }

    pub fn v1(&self) -> v1alpha1::provisioner_client::ProvisionerClient<Channel> {
        v1alpha1::provisioner_client::ProvisionerClient::new(self.channel.clone())
    }

    pub fn v2(&self) -> v1alpha2::provisioner_client::ProvisionerClient<Channel> {
        v1alpha2::provisioner_client::ProvisionerClient::new(self.channel.clone())
    }

    /// An S3 client signing with a key pair, as a consumer of the Secret would.
    pub fn s3_client(&self, endpoint: &str, id: &str, secret: &str) -> Client {
        assert_eq!(endpoint, format!("http://{}", self.s3), "the endpoint handed out");
        let config = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .force_path_style(true)
            .credentials_provider(Credentials::new(id, secret, None, None, "test"))
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .build();
        Client::from_conf(config)
    }

    /// A bucket provisioned for an objectbucket.io claim, as the controller would.
    pub async fn claim_bucket(&self, bucket: &str) {
        let options = BucketOptions {
            bucket_name: bucket.to_owned(),
            user_id: user_id_for_claim("0b1e6c1a-claim"),
            reclaim_policy: ReclaimPolicy::Delete,
            parameters: BTreeMap::new(),
            additional_config: Default::default(),
            access_mode: Default::default(),
            storage_class_name: "hostpath".to_owned(),
            web_identity: None,
            claim: Default::default(),
        };
        self.backend.provision(&options).await.unwrap();
    }

    /// How many keys the store holds.
    pub fn key_count(&self, user: &str) -> usize {
        self.store.keys_for_user(user).len()
    }
}

pub fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// The S3 error code of a failed call.
pub fn code<E: aws_sdk_s3::error::ProvideErrorMetadata, R>(
    err: &aws_sdk_s3::error::SdkError<E, R>,
) -> String {
    err.as_service_error().and_then(|e| e.code()).unwrap_or("<no code>").to_owned()
}

/// Writes, reads back and lists one object.
pub async fn writes_reads_lists(client: &Client, bucket: &str) {
    client
        .put_object()
        .bucket(bucket)
        .key("hello.txt")
        .body(ByteStream::from_static(b"hello"))
        .send()
        .await
        .unwrap();
    let got = client.get_object().bucket(bucket).key("hello.txt").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"hello");
    let listed = client.list_objects_v2().bucket(bucket).send().await.unwrap();
    assert_eq!(listed.contents().len(), 1);
}

/// Whether a write with this client is refused, and with which code.
pub async fn write_refused(client: &Client, bucket: &str) -> String {
    let err = client
        .put_object()
        .bucket(bucket)
        .key("denied.txt")
        .body(ByteStream::from_static(b"no"))
        .send()
        .await
        .unwrap_err();
    code(&err)
}

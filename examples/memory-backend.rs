//! A complete (if forgetful) backend: buckets live in memory. Everything Kubernetes — claims,
//! Secrets, ConfigMaps, ObjectBuckets, status, Events, retries, leader election, metrics — comes
//! from the library.
//!
//! Run it against a cluster with the CRDs installed and a StorageClass whose provisioner is
//! `example.com/memory-bucket`:
//! `cargo run -p bucket-provisioner --example memory-backend -- --kubeconfig ~/.kube/config`

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use bucket_api::ObjectBucket;
use bucket_provisioner::runtime::{ControllerArgs, RunError, init_logging, run, shutdown_signal};
use bucket_provisioner::{
    BackendError, BucketOptions, Credentials, Endpoint, ProvisionedBucket, Provisioner, user_id_of,
};
use clap::Parser;

/// bucket name → users with access
#[derive(Default)]
struct MemoryBuckets(Mutex<BTreeMap<String, BTreeSet<String>>>);

impl MemoryBuckets {
    fn give_access(&self, options: &BucketOptions) -> ProvisionedBucket {
        let mut buckets = self.0.lock().unwrap();
        buckets.entry(options.bucket_name.clone()).or_default().insert(options.user_id.clone());
        ProvisionedBucket {
            endpoint: Endpoint {
                scheme: "http".into(),
                host: "memory.example".into(),
                port: 9000,
                region: "us-east-1".into(),
                sub_region: String::new(),
            },
            // Derived from the user id, so a retried call hands out the same key.
            credentials: Credentials {
                access_key_id: options.user_id.clone(),
                secret_access_key: format!("not-a-secret-{}", options.user_id),
            },
            additional_state: BTreeMap::new(),
        }
    }
}

fn bucket_of(bucket: &ObjectBucket) -> String {
    bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.clone()).unwrap_or_default()
}

impl Provisioner for MemoryBuckets {
    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        match options.parameters.keys().next() {
            Some(key) => Err(BackendError::invalid_parameter(format!("unknown parameter {key:?}"))),
            None => Ok(()),
        }
    }

    async fn provision(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        Ok(self.give_access(options)) // creating twice is fine: the map entry is reused
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        if !self.0.lock().unwrap().contains_key(&options.bucket_name) {
            let message = format!("bucket {:?} does not exist", options.bucket_name);
            return Err(BackendError::permanent("BucketNotFound", message));
        }
        Ok(self.give_access(options))
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        self.0.lock().unwrap().remove(&bucket_of(bucket)); // already gone counts as done
        Ok(())
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        if let (Some(users), Some(user)) =
            (self.0.lock().unwrap().get_mut(&bucket_of(bucket)), user_id_of(bucket))
        {
            users.remove(&user);
        }
        Ok(())
    }
}

#[derive(Parser)]
struct Args {
    /// The StorageClass `provisioner` value to answer to.
    #[arg(long, default_value = "example.com/memory-bucket")]
    provisioner_name: String,
    #[command(flatten)]
    controller: ControllerArgs,
}

#[tokio::main]
async fn main() -> Result<(), RunError> {
    init_logging();
    let args = Args::parse();
    run(MemoryBuckets::default(), &args.provisioner_name, &args.controller, shutdown_signal()).await
}

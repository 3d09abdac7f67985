//! A complete (if forgetful) backend: buckets live in memory. Everything Kubernetes — claims,
//! Secrets, ConfigMaps, ObjectBuckets, status, Events, retries, leader election, metrics — comes
//! from the library.
//!
//! Run it against a cluster with the CRDs installed and a StorageClass whose provisioner is
//! `example.com/memory-bucket`:
//! `cargo run -p bucket-provisioner --example memory-backend -- --kubeconfig ~/.kube/config`

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use bucket_api::{ObjectBucket, ReclaimPolicy};
use bucket_provisioner::bucket::standalone::{
    BucketLocation, IssuedKey, KeyBucket, KeyRequest, NewBucket, cosi_may_use,
};
use bucket_provisioner::runtime::{ControllerArgs, RunError, init_logging, run, shutdown_signal};
use bucket_provisioner::{
    BackendError, BucketOptions, Credentials, Endpoint, ProvisionedBucket, Provisioner, Removed,
    user_id_of,
};
use clap::Parser;

/// What the backend itself records of a bucket: the claim that created it (never taken from the
/// claim's spec or annotations, which its tenant writes) and who has access.
#[derive(Default)]
struct Bucket {
    /// User id of the creating claim and whether the bucket goes with it; `None` when the bucket
    /// existed before any claim.
    creator: Option<(String, ReclaimPolicy)>,
    users: BTreeSet<String>,
}

/// Buckets by name, and the COSI front's keys by owner id with what they reach.
#[derive(Default)]
struct MemoryBuckets(Mutex<BTreeMap<String, Bucket>>, Mutex<BTreeMap<String, Vec<KeyBucket>>>);

impl MemoryBuckets {
    fn endpoint() -> Endpoint {
        Endpoint {
            scheme: "http".into(),
            host: "memory.example".into(),
            port: 9000,
            region: "us-east-1".into(),
            sub_region: String::new(),
        }
    }

    fn give_access(&self, options: &BucketOptions) -> ProvisionedBucket {
        let mut buckets = self.0.lock().unwrap();
        buckets
            .entry(options.bucket_name.clone())
            .or_default()
            .users
            .insert(options.user_id.clone());
        ProvisionedBucket {
            endpoint: Self::endpoint(),
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
        {
            let mut buckets = self.0.lock().unwrap();
            let bucket = buckets.entry(options.bucket_name.clone()).or_insert_with(|| Bucket {
                creator: Some((options.user_id.clone(), options.reclaim_policy)),
                users: BTreeSet::new(),
            });
            // A retry by the creating claim is fine; anyone else gets no foothold.
            if bucket.creator.as_ref().map(|(user, _)| user) != Some(&options.user_id) {
                return Err(BackendError::name_taken(&options.bucket_name));
            }
        }
        Ok(self.give_access(options))
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        if !self.0.lock().unwrap().contains_key(&options.bucket_name) {
            let message = format!("bucket {:?} does not exist", options.bucket_name);
            return Err(BackendError::permanent("BucketNotFound", message));
        }
        Ok(self.give_access(options))
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<Removed, BackendError> {
        let name = bucket_of(bucket);
        let claimant = user_id_of(bucket);
        let mut buckets = self.0.lock().unwrap();
        let Some(recorded) = buckets.get_mut(&name) else { return Ok(Removed::Bucket) };
        match (&recorded.creator, &claimant) {
            (Some((creator, ReclaimPolicy::Delete)), Some(user)) if creator == user => {
                buckets.remove(&name);
                Ok(Removed::Bucket)
            }
            // Our record does not say this claim made it to go with it: only its access goes.
            _ => {
                if let Some(user) = claimant {
                    recorded.users.remove(&user);
                }
                Ok(Removed::AccessOnly)
            }
        }
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        if let (Some(recorded), Some(user)) =
            (self.0.lock().unwrap().get_mut(&bucket_of(bucket)), user_id_of(bucket))
        {
            recorded.users.remove(&user);
        }
        Ok(())
    }

    // The COSI front's operations: buckets with no key, and keys of their own.

    async fn create_bucket(&self, bucket: &NewBucket) -> Result<BucketLocation, BackendError> {
        let mut buckets = self.0.lock().unwrap();
        let recorded = buckets.entry(bucket.bucket_name.clone()).or_insert_with(|| Bucket {
            creator: Some((bucket.owner_id.clone(), ReclaimPolicy::Delete)),
            users: BTreeSet::new(),
        });
        if recorded.creator.as_ref().map(|(owner, _)| owner) != Some(&bucket.owner_id) {
            return Err(BackendError::name_taken(&bucket.bucket_name));
        }
        Ok(BucketLocation { bucket_name: bucket.bucket_name.clone(), endpoint: Self::endpoint() })
    }

    async fn delete_bucket(&self, name: &str, owner_id: &str) -> Result<Removed, BackendError> {
        let mut buckets = self.0.lock().unwrap();
        match buckets.get(name).map(|b| b.creator.as_ref().map(|(owner, _)| owner.as_str())) {
            None => Ok(Removed::Bucket),
            Some(Some(owner)) if owner == owner_id => {
                buckets.remove(name);
                Ok(Removed::Bucket)
            }
            Some(_) => Ok(Removed::AccessOnly),
        }
    }

    async fn existing_bucket(
        &self,
        name: &str,
        _parameters: &BTreeMap<String, String>,
    ) -> Result<BucketLocation, BackendError> {
        let buckets = self.0.lock().unwrap();
        match buckets.get(name) {
            Some(b) if cosi_may_use(b.creator.as_ref().map(|(owner, _)| owner.as_str())) => {
                Ok(BucketLocation { bucket_name: name.to_owned(), endpoint: Self::endpoint() })
            }
            _ => Err(BackendError::not_found(format!("bucket {name:?}"))),
        }
    }

    async fn issue_key(&self, request: &KeyRequest) -> Result<IssuedKey, BackendError> {
        let buckets = self.0.lock().unwrap();
        for wanted in &request.buckets {
            let creator = buckets
                .get(&wanted.bucket_name)
                .map(|b| b.creator.as_ref().map(|(owner, _)| owner.as_str()));
            if !creator.is_some_and(cosi_may_use) {
                return Err(BackendError::not_found(format!("bucket {:?}", wanted.bucket_name)));
            }
        }
        let mut keys = self.1.lock().unwrap();
        let key = keys.entry(request.owner_id.clone()).or_insert_with(|| request.buckets.clone());
        if *key != request.buckets {
            return Err(BackendError::access_conflict(&request.owner_id));
        }
        Ok(IssuedKey {
            endpoint: Self::endpoint(),
            credentials: Credentials {
                access_key_id: request.owner_id.clone(),
                secret_access_key: format!("not-a-secret-{}", request.owner_id),
            },
            web_identity: None,
        })
    }

    async fn revoke_key(&self, owner_id: &str) -> Result<(), BackendError> {
        self.1.lock().unwrap().remove(owner_id);
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
    let args = Args::parse();
    init_logging(args.controller.log_format);
    let shutdown = shutdown_signal();
    run(MemoryBuckets::default(), &args.provisioner_name, &args.controller, shutdown, Vec::new())
        .await
}

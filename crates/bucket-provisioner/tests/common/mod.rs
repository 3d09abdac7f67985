//! Shared pieces of the library's tests on a real control plane: an in-memory backend that can be
//! told to fail or hang, and helpers for claims, classes and Events.

#![allow(dead_code, unused_imports)] // each test binary uses its own part

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use bucket_api::{AccessMode, BucketUsage, ObjectBucket, ObjectBucketClaimSpec, ReclaimPolicy};
use bucket_provisioner::{
    BackendError, BucketOptions, Credentials, Endpoint, ProvisionedBucket, Provisioner, Removed,
    user_id_of,
};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use test_support::{ControlPlane, deployed_identity, eventually};
use tokio::sync::Notify;

pub use test_support::{
    Deployed, Harness, create_claim, ready, wait_claim_gone as wait_gone,
    wait_for_claim as wait_for,
};
use test_support::{bucket_class, parameters};

/// A backend operation, as recorded and as targeted by injected failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// `provision`
    Provision,
    /// `grant`
    Grant,
    /// `delete`
    Delete,
    /// `revoke`
    Revoke,
    /// `update`
    Update,
}

/// What an injected fault does.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Fail with a permanent error of this reason.
    Permanent(&'static str),
    /// Fail with a transient error.
    Transient,
    /// Hang before doing anything, until [`MemoryBackend::release_hangs`].
    HangBefore,
    /// Do the work, then hang before answering (a crash right after the backend acted).
    HangAfter,
    /// Panic, as a defect of the backend would.
    Panic,
}

/// The backend's own record of a bucket.
#[derive(Default)]
struct Bucket {
    /// The claim (user id) that created it and the policy it was created under; `None` for a
    /// bucket that existed before any claim.
    creator: Option<(String, ReclaimPolicy)>,
    /// user id → key id
    keys: BTreeMap<String, String>,
}

#[derive(Default)]
struct State {
    buckets: BTreeMap<String, Bucket>,
    calls: Vec<(Op, String)>,
    updates: Vec<BTreeMap<String, String>>,
    /// What every provision, grant and update was handed: `additionalConfig` and access mode.
    handed: Vec<(Op, BTreeMap<String, String>, AccessMode)>,
    cleanup_states: Vec<BTreeMap<String, String>>,
    /// For each provision call: (the bucket asked for, the name the claim recorded by then).
    provisioned_names: Vec<(String, Option<String>)>,
    faults: BTreeMap<Op, (Fault, usize)>,
    /// What buckets hold, as `usage` reports it; buckets not here report nothing.
    usage: BTreeMap<String, BucketUsage>,
    /// Buckets whose `usage` panics, as a defect of the backend would.
    usage_panics: BTreeSet<String>,
}

/// An in-memory backend with fault injection. Clones share state.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    state: Arc<Mutex<State>>,
    hang: Arc<Notify>,
}

const ALLOWED_PARAMETERS: [&str; 2] = ["region", "tier"];
const ALLOWED_CONFIG: [&str; 2] = ["maxObjects", "maxSize"];

impl MemoryBackend {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Makes the next `times` calls of `op` hit `fault`.
    pub fn inject(&self, op: Op, fault: Fault, times: usize) {
        self.state().faults.insert(op, (fault, times));
    }

    /// Lets every hanging call go on.
    pub fn release_hangs(&self) {
        self.hang.notify_waiters();
    }

    /// A bucket that exists before any claim (for grants), or one owned by someone else.
    pub fn add_existing_bucket(&self, name: &str) {
        self.state().buckets.insert(name.into(), Bucket::default());
    }

    /// The buckets that exist now.
    pub fn buckets(&self) -> BTreeSet<String> {
        self.state().buckets.keys().cloned().collect()
    }

    /// Users holding keys on `bucket`.
    pub fn users_of(&self, bucket: &str) -> BTreeSet<String> {
        self.state()
            .buckets
            .get(bucket)
            .map(|b| b.keys.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// How often `op` was called (failed calls included).
    pub fn calls(&self, op: Op) -> usize {
        self.state().calls.iter().filter(|(o, _)| *o == op).count()
    }

    /// Every call so far, in order.
    pub fn all_calls(&self) -> Vec<(Op, String)> {
        self.state().calls.clone()
    }

    /// The `additionalState` handed to every `delete` and `revoke` call.
    pub fn cleanup_states(&self) -> Vec<BTreeMap<String, String>> {
        self.state().cleanup_states.clone()
    }

    /// For each `provision` call: the bucket asked for, and the name its claim had recorded by
    /// the time of the call.
    pub fn provisioned_names(&self) -> Vec<(String, Option<String>)> {
        self.state().provisioned_names.clone()
    }

    /// Makes `usage` report that `bucket` holds `usage`.
    pub fn set_usage(&self, bucket: &str, usage: BucketUsage) {
        self.state().usage.insert(bucket.into(), usage);
    }

    /// Makes `usage` panic for `bucket`.
    pub fn panic_on_usage(&self, bucket: &str) {
        self.state().usage_panics.insert(bucket.into());
    }

    /// The `additionalConfig` of every `update` call.
    pub fn updates(&self) -> Vec<BTreeMap<String, String>> {
        self.state().updates.clone()
    }

    /// What every provision, grant and update was handed, in order: the operation, the
    /// `additionalConfig` and the access mode.
    pub fn handed(&self) -> Vec<(Op, BTreeMap<String, String>, AccessMode)> {
        self.state().handed.clone()
    }

    fn hand(&self, op: Op, options: &BucketOptions) {
        let config = options.additional_config.requested().clone();
        self.state().handed.push((op, config, options.access_mode));
    }

    /// Records the call and applies a pending fault; `Some` means hang or fail now.
    async fn enter(&self, op: Op, bucket: &str) -> Result<Option<Fault>, BackendError> {
        let fault = {
            let mut state = self.state();
            state.calls.push((op, bucket.to_string()));
            match state.faults.get_mut(&op) {
                Some((fault, remaining)) if *remaining > 0 => {
                    *remaining -= 1;
                    Some(fault.clone())
                }
                _ => None,
            }
        };
        match fault {
            Some(Fault::Permanent(reason)) => {
                Err(BackendError::permanent(reason, format!("injected permanent {op:?} failure")))
            }
            Some(Fault::Transient) => {
                Err(BackendError::transient(format!("injected transient {op:?} failure")))
            }
            Some(Fault::Panic) => panic!("injected {op:?} panic: a defect of the backend"),
            Some(Fault::HangBefore) => {
                self.hang.notified().await;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    async fn leave(&self, fault: Option<Fault>) {
        if matches!(fault, Some(Fault::HangAfter)) {
            self.hang.notified().await;
        }
    }

    fn answer(&self, options: &BucketOptions) -> ProvisionedBucket {
        let key = format!("AK{}", &options.user_id.replace('-', "")[..16].to_uppercase());
        self.state()
            .buckets
            .get_mut(&options.bucket_name)
            .map(|b| b.keys.insert(options.user_id.clone(), key.clone()));
        ProvisionedBucket {
            endpoint: Endpoint {
                scheme: "http".into(),
                host: "memory.test".into(),
                port: 9000,
                region: "us-test-1".into(),
                sub_region: String::new(),
            },
            credentials: Credentials {
                access_key_id: key,
                secret_access_key: format!("secret-{}", options.user_id),
            },
            additional_state: BTreeMap::from([("backend".into(), "memory".into())]),
        }
    }
}

impl Provisioner for MemoryBackend {
    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        if let Some(key) =
            options.parameters.keys().find(|k| !ALLOWED_PARAMETERS.contains(&k.as_str()))
        {
            return Err(BackendError::invalid_parameter(format!("unknown parameter {key:?}")));
        }
        for (key, value) in options.additional_config.requested() {
            if !ALLOWED_CONFIG.contains(&key.as_str()) {
                return Err(BackendError::invalid_parameter(format!(
                    "unknown additionalConfig key {key:?}"
                )));
            }
            if key == "maxObjects" && value.parse::<u64>().is_err() {
                return Err(BackendError::invalid_parameter(format!(
                    "additionalConfig maxObjects must be a whole number, not {value:?}"
                )));
            }
        }
        Ok(())
    }

    fn cleanup_state(&self, options: &BucketOptions) -> BTreeMap<String, String> {
        BTreeMap::from([("recordedFor".to_string(), options.bucket_name.clone())])
    }

    async fn provision(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let recorded = options.claim.requested().spec.bucket_name.clone();
        self.state().provisioned_names.push((options.bucket_name.clone(), recorded));
        self.hand(Op::Provision, options);
        let fault = self.enter(Op::Provision, &options.bucket_name).await?;
        let created_by_claim = {
            let mut state = self.state();
            let bucket =
                state.buckets.entry(options.bucket_name.clone()).or_insert_with(|| Bucket {
                    creator: Some((options.user_id.clone(), options.reclaim_policy)),
                    keys: BTreeMap::new(),
                });
            bucket.creator.as_ref().map(|(user, _)| user) == Some(&options.user_id)
        };
        if !created_by_claim {
            return Err(BackendError::name_taken(&options.bucket_name));
        }
        let answer = self.answer(options);
        self.leave(fault).await;
        Ok(answer)
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        self.hand(Op::Grant, options);
        let fault = self.enter(Op::Grant, &options.bucket_name).await?;
        if !self.state().buckets.contains_key(&options.bucket_name) {
            return Err(BackendError::permanent(
                "BucketNotFound",
                format!("bucket {:?} does not exist", options.bucket_name),
            ));
        }
        let answer = self.answer(options);
        self.leave(fault).await;
        Ok(answer)
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<Removed, BackendError> {
        let name = bucket_name(bucket);
        let fault = self.enter(Op::Delete, &name).await?;
        let user = user_id_of(bucket).unwrap_or_default();
        let removed = {
            let mut state = self.state();
            state.cleanup_states.push(bucket.spec.additional_state.clone().unwrap_or_default());
            let creator = state.buckets.get(&name).map(|b| b.creator.clone());
            match creator {
                None => Removed::Bucket,
                Some(Some((creator, ReclaimPolicy::Delete))) if creator == user => {
                    state.buckets.remove(&name);
                    Removed::Bucket
                }
                Some(_) => {
                    if let Some(b) = state.buckets.get_mut(&name) {
                        b.keys.remove(&user);
                    }
                    Removed::AccessOnly
                }
            }
        };
        self.leave(fault).await;
        Ok(removed)
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        let name = bucket_name(bucket);
        let fault = self.enter(Op::Revoke, &name).await?;
        let user = user_id_of(bucket).unwrap_or_default();
        {
            let mut state = self.state();
            if let Some(b) = state.buckets.get_mut(&name) {
                b.keys.remove(&user);
            }
            state.cleanup_states.push(bucket.spec.additional_state.clone().unwrap_or_default());
        }
        self.leave(fault).await;
        Ok(())
    }

    async fn update(&self, options: &BucketOptions, _: &ObjectBucket) -> Result<(), BackendError> {
        let fault = self.enter(Op::Update, &options.bucket_name).await?;
        self.state().updates.push(options.additional_config.requested().clone());
        self.hand(Op::Update, options);
        self.leave(fault).await;
        Ok(())
    }

    fn usage(&self, bucket: &ObjectBucket) -> Option<BucketUsage> {
        let name = bucket_name(bucket);
        // Not while holding the state's lock, which would poison it for every other call.
        let panics = self.state().usage_panics.contains(&name);
        assert!(!panics, "injected usage panic on bucket {name}");
        self.state().usage.get(&name).cloned()
    }
}

fn bucket_name(bucket: &ObjectBucket) -> String {
    bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.clone()).unwrap_or_default()
}

/// A client of the shared control plane acting as the bucket provisioners are deployed.
pub async fn as_deployed() -> Client {
    let plane = ControlPlane::shared();
    deployed_identity(plane, Deployed::HostPath)
        .await
        .expect("the deployed identity")
        .client()
        .await
}

/// Creates a StorageClass with a unique name for `provisioner`; returns its name.
pub async fn storage_class(
    client: &Client,
    provisioner: &str,
    pairs: &[(&str, &str)],
    reclaim_policy: Option<&str>,
) -> String {
    bucket_class(client, "bucket-class", provisioner, parameters(pairs), reclaim_policy).await
}

/// A claim spec against `class`.
pub fn claim_spec(class: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec { storage_class_name: class.into(), ..Default::default() }
}

/// A claim spec for the bucket `bucket` against `class`.
pub fn named_spec(class: &str, bucket: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec { bucket_name: Some(bucket.into()), ..claim_spec(class) }
}

/// The reasons of the Events recorded on the claim `name` in `namespace`.
pub async fn event_reasons(client: &Client, namespace: &str, name: &str) -> BTreeSet<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events
        .list(&ListParams::default())
        .await
        .expect("listing events")
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

/// Waits until an Event of `reason` is recorded on the claim.
pub async fn wait_event(client: &Client, namespace: &str, name: &str, reason: &str) {
    eventually(&format!("an Event {reason} on {name}"), || async {
        event_reasons(client, namespace, name).await.contains(reason).then_some(())
    })
    .await
}

/// The name of a claim's ObjectBucket.
pub fn object_bucket_name(namespace: &str, claim: &str) -> String {
    format!("obc-{namespace}-{claim}")
}

/// Whether the object has the claim finalizer.
pub fn has_finalizer(object: &impl ResourceExt) -> bool {
    object.finalizers().iter().any(|f| f == bucket_api::contract::FINALIZER)
}

//! The contract between the controller and a storage backend.
//!
//! # Writing a backend
//!
//! A backend implements [`Provisioner`]: four operations on buckets (five more for COSI), each
//! handed everything it needs, so that it never talks to Kubernetes. The library owns the claim's whole life: it picks
//! and records the bucket name, writes the Secret, ConfigMap and ObjectBucket, reports status and
//! Events, and retries.
//!
//! | claim event | StorageClass has `bucketName`? | library calls |
//! |---|---|---|
//! | created / recreated | no (greenfield) | [`Provisioner::provision`] |
//! | created / recreated | yes (brownfield) | [`Provisioner::grant`] |
//! | created with `additionalConfig` `shareFrom` (another claim's bucket) | — | [`Provisioner::grant`] of that bucket |
//! | `additionalConfig` (or its StorageClass's limits) changed | — | [`Provisioner::update`] |
//! | deleted, bucket created for it, policy `Delete` | — | [`Provisioner::delete`] |
//! | deleted, otherwise | — | [`Provisioner::revoke`] |
//! | refused, never Bound, for a Secret or ConfigMap of its name not its own | — | `delete` or `revoke`, as if deleted |
//! | bound, every usage interval | — | [`Provisioner::usage`] (optional) |
//! | claims of a class waiting long after a transient failure, every few seconds | — | [`Provisioner::probe`] (optional) |
//! | rotation asked for, or due by the StorageClass's `rotationPeriod` | — | [`Provisioner::rotate`] (optional) |
//! | the previous key's overlap window is over | — | [`Provisioner::retire_key`] (optional) |
//!
//! ## Ownership is yours to record
//! Everything on a claim (spec, labels, annotations) is written by its tenant and proves nothing,
//! and a hand-made ObjectBucket proves little more. What a tenant wrote reaches you as
//! [`TenantWritten`] ([`BucketOptions::claim`], [`BucketOptions::additional_config`]), read with
//! `requested()`: interpret it as a request and check it, but take addresses, Secret names and
//! the names of what you change or delete from [`BucketOptions::parameters`] (the operator's)
//! and your own records only; the workspace's `tenant_input` test holds the backends here to it. So the backend keeps its own record, with the
//! bucket, of the claim that created it ([`BucketOptions::user_id`], derived from the claim UID
//! the apiserver assigns) and of the reclaim policy it was created under:
//!
//! - `provision` of a bucket that exists succeeds only for the claim your record says created it
//!   (a retry). For anyone else, or a bucket you have no record of, return
//!   [`BackendError::name_taken`]: the claim fails without learning anything about the owner, and
//!   a generated name is replaced by a fresh one.
//! - `delete` removes the bucket only when your record says this claim created it under
//!   [`ReclaimPolicy::Delete`]; otherwise it removes the claim's own access and answers
//!   [`Removed::AccessOnly`]. The library asks for `delete` only when its own records say so, but
//!   those can be forged by a cluster administrator's hand-made ObjectBucket or, after a crash,
//!   rebuilt from the claim: your record decides.
//! - A bucket kept after its claim went (`Retain`) stays recorded as that claim's, so no new
//!   claim can take it over by name; an operator's StorageClass naming it (`bucketName`) is the
//!   only way back to it, through `grant`.
//!
//! ## Every call may be repeated
//! The controller can crash or lose its connection between any two steps, and a retried call gets
//! **the same** bucket name and [`BucketOptions::user_id`]. So every operation must be idempotent:
//! `provision` of a bucket that this claim already created succeeds; `delete` or `revoke` of
//! something already gone succeeds. Derive every name you create (users, keys, policies) from the
//! bucket name and `user_id`, never from randomness or time, and a retry can never create a second
//! one.
//!
//! ## Errors say whether retrying helps
//! Return [`BackendError::permanent`] for what only a change to the claim or the StorageClass can
//! fix (an unknown parameter, a name owned by someone else): the claim becomes `Failed` with your
//! reason and message, and nothing is retried until the claim changes. Return
//! [`BackendError::transient`] for everything else (network, throttling, server errors): the call is
//! retried with exponential backoff, and the claim shows why it is waiting.
//!
//! ## What to return
//! `provision` and `grant` return a [`ProvisionedBucket`]: where the bucket is, the credentials for
//! this claim alone, and any `additional_state` you need later. The state is stored on the
//! ObjectBucket and handed back to `delete` and `revoke`, which must work even when the
//! StorageClass is gone: record there whatever cleanup needs.
//!
//! ## Access modes and limits are the library's; enforcing them is yours
//! A claim asks for an access mode with `additionalConfig` `accessMode`, and an operator's
//! StorageClass may cap it and the quotas (`limitAccessMode`, `limitMaxSize`, ...; see
//! [`crate::bucket::limits`]). The library decides what is in force and hands you only the
//! outcome: [`BucketOptions::access_mode`], and [`BucketOptions::additional_config`] with the
//! quotas in force; a claim asking for more than its class allows never reaches you. Give the
//! claim's credentials exactly the mode's operations:
//!
//! | mode | allowed | refused |
//! |---|---|---|
//! | `ReadWrite` | everything a claim's credentials could do before modes existed | — |
//! | `ReadOnly` | reading and listing objects, their metadata and uploads in progress | every write, delete, multipart create/upload/complete/abort |
//! | `WriteOnly` | writing objects, multipart uploads (create, upload parts, list its parts, complete, abort) | reading or listing objects, and deleting them |
//!
//! Bucket-level lookups clients make before anything else (does the bucket exist, where is it)
//! stay allowed in every mode. A changed mode on a bound claim comes through
//! [`Provisioner::update`], with the mode the credentials had in [`access_mode_of`] the
//! ObjectBucket; `provision` and `grant` of a claim whose credentials are issued again get the
//! mode in force too.
//!
//! ## Sharing is a grant
//! A claim sharing another claim's bucket (see [`crate::bucket::sharing`]) reaches you as a
//! [`Provisioner::grant`] of that bucket under its own `user_id`, and as a
//! [`Provisioner::revoke`] when it goes or the bucket goes with its owner: nothing new to
//! implement. The library revokes every sharing claim's key before it asks you to `delete` the
//! owner's bucket. Across namespaces (see `cross_namespace`) it is the same two calls: a grant
//! when the owner's namespace and class consent, a revoke when they withdraw, and an
//! [`Provisioner::update`] with the narrower mode when the consent narrows.
//!
//! ## Rotation: two keys at most, never none
//! A claim's credentials are replaced on demand (its tenant changes the claim's
//! `objectbucket.io/rotate-credentials` annotation) or when its StorageClass's `rotationPeriod`
//! is up (see [`crate::bucket::rotation`]). The library calls [`Provisioner::rotate`] with the
//! access key id that is in the claim's Secret, writes the new key to the Secret, keeps the
//! previous one working for the class's `rotationOverlap`, then calls
//! [`Provisioner::retire_key`] for it. It records every step on the ObjectBucket before taking
//! it, so after a crash it calls `rotate` again (with the same key to keep) or `retire_key`
//! again; each must hold up to that:
//!
//! - `rotate(bucket, keep)` first removes every key of the claim other than `keep` (left over
//!   from an attempt whose answer was lost: its secret never reached anyone), then issues a new
//!   one with the same access as `keep`. The claim then has exactly two keys.
//! - `retire_key(bucket, id)` removes that key of the claim; one already gone counts as done.
//!   It never removes a key of another claim, whatever `id` says.
//! - `provision` or `grant` of a bound claim (its Secret lost its credentials) may answer with
//!   either of the claim's keys, or remove both and issue one: never a third.
//!
//! Both are handed the ObjectBucket, not [`BucketOptions`], so that a rotation under way ends even
//! when the StorageClass is gone. The defaults refuse permanently: a backend without rotation
//! leaves its claims' keys as they are, and a claim asking for a rotation fails with the reason
//! [`ROTATION_NOT_SUPPORTED`] until its request is taken back (removed, or set back to the value
//! last honoured). Any permanent refusal of `rotate` is handled the same way.
//!
//! ## Short-lived credentials for ServiceAccounts
//! A claim may name ServiceAccounts of its namespace (`additionalConfig` `serviceAccountName`)
//! where its StorageClass allows it (`webIdentity`; see [`crate::bucket::web_identity`]). The
//! library hands you their token subjects in [`BucketOptions::web_identity`] with every
//! `provision`, `grant` and `update`, and asks [`Provisioner::web_identity`] for the role they
//! assume and the STS endpoint where they assume it, which it writes into the claim's ConfigMap
//! for the SDKs. Let in exactly those subjects (none when the field is `None`), with the claim's
//! mode on its bucket, and make revoking or narrowing the claim's key end or narrow their
//! sessions at once; under [`WebIdentityOptions::sessions_only`] the claim's key must not work
//! with its own secret (its Secret is not written). The default refuses, so a backend that
//! cannot hold this fails such claims by name and never hands out a key instead.
//!
//! ## COSI: buckets and keys on their own
//! A COSI driver (see the `cosi-driver` crate) drives the same backend without claims: a bucket
//! is created with no key, and each access gets a key of its own, with a mode per bucket. Its
//! requests and answers are in [`crate::bucket::standalone`]; the defaults refuse permanently
//! (reason [`STANDALONE_NOT_SUPPORTED`](crate::bucket::standalone::STANDALONE_NOT_SUPPORTED)),
//! so a backend without them serves objectbucket.io claims only.
//!
//! | COSI call | library calls | the backend's answer the front turns into a status code |
//! |---|---|---|
//! | `DriverCreateBucket` | [`Provisioner::create_bucket`] | `name_taken` → `ALREADY_EXISTS` |
//! | `DriverGetExistingBucket` (v1alpha2) | [`Provisioner::existing_bucket`] | `not_found` → `NOT_FOUND` |
//! | `DriverDeleteBucket` | [`Provisioner::delete_bucket`] | gone counts as done |
//! | `DriverGrantBucketAccess` | [`Provisioner::issue_key`] | `access_conflict` → `ALREADY_EXISTS`, `multi_bucket_unsupported` → `OUT_OF_RANGE`, `not_found` → `NOT_FOUND` |
//! | `DriverRevokeBucketAccess` | [`Provisioner::revoke_key`] | gone counts as done |
//!
//! Every permanent error else is `INVALID_ARGUMENT` with your message, every transient one
//! `UNAVAILABLE`. The ownership rules above hold with owner ids in place of claims' user ids:
//! COSI owner ids start with `cosi-`, claims' with `obc-`, so neither front can take over or
//! delete the other's buckets. On top of that, `issue_key` and `existing_bucket` reach only
//! buckets [`cosi_may_use`](crate::bucket::standalone::cosi_may_use) (created by a COSI owner,
//! or by nobody's record: the operator's); a claim's bucket is `not_found` to them.
//!
//! A complete backend fits in a page: see `examples/memory-backend.rs` in the repository.

use std::collections::BTreeMap;
use std::future::Future;

pub use crate::bucket::location::{Credentials, Endpoint};
use bucket_api::contract::annotations;
use bucket_api::{AccessMode, BucketUsage, ObjectBucket, ObjectBucketClaim, ReclaimPolicy};
pub use provisioner_runtime::backend_error::{BUCKET_NAME_TAKEN, BackendError};

use crate::bucket::standalone::{
    BucketLocation, IssuedKey, KeyRequest, NewBucket, standalone_not_supported,
};
use crate::bucket::tenant_written::TenantWritten;
use crate::bucket::web_identity::{WEB_IDENTITY_NOT_SUPPORTED, WebIdentity, WebIdentityOptions};

/// What a backend needs to create a bucket or grant access to one.
#[derive(Clone, Debug)]
pub struct BucketOptions {
    /// The bucket: chosen (or generated) by the library, valid as an S3 bucket name, and the same
    /// on every retry.
    pub bucket_name: String,
    /// A stable identifier for this claim's access (derived from the claim UID): name users and
    /// keys after it so that retries find what an earlier attempt created.
    pub user_id: String,
    /// What happens to the bucket when the claim goes away.
    pub reclaim_policy: ReclaimPolicy,
    /// The StorageClass parameters, without the ones the library interprets (`bucketName` and
    /// the limits of [`crate::bucket::limits`]).
    pub parameters: BTreeMap<String, String>,
    /// The claim's `additionalConfig` as it is in force: without `accessMode` (see
    /// [`BucketOptions::access_mode`]), and with the quota keys `maxObjects` and `maxSize` set
    /// to what the StorageClass's limits allow. A class with no limits passes the claim's
    /// entries on as written. The tenant wrote it: a request, never an address or a name of
    /// something to read or delete.
    pub additional_config: TenantWritten<BTreeMap<String, String>>,
    /// What this claim's credentials may do with the bucket: `ReadWrite` unless the claim or
    /// its StorageClass narrowed it. Give the credentials exactly this (see "Access modes" in
    /// the [module documentation](self)); a backend that cannot narrow access returns
    /// [`BackendError::invalid_parameter`] for anything but `ReadWrite`.
    pub access_mode: AccessMode,
    /// Name of the StorageClass the claim uses.
    pub storage_class_name: String,
    /// The ServiceAccounts whose tokens may be traded for short-lived credentials of the
    /// bucket with this claim's mode, where its StorageClass allows it; `None` when the claim
    /// names none (then any the backend let in before are let in no more). See
    /// [`Provisioner::web_identity`].
    pub web_identity: Option<WebIdentityOptions>,
    /// The claim itself, for anything else a backend wants to look at: written by its tenant,
    /// so only ever a request (names to show, labels to copy), never an address, a Secret's name
    /// or something to change or delete.
    pub claim: TenantWritten<ObjectBucketClaim>,
}

/// What `provision` and `grant` hand back to the library.
#[derive(Clone, Debug, PartialEq)]
pub struct ProvisionedBucket {
    /// Where consumers reach the bucket.
    pub endpoint: Endpoint,
    /// Credentials for this claim alone.
    pub credentials: Credentials,
    /// Backend bookkeeping, stored on the ObjectBucket and handed back on `delete`/`revoke`.
    pub additional_state: BTreeMap<String, String>,
}

/// What a backend answers when it takes over a claim's bucket from a lib-bucket-provisioner
/// provisioner (see [`Provisioner::adopt`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Adoption {
    /// Where consumers reach the bucket: what the claim's ConfigMap already says.
    pub endpoint: Endpoint,
    /// Backend bookkeeping for the ObjectBucket, as `provision` would answer it.
    pub additional_state: BTreeMap<String, String>,
    /// The backend's records now say the claim created the bucket, so `delete` under the
    /// `Delete` policy removes it; `false`: only the claim's access is ever removed.
    pub bucket_created_by_claim: bool,
}

/// What [`Provisioner::delete`] removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removed {
    /// The bucket, its data and the claim's access (or they were already gone).
    Bucket,
    /// Only the claim's access: the backend's records do not show this claim creating the bucket
    /// under the `Delete` policy, so the bucket and its data stay.
    AccessOnly,
}

/// The reason of the default [`Provisioner::rotate`] and [`Provisioner::retire_key`].
pub const ROTATION_NOT_SUPPORTED: &str = "RotationNotSupported";

fn rotation_not_supported() -> BackendError {
    BackendError::permanent(
        ROTATION_NOT_SUPPORTED,
        "this provisioner cannot rotate credentials; remove the claim's \
         objectbucket.io/rotate-credentials annotation (or set it back to its previous value), \
         or use a StorageClass without rotationPeriod",
    )
}

/// A storage backend driven by the controller. See the [module documentation](self) for the
/// rules every implementation follows.
///
/// Methods return `Send` futures so that several claims are worked on concurrently; write them
/// as `async fn` in your `impl`.
pub trait Provisioner: Send + Sync + 'static {
    /// Checks the StorageClass parameters and `additionalConfig` before anything is created.
    /// Return [`BackendError::invalid_parameter`] for anything unknown or malformed.
    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        let _ = options;
        Ok(())
    }

    /// What cleanup needs when the process stopped after the backend acted but before its answer
    /// was recorded on an ObjectBucket: where the bucket lives, which account owns it, and the
    /// like (never secrets), from `options.parameters` alone. The library computes it again at
    /// cleanup from the claim's StorageClass as it is then (never from anything on the claim,
    /// which its tenant can write) and hands it to `delete` or `revoke` as `additionalState` of
    /// the ObjectBucket it passes; with the class gone, `additionalState` is empty. The default
    /// is empty.
    fn cleanup_state(&self, options: &BucketOptions) -> BTreeMap<String, String> {
        let _ = options;
        BTreeMap::new()
    }

    /// Creates the bucket `options.bucket_name` and credentials for it, recording with the bucket
    /// that `options.user_id` created it under `options.reclaim_policy`. Must succeed when called
    /// again for a bucket that an earlier call for the same `user_id` created; any other existing
    /// bucket is [`BackendError::name_taken`].
    fn provision(
        &self,
        options: &BucketOptions,
    ) -> impl Future<Output = Result<ProvisionedBucket, BackendError>> + Send;

    /// Gives new credentials access to the existing bucket `options.bucket_name` (named by the
    /// StorageClass). A missing bucket is a permanent error.
    fn grant(
        &self,
        options: &BucketOptions,
    ) -> impl Future<Output = Result<ProvisionedBucket, BackendError>> + Send;

    /// Removes the bucket, its data and the claim's access, if the backend's own record says the
    /// claim ([`user_id_of`] the ObjectBucket) created it under the `Delete` policy; otherwise
    /// removes only the claim's access and answers [`Removed::AccessOnly`]. Something already
    /// gone counts as done.
    fn delete(
        &self,
        bucket: &ObjectBucket,
    ) -> impl Future<Output = Result<Removed, BackendError>> + Send;

    /// Removes the claim's access only; the bucket and its data stay. Something already gone
    /// counts as done.
    fn revoke(
        &self,
        bucket: &ObjectBucket,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Applies a changed `additionalConfig` or access mode to a bound bucket: `options` holds
    /// what is in force now, `bucket` what was in force before (its `additionalConfig`, and
    /// [`access_mode_of`] it). The default accepts every change without doing anything, so a
    /// backend that enforces modes must implement it.
    fn update(
        &self,
        options: &BucketOptions,
        bucket: &ObjectBucket,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = (options, bucket);
        async { Ok(()) }
    }

    /// Issues a new key for the claim of `bucket` with the access its key `keep` has, after
    /// removing every other key of that claim, and answers it; `keep` goes on working. See
    /// "Rotation" in the [module documentation](self). The default refuses permanently.
    fn rotate(
        &self,
        bucket: &ObjectBucket,
        keep: &str,
    ) -> impl Future<Output = Result<Credentials, BackendError>> + Send {
        let _ = (bucket, keep);
        async { Err(rotation_not_supported()) }
    }

    /// Removes the key `access_key_id` of the claim of `bucket` (a key of anyone else stays); a
    /// key already gone counts as done. The default refuses permanently.
    fn retire_key(
        &self,
        bucket: &ObjectBucket,
        access_key_id: &str,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = (bucket, access_key_id);
        async { Err(rotation_not_supported()) }
    }

    /// Creates `bucket.bucket_name` with no key, recording `bucket.owner_id` as its creator (a
    /// bucket that goes when [`Provisioner::delete_bucket`] is asked by that owner), with the
    /// bucket's quotas. A bucket this owner created already is a retry: answer it again. Any
    /// other existing bucket is [`BackendError::name_taken`]. The default refuses permanently.
    fn create_bucket(
        &self,
        bucket: &NewBucket,
    ) -> impl Future<Output = Result<BucketLocation, BackendError>> + Send {
        let _ = bucket;
        async { Err(standalone_not_supported()) }
    }

    /// Deletes `bucket_name`, its data and every key reaching it when the backend's record says
    /// `owner_id` created it, and answers [`Removed::Bucket`] (also when it is gone already).
    /// Any other bucket is left as it is: [`Removed::AccessOnly`]. The default refuses
    /// permanently.
    fn delete_bucket(
        &self,
        bucket_name: &str,
        owner_id: &str,
    ) -> impl Future<Output = Result<Removed, BackendError>> + Send {
        let _ = (bucket_name, owner_id);
        async { Err(standalone_not_supported()) }
    }

    /// Where the existing bucket `bucket_name` is, for an operator's static use; changes
    /// nothing. A missing bucket, or one the COSI front may not reach, is
    /// [`BackendError::not_found`]. The default refuses permanently.
    fn existing_bucket(
        &self,
        bucket_name: &str,
        parameters: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<BucketLocation, BackendError>> + Send {
        let _ = (bucket_name, parameters);
        async { Err(standalone_not_supported()) }
    }

    /// Issues the key of `request.owner_id` on its buckets with their modes, or answers the same
    /// key again when it exists with the same buckets, modes and quotas (a retry); with others
    /// it is [`BackendError::access_conflict`]. A missing bucket, or one the COSI front may not
    /// reach, is [`BackendError::not_found`]. The default refuses permanently.
    fn issue_key(
        &self,
        request: &KeyRequest,
    ) -> impl Future<Output = Result<IssuedKey, BackendError>> + Send {
        let _ = request;
        async { Err(standalone_not_supported()) }
    }

    /// Removes every key of `owner_id`; none left counts as done. The default refuses
    /// permanently.
    fn revoke_key(&self, owner_id: &str) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = owner_id;
        async { Err(standalone_not_supported()) }
    }

    /// The role the ServiceAccounts of [`BucketOptions::web_identity`] assume to get short-lived
    /// credentials of the claim's bucket, and the STS endpoint where they assume it. Asked before
    /// `provision`, `grant` or `update` is, whenever the claim names ServiceAccounts; those calls
    /// then let exactly those subjects in (and let in none when `web_identity` is `None`), and a
    /// backend whose claims may get no key ([`WebIdentityOptions::sessions_only`]) refuses the
    /// key's own secret. Revoking or narrowing the claim's key must end or narrow every session
    /// of it at once. The default refuses permanently (reason [`WEB_IDENTITY_NOT_SUPPORTED`]):
    /// a backend without it never hands out a static key in its place.
    fn web_identity(&self, options: &BucketOptions) -> Result<WebIdentity, BackendError> {
        let _ = options;
        Err(BackendError::permanent(
            WEB_IDENTITY_NOT_SUPPORTED,
            "this provisioner cannot give ServiceAccounts short-lived credentials; remove \
             serviceAccountName from the claim's additionalConfig, or use a StorageClass of a \
             provisioner that can",
        ))
    }

    /// Whether the store a StorageClass's `parameters` (as [`BucketOptions::parameters`] holds
    /// them) name answers now: `Some(Ok(()))` when it does, `Some(Err(_))` when it does not,
    /// `None` (the default) when the backend cannot tell without acting for a claim. Asked every
    /// few seconds, for each StorageClass whose claims all wait long after a transient failure,
    /// so that they are retried as soon as the store answers again: it must be cheap and change
    /// nothing. For a backend answering `None`, one of the waiting claims is retried instead.
    fn probe(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> impl Future<Output = Option<Result<(), BackendError>>> + Send {
        let _ = parameters;
        async { None }
    }

    /// Takes over the bucket of a claim that a provisioner built on lib-bucket-provisioner (the
    /// Go library) bound under the same provisioner name: `legacy` is that provisioner's
    /// ObjectBucket, already proven the claim's by the library (see
    /// [`crate::bucket::legacy`]); `options` are the claim's as that provisioner recorded it
    /// (the bucket its ObjectBucket names, the parameters of the StorageClass it records, never
    /// what the claim, which its tenant may have edited, names now). The claim's Secret keeps
    /// its key, so nothing is issued: answer where consumers reach the
    /// bucket, the `additionalState` that `delete`/`revoke` will need to remove what the old
    /// provisioner made for the claim, and whether the backend's own records now say that the
    /// claim created the bucket (only ever when `created_by_claim` and the old records prove
    /// it). `None` (the default) refuses: such claims fail with the reason `AdoptionUnsupported`
    /// rather than being provisioned a second time.
    fn adopt(
        &self,
        options: &BucketOptions,
        legacy: &ObjectBucket,
        created_by_claim: bool,
    ) -> impl Future<Output = Result<Option<Adoption>, BackendError>> + Send {
        let _ = (options, legacy, created_by_claim);
        async { Ok(None) }
    }

    /// What the bound bucket of this ObjectBucket holds now, or `None` when the backend does not
    /// know (the default). Called for every bound ObjectBucket once per usage interval (see
    /// [`crate::ControllerConfig::usage_interval`]), so it must answer from memory, never from a
    /// remote call. The library publishes it as metrics and writes it to the ObjectBucket's
    /// `status.usage` only when it changed, at a bounded rate.
    fn usage(&self, bucket: &ObjectBucket) -> Option<BucketUsage> {
        let _ = bucket;
        None
    }
}

/// The stable user id the library hands to backends for a claim with this UID.
pub fn user_id_for_claim(claim_uid: &str) -> String {
    format!("obc-{claim_uid}")
}

/// The user id of the claim an ObjectBucket is bound to (what [`BucketOptions::user_id`] was).
pub fn user_id_of(bucket: &ObjectBucket) -> Option<String> {
    bucket.spec.claim_ref.as_ref()?.uid.as_deref().map(user_id_for_claim)
}

/// The access mode the credentials of this ObjectBucket's claim were given: what the library
/// recorded, `ReadWrite` on an ObjectBucket written before modes existed.
pub fn access_mode_of(bucket: &ObjectBucket) -> AccessMode {
    bucket
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::ACCESS_MODE))
        .and_then(|m| AccessMode::parse(m))
        .unwrap_or_default()
}

/// A shared backend is a backend: the runtime keeps one across leadership terms.
impl<P: Provisioner> Provisioner for std::sync::Arc<P> {
    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        (**self).validate(options)
    }

    fn cleanup_state(&self, options: &BucketOptions) -> BTreeMap<String, String> {
        (**self).cleanup_state(options)
    }

    fn provision(
        &self,
        options: &BucketOptions,
    ) -> impl Future<Output = Result<ProvisionedBucket, BackendError>> + Send {
        (**self).provision(options)
    }

    fn grant(
        &self,
        options: &BucketOptions,
    ) -> impl Future<Output = Result<ProvisionedBucket, BackendError>> + Send {
        (**self).grant(options)
    }

    fn delete(
        &self,
        bucket: &ObjectBucket,
    ) -> impl Future<Output = Result<Removed, BackendError>> + Send {
        (**self).delete(bucket)
    }

    fn revoke(
        &self,
        bucket: &ObjectBucket,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).revoke(bucket)
    }

    fn update(
        &self,
        options: &BucketOptions,
        bucket: &ObjectBucket,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).update(options, bucket)
    }

    fn rotate(
        &self,
        bucket: &ObjectBucket,
        keep: &str,
    ) -> impl Future<Output = Result<Credentials, BackendError>> + Send {
        (**self).rotate(bucket, keep)
    }

    fn retire_key(
        &self,
        bucket: &ObjectBucket,
        access_key_id: &str,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).retire_key(bucket, access_key_id)
    }

    fn create_bucket(
        &self,
        bucket: &NewBucket,
    ) -> impl Future<Output = Result<BucketLocation, BackendError>> + Send {
        (**self).create_bucket(bucket)
    }

    fn delete_bucket(
        &self,
        bucket_name: &str,
        owner_id: &str,
    ) -> impl Future<Output = Result<Removed, BackendError>> + Send {
        (**self).delete_bucket(bucket_name, owner_id)
    }

    fn existing_bucket(
        &self,
        bucket_name: &str,
        parameters: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<BucketLocation, BackendError>> + Send {
        (**self).existing_bucket(bucket_name, parameters)
    }

    fn issue_key(
        &self,
        request: &KeyRequest,
    ) -> impl Future<Output = Result<IssuedKey, BackendError>> + Send {
        (**self).issue_key(request)
    }

    fn revoke_key(&self, owner_id: &str) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).revoke_key(owner_id)
    }

    fn web_identity(&self, options: &BucketOptions) -> Result<WebIdentity, BackendError> {
        (**self).web_identity(options)
    }

    fn probe(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> impl Future<Output = Option<Result<(), BackendError>>> + Send {
        (**self).probe(parameters)
    }

    fn usage(&self, bucket: &ObjectBucket) -> Option<BucketUsage> {
        (**self).usage(bucket)
    }

    fn adopt(
        &self,
        options: &BucketOptions,
        legacy: &ObjectBucket,
        created_by_claim: bool,
    ) -> impl Future<Output = Result<Option<Adoption>, BackendError>> + Send {
        (**self).adopt(options, legacy, created_by_claim)
    }
}

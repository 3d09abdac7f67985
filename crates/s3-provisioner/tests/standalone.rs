//! The COSI front's buckets and keys against a real moto server with IAM enforced: buckets with
//! no key, keys of their own with a mode per bucket, and the ownership rules between owners and
//! between the two fronts.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bucket_provisioner::{AccessMode, BackendError, Provisioner, Removed};
use common::moto::Moto;
use common::{FixedOwner, MemoryKeyRecords, claim, error_code, options, read_write};
use s3_provisioner::backend::standalone::COSI_OWNER_ACTIONS;
use s3_provisioner::owner::OWNER_ACTIONS;
use s3_provisioner::{S3Provisioner, iam};
use test_support::standalone_requests::{key_request, new_bucket};

/// A backend whose owner is allowed exactly what the book's S3 chapter lists for claims and COSI
/// (moto authorizes IAM actions on "*" only, so the resources are not narrowed here).
async fn backend(moto: &Moto) -> S3Provisioner {
    let actions: Vec<&str> = OWNER_ACTIONS.iter().chain(&COSI_OWNER_ACTIONS).copied().collect();
    let owner = moto.user_allowed("cosi-owner", &actions).await;
    S3Provisioner::new(Arc::new(FixedOwner(owner)))
        .with_standalone(&common::store_parameters(&moto.endpoint))
        .expect("the driver's parameters are valid")
}

fn reason(error: &BackendError) -> &str {
    match error {
        BackendError::Permanent { reason, .. } => reason,
        BackendError::Transient { .. } => "transient",
    }
}

async fn put(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    let put = s3.put_object().bucket(bucket).key(key).body(key.as_bytes().to_vec().into());
    put.send().await.map(drop).map_err(|e| error_code::<_>(Err::<(), _>(e)))
}

#[tokio::test]
async fn buckets_are_created_once_per_owner_and_deleted_only_by_it() {
    let moto = Moto::start().await;
    let backend = backend(&moto).await;
    let name = format!("cosi-{}", common::suffix());
    let asked = new_bucket(&name, &[]);
    let first = backend.create_bucket(&asked).await.unwrap();
    let again = backend.create_bucket(&asked).await.expect("a retry answers the same");
    assert_eq!(first, again);
    assert_eq!(first.bucket_name, name);
    assert_eq!((first.endpoint.host.as_str(), first.endpoint.port), ("127.0.0.1", moto.port()));
    assert!(moto.provisioned_users().await.is_empty(), "a bucket comes with no key");

    // The same name asked with other parameters is another owner.
    let other = new_bucket(&name, &[("tier", "cold")]);
    let error = backend.create_bucket(&other).await.unwrap_err();
    assert!(error.is_name_taken(), "{error}");
    let removed = backend.delete_bucket(&name, &other.owner_id).await.unwrap();
    assert_eq!(removed, Removed::AccessOnly, "another owner deletes nothing");
    assert!(moto.bucket_exists(&name).await);

    // Quotas and parameters S3 cannot honour are refused before anything is made.
    let quota = format!("quota-{}", common::suffix());
    let mut limited = new_bucket(&quota, &[]);
    limited.quotas.max_bytes = Some(1 << 30);
    let error = backend.create_bucket(&limited).await.unwrap_err();
    assert_eq!(reason(&error), "InvalidParameters", "{error}");
    let mut odd = new_bucket(&quota, &[]);
    odd.parameters.insert("colour".into(), "blue".into());
    assert!(backend.create_bucket(&odd).await.unwrap_err().to_string().contains("\"colour\""));
    assert!(!moto.bucket_exists(&quota).await);

    // The creator's deletion empties and removes it, with any key reaching it; again is done.
    let writer = key_request("ba-writer", &[(&name, AccessMode::ReadWrite)]);
    let issued = backend.issue_key(&writer).await.unwrap();
    put(&moto.s3(&issued.credentials), &name, "data.txt").await.unwrap();
    let removed = backend.delete_bucket(&name, &asked.owner_id).await.unwrap();
    assert_eq!(removed, Removed::Bucket);
    assert!(!moto.bucket_exists(&name).await);
    assert!(!moto.user_exists(&iam::user_name(&writer.owner_id)).await, "its key went with it");
    assert_eq!(backend.delete_bucket(&name, &asked.owner_id).await.unwrap(), Removed::Bucket);
}

#[tokio::test]
async fn keys_get_exactly_their_mode_on_each_of_their_buckets() {
    let moto = Moto::start().await;
    let backend = backend(&moto).await;
    let (a, b) = (format!("keys-a-{}", common::suffix()), format!("keys-b-{}", common::suffix()));
    for name in [&a, &b] {
        backend.create_bucket(&new_bucket(name, &[])).await.unwrap();
    }

    let both = key_request("ba-both", &[(&a, AccessMode::ReadWrite), (&b, AccessMode::ReadWrite)]);
    let issued = backend.issue_key(&both).await.unwrap();
    let s3 = moto.s3(&issued.credentials);
    read_write(&s3, &a).await;
    read_write(&s3, &b).await;
    put(&s3, &a, "seed.txt").await.unwrap();

    let reader = key_request("ba-reader", &[(&a, AccessMode::ReadOnly)]);
    let read_only = moto.s3(&backend.issue_key(&reader).await.unwrap().credentials);
    let got = read_only.get_object().bucket(&a).key("seed.txt").send().await;
    assert!(got.is_ok(), "ReadOnly reads: {got:?}");
    assert_eq!(put(&read_only, &a, "no.txt").await, Err("AccessDenied".into()));
    assert_eq!(put(&read_only, &b, "no.txt").await, Err("AccessDenied".into()), "not its bucket");

    let writer = key_request("ba-writer", &[(&a, AccessMode::WriteOnly)]);
    let write_only = moto.s3(&backend.issue_key(&writer).await.unwrap().credentials);
    put(&write_only, &a, "dropped.txt").await.expect("WriteOnly writes");
    let read = write_only.get_object().bucket(&a).key("seed.txt").send().await;
    assert_eq!(error_code(read), "AccessDenied", "WriteOnly cannot read");
    let list = write_only.list_objects_v2().bucket(&a).send().await;
    assert_eq!(error_code(list), "AccessDenied", "WriteOnly cannot list");

    // A retry: the same user and policy, one key (IAM shows a secret only once, so the key
    // whose answer was lost is replaced).
    let user = iam::user_name(&both.owner_id);
    let again = backend.issue_key(&both).await.expect("a retry succeeds");
    assert_eq!(moto.access_keys(&user).await, [again.credentials.access_key_id.as_str()]);
    read_write(&moto.s3(&again.credentials), &b).await;
    let replaced = moto.s3(&issued.credentials).list_objects_v2().bucket(&a).send().await;
    assert_eq!(error_code(replaced), "InvalidAccessKeyId", "the lost answer's key is gone");

    // The same access asking for other buckets or modes is refused, and changes nothing.
    let narrower =
        key_request("ba-both", &[(&a, AccessMode::ReadOnly), (&b, AccessMode::ReadWrite)]);
    let error = backend.issue_key(&narrower).await.unwrap_err();
    assert!(error.is_access_conflict(), "{error}");
    put(&moto.s3(&again.credentials), &a, "still.txt").await.expect("the key is as it was");

    // Revoking stops the key (IAM enforced), and again is done.
    backend.revoke_key(&both.owner_id).await.unwrap();
    let refused = moto.s3(&again.credentials).list_objects_v2().bucket(&a).send().await;
    assert_eq!(error_code(refused), "InvalidAccessKeyId");
    assert!(!moto.user_exists(&user).await);
    backend.revoke_key(&both.owner_id).await.expect("revoking again is done");

    // Quotas, and a bucket named twice, are refused.
    let mut limited = key_request("ba-limited", &[(&a, AccessMode::ReadWrite)]);
    limited.quotas.max_objects = Some(10);
    assert_eq!(reason(&backend.issue_key(&limited).await.unwrap_err()), "InvalidParameters");
    let twice = key_request("ba-twice", &[(&a, AccessMode::ReadWrite), (&a, AccessMode::ReadOnly)]);
    assert_eq!(reason(&backend.issue_key(&twice).await.unwrap_err()), "InvalidParameters");
    assert!(!moto.user_exists(&iam::user_name(&limited.owner_id)).await);
}

#[tokio::test]
async fn claims_buckets_are_out_of_reach_and_operators_buckets_are_found() {
    let moto = Moto::start().await;
    let backend = backend(&moto).await;
    let claim = claim(&format!("claimed-{}", common::suffix()));
    let params = common::store_parameters(&moto.endpoint);
    let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let claimed = options(&claim, &params);
    backend.provision(&claimed).await.unwrap();
    let name = claimed.bucket_name.clone();

    let error = backend.existing_bucket(&name, &BTreeMap::new()).await.unwrap_err();
    assert!(error.is_not_found(), "{error}");
    let intruder = key_request("ba-intruder", &[(&name, AccessMode::ReadOnly)]);
    let error = backend.issue_key(&intruder).await.unwrap_err();
    assert!(error.is_not_found(), "{error}");
    assert!(!moto.user_exists(&iam::user_name(&intruder.owner_id)).await);
    let error = backend.create_bucket(&new_bucket(&name, &[])).await.unwrap_err();
    assert!(error.is_name_taken(), "{error}");
    let owner = &claimed.user_id;
    let error = backend.delete_bucket(&name, owner).await.unwrap_err();
    assert_eq!(reason(&error), "InvalidParameters", "a claim's id is no COSI owner: {error}");
    assert!(moto.bucket_exists(&name).await);
    let missing = backend.existing_bucket("no-such-bucket-here", &BTreeMap::new()).await;
    assert!(missing.unwrap_err().is_not_found());

    // An operator's bucket (no record) is found, reached, and never deleted.
    let static_name = format!("static-{}", common::suffix());
    moto.existing_bucket(&static_name, &["keep.txt"]).await;
    let found = backend.existing_bucket(&static_name, &BTreeMap::new()).await.unwrap();
    assert_eq!(found.bucket_name, static_name);
    let reader = key_request("ba-static", &[(&static_name, AccessMode::ReadOnly)]);
    let s3 = moto.s3(&backend.issue_key(&reader).await.unwrap().credentials);
    assert!(s3.get_object().bucket(&static_name).key("keep.txt").send().await.is_ok());
    let owner = new_bucket(&static_name, &[]).owner_id;
    assert_eq!(backend.delete_bucket(&static_name, &owner).await.unwrap(), Removed::AccessOnly);
    assert_eq!(moto.object_keys(&static_name).await, ["keep.txt"]);
}

#[tokio::test]
async fn an_attempt_cut_off_after_the_user_is_finished_by_the_retry() {
    let moto = Moto::start().await;
    let backend = backend(&moto).await;
    let name = format!("cutoff-{}", common::suffix());
    backend.create_bucket(&new_bucket(&name, &[])).await.unwrap();
    let access = key_request("ba-cutoff", &[(&name, AccessMode::ReadWrite)]);
    // What an attempt stopped right after CreateUser leaves: the user, no policy, no key.
    let user = iam::user_name(&access.owner_id);
    let iam = moto.iam(&moto.admin);
    let path = s3_provisioner::backend::standalone::COSI_USER_PATH;
    iam.create_user().user_name(&user).path(path).send().await.unwrap();
    let issued = backend.issue_key(&access).await.expect("the retry finishes it");
    read_write(&moto.s3(&issued.credentials), &name).await;
    assert_eq!(moto.access_keys(&user).await, [issued.credentials.access_key_id.as_str()]);

    // Two different requests of one access at once: one gets the key, the other a conflict.
    let on_rw = key_request("ba-race", &[(&name, AccessMode::ReadWrite)]);
    let on_ro = key_request("ba-race", &[(&name, AccessMode::ReadOnly)]);
    let (first, second) = tokio::join!(backend.issue_key(&on_rw), backend.issue_key(&on_ro));
    assert!(first.is_ok() != second.is_ok(), "exactly one: {first:?} {second:?}");
    let refused = first.as_ref().err().or(second.as_ref().err()).unwrap();
    assert!(refused.is_access_conflict(), "{refused}");
    assert_eq!(moto.access_keys(&iam::user_name(&on_rw.owner_id)).await.len(), 1);
}

#[tokio::test]
async fn a_repeated_grant_answers_the_recorded_key_in_use() {
    let moto = Moto::start().await;
    let records = Arc::new(MemoryKeyRecords::default());
    let backend = backend(&moto).await.with_key_records(records.clone());
    let name = format!("recorded-{}", common::suffix());
    backend.create_bucket(&new_bucket(&name, &[])).await.unwrap();
    let access = key_request("ba-recorded", &[(&name, AccessMode::ReadWrite)]);
    let user = iam::user_name(&access.owner_id);

    // The grant repeated (main's sidecar grants every access again when it starts) answers
    // the same key, which keeps working: consumers holding it are not locked out.
    let first = backend.issue_key(&access).await.unwrap();
    let again = backend.issue_key(&access).await.unwrap();
    assert_eq!(again.credentials, first.credentials);
    assert_eq!(moto.access_keys(&user).await, [first.credentials.access_key_id.as_str()]);
    read_write(&moto.s3(&first.credentials), &name).await;

    // A record of a key IAM no longer holds is no answer: a new key, recorded in its place.
    let iam = moto.iam(&moto.admin);
    let id = &first.credentials.access_key_id;
    iam.delete_access_key().user_name(&user).access_key_id(id).send().await.unwrap();
    let replaced = backend.issue_key(&access).await.unwrap();
    assert_ne!(replaced.credentials.access_key_id, *id);
    assert_eq!(moto.access_keys(&user).await, [replaced.credentials.access_key_id.as_str()]);
    read_write(&moto.s3(&replaced.credentials), &name).await;
    assert_eq!(backend.issue_key(&access).await.unwrap().credentials, replaced.credentials);

    // Revoking forgets the record with the user.
    backend.revoke_key(&access.owner_id).await.unwrap();
    assert!(records.0.lock().unwrap().is_empty(), "the record went with the key");
    assert!(!moto.user_exists(&user).await);
}

use std::io;

use super::*;
use crate::store::object_lock::{DefaultRetention, LockMode, RetentionPeriod};
use crate::store::{CopyReplace, CopySourceCheck, Creator, PutCheck, Writer};

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

async fn put(
    store: &BucketStore,
    bucket: &str,
    key: &str,
    lock: ObjectLock,
) -> Result<ObjectInfo, StoreError> {
    let body = futures::stream::iter([Ok::<_, io::Error>(bytes::Bytes::from_static(b"data"))]);
    let attrs = ObjectAttrs { lock, ..ObjectAttrs::default() };
    store.put_object(bucket, key, attrs, body, PutCheck::default(), &Writer::Operator).await
}

fn retention(mode: LockMode, days: u64) -> Retention {
    Retention { mode, until_ms: now_ms() + days * DAY_MS }
}

async fn lock_bucket(store: &BucketStore, bucket: &str) {
    let creator = Creator { user_id: "obc-1", delete_with_claim: true };
    store.create_bucket(bucket, creator).await.unwrap();
    store.enable_object_lock(bucket).await.unwrap();
}

fn is_locked(result: Result<impl std::fmt::Debug, StoreError>) -> bool {
    matches!(result, Err(StoreError::ObjectLocked(_)))
}

#[tokio::test]
async fn protected_objects_are_neither_deleted_nor_overwritten_and_their_lock_persists() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    lock_bucket(&store, "b-1").await;
    let compliance =
        ObjectLock { retention: Some(retention(LockMode::Compliance, 1)), legal_hold: false };
    put(&store, "b-1", "c", compliance).await.unwrap();
    // A key beside the bucket (both an object and a prefix) and a folder marker too.
    put(&store, "b-1", "c/d", compliance).await.unwrap();
    put(&store, "b-1", "c", compliance).await.unwrap_err();
    let hold = ObjectLock { retention: None, legal_hold: true };
    put(&store, "b-1", "h", hold).await.unwrap();
    put(&store, "b-1", "free", ObjectLock::default()).await.unwrap();

    for key in ["c", "c/d", "h"] {
        for bypass in [Bypass::No, Bypass::Permitted] {
            assert!(is_locked(store.delete_object_with("b-1", key, bypass).await), "{key}");
        }
        assert!(is_locked(put(&store, "b-1", key, ObjectLock::default()).await), "{key}");
    }
    store.delete_object_with("b-1", "free", Bypass::No).await.unwrap();
    // The operator's own paths obey it too.
    assert!(is_locked(store.delete_object("b-1", "c").await));
    let err = store.delete_bucket("b-1", "obc-1").await.unwrap_err();
    assert!(matches!(&err, StoreError::ObjectLocked(r) if r.until().is_some()), "{err}");

    drop(store);
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    assert_eq!(store.object_lock("b-1", "c").await.unwrap(), compliance);
    assert_eq!(store.object_lock("b-1", "h").await.unwrap(), hold);
    assert!(is_locked(store.delete_object("b-1", "h").await));
    store.set_object_legal_hold("b-1", "h", false).await.unwrap();
    store.delete_object("b-1", "h").await.unwrap();
    assert!(store.bucket_exists("b-1").unwrap(), "the bucket kept its data");
}

#[tokio::test]
async fn new_objects_and_copies_get_the_bucket_default_and_never_the_source_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    lock_bucket(&store, "b-1").await;
    let default = DefaultRetention { mode: LockMode::Governance, period: RetentionPeriod::Days(1) };
    store.set_object_lock_default("b-1", Some(default)).await.unwrap();
    let before = now_ms();
    let info = put(&store, "b-1", "k", ObjectLock::default()).await.unwrap();
    let r = info.attrs.lock.retention.unwrap();
    assert_eq!(r.mode, LockMode::Governance);
    assert!(r.until_ms >= before + DAY_MS && r.until_ms <= now_ms() + DAY_MS, "{r:?}");
    assert!(!info.attrs.lock.legal_hold);

    // A copy gets what it asks for, else the default; never the source's hold.
    store.set_object_legal_hold("b-1", "k", true).await.unwrap();
    let asked =
        ObjectLock { retention: Some(retention(LockMode::Compliance, 2)), legal_hold: false };
    let replace = CopyReplace { lock: asked, ..CopyReplace::default() };
    let copy = store
        .copy_object(
            "b-1",
            "k",
            "b-1",
            "copy",
            replace,
            CopySourceCheck::default(),
            &Writer::Operator,
        )
        .await
        .unwrap();
    assert_eq!(copy.attrs.lock, asked);
    let copy = store
        .copy_object(
            "b-1",
            "k",
            "b-1",
            "copy-2",
            CopyReplace::default(),
            CopySourceCheck::default(),
            &Writer::Operator,
        )
        .await
        .unwrap();
    assert_eq!(copy.attrs.lock.retention.map(|r| r.mode), Some(LockMode::Governance));
    assert!(!copy.attrs.lock.legal_hold);

    // A bucket without lock refuses a locked write and has no lock to read.
    store
        .create_bucket("plain", Creator { user_id: "obc-1", delete_with_claim: true })
        .await
        .unwrap();
    let err = put(&store, "plain", "k", asked).await.unwrap_err();
    assert!(matches!(&err, StoreError::InvalidRequest(m) if m.contains("Object Lock")), "{err}");
    put(&store, "plain", "k", ObjectLock::default()).await.unwrap();
    assert!(matches!(store.object_lock("plain", "k").await, Err(StoreError::InvalidRequest(_))));
    let refused =
        store.set_object_retention("plain", "k", Some(asked.retention.unwrap()), Bypass::No);
    assert!(matches!(refused.await, Err(StoreError::InvalidRequest(_))));
}

#[tokio::test]
async fn retention_changes_obey_the_mode_and_the_bypass() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    lock_bucket(&store, "b-1").await;
    let g = retention(LockMode::Governance, 2);
    put(&store, "b-1", "g", ObjectLock { retention: Some(g), legal_hold: false }).await.unwrap();
    let shorter = Retention { until_ms: g.until_ms - DAY_MS, ..g };
    assert!(is_locked(store.set_object_retention("b-1", "g", Some(shorter), Bypass::No).await));
    assert!(is_locked(store.set_object_retention("b-1", "g", None, Bypass::Refused).await));
    store.set_object_retention("b-1", "g", Some(shorter), Bypass::Permitted).await.unwrap();
    assert_eq!(store.object_lock("b-1", "g").await.unwrap().retention, Some(shorter));
    let c = Retention { mode: LockMode::Compliance, ..shorter };
    store.set_object_retention("b-1", "g", Some(c), Bypass::Permitted).await.unwrap();
    for bypass in [Bypass::No, Bypass::Permitted] {
        assert!(is_locked(store.set_object_retention("b-1", "g", None, bypass).await));
        assert!(is_locked(store.set_object_retention("b-1", "g", Some(g), bypass).await), "mode");
        assert!(is_locked(store.delete_object_with("b-1", "g", bypass).await));
    }
    let longer = Retention { until_ms: c.until_ms + DAY_MS, ..c };
    store.set_object_retention("b-1", "g", Some(longer), Bypass::No).await.unwrap();
    let past = Retention { until_ms: now_ms() - 1, ..c };
    let err = store.set_object_retention("b-1", "g", Some(past), Bypass::Permitted).await;
    assert!(matches!(err, Err(StoreError::InvalidArgument(_))));
    assert!(matches!(
        store.set_object_retention("b-1", "missing", Some(longer), Bypass::No).await,
        Err(StoreError::NoSuchKey(_))
    ));
    assert_eq!(store.object_lock("b-1", "g").await.unwrap().retention, Some(longer));

    // Governance gives way to a permitted bypass only, for a deletion as for a change.
    put(&store, "b-1", "g2", ObjectLock { retention: Some(g), legal_hold: false }).await.unwrap();
    assert!(is_locked(store.delete_object_with("b-1", "g2", Bypass::Refused).await));
    store.delete_object_with("b-1", "g2", Bypass::Permitted).await.unwrap();
}

#[tokio::test]
async fn only_the_creating_claim_or_the_operator_on_its_own_buckets_may_bypass() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    let creator = Creator { user_id: "obc-1", delete_with_claim: true };
    let (_, owner) = store.provision_bucket("b-1", creator).await.unwrap();
    let other = store.issue_key("obc-2", "b-1").await.unwrap();
    assert!(store.may_bypass_governance("b-1", &owner.access_key_id));
    assert!(!store.may_bypass_governance("b-1", &other.access_key_id));
    assert!(!store.may_bypass_governance("b-1", "unknown"));
    let admin = crate::admin::AdminCredentials::new(
        "ADMINKEY0000",
        "secret-secret-secret-secret-secret-00",
    )
    .unwrap();
    store.set_admin(Some(admin));
    assert!(!store.may_bypass_governance("b-1", "ADMINKEY0000"), "a claim's bucket");
    store.create_operator_bucket("ops", None).await.unwrap();
    assert!(store.may_bypass_governance("ops", "ADMINKEY0000"));
    assert!(!store.may_bypass_governance("ops", &owner.access_key_id));
}

#[tokio::test]
async fn lifecycle_keeps_protected_objects_and_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    lock_bucket(&store, "b-1").await;
    let hold = ObjectLock { retention: None, legal_hold: true };
    put(&store, "b-1", "a-held", hold).await.unwrap();
    put(&store, "b-1", "b-free", ObjectLock::default()).await.unwrap();
    let g = ObjectLock { retention: Some(retention(LockMode::Governance, 1)), legal_hold: false };
    put(&store, "b-1", "c-governed", g).await.unwrap();
    let rule = crate::store::LifecycleRule {
        status: "Enabled".into(),
        expiration: Some(crate::store::Expiration { days: Some(1), ..Default::default() }),
        ..Default::default()
    };
    let config = crate::store::LifecycleConfig { rules: vec![rule] };
    store.set_bucket_lifecycle("b-1", Some(config)).await.unwrap();
    let later = SystemTime::now() + std::time::Duration::from_secs(3 * 86_400);
    let report = store.run_lifecycle_pass(later).await.unwrap();
    assert_eq!((report.expired, report.locked, report.failed), (1, 2, 0), "{report:?}");
    store.head_object("b-1", "a-held").await.unwrap();
    store.head_object("b-1", "c-governed").await.unwrap();
}

use std::io;

use super::*;
use crate::store::object_lock::{DefaultRetention, LockMode, RetentionPeriod};
use crate::store::{
    CopyReplace, CopySourceCheck, Creator, NoncurrentExpiration, PutCheck, Versioning, Writer,
};

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

async fn delete(
    store: &BucketStore,
    key: &str,
    version: Option<&str>,
    bypass: Bypass,
) -> Result<crate::store::Deleted, StoreError> {
    store.delete_object_version_with("b-1", key, version, bypass).await
}

#[tokio::test]
async fn protected_versions_are_never_removed_but_new_versions_and_markers_are_made() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    lock_bucket(&store, "b-1").await;
    assert_eq!(store.bucket_versioning("b-1").await.unwrap(), Some(Versioning::Enabled));
    let err = store.set_bucket_versioning("b-1", Versioning::Suspended).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidBucketState(_)), "{err}");

    let compliance = ObjectLock {
        retention: Some(retention(LockMode::Compliance, 1)),
        legal_hold: false,
        legal_hold_set: false,
    };
    let hold = ObjectLock { retention: None, legal_hold: true, legal_hold_set: true };
    // A plain key, one kept beside the bucket (also a prefix), and a held one.
    let mut ids = Vec::new();
    for (key, lock) in [("c", compliance), ("c/d", compliance), ("h", hold)] {
        ids.push(put(&store, "b-1", key, lock).await.unwrap().version_id.unwrap());
    }
    // Overwriting makes a new version; the protected one stays behind it.
    let newer = put(&store, "b-1", "c", ObjectLock::default()).await.unwrap();
    assert_ne!(newer.version_id.as_deref(), Some(ids[0].as_str()));
    for ((key, id), bypass) in ["c", "c/d", "h"].iter().zip(&ids).zip([Bypass::Permitted; 3]) {
        assert!(is_locked(delete(&store, key, Some(id), Bypass::No).await), "{key}");
        assert!(is_locked(delete(&store, key, Some(id), bypass).await), "{key}");
    }
    // A delete marker removes nothing, and is allowed.
    let marker = delete(&store, "c/d", None, Bypass::No).await.unwrap();
    assert!(marker.delete_marker);
    // The unprotected newest version of `c` goes; the protected one comes back in place.
    delete(&store, "c", newer.version_id.as_deref(), Bypass::No).await.unwrap();
    assert_eq!(store.head_object("b-1", "c").await.unwrap().attrs.lock, compliance);
    // The operator's own path is refused too.
    assert!(is_locked(store.delete_object_version("b-1", "c", Some(&ids[0])).await));
    let err = store.delete_bucket("b-1", "obc-1").await.unwrap_err();
    assert!(matches!(&err, StoreError::ObjectLocked(r) if r.until().is_some()), "{err}");

    drop(store);
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    assert_eq!(store.object_lock("b-1", "c/d", Some(&ids[1])).await.unwrap(), compliance);
    assert_eq!(store.object_lock("b-1", "h", None).await.unwrap(), hold);
    store.set_object_legal_hold("b-1", "h", Some(&ids[2]), false).await.unwrap();
    delete(&store, "h", Some(&ids[2]), Bypass::No).await.unwrap();
    assert!(store.bucket_exists("b-1").unwrap(), "the bucket kept its data");
}

#[tokio::test]
async fn an_unversioned_lock_bucket_refuses_overwrites_of_protected_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    let creator = Creator { user_id: "obc-1", delete_with_claim: true };
    store.create_bucket("b-1", creator).await.unwrap();
    // As a bucket locked before buckets had versions: the lock file without versioning.
    let path = store.inner.state_dir().join("meta").join("b-1").join("object-lock.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"{}").unwrap();
    let lock = ObjectLock {
        retention: Some(retention(LockMode::Governance, 1)),
        legal_hold: false,
        legal_hold_set: false,
    };
    put(&store, "b-1", "k", lock).await.unwrap();
    assert!(is_locked(put(&store, "b-1", "k", ObjectLock::default()).await));
    assert!(is_locked(delete(&store, "k", None, Bypass::Refused).await));
    assert!(is_locked(delete(&store, "k", Some("null"), Bypass::No).await));
    delete(&store, "k", None, Bypass::Permitted).await.unwrap();
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
    store.set_object_legal_hold("b-1", "k", None, true).await.unwrap();
    let asked = ObjectLock {
        retention: Some(retention(LockMode::Compliance, 2)),
        legal_hold: false,
        legal_hold_set: false,
    };
    let replace = CopyReplace { lock: asked, ..CopyReplace::default() };
    let check = CopySourceCheck::default();
    let copy = store.copy_object("b-1", "k", "b-1", "copy", replace, check, &Writer::Operator);
    assert_eq!(copy.await.unwrap().attrs.lock, asked);
    let (replace, check) = (CopyReplace::default(), CopySourceCheck::default());
    let copy = store.copy_object("b-1", "k", "b-1", "copy-2", replace, check, &Writer::Operator);
    let copy = copy.await.unwrap();
    assert_eq!(copy.attrs.lock.retention.map(|r| r.mode), Some(LockMode::Governance));
    assert!(!copy.attrs.lock.legal_hold);

    // A bucket without lock refuses a locked write and has no lock to read.
    let creator = Creator { user_id: "obc-1", delete_with_claim: true };
    store.create_bucket("plain", creator).await.unwrap();
    let err = put(&store, "plain", "k", asked).await.unwrap_err();
    assert!(matches!(&err, StoreError::InvalidRequest(m) if m.contains("Object Lock")), "{err}");
    put(&store, "plain", "k", ObjectLock::default()).await.unwrap();
    assert!(matches!(
        store.object_lock("plain", "k", None).await,
        Err(StoreError::InvalidRequest(_))
    ));
    let refused = store.set_object_retention("plain", "k", None, asked.retention, Bypass::No);
    assert!(matches!(refused.await, Err(StoreError::InvalidRequest(_))));
}

#[tokio::test]
async fn retention_changes_obey_the_mode_and_the_bypass_on_any_version() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    lock_bucket(&store, "b-1").await;
    let g = retention(LockMode::Governance, 2);
    let old = put(
        &store,
        "b-1",
        "g",
        ObjectLock { retention: Some(g), legal_hold: false, legal_hold_set: false },
    );
    let old = old.await.unwrap().version_id.unwrap();
    // The version changed below is a noncurrent one, named by its id.
    put(&store, "b-1", "g", ObjectLock::default()).await.unwrap();
    let v = Some(old.as_str());
    let set = |r: Option<Retention>, bypass| store.set_object_retention("b-1", "g", v, r, bypass);
    let shorter = Retention { until_ms: g.until_ms - DAY_MS, ..g };
    assert!(is_locked(set(Some(shorter), Bypass::No).await));
    assert!(is_locked(set(None, Bypass::Refused).await));
    set(Some(shorter), Bypass::Permitted).await.unwrap();
    assert_eq!(store.object_lock("b-1", "g", v).await.unwrap().retention, Some(shorter));
    let c = Retention { mode: LockMode::Compliance, ..shorter };
    set(Some(c), Bypass::Permitted).await.unwrap();
    for bypass in [Bypass::No, Bypass::Permitted] {
        assert!(is_locked(set(None, bypass).await));
        assert!(is_locked(set(Some(g), bypass).await), "mode");
        assert!(is_locked(delete(&store, "g", v, bypass).await));
    }
    let longer = Retention { until_ms: c.until_ms + DAY_MS, ..c };
    set(Some(longer), Bypass::No).await.unwrap();
    let past = Retention { until_ms: now_ms() - 1, ..c };
    assert!(matches!(
        set(Some(past), Bypass::Permitted).await,
        Err(StoreError::InvalidArgument(_))
    ));
    let missing =
        store.set_object_retention("b-1", "g", Some("0123456789abcdef01234567"), None, Bypass::No);
    assert!(matches!(missing.await, Err(StoreError::NoSuchVersion { .. })));
    assert_eq!(store.object_lock("b-1", "g", v).await.unwrap().retention, Some(longer));
    assert_eq!(store.object_lock("b-1", "g", None).await.unwrap().retention, None, "the newest");

    // Governance gives way to a permitted bypass only, for a removal as for a change.
    let g2 = put(
        &store,
        "b-1",
        "g2",
        ObjectLock { retention: Some(g), legal_hold: false, legal_hold_set: false },
    );
    let g2 = g2.await.unwrap().version_id;
    assert!(is_locked(delete(&store, "g2", g2.as_deref(), Bypass::Refused).await));
    delete(&store, "g2", g2.as_deref(), Bypass::Permitted).await.unwrap();
}

#[tokio::test]
async fn only_the_creating_claim_and_the_operator_may_bypass() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    let creator = Creator { user_id: "obc-1", delete_with_claim: true };
    let (_, owner) = store.provision_bucket("b-1", creator).await.unwrap();
    let other = store.issue_key("obc-2", "b-1").await.unwrap();
    assert!(store.may_bypass_governance("b-1", &owner.access_key_id));
    assert!(!store.may_bypass_governance("b-1", &other.access_key_id));
    assert!(!store.may_bypass_governance("b-1", "unknown"));
    let secret = "secret-secret-secret-secret-secret-00";
    let admin = crate::admin::AdminCredentials::new("ADMINKEY0000", secret).unwrap();
    store.set_admin(Some(admin));
    assert!(store.may_bypass_governance("b-1", "ADMINKEY0000"), "a claim's bucket");
    store.create_operator_bucket("ops", None).await.unwrap();
    assert!(store.may_bypass_governance("ops", "ADMINKEY0000"));
    assert!(!store.may_bypass_governance("ops", &owner.access_key_id));
}

#[tokio::test]
async fn lifecycle_keeps_protected_versions_and_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    lock_bucket(&store, "b-1").await;
    let hold = ObjectLock { retention: None, legal_hold: true, legal_hold_set: true };
    put(&store, "b-1", "a-held", hold).await.unwrap();
    put(&store, "b-1", "b-free", ObjectLock::default()).await.unwrap();
    let g = ObjectLock {
        retention: Some(retention(LockMode::Governance, 1)),
        legal_hold: false,
        legal_hold_set: false,
    };
    put(&store, "b-1", "c-governed", g).await.unwrap();
    let rule = crate::store::LifecycleRule {
        status: "Enabled".into(),
        expiration: Some(crate::store::Expiration { days: Some(1), ..Default::default() }),
        noncurrent_expiration: Some(NoncurrentExpiration { days: Some(1), newer_versions: None }),
        ..Default::default()
    };
    let config = crate::store::LifecycleConfig { rules: vec![rule] };
    store.set_bucket_lifecycle("b-1", Some(config)).await.unwrap();
    let later = SystemTime::now() + std::time::Duration::from_secs(3 * 86_400);
    let (mut locked, mut failed) = (0, 0);
    for _ in 0..2 {
        let report = store.run_lifecycle_pass(later).await.unwrap();
        (locked, failed) = (locked + report.locked, failed + report.failed);
    }
    assert!(locked >= 2 && failed == 0, "{locked} {failed}");
    // Every key reads as deleted; only the protected versions remain behind their markers.
    let dir = store.bucket_dir("b-1").unwrap();
    let kept = |key: &str| store.versions_of("b-1", &dir, key).unwrap();
    assert!(kept("b-free").iter().all(|v| v.is_marker()));
    for key in ["a-held", "c-governed"] {
        let versions = kept(key);
        assert!(versions[0].is_marker(), "{key}");
        assert_eq!(versions.iter().filter(|v| !v.is_marker()).count(), 1, "{key}");
    }
}

//! The store's own bookkeeping: buckets and keys provisioned, revoked and deleted
//! idempotently and only by their creator, crash leftovers cleared, secrets kept private.

use super::*;

fn open(dir: &Path, identity: &str) -> BucketStore {
    BucketStore::open(dir.to_owned(), identity).unwrap()
}

const ONE: Creator<'static> = Creator { user_id: "obc-1", delete_with_claim: true };

#[tokio::test]
async fn provision_issue_revoke_delete_are_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), "ours");

    let first = store.create_bucket("photos", ONE).await.unwrap();
    let again = store.create_bucket("photos", ONE).await.unwrap();
    assert_eq!(first, again);
    assert!(first.created_by_provisioner);
    assert_eq!(first.owner, "ours");
    assert!(store.bucket_exists("photos").unwrap());

    let key = store.issue_key("obc-1", "photos").await.unwrap();
    let retry = store.issue_key("obc-1", "photos").await.unwrap();
    assert_eq!(key, retry, "a retry returns the same key pair");
    let other = store.issue_key("obc-2", "photos").await.unwrap();
    assert_ne!(key.access_key_id, other.access_key_id);
    assert_eq!(key.secret_access_key.len(), 40);

    // Survives a restart.
    drop(store);
    let store = open(tmp.path(), "ours");
    assert_eq!(store.lookup_key(&key.access_key_id), Some(key.clone()));
    assert_eq!(store.issue_key("obc-1", "photos").await.unwrap(), key);

    assert_eq!(store.revoke_keys("obc-1").await.unwrap(), 1);
    assert_eq!(store.revoke_keys("obc-1").await.unwrap(), 0);
    assert!(store.lookup_key(&key.access_key_id).is_none());
    assert!(store.lookup_key(&other.access_key_id).is_some());

    assert!(store.delete_bucket("photos", "obc-1").await.unwrap());
    assert!(!store.bucket_exists("photos").unwrap());
    assert!(store.lookup_key(&other.access_key_id).is_none(), "bucket keys go with it");
    assert!(store.bucket_record("photos").is_none());
    assert!(store.delete_bucket("photos", "obc-1").await.unwrap());

    // Provisioning again after a delete works, for anyone.
    store.create_bucket("photos", Creator { user_id: "obc-2", ..ONE }).await.unwrap();
}

#[tokio::test]
async fn only_the_creating_claim_provisions_or_deletes_a_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), "ours");
    store.create_bucket("victim", ONE).await.unwrap();
    let victim = store.issue_key("obc-1", "victim").await.unwrap();
    let thief = Creator { user_id: "obc-2", delete_with_claim: true };
    assert!(matches!(
        store.create_bucket("victim", thief).await,
        Err(StoreError::BucketAlreadyExists(_))
    ));
    // A key the thief got some other way (a grant) goes; the bucket stays.
    let granted = store.issue_key("obc-2", "victim").await.unwrap();
    assert!(!store.delete_bucket("victim", "obc-2").await.unwrap());
    assert!(store.bucket_exists("victim").unwrap());
    assert!(store.lookup_key(&granted.access_key_id).is_none());
    assert!(store.lookup_key(&victim.access_key_id).is_some());

    // Retained: even its creator's deletion only takes its key, and nobody takes it over.
    let keeper = Creator { user_id: "obc-3", delete_with_claim: false };
    store.create_bucket("kept", keeper).await.unwrap();
    assert!(!store.delete_bucket("kept", "obc-3").await.unwrap());
    assert!(store.bucket_exists("kept").unwrap());
    assert!(store.create_bucket("kept", thief).await.is_err());
}

#[tokio::test]
async fn buckets_of_others_are_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let theirs = open(tmp.path(), "theirs");
    theirs.create_bucket("shared", ONE).await.unwrap();
    let key = theirs.issue_key("obc-9", "shared").await.unwrap();
    drop(theirs);

    let ours = open(tmp.path(), "ours");
    let err = ours.delete_bucket("shared", "obc-1").await.unwrap_err();
    assert!(matches!(&err, StoreError::NotOurs { owner, .. } if owner == "theirs"), "{err}");
    assert!(err.to_string().contains("left alone"));
    assert!(ours.bucket_exists("shared").unwrap());
    assert!(ours.lookup_key(&key.access_key_id).is_some());
    assert!(matches!(ours.create_bucket("shared", ONE).await, Err(StoreError::NotOurs { .. })));

    // A directory made by an operator has no record: never adopted, never deleted.
    fs::create_dir(ours.bucket_path("handmade").unwrap()).unwrap();
    assert!(matches!(
        ours.create_bucket("handmade", ONE).await,
        Err(StoreError::BucketAlreadyExists(_))
    ));
    assert!(!ours.delete_bucket("handmade", "obc-1").await.unwrap());
    assert!(ours.bucket_exists("handmade").unwrap());
    // ...but it can be granted.
    ours.issue_key("obc-3", "handmade").await.unwrap();
    assert!(matches!(ours.issue_key("obc-3", "missing").await, Err(StoreError::NoSuchBucket(_))));
}

#[tokio::test]
async fn writes_a_crash_interrupted_are_removed_when_the_store_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), "ours");
    store.create_bucket("abc", ONE).await.unwrap();
    let key = store.issue_key("u", "abc").await.unwrap();
    drop(store);
    let keys = tmp.path().join(STATE_DIR).join(KEYS_DIR);
    let interrupted = keys.join(format!("{}.tmp-0123456789abcdef", key.access_key_id));
    fs::write(&interrupted, b"{\"secret_access_key\":\"half-writ").unwrap();

    let store = open(tmp.path(), "ours");
    assert!(!interrupted.exists(), "left behind with a secret in it");
    assert_eq!(fs::read_dir(&keys).unwrap().count(), 1);
    assert_eq!(store.lookup_key(&key.access_key_id).unwrap().user_id, "u");
}

#[tokio::test]
async fn secrets_are_private() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), "ours");
    store.create_bucket("abc", ONE).await.unwrap();
    store.issue_key("u", "abc").await.unwrap();
    let dir = fs::metadata(tmp.path().join(STATE_DIR)).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    let key_id = &store.keys_for_user("u")[0].access_key_id;
    let file = tmp.path().join(STATE_DIR).join(KEYS_DIR).join(format!("{key_id}.json"));
    assert_eq!(fs::metadata(file).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(
        !format!("{:?}", store.keys_for_user("u"))
            .contains(&store.keys_for_user("u")[0].secret_access_key)
    );
}

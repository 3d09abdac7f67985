//! Per-version retention and legal holds: governance gives way only to a bypass by the bucket
//! owner's key or the operator; compliance to nobody, the operator credential included, for removals and
//! retention changes alike; a legal hold until it is cleared; DeleteObjects answers each
//! protected version with its own AccessDenied. Overwrites and deletes without a version id
//! stay allowed: they make a new version or a delete marker, and the protected version stays
//! behind them. Put/GetObjectRetention also as raw signed requests, a second client besides the
//! SDK.

use aws_sdk_s3::Client;
use aws_sdk_s3::types::{
    Delete, ObjectIdentifier, ObjectLockLegalHold, ObjectLockLegalHoldStatus, ObjectLockMode,
    ObjectLockRetention, ObjectLockRetentionMode,
};
use s3_endpoint::StoreError;

use super::{ADMIN_ID, ADMIN_SECRET, in_days, lock_bucket, put, retention, signed};
use crate::common::{Server, code, status};

/// Removes version `version` of `key` for good; a refusal must be a 403.
async fn delete(
    s3: &Client,
    bucket: &str,
    key: &str,
    version: &str,
    bypass: bool,
) -> Result<(), String> {
    let delete = s3.delete_object().bucket(bucket).key(key).version_id(version);
    delete.bypass_governance_retention(bypass).send().await.map(|_| ()).map_err(|e| {
        assert_eq!(status(&e), Some(403), "{e:?}");
        code(&e)
    })
}

async fn set_retention(
    s3: &Client,
    bucket: &str,
    key: &str,
    version: &str,
    retention: ObjectLockRetention,
    bypass: bool,
) -> Result<(), String> {
    let put = s3.put_object_retention().bucket(bucket).key(key).version_id(version);
    let put = put.retention(retention).bypass_governance_retention(bypass);
    put.send().await.map(|_| ()).map_err(|e| code(&e))
}

/// Whether version `version` of `key` is still there.
async fn kept(s3: &Client, bucket: &str, key: &str, version: &str) -> bool {
    s3.head_object().bucket(bucket).key(key).version_id(version).send().await.is_ok()
}

fn denied(result: Result<(), String>) -> bool {
    result.is_err_and(|code| code == "AccessDenied")
}

#[tokio::test]
async fn governance_gives_way_only_to_the_owner_or_the_operator_asking_to_bypass() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    let (owner, other) = lock_bucket(&server, "gov").await;
    let (owner, other) = (server.client(&owner), server.client(&other));
    let until = in_days(2);
    let v = put(&owner, "gov", "k", Some((ObjectLockMode::Governance, until))).await.unwrap();
    let v = v.unwrap();

    assert!(denied(delete(&owner, "gov", "k", &v, false).await));
    assert!(denied(delete(&other, "gov", "k", &v, true).await), "not the owner's key");
    assert!(denied(delete(&admin, "gov", "k", &v, false).await), "no bypass asked for");
    let shorter = retention(ObjectLockRetentionMode::Governance, in_days(1));
    assert!(denied(set_retention(&owner, "gov", "k", &v, shorter.clone(), false).await));
    assert!(denied(set_retention(&other, "gov", "k", &v, shorter.clone(), true).await));
    // Anyone who may write may lengthen it.
    let longer = retention(ObjectLockRetentionMode::Governance, in_days(3));
    set_retention(&other, "gov", "k", &v, longer, false).await.unwrap();
    set_retention(&owner, "gov", "k", &v, shorter.clone(), true).await.unwrap();
    let got = owner.get_object_retention().bucket("gov").key("k").send().await.unwrap();
    assert_eq!(got.retention(), Some(&shorter));
    // An overwrite and a delete marker leave the version in place behind them.
    let newer = put(&owner, "gov", "k", None).await.unwrap().unwrap();
    let marker = owner.delete_object().bucket("gov").key("k").send().await.unwrap();
    assert_eq!(marker.delete_marker(), Some(true));
    assert!(kept(&owner, "gov", "k", &v).await);
    let got = owner.get_object_retention().bucket("gov").key("k").version_id(&v).send().await;
    assert_eq!(got.unwrap().retention(), Some(&shorter));
    delete(&owner, "gov", "k", &newer, false).await.unwrap();
    delete(&owner, "gov", "k", &v, true).await.unwrap();
    assert!(!kept(&owner, "gov", "k", &v).await);
    // The operator lifts it on any bucket.
    let v = put(&other, "gov", "k2", Some((ObjectLockMode::Governance, until))).await.unwrap();
    let v = v.unwrap();
    assert!(denied(delete(&other, "gov", "k2", &v, true).await));
    delete(&admin, "gov", "k2", &v, true).await.unwrap();
    assert!(!kept(&owner, "gov", "k2", &v).await);
}

#[tokio::test]
async fn compliance_holds_against_every_key_and_the_operator_until_its_date() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    let (owner, other) = lock_bucket(&server, "comp").await;
    let (owner, other) = (server.client(&owner), server.client(&other));
    let until = in_days(2);
    let v = put(&owner, "comp", "k", Some((ObjectLockMode::Compliance, until))).await.unwrap();
    let v = v.unwrap();
    let shorter = retention(ObjectLockRetentionMode::Compliance, in_days(1));
    let governance = retention(ObjectLockRetentionMode::Governance, in_days(5));
    let removed = ObjectLockRetention::builder().build();
    for s3 in [&owner, &other, &admin] {
        for bypass in [false, true] {
            assert!(denied(delete(s3, "comp", "k", &v, bypass).await));
            for change in [&shorter, &governance, &removed] {
                let refused = set_retention(s3, "comp", "k", &v, change.clone(), bypass).await;
                assert!(denied(refused), "{change:?}");
            }
        }
    }
    // The store's own paths refuse it too, naming the date.
    let err = server.store.delete_object_version("comp", "k", Some(&v)).await.unwrap_err();
    let StoreError::ObjectLocked(refusal) = &err else { panic!("{err}") };
    assert!(refusal.until().is_some() && err.to_string().contains("COMPLIANCE"), "{err}");
    let longer = retention(ObjectLockRetentionMode::Compliance, in_days(3));
    set_retention(&other, "comp", "k", &v, longer.clone(), false).await.unwrap();
    let got = admin.get_object_retention().bucket("comp").key("k").send().await.unwrap();
    assert_eq!(got.retention(), Some(&longer));
    let data = owner.get_object().bucket("comp").key("k").version_id(&v).send().await.unwrap();
    assert_eq!(data.body.collect().await.unwrap().into_bytes().as_ref(), b"data");
}

#[tokio::test]
async fn a_legal_hold_blocks_every_removal_until_it_is_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, "hold").await;
    let s3 = server.client(&owner);
    let v = put(&s3, "hold", "k", None).await.unwrap().unwrap();
    let hold = |status| ObjectLockLegalHold::builder().status(status).build();
    // Never set: no legal hold configuration to read, as S3 answers.
    let never = s3.get_object_legal_hold().bucket("hold").key("k").send().await.unwrap_err();
    let code = never.as_service_error().and_then(|e| e.meta().code().map(str::to_owned));
    assert_eq!(code.as_deref(), Some("NoSuchObjectLockConfiguration"));
    let on = s3.put_object_legal_hold().bucket("hold").key("k");
    on.legal_hold(hold(ObjectLockLegalHoldStatus::On)).send().await.unwrap();
    let got = s3.get_object_legal_hold().bucket("hold").key("k").send().await.unwrap();
    assert_eq!(got.legal_hold().unwrap().status(), Some(&ObjectLockLegalHoldStatus::On));
    let head = s3.head_object().bucket("hold").key("k").send().await.unwrap();
    assert_eq!(head.object_lock_legal_hold_status(), Some(&ObjectLockLegalHoldStatus::On));
    assert!(denied(delete(&s3, "hold", "k", &v, true).await));
    let off = s3.put_object_legal_hold().bucket("hold").key("k").version_id(&v);
    off.legal_hold(hold(ObjectLockLegalHoldStatus::Off)).send().await.unwrap();
    let got = s3.get_object_legal_hold().bucket("hold").key("k").send().await.unwrap();
    assert_eq!(got.legal_hold().unwrap().status(), Some(&ObjectLockLegalHoldStatus::Off));
    delete(&s3, "hold", "k", &v, false).await.unwrap();
    assert!(!kept(&s3, "hold", "k", &v).await);
}

#[tokio::test]
async fn delete_objects_answers_each_protected_version_with_access_denied() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, "many").await;
    let s3 = server.client(&owner);
    let lock = |mode| Some((mode, in_days(1)));
    let versions = [
        ("free", put(&s3, "many", "free", None).await.unwrap().unwrap()),
        (
            "governed",
            put(&s3, "many", "governed", lock(ObjectLockMode::Governance)).await.unwrap().unwrap(),
        ),
        (
            "complied",
            put(&s3, "many", "complied", lock(ObjectLockMode::Compliance)).await.unwrap().unwrap(),
        ),
    ];
    let delete = || {
        let objects = versions
            .iter()
            .map(|(k, v)| ObjectIdentifier::builder().key(*k).version_id(v).build().unwrap());
        Delete::builder().set_objects(Some(objects.collect())).build().unwrap()
    };
    let first = s3.delete_objects().bucket("many").delete(delete()).send().await.unwrap();
    let deleted: Vec<_> = first.deleted().iter().filter_map(|d| d.key()).collect();
    assert_eq!(deleted, ["free"]);
    let mut refused: Vec<_> =
        first.errors().iter().map(|e| (e.key().unwrap(), e.code().unwrap())).collect();
    refused.sort_unstable();
    assert_eq!(refused, [("complied", "AccessDenied"), ("governed", "AccessDenied")]);
    let bypass = s3.delete_objects().bucket("many").delete(delete());
    let second = bypass.bypass_governance_retention(true).send().await.unwrap();
    let deleted: Vec<_> = second.deleted().iter().filter_map(|d| d.key()).collect();
    assert_eq!(deleted, ["free", "governed"], "a missing version counts as deleted");
    let refused: Vec<_> = second.errors().iter().map(|e| e.key().unwrap()).collect();
    assert_eq!(refused, ["complied"]);
    assert!(kept(&s3, "many", "complied", &versions[2].1).await);
}

#[tokio::test]
async fn retention_as_raw_signed_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, other) = lock_bucket(&server, "raw").await;
    let sdk = server.client(&owner);
    let v = put(&sdk, "raw", "k", None).await.unwrap().unwrap();
    put(&sdk, "raw", "k", None).await.unwrap();
    let doc = |mode: &str, date: &str| {
        format!(
            "<Retention xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Mode>{mode}</Mode>\
             <RetainUntilDate>{date}</RetainUntilDate></Retention>"
        )
    };
    // The older version, named by its id.
    let path = format!("/raw/k?retention&versionId={v}");
    let far = "2100-01-02T03:04:05.678Z";
    let put = signed(&server, &owner, "PUT", &path, &[], &doc("GOVERNANCE", far)).await;
    assert_eq!(put.status, 200, "{}", put.text());
    let got = signed(&server, &owner, "GET", &path, &[], "").await;
    assert_eq!(got.status, 200, "{}", got.text());
    let text = got.text();
    assert!(text.contains("<Mode>GOVERNANCE</Mode>"), "{text}");
    assert!(text.contains("2100-01-02T03:04:05.678Z"), "to the millisecond: {text}");
    let newest = signed(&server, &owner, "GET", "/raw/k?retention", &[], "").await;
    assert_eq!(newest.error_code().as_deref(), Some("NoSuchObjectLockConfiguration"));

    let sooner = doc("GOVERNANCE", "2099-01-01T00:00:00Z");
    let refused = signed(&server, &owner, "PUT", &path, &[], &sooner).await;
    assert_eq!((refused.status, refused.error_code().as_deref()), (403, Some("AccessDenied")));
    let bypass = [("x-amz-bypass-governance-retention", "true")];
    let refused = signed(&server, &other, "PUT", &path, &bypass, &sooner).await;
    assert_eq!(refused.error_code().as_deref(), Some("AccessDenied"));
    assert!(refused.text().contains("owner"), "{}", refused.text());
    let done = signed(&server, &owner, "PUT", &path, &bypass, &sooner).await;
    assert_eq!(done.status, 200, "{}", done.text());

    for (body, expected) in [
        (doc("governance", far), "InvalidArgument"),
        (doc("COMPLIANCE", "2001-01-01T00:00:00Z"), "InvalidArgument"),
        ("<Retention><Mode>COMPLIANCE</Mode></Retention>".to_owned(), "MalformedXML"),
    ] {
        let refused = signed(&server, &owner, "PUT", &path, &[], &body).await;
        assert_eq!(refused.error_code().as_deref(), Some(expected), "{body}");
    }
    let got = signed(&server, &owner, "GET", &path, &[], "").await;
    assert!(got.text().contains("2099-01-01T00:00:00"), "unchanged: {}", got.text());
}

#[tokio::test]
async fn a_put_with_lock_headers_needs_a_digest_of_its_body() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, "digest").await;
    let lock = [
        ("x-amz-object-lock-mode", "GOVERNANCE"),
        ("x-amz-object-lock-retain-until-date", "2100-01-01T00:00:00Z"),
    ];
    // Signed over its payload hash, but with neither Content-MD5 nor a checksum header.
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"data"));
    let mut headers = vec![("x-amz-content-sha256", sha.as_str())];
    headers.extend_from_slice(&lock);
    let signatures =
        crate::common::sign_v4(server.addr, &owner, "PUT", "/digest/k", &headers, &sha);
    let mut all = headers.clone();
    all.extend(signatures.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    let refused = crate::common::raw_request(server.addr, "PUT", "/digest/k", &all, b"data").await;
    assert_eq!((refused.status, refused.error_code().as_deref()), (400, Some("InvalidRequest")));
    assert!(refused.text().contains("Content-MD5"), "{}", refused.text());
    // With Content-MD5 (added by `signed`) it is stored, protected.
    let stored = signed(&server, &owner, "PUT", "/digest/k", &lock, "data").await;
    assert_eq!(stored.status, 200, "{}", stored.text());
    let lock = server.store.object_lock("digest", "k", None).await.unwrap();
    assert_eq!(lock.retention.map(|r| r.mode), Some(s3_endpoint::store::LockMode::Governance));
}

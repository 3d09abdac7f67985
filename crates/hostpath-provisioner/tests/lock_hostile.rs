//! Tenants working against object lock on the hostPath backend, with the real binary on the
//! real control plane, the provisioner as deployed and tenants scoped to their namespaces,
//! each using nothing but its claim's Secret: no key of a claim, the owner's or a sharing
//! claim's, shortens, removes or weakens a COMPLIANCE retention, deletes a protected version
//! (DeleteObject, DeleteObjects, with or without the governance bypass), or sets a retention
//! past what its StorageClass allows (`maxObjectLockRetentionDays`, `allowComplianceRetention`);
//! a key granted across namespaces does no better; a claim's lifecycle rules leave protected
//! versions in place; another namespace's tenant cannot delete the claim. What each refusal leaves is read back.

mod harness;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{
    DefaultRetention, Delete, ObjectIdentifier, ObjectLockConfiguration, ObjectLockEnabled,
    ObjectLockMode, ObjectLockRetention, ObjectLockRetentionMode, ObjectLockRule,
};
use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use harness::share::{ALLOW, create_grant, grant, namespace_role};
use harness::*;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use test_support::eventually;

const DAY: Duration = Duration::from_secs(86_400);
/// Long past: what the lifecycle rule covers is due at once.
const PAST: &str = "2020-01-01T00:00:00Z";

fn spec(class: &str, name: &str, config: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    let config = config.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    ObjectBucketClaimSpec {
        storage_class_name: class.to_owned(),
        generate_bucket_name: Some(name.into()),
        additional_config: Some(config.collect::<BTreeMap<_, _>>()),
        ..Default::default()
    }
}

/// A date `days` from now, to the second.
fn in_days(days: u32) -> DateTime {
    let at = SystemTime::now() + DAY * days;
    DateTime::from_secs(at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64)
}

fn compliance(days: u32) -> Option<(ObjectLockMode, DateTime)> {
    Some((ObjectLockMode::Compliance, in_days(days)))
}

fn governance(days: u32) -> Option<(ObjectLockMode, DateTime)> {
    Some((ObjectLockMode::Governance, in_days(days)))
}

/// Stores `key` with the retention given; answers its version, or the error code.
async fn put_locked(
    s3: &S3,
    bucket: &str,
    key: &str,
    lock: Option<(ObjectLockMode, DateTime)>,
) -> Result<String, String> {
    let mut put = s3.put_object().bucket(bucket).key(key).body(ByteStream::from_static(b"kept"));
    if let Some((mode, until)) = lock {
        put = put.object_lock_mode(mode).object_lock_retain_until_date(until);
    }
    let sent = put.send().await;
    sent.map(|o| o.version_id.expect("a version")).map_err(|e| code::<(), _>(Err(e)))
}

/// Sets the retention of version `v` of `key` (`None`: removes it).
async fn set_retention(
    s3: &S3,
    bucket: &str,
    (key, v): (&str, &str),
    to: Option<(ObjectLockRetentionMode, DateTime)>,
    bypass: bool,
) -> String {
    let doc = match to {
        Some((mode, until)) => ObjectLockRetention::builder().mode(mode).retain_until_date(until),
        None => ObjectLockRetention::builder(),
    };
    let set = s3.put_object_retention().bucket(bucket).key(key).version_id(v);
    code(set.retention(doc.build()).bypass_governance_retention(bypass).send().await)
}

/// The retention of version `v` of `key`: mode and date.
async fn retention_of(s3: &S3, bucket: &str, (key, v): (&str, &str)) -> (String, DateTime) {
    let got = s3.get_object_retention().bucket(bucket).key(key).version_id(v).send().await;
    let got = got.unwrap();
    let got = got.retention().unwrap();
    (got.mode().unwrap().as_str().to_owned(), *got.retain_until_date().unwrap())
}

async fn delete_version(s3: &S3, bucket: &str, (key, v): (&str, &str), bypass: bool) -> String {
    let delete = s3.delete_object().bucket(bucket).key(key).version_id(v);
    code(delete.bypass_governance_retention(bypass).send().await)
}

/// DeleteObjects of `versions`: the keys deleted, and the keys refused with their codes.
async fn delete_many(
    s3: &S3,
    bucket: &str,
    versions: &[(&str, &str)],
    bypass: bool,
) -> (Vec<String>, Vec<(String, String)>) {
    let objects = versions
        .iter()
        .map(|(key, v)| ObjectIdentifier::builder().key(*key).version_id(*v).build().unwrap());
    let delete = Delete::builder().set_objects(Some(objects.collect())).build().unwrap();
    let sent = s3.delete_objects().bucket(bucket).delete(delete);
    let done = sent.bypass_governance_retention(bypass).send().await.unwrap();
    let mut deleted: Vec<_> =
        done.deleted().iter().map(|d| d.key().unwrap_or_default().to_owned()).collect();
    let mut refused: Vec<_> = done
        .errors()
        .iter()
        .map(|e| (e.key().unwrap_or_default().to_owned(), e.code().unwrap_or_default().to_owned()))
        .collect();
    deleted.sort();
    refused.sort();
    (deleted, refused)
}

/// Whether version `v` of `key` is still there.
async fn kept(s3: &S3, bucket: &str, (key, v): (&str, &str)) -> bool {
    s3.head_object().bucket(bucket).key(key).version_id(v).send().await.is_ok()
}

fn default_lock(mode: ObjectLockRetentionMode, days: i32) -> ObjectLockConfiguration {
    let retention = DefaultRetention::builder().mode(mode).days(days).build();
    ObjectLockConfiguration::builder()
        .object_lock_enabled(ObjectLockEnabled::Enabled)
        .rule(ObjectLockRule::builder().default_retention(retention).build())
        .build()
}

async fn set_default(s3: &S3, bucket: &str, config: ObjectLockConfiguration) -> String {
    let set = s3.put_object_lock_configuration().bucket(bucket);
    code(set.object_lock_configuration(config).send().await)
}

fn denied(got: String) -> bool {
    got == "AccessDenied"
}

/// Lets the claims go without the provisioner: their retentions outlast the test.
async fn release(env: &Env, tenant: &Tenant, names: &[&str]) {
    let admin: Api<ObjectBucketClaim> = Api::namespaced(env.client.clone(), &tenant.ns);
    let release = json!({ "metadata": { "finalizers": null } });
    for name in names {
        admin.patch(name, &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
    }
}

#[tokio::test]
async fn no_claim_key_weakens_removes_or_overextends_locked_data() {
    let env = Env::new("hp-lock-hostile").await;
    let provisioner = env.start("node-a");
    let tenant = env.scoped_tenant("hp-lock-hostile-t").await;
    let lock_class = |compliance: &'static str| {
        [
            ("allowVersioning", "true"),
            ("allowObjectLock", "true"),
            ("allowComplianceRetention", compliance),
            ("maxObjectLockRetentionDays", "30"),
        ]
    };
    let open = env.class(&lock_class("true"), "Delete").await;
    let governed = env.class(&lock_class("false"), "Delete").await;
    let aging = json!({ "Rules": [{
        "ID": "age", "Status": "Enabled", "Filter": { "Prefix": "aged/" },
        "Expiration": { "Date": PAST }, "NoncurrentVersionExpiration": { "NoncurrentDays": 1 },
    }] })
    .to_string();
    let vault = [("objectLock", "Enabled"), ("bucketLifecycle", aging.as_str())];
    tenant.create("vault", spec(&open, "vault", &vault)).await;
    tenant.create("nocomp", spec(&governed, "nocomp", &[("objectLock", "Enabled")])).await;
    tenant.wait("vault", ClaimPhase::Bound, "Bound").await;
    let share = [("shareFrom", "vault")];
    tenant.create("peer", spec(&open, "peer", &share)).await;
    tenant.wait("peer", ClaimPhase::Bound, "Bound").await;
    tenant.wait("nocomp", ClaimPhase::Bound, "Bound").await;
    let (owner, bucket) = tenant.s3_for("vault").await;
    let (peer, peer_bucket) = tenant.s3_for("peer").await;
    assert_eq!(peer_bucket, bucket, "the sharing claim reaches the vault");
    let b = bucket.as_str();

    let held = put_locked(&owner, b, "held", compliance(5)).await.unwrap();
    let gov = put_locked(&owner, b, "gov", governance(5)).await.unwrap();
    let free = put_locked(&owner, b, "free", None).await.unwrap();
    let (held, gov, free) =
        (("held", held.as_str()), ("gov", gov.as_str()), ("free", free.as_str()));
    let before = retention_of(&owner, b, held).await;
    assert_eq!(before.0, "COMPLIANCE");

    // The owner's own key: COMPLIANCE is not shortened, removed or turned GOVERNANCE, bypass
    // or not.
    use ObjectLockRetentionMode::{Compliance, Governance};
    for bypass in [false, true] {
        for to in [Some((Compliance, in_days(1))), None, Some((Governance, in_days(6)))] {
            assert!(denied(set_retention(&owner, b, held, to, bypass).await), "{bypass}");
        }
        assert!(denied(delete_version(&owner, b, held, bypass).await), "bypass {bypass}");
    }
    assert_eq!(retention_of(&owner, b, held).await, before, "the retention is unchanged");
    // DeleteObjects, mixed: the protected versions refused one by one, the free one deleted.
    let (deleted, refused) = delete_many(&owner, b, &[held, gov, free], false).await;
    assert_eq!(deleted, ["free"]);
    let refused_both =
        [("gov".into(), "AccessDenied".into()), ("held".into(), "AccessDenied".into())];
    assert_eq!(refused, refused_both);
    assert!(!kept(&owner, b, free).await, "the unprotected version is gone");

    // The sharing claim's key: no deletion, no governance bypass, no shortening.
    for bypass in [false, true] {
        for version in [held, gov] {
            assert!(denied(delete_version(&peer, b, version, bypass).await), "{version:?}");
        }
        let (_, refused) = delete_many(&peer, b, &[held, gov], bypass).await;
        assert_eq!(refused, refused_both, "bypass {bypass}");
        let shorter_gov = Some((Governance, in_days(1)));
        assert!(denied(set_retention(&peer, b, gov, shorter_gov, bypass).await));
        assert!(denied(set_retention(&peer, b, gov, None, bypass).await));
        let shorter = Some((Compliance, in_days(1)));
        assert!(denied(set_retention(&peer, b, held, shorter, bypass).await));
    }
    for version in [held, gov] {
        assert!(kept(&owner, b, version).await, "{version:?} outlives every attempt");
    }
    assert_eq!(retention_of(&owner, b, gov).await.0, "GOVERNANCE");

    // Past the class's cap (30 days), by any key and any path: refused, nothing written.
    for s3 in [&owner, &peer] {
        assert_eq!(put_locked(s3, b, "long", compliance(40)).await, Err("AccessDenied".into()));
        assert!(denied(set_retention(s3, b, held, Some((Compliance, in_days(40))), false).await));
        assert!(denied(set_default(s3, b, default_lock(Compliance, 365)).await));
    }
    let long = owner.head_object().bucket(b).key("long").send().await;
    assert_eq!(code(long), "NotFound", "a refused write leaves nothing");
    assert_eq!(retention_of(&owner, b, held).await, before);
    let config = owner.get_object_lock_configuration().bucket(b).send().await.unwrap();
    let rule = config.object_lock_configuration().and_then(|c| c.rule());
    assert!(rule.is_none(), "no default retention was set: {config:?}");
    // Within it a key lengthens: the limit, not a blanket refusal.
    // One instant, asked for and compared: a second may pass between the two.
    let until = in_days(6);
    assert_eq!(set_retention(&peer, b, held, Some((Compliance, until)), false).await, "ok");
    assert_eq!(retention_of(&owner, b, held).await.1, until);
    // COMPLIANCE where the class does not allow it.
    let (nocomp, nocomp_bucket) = tenant.s3_for("nocomp").await;
    let denied_comp = put_locked(&nocomp, &nocomp_bucket, "k", compliance(1)).await;
    assert_eq!(denied_comp, Err("AccessDenied".into()));
    assert!(denied(set_default(&nocomp, &nocomp_bucket, default_lock(Compliance, 1)).await));
    let v = put_locked(&nocomp, &nocomp_bucket, "k", governance(1)).await.unwrap();
    let to_comp = Some((Compliance, in_days(2)));
    assert!(denied(set_retention(&nocomp, &nocomp_bucket, ("k", &v), to_comp, false).await));

    // The claim's lifecycle rules: the pass (run at start) makes the protected key read as
    // deleted and keeps its version. Its NoncurrentDays need a day of real time, so that part
    // of the pass is proven at the endpoint, whose pass takes the time it runs at.
    let aged = put_locked(&owner, b, "aged/doc", compliance(5)).await.unwrap();
    provisioner.kill().await;
    let _provisioner = env.start("node-a");
    eventually("a lifecycle pass over aged/", || async {
        let got = owner.get_object().bucket(b).key("aged/doc").send().await;
        (code(got) == "NoSuchKey").then_some(())
    })
    .await;
    assert!(kept(&owner, b, ("aged/doc", &aged)).await, "the pass removes no protected version");

    // The sharing claim goes; the vault and its data stay.
    tenant.delete("peer").await;
    assert!(kept(&owner, b, held).await && kept(&owner, b, gov).await);
    release(&env, &tenant, &["vault", "nocomp"]).await;
}

#[tokio::test]
async fn another_namespace_cannot_delete_a_claim_holding_locked_data() {
    let env = Env::new("hp-lock-foreign").await;
    let _provisioner = env.start("node-a");
    let tenant = env.scoped_tenant("hp-lock-foreign-t").await;
    let stranger = env.scoped_tenant("hp-lock-foreign-s").await;
    let pairs = [("allowObjectLock", "true"), ("allowComplianceRetention", "true")];
    let class = env.class(&pairs, "Delete").await;
    tenant.create("vault", spec(&class, "vault", &[("objectLock", "Enabled")])).await;
    tenant.wait("vault", ClaimPhase::Bound, "Bound").await;
    let (owner, bucket) = tenant.s3_for("vault").await;
    let held = put_locked(&owner, &bucket, "held", compliance(2)).await.unwrap();
    let theirs: Api<ObjectBucketClaim> = Api::namespaced(stranger.client.clone(), &tenant.ns);
    let refused = theirs.delete("vault", &Default::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(e) if e.code == 403),
        "a tenant's rights end at its namespace: {refused:?}"
    );
    let claim = tenant.claims.get("vault").await.unwrap();
    assert!(claim.metadata.deletion_timestamp.is_none(), "the claim is untouched");
    assert!(kept(&owner, &bucket, ("held", &held)).await);
    release(&env, &tenant, &["vault"]).await;
}

#[tokio::test]
async fn a_key_granted_across_namespaces_cannot_undo_locked_data() {
    let env = Env::new("hp-lock-xns").await;
    let _provisioner = env.start("node-a");
    let pairs = [
        ALLOW,
        ("allowObjectLock", "true"),
        ("allowComplianceRetention", "true"),
        ("maxObjectLockRetentionDays", "30"),
    ];
    let class = env.class(&pairs, "Delete").await;
    env.home().create("vault", spec(&class, "vault", &[("objectLock", "Enabled")])).await;
    env.wait("vault", ClaimPhase::Bound, "Bound").await;
    let (owner, bucket) = env.s3_for("vault").await;
    let b = bucket.as_str();
    let held = put_locked(&owner, b, "held", compliance(2)).await.unwrap();
    let gov = put_locked(&owner, b, "gov", governance(2)).await.unwrap();
    let (held, gov) = (("held", held.as_str()), ("gov", gov.as_str()));

    let admin = namespace_role(&env.client, &env.ns, "admin").await;
    let other = env.scoped_tenant("hp-lock-xns-w").await;
    let consent = grant("share-vault", "vault", &[(&other.ns, None, Some("ReadWrite"))]);
    create_grant(&admin, &env.ns, &consent).await;
    let from = format!("{}/vault", env.ns);
    let asking = [("shareFrom", from.as_str()), ("accessMode", "ReadWrite")];
    other.create("writer", spec(&class, "writer", &asking)).await;
    other.wait("writer", ClaimPhase::Bound, "Bound").await;
    let (writer, writer_bucket) = other.s3_for("writer").await;
    assert_eq!(writer_bucket, bucket);
    assert!(put_locked(&writer, b, "theirs", None).await.is_ok(), "a key that writes");

    use ObjectLockRetentionMode::{Compliance, Governance};
    for bypass in [false, true] {
        for version in [held, gov] {
            assert!(denied(delete_version(&writer, b, version, bypass).await), "{version:?}");
        }
        let (_, refused) = delete_many(&writer, b, &[held, gov], bypass).await;
        assert_eq!(refused.len(), 2, "bypass {bypass}: {refused:?}");
        let shorter = Some((Governance, in_days(1)));
        assert!(denied(set_retention(&writer, b, gov, shorter, bypass).await));
        let shorter = Some((Compliance, in_days(1)));
        assert!(denied(set_retention(&writer, b, held, shorter, bypass).await));
    }
    assert_eq!(put_locked(&writer, b, "long", compliance(31)).await, Err("AccessDenied".into()));
    for version in [held, gov] {
        assert!(kept(&owner, b, version).await, "{version:?} outlives every attempt");
    }
    release(&env, &env.home(), &["vault"]).await;
}

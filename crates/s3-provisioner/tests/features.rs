//! Versioning, object lock and lifecycle rules of a claim's bucket, and the StorageClass's
//! defaults for them, the backend alone against a real moto server (IAM enforced), checked
//! through the S3 API as a tenant or operator would.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_s3::types::ObjectLockRetentionMode;
use bucket_api::ObjectBucket;
use bucket_provisioner::{BackendError, BucketOptions, Provisioner, TenantWritten};
use common::moto::Moto;
use common::{FixedOwner, claim, error_code, object_bucket, options};
use s3_provisioner::S3Provisioner;

const ROOK_LIFECYCLE: &str = r#"{"Rules": [
    {"ID": "AbortIncompleteMultipartUploads", "Status": "Enabled", "Prefix": "",
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    {"ID": "ExpireAfter30Days", "Status": "Enabled", "Prefix": "logs/",
     "Expiration": {"Days": 30}}]}"#;

fn lock(mode: &str, days: u32) -> String {
    format!(
        r#"{{"ObjectLockEnabled": "Enabled",
            "Rule": {{"DefaultRetention": {{"Mode": "{mode}", "Days": {days}}}}}}}"#
    )
}

struct Fixture {
    moto: Moto,
    backend: S3Provisioner,
    base: Vec<(String, String)>,
}

impl Fixture {
    async fn start() -> Self {
        let moto = Moto::start().await;
        let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
        let base = [
            ("endpoint", moto.endpoint.as_str()),
            ("forcePathStyle", "true"),
            ("secretName", "owner"),
            ("secretNamespace", "infra"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .to_vec();
        Self { moto, backend, base }
    }

    /// Options for `claim` in a class with the base parameters and `class`, asking `config`.
    fn asking(
        &self,
        claim: &bucket_api::ObjectBucketClaim,
        class: &[(&str, &str)],
        config: &[(&str, &str)],
    ) -> BucketOptions {
        let base = self.base.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let parameters: Vec<(&str, &str)> = base.chain(class.iter().copied()).collect();
        let mut options = options(claim, &parameters);
        options.additional_config = TenantWritten::new(
            config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        );
        options
    }

    fn s3(&self) -> aws_sdk_s3::Client {
        self.moto.s3(&self.moto.admin)
    }
}

/// The versioning status of `bucket`. moto 5.2 names GetBucketVersioning's answer
/// `GetBucketVersioningResponse`, a root the SDK refuses, so the status is read from the body.
async fn versioning_of(s3: &aws_sdk_s3::Client, bucket: &str) -> Option<String> {
    match s3.get_bucket_versioning().bucket(bucket).send().await {
        Ok(found) => found.status().map(|s| s.as_str().to_string()),
        Err(aws_sdk_s3::error::SdkError::ServiceError(e)) if e.raw().status().as_u16() == 200 => {
            let body = String::from_utf8_lossy(e.raw().body().bytes().unwrap_or_default());
            let status = body.split("<Status>").nth(1)?.split("</Status>").next()?;
            Some(status.to_string())
        }
        Err(e) => panic!("GetBucketVersioning {bucket}: {e:?}"),
    }
}

/// What the library records after a successful provision or update.
fn recorded(bound: &mut ObjectBucket, options: &BucketOptions) {
    bound.spec.endpoint.as_mut().unwrap().additional_config =
        Some(options.additional_config.requested().clone())
            .filter(|c: &BTreeMap<_, _>| !c.is_empty());
}

fn refused(error: BackendError, says: &str) {
    assert!(
        matches!(&error, BackendError::Permanent { reason, .. } if reason == "InvalidParameters"),
        "{error:?}"
    );
    assert!(error.to_string().contains(says), "{says}: {error}");
}

const ALL: [(&str, &str); 4] = [
    ("allowVersioning", "true"),
    ("allowObjectLock", "true"),
    ("allowComplianceRetention", "true"),
    ("maxObjectLockRetentionDays", "30"),
];

#[tokio::test]
async fn versioning_and_lifecycle_follow_a_bound_claim_and_lock_cannot_be_added_later() {
    let f = Fixture::start().await;
    let s3 = f.s3();
    let claim = claim(&format!("versioned-{}", common::suffix()));
    let bucket = claim.spec.bucket_name.clone().unwrap();
    let asked =
        f.asking(&claim, &ALL, &[("versioning", "Enabled"), ("bucketLifecycle", ROOK_LIFECYCLE)]);
    f.backend.validate(&asked).unwrap();
    let provisioned = f.backend.provision(&asked).await.unwrap();
    assert_eq!(versioning_of(&s3, &bucket).await.as_deref(), Some("Enabled"));
    let lifecycle = s3.get_bucket_lifecycle_configuration().bucket(&bucket).send().await.unwrap();
    let rules = lifecycle.rules();
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[0].abort_incomplete_multipart_upload().and_then(|a| a.days_after_initiation()),
        Some(1)
    );
    assert_eq!(rules[1].expiration().and_then(|e| e.days()), Some(30));
    let mut bound = object_bucket(&claim, Some(&provisioned));
    recorded(&mut bound, &asked);

    // Object lock asked of the bound claim: S3 turns it on only at creation. Refused, and the
    // bucket is as it was.
    let locked = f.asking(
        &claim,
        &ALL,
        &[
            ("versioning", "Enabled"),
            ("bucketLifecycle", ROOK_LIFECYCLE),
            ("objectLock", "Enabled"),
        ],
    );
    refused(f.backend.update(&locked, &bound).await.unwrap_err(), "created without object lock");
    let lock = s3.get_object_lock_configuration().bucket(&bucket).send().await;
    assert_eq!(error_code(lock), "ObjectLockConfigurationNotFoundError");

    // Both keys dropped: versioning suspended (never unversioned again), the rules removed.
    let dropped = f.asking(&claim, &ALL, &[]);
    f.backend.update(&dropped, &bound).await.unwrap();
    assert_eq!(versioning_of(&s3, &bucket).await.as_deref(), Some("Suspended"));
    let gone = s3.get_bucket_lifecycle_configuration().bucket(&bucket).send().await;
    assert_eq!(error_code(gone), "NoSuchLifecycleConfiguration");
    recorded(&mut bound, &dropped);

    // Asked again: enabled again.
    let again = f.asking(&claim, &ALL, &[("versioning", "Enabled")]);
    f.backend.update(&again, &bound).await.unwrap();
    assert_eq!(versioning_of(&s3, &bucket).await.as_deref(), Some("Enabled"));

    bound.spec.endpoint.as_mut().unwrap().additional_config = None;
    f.backend.delete(&bound).await.unwrap();
    assert!(!f.moto.bucket_exists(&bucket).await);
}

#[tokio::test]
async fn a_compliance_retention_holds_against_the_claim_that_set_it() {
    let f = Fixture::start().await;
    let s3 = f.s3();
    let claim = claim(&format!("locked-{}", common::suffix()));
    let bucket = claim.spec.bucket_name.clone().unwrap();
    let asked = f.asking(&claim, &ALL, &[("objectLock", &lock("COMPLIANCE", 10))]);
    f.backend.validate(&asked).unwrap();
    let provisioned = f.backend.provision(&asked).await.unwrap();
    f.backend.provision(&asked).await.expect("a retry finds the bucket and its lock as asked");
    let retention = || async {
        let found = s3.get_object_lock_configuration().bucket(&bucket).send().await.unwrap();
        let configuration = found.object_lock_configuration().unwrap().clone();
        let retention = configuration.rule().and_then(|r| r.default_retention()).unwrap();
        (retention.mode().cloned(), retention.days())
    };
    assert_eq!(retention().await, (Some(ObjectLockRetentionMode::Compliance), Some(10)));
    assert_eq!(versioning_of(&s3, &bucket).await.as_deref(), Some("Enabled"));
    let mut bound = object_bucket(&claim, Some(&provisioned));
    recorded(&mut bound, &asked);

    // The tenant tries to shorten, weaken or drop it, or to stop versioning under it.
    for (config, says) in [
        (vec![("objectLock", lock("COMPLIANCE", 5))], "COMPLIANCE default retention of 10 days"),
        (vec![("objectLock", lock("GOVERNANCE", 10))], "may keep or lengthen"),
        (vec![("objectLock", "Enabled".to_string())], "not shorten, weaken or remove"),
        (vec![], "cannot be turned off"),
        (
            vec![("objectLock", lock("COMPLIANCE", 10)), ("versioning", "Suspended".into())],
            "Suspended cannot go with objectLock",
        ),
    ] {
        let config: Vec<(&str, &str)> = config.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let changed = f.asking(&claim, &ALL, &config);
        refused(f.backend.update(&changed, &bound).await.unwrap_err(), says);
        assert_eq!(retention().await, (Some(ObjectLockRetentionMode::Compliance), Some(10)));
    }

    // Lengthened within the class's cap: applied; beyond it: refused.
    let longer = f.asking(&claim, &ALL, &[("objectLock", &lock("COMPLIANCE", 20))]);
    f.backend.update(&longer, &bound).await.unwrap();
    assert_eq!(retention().await, (Some(ObjectLockRetentionMode::Compliance), Some(20)));
    recorded(&mut bound, &longer);
    let beyond = f.asking(&claim, &ALL, &[("objectLock", &lock("COMPLIANCE", 31))]);
    refused(f.backend.update(&beyond, &bound).await.unwrap_err(), "longer than the 30 days");
    assert_eq!(retention().await, (Some(ObjectLockRetentionMode::Compliance), Some(20)));

    // The bucket holds no objects, so its deletion goes through.
    f.backend.delete(&bound).await.unwrap();
    assert!(!f.moto.bucket_exists(&bucket).await);
}

#[tokio::test]
async fn what_the_class_does_not_allow_is_refused_by_name_and_nothing_is_made() {
    let f = Fixture::start().await;
    /// The class's parameters, what the claim asks, and what the refusal says.
    type Case<'a> = (&'a [(&'a str, &'a str)], (&'a str, String), &'a str);
    let cases: [Case; 6] = [
        (&[], ("versioning", "Enabled".into()), "allowVersioning: \"true\""),
        (&[], ("objectLock", "Enabled".into()), "allowObjectLock: \"true\""),
        (
            &[("allowLifecycle", "false")],
            ("bucketLifecycle", ROOK_LIFECYCLE.into()),
            "allowLifecycle: \"true\"",
        ),
        (
            &[("allowObjectLock", "true")],
            ("objectLock", lock("COMPLIANCE", 1)),
            "allowComplianceRetention",
        ),
        (&ALL, ("objectLock", lock("GOVERNANCE", 31)), "31 days is longer than the 30 days"),
        (&ALL, ("versioning", "on".into()), "\"on\" is neither \"Enabled\" nor \"Suspended\""),
    ];
    for (class, (key, value), says) in cases {
        let claim = claim(&format!("refused-{}", common::suffix()));
        let asked = f.asking(&claim, class, &[(key, &value)]);
        refused(f.backend.validate(&asked).unwrap_err(), says);
        refused(f.backend.provision(&asked).await.unwrap_err(), says);
        assert!(!f.moto.bucket_exists(&asked.bucket_name).await, "{key}: nothing was made");
    }
}

/// The object lock default retention of `bucket`: its mode and days, `None` without a rule.
async fn retention_of(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
) -> Option<(ObjectLockRetentionMode, i32)> {
    let found = s3.get_object_lock_configuration().bucket(bucket).send().await.unwrap();
    let configuration = found.object_lock_configuration()?;
    let retention = configuration.rule()?.default_retention()?;
    Some((retention.mode()?.clone(), retention.days()?))
}

#[tokio::test]
async fn a_class_default_is_what_a_claim_leaving_the_key_out_gets() {
    let f = Fixture::start().await;
    let s3 = f.s3();
    let class: Vec<(&str, &str)> = ALL
        .into_iter()
        .chain([("defaultVersioning", "Enabled"), ("defaultObjectLockRetention", "GOVERNANCE:7d")])
        .collect();

    // No versioning asked: the class's Enabled. No object lock asked: none, default or not.
    let plain = claim(&format!("defaulted-{}", common::suffix()));
    let asked = f.asking(&plain, &class, &[]);
    f.backend.validate(&asked).unwrap();
    let provisioned = f.backend.provision(&asked).await.unwrap();
    assert_eq!(versioning_of(&s3, &asked.bucket_name).await.as_deref(), Some("Enabled"));
    let none = s3.get_object_lock_configuration().bucket(&asked.bucket_name).send().await;
    assert_eq!(error_code(none), "ObjectLockConfigurationNotFoundError");
    let mut bound = object_bucket(&plain, Some(&provisioned));

    // The claim's own value wins; dropped again, the class's default applies, not suspension.
    let suspended = f.asking(&plain, &class, &[("versioning", "Suspended")]);
    f.backend.update(&suspended, &bound).await.unwrap();
    assert_eq!(versioning_of(&s3, &asked.bucket_name).await.as_deref(), Some("Suspended"));
    recorded(&mut bound, &suspended);
    f.backend.update(&asked, &bound).await.unwrap();
    assert_eq!(versioning_of(&s3, &asked.bucket_name).await.as_deref(), Some("Enabled"));
    recorded(&mut bound, &asked);
    f.backend.delete(&bound).await.unwrap();

    // Object lock without a retention of its own: the class's GOVERNANCE 7 days.
    let locked = claim(&format!("default-lock-{}", common::suffix()));
    let asked = f.asking(&locked, &class, &[("objectLock", "Enabled")]);
    let provisioned = f.backend.provision(&asked).await.unwrap();
    let governance = ObjectLockRetentionMode::Governance;
    assert_eq!(retention_of(&s3, &asked.bucket_name).await, Some((governance, 7)));
    let mut bound = object_bucket(&locked, Some(&provisioned));
    recorded(&mut bound, &asked);
    // Its own retention wins over the default.
    let own = f.asking(&locked, &class, &[("objectLock", &lock("COMPLIANCE", 3))]);
    f.backend.update(&own, &bound).await.unwrap();
    let compliance = ObjectLockRetentionMode::Compliance;
    assert_eq!(retention_of(&s3, &asked.bucket_name).await, Some((compliance, 3)));
    recorded(&mut bound, &own);
    f.backend.delete(&bound).await.unwrap();
    assert!(!f.moto.bucket_exists(&asked.bucket_name).await);
}

#[tokio::test]
async fn a_class_default_beyond_what_it_allows_is_refused_naming_both_parameters() {
    let f = Fixture::start().await;
    for (class, says) in [
        (
            &[("defaultVersioning", "Enabled")][..],
            ["defaultVersioning", "allowVersioning: \"true\""],
        ),
        (
            &[ALL[0], ALL[1], ALL[3], ("defaultObjectLockRetention", "GOVERNANCE:31d")][..],
            ["defaultObjectLockRetention", "longer than the 30 days of maxObjectLockRetentionDays"],
        ),
        (
            &[ALL[1], ("defaultObjectLockRetention", "COMPLIANCE:1d")][..],
            ["defaultObjectLockRetention", "allowComplianceRetention: \"true\""],
        ),
        (
            &[ALL[1], ("defaultObjectLockRetention", "GOVERNANCE:30days")][..],
            ["defaultObjectLockRetention", "GOVERNANCE:30d"],
        ),
    ] {
        let claim = claim(&format!("bad-default-{}", common::suffix()));
        let asked = f.asking(&claim, class, &[("objectLock", "Enabled")]);
        let validated = f.backend.validate(&asked).unwrap_err();
        let provisioned = f.backend.provision(&asked).await.unwrap_err();
        for error in [validated, provisioned] {
            says.iter().for_each(|says| refused(error.clone(), says));
        }
        assert!(!f.moto.bucket_exists(&asked.bucket_name).await, "{class:?}: nothing was made");
    }
}

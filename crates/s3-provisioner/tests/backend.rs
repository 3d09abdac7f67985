//! The backend alone against a real moto server (IAM enforced), called as the library calls it:
//! repeated calls, buckets that are not the claim's, and cleanups without recorded state.

mod common;

use std::sync::Arc;

use bucket_api::ReclaimPolicy;
use bucket_provisioner::{BUCKET_NAME_TAKEN, BackendError, Provisioner, Removed, TenantWritten};
use common::moto::Moto;
use common::{
    FixedOwner, claim, denied_elsewhere, error_code, moto_parameters, object_bucket, options,
    read_write, with,
};
use s3_provisioner::bucket::CLAIM_TAG;
use s3_provisioner::params::{STATE_POLICY_NAME, STATE_USER_NAME};
use s3_provisioner::{S3Provisioner, iam};

fn reason(error: &BackendError) -> &str {
    match error {
        BackendError::Permanent { reason, .. } => reason,
        BackendError::Transient { .. } => "transient",
    }
}

#[tokio::test]
async fn repeated_provisioning_keeps_one_user_with_one_fresh_key() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let params = moto_parameters(&moto);
    let claim = claim(&format!("repeat-{}", common::suffix()));
    let options = options(&claim, &with(&params, &[("region", "eu-west-1")]));
    backend.validate(&options).unwrap();

    let first = backend.provision(&options).await.unwrap();
    let second = backend.provision(&options).await.expect("a retry of provision succeeds");
    let user = iam::user_name(&options.user_id);
    assert_eq!(moto.provisioned_users().await, [user.as_str()], "one user, named after the claim");
    assert_eq!(moto.access_keys(&user).await, [second.credentials.access_key_id.as_str()]);
    assert_ne!(first.credentials, second.credentials, "the undelivered key was replaced");
    assert_eq!(second.additional_state, first.additional_state);
    assert_eq!(second.additional_state[STATE_USER_NAME], user);
    assert_eq!(second.additional_state[STATE_POLICY_NAME], iam::policy_name(&options.bucket_name));
    assert_eq!(second.additional_state["region"], "eu-west-1");
    assert!(!second.additional_state.values().any(|v| v == &moto.admin.secret_access_key));
    assert_eq!((second.endpoint.host.as_str(), second.endpoint.port), ("127.0.0.1", moto.port()));

    let s3 = moto.s3_in(&second.credentials, "eu-west-1");
    read_write(&s3, &options.bucket_name).await;
    let old = moto.s3_in(&first.credentials, "eu-west-1");
    let refused = old.list_objects_v2().bucket(&options.bucket_name).send().await;
    assert_eq!(error_code(refused), "InvalidAccessKeyId", "the replaced key no longer works");
    let tags = moto.s3_in(&moto.admin, "eu-west-1");
    let tags = tags.get_bucket_tagging().bucket(&options.bucket_name).send().await.unwrap();
    assert!(tags.tag_set().iter().any(|t| t.key() == CLAIM_TAG && t.value() == options.user_id));

    let record = object_bucket(&claim, Some(&second));
    backend.delete(&record).await.unwrap();
    backend.delete(&record).await.expect("deleting again is done already");
    backend.revoke(&record).await.expect("revoking what is gone is done already");
    assert!(moto.provisioned_users().await.is_empty());
    assert!(!moto.bucket_exists(&options.bucket_name).await);
}

#[tokio::test]
async fn buckets_that_are_not_the_claims_are_refused_and_left_alone() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let params = moto_parameters(&moto);

    // Same account, someone else's data: never adopted, never deleted.
    let taken = format!("taken-{}", common::suffix());
    moto.existing_bucket(&taken, &["keep.txt"]).await;
    let intruder = claim(&taken);
    backend.validate(&options(&intruder, &with(&params, &[]))).unwrap();
    let error = backend.provision(&options(&intruder, &with(&params, &[]))).await.unwrap_err();
    assert_eq!(reason(&error), BUCKET_NAME_TAKEN, "{error}");
    let removed = backend.delete(&object_bucket(&intruder, None)).await.unwrap();
    assert_eq!(removed, Removed::AccessOnly, "an untagged bucket with data is not deleted");
    assert_eq!(moto.object_keys(&taken).await, ["keep.txt"]);

    // Another claim's bucket: neither taken by name nor deleted by a record naming it.
    let owner = claim(&format!("owned-{}", common::suffix()));
    let owned = backend.provision(&options(&owner, &with(&params, &[]))).await.unwrap();
    let other = claim(&owner.spec.bucket_name.clone().unwrap());
    let error = backend.provision(&options(&other, &with(&params, &[]))).await.unwrap_err();
    assert_eq!(reason(&error), BUCKET_NAME_TAKEN, "{error}");
    assert!(!error.to_string().contains(&options(&owner, &[]).user_id), "names nobody: {error}");
    let removed = backend.delete(&object_bucket(&other, Some(&owned))).await.unwrap();
    assert_eq!(removed, Removed::AccessOnly);
    assert!(moto.bucket_exists(&owner.spec.bucket_name.clone().unwrap()).await);

    // A grant needs the bucket to exist.
    let missing = claim(&format!("missing-{}", common::suffix()));
    let error = backend.grant(&options(&missing, &with(&params, &[]))).await.unwrap_err();
    assert_eq!(reason(&error), "BucketNotFound", "{error}");
    assert!(
        moto.provisioned_users()
            .await
            .iter()
            .all(|u| *u == iam::user_name(&options(&owner, &[]).user_id))
    );
}

#[tokio::test]
async fn claims_racing_for_one_name_get_it_once_and_retained_buckets_stay() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let params = moto_parameters(&moto);
    let name = format!("race-{}", common::suffix());
    let (first, second) = (claim(&name), claim(&name));
    let (a, b) = (options(&first, &with(&params, &[])), options(&second, &with(&params, &[])));
    let (a, b) = tokio::join!(backend.provision(&a), backend.provision(&b));
    assert!(a.is_ok() != b.is_ok(), "exactly one claim gets the bucket: {a:?} {b:?}");
    let loser = a.as_ref().err().or(b.as_ref().err()).unwrap();
    assert_eq!(reason(loser), BUCKET_NAME_TAKEN);

    // Created under Retain: even its own claim's deletion keeps it.
    let keeper = claim(&format!("kept-{}", common::suffix()));
    let mut retained = options(&keeper, &with(&params, &[]));
    retained.reclaim_policy = ReclaimPolicy::Retain;
    let provisioned = backend.provision(&retained).await.unwrap();
    moto.s3_in(&provisioned.credentials, "us-east-1")
        .put_object()
        .bucket(&retained.bucket_name)
        .key("keep.txt")
        .body(b"kept".to_vec().into())
        .send()
        .await
        .unwrap();
    let removed = backend.delete(&object_bucket(&keeper, Some(&provisioned))).await.unwrap();
    assert_eq!(removed, Removed::AccessOnly);
    assert_eq!(moto.object_keys(&retained.bucket_name).await, ["keep.txt"]);
    assert!(moto.provisioned_users().await.iter().all(|u| *u != iam::user_name(&retained.user_id)));
}

#[tokio::test]
async fn cleanup_without_recorded_state_uses_the_class_it_saw() {
    let moto = Moto::start().await;
    let params = moto_parameters(&moto);
    let claim = claim(&format!("norecord-{}", common::suffix()));
    let options = options(&claim, &with(&params, &[]));
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    backend.validate(&options).unwrap();
    let provisioned = backend.provision(&options).await.unwrap();
    let s3 = moto.s3(&provisioned.credentials);
    s3.put_object()
        .bucket(&options.bucket_name)
        .key("a")
        .body(b"a".to_vec().into())
        .send()
        .await
        .unwrap();

    // After a restart nothing is known: a clear refusal, and nothing is touched.
    let restarted = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let error = restarted.delete(&object_bucket(&claim, None)).await.unwrap_err();
    assert_eq!(reason(&error), "BucketSettingsUnknown", "{error}");
    assert!(moto.bucket_exists(&options.bucket_name).await);

    // The instance that saw the StorageClass cleans up the bucket and the user.
    backend.delete(&object_bucket(&claim, None)).await.unwrap();
    assert!(!moto.bucket_exists(&options.bucket_name).await);
    assert!(moto.provisioned_users().await.is_empty());
}

#[tokio::test]
async fn owner_keys_are_handed_out_only_when_asked_for() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let params = moto_parameters(&moto);
    let claim = claim(&format!("ownerkeys-{}", common::suffix()));
    let options = options(&claim, &with(&params, &[("createBucketUser", "false")]));
    let provisioned = backend.provision(&options).await.unwrap();
    assert_eq!(provisioned.credentials, moto.admin);
    assert!(moto.provisioned_users().await.is_empty());
    backend.revoke(&object_bucket(&claim, Some(&provisioned))).await.unwrap();
    assert!(moto.user_exists("admin").await, "revoking never touches the owner");
    assert!(moto.bucket_exists(&options.bucket_name).await);
}

#[tokio::test]
async fn minted_keys_reach_only_their_bucket() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let params = moto_parameters(&moto);
    let other = format!("other-{}", common::suffix());
    moto.existing_bucket(&other, &["keep.txt"]).await;
    let claim = claim(&format!("mine-{}", common::suffix()));
    let provisioned = backend.provision(&options(&claim, &with(&params, &[]))).await.unwrap();
    read_write(&moto.s3(&provisioned.credentials), &claim.spec.bucket_name.clone().unwrap()).await;
    denied_elsewhere(
        &moto.s3(&provisioned.credentials),
        &moto.iam(&provisioned.credentials),
        &other,
    )
    .await;
}

#[tokio::test]
async fn bucket_policy_and_lifecycle_follow_the_claim_and_quotas_are_refused() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let reader = "arn:aws:iam::123456789012:role/reader";
    let params = moto_parameters(&moto);
    let params = with(&params, &[("bucketPolicyPrincipals", reader)]);
    let configured = claim(&format!("configured-{}", common::suffix()));
    let bucket = configured.spec.bucket_name.clone().unwrap();
    let read_by = |principal: &str| {
        serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": { "AWS": principal },
                "Action": "s3:GetObject",
                "Resource": format!("arn:aws:s3:::{bucket}/*"),
            }]
        })
        .to_string()
    };
    let expire_after = |days: u32| {
        format!(
            r#"{{"Rules":[{{"ID":"expire","Status":"Enabled","Expiration":{{"Days":{days}}}}}]}}"#
        )
    };
    let mut asked = options(&configured, &params);
    asked.additional_config = TenantWritten::new(
        [
            ("bucketPolicy".to_string(), read_by(reader)),
            ("bucketLifecycle".to_string(), expire_after(30)),
        ]
        .into(),
    );
    backend.validate(&asked).unwrap();
    let provisioned = backend.provision(&asked).await.unwrap();
    let owner = moto.s3(&moto.admin);
    let applied = owner.get_bucket_policy().bucket(&bucket).send().await.unwrap();
    let applied: serde_json::Value = serde_json::from_str(applied.policy().unwrap()).unwrap();
    assert_eq!(applied["Statement"][0]["Principal"]["AWS"], reader, "{applied}");
    let rules = owner.get_bucket_lifecycle_configuration().bucket(&bucket).send().await.unwrap();
    assert_eq!(rules.rules()[0].expiration().and_then(|e| e.days()), Some(30));

    // Wider than the class allows: refused before anything is touched.
    let mut public = asked.clone();
    public.additional_config.requested_mut().insert("bucketPolicy".into(), read_by("*"));
    let error = backend.validate(&public).unwrap_err();
    assert_eq!(reason(&error), "InvalidParameters");
    assert!(error.to_string().contains("bucketPolicyPrincipals"), "{error}");

    // Changed on the bound claim: the lifecycle replaced, the policy (now naming the claim's own
    // user, as IAM has it) replaced, then removed with its key.
    let mut record = object_bucket(&configured, Some(&provisioned));
    record.spec.endpoint.as_mut().unwrap().additional_config =
        Some(asked.additional_config.requested().clone());
    let own = format!(
        "arn:aws:iam::123456789012:user{}{}",
        iam::USER_PATH,
        iam::user_name(&asked.user_id)
    );
    let mut changed = options(&configured, &params);
    changed.additional_config = TenantWritten::new(
        [
            ("bucketPolicy".to_string(), read_by(&own)),
            ("bucketLifecycle".to_string(), expire_after(10)),
        ]
        .into(),
    );
    backend.update(&changed, &record).await.unwrap();
    let applied = owner.get_bucket_policy().bucket(&bucket).send().await.unwrap();
    assert!(applied.policy().unwrap().contains(&own));
    let rules = owner.get_bucket_lifecycle_configuration().bucket(&bucket).send().await.unwrap();
    assert_eq!(rules.rules()[0].expiration().and_then(|e| e.days()), Some(10));
    record.spec.endpoint.as_mut().unwrap().additional_config =
        Some(changed.additional_config.requested().clone());
    let mut removed = options(&configured, &params);
    removed.additional_config =
        TenantWritten::new([("bucketLifecycle".to_string(), expire_after(10))].into());
    backend.update(&removed, &record).await.unwrap();
    let gone = owner.get_bucket_policy().bucket(&bucket).send().await;
    assert_eq!(error_code(gone), "NoSuchBucketPolicy");

    // S3 has no quotas: said, not silently accepted.
    let mut quota = options(&configured, &params);
    quota.additional_config =
        TenantWritten::new([("maxSize".to_string(), "2G".to_string())].into());
    let error = backend.validate(&quota).unwrap_err();
    assert!(error.to_string().contains("AWS S3 has no bucket or user quotas"), "{error}");

    // A claim granted a shared bucket may not configure it.
    let sharer = claim(&bucket);
    let mut shared = options(&sharer, &params);
    shared.additional_config =
        TenantWritten::new([("bucketLifecycle".to_string(), expire_after(1))].into());
    let error = backend.grant(&shared).await.unwrap_err();
    assert!(error.to_string().contains("only the claim that created a bucket"), "{error}");
    backend.delete(&record).await.unwrap();
    assert!(!moto.bucket_exists(&bucket).await);
}

#[tokio::test]
async fn the_claim_users_policy_grants_only_its_access_mode() {
    use aws_sdk_s3::primitives::ByteStream;
    use bucket_provisioner::AccessMode;

    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let params = moto_parameters(&moto);
    let bucket = format!("modes-{}", common::suffix());
    moto.existing_bucket(&bucket, &["seed.txt"]).await;
    let put = |s3: &aws_sdk_s3::Client, key: &str| {
        s3.put_object().bucket(&bucket).key(key).body(ByteStream::from_static(b"x")).send()
    };

    let reader_claim = claim(&bucket);
    let mut reader = options(&reader_claim, &with(&params, &[]));
    reader.access_mode = AccessMode::ReadOnly;
    let granted = backend.grant(&reader).await.unwrap();
    let s3 = moto.s3(&granted.credentials);
    s3.get_object().bucket(&bucket).key("seed.txt").send().await.unwrap();
    s3.list_objects_v2().bucket(&bucket).send().await.unwrap();
    assert_eq!(error_code(put(&s3, "seed.txt").await), "AccessDenied");
    let delete = s3.delete_object().bucket(&bucket).key("seed.txt").send().await;
    assert_eq!(error_code(delete), "AccessDenied");
    let upload = s3.create_multipart_upload().bucket(&bucket).key("mp").send().await;
    assert_eq!(error_code(upload), "AccessDenied");

    let writer_claim = claim(&bucket);
    let mut writer = options(&writer_claim, &with(&params, &[]));
    writer.access_mode = AccessMode::WriteOnly;
    let granted = backend.grant(&writer).await.unwrap();
    let s3 = moto.s3(&granted.credentials);
    put(&s3, "log-1").await.unwrap();
    let upload = s3.create_multipart_upload().bucket(&bucket).key("mp").send().await.unwrap();
    let id = upload.upload_id.unwrap();
    s3.abort_multipart_upload().bucket(&bucket).key("mp").upload_id(id).send().await.unwrap();
    let get = s3.get_object().bucket(&bucket).key("seed.txt").send().await;
    assert_eq!(error_code(get), "AccessDenied");
    assert_eq!(error_code(s3.list_objects_v2().bucket(&bucket).send().await), "AccessDenied");
    let delete = s3.delete_object().bucket(&bucket).key("log-1").send().await;
    assert_eq!(error_code(delete), "AccessDenied");

    // A changed mode reaches the user through update: the writer may now read.
    let mut recorded = object_bucket(&writer_claim, Some(&granted));
    let annotations = [("objectbucket.io/access-mode".to_string(), "WriteOnly".to_string())];
    recorded.metadata.annotations = Some(annotations.into());
    writer.access_mode = AccessMode::ReadWrite;
    backend.update(&writer, &recorded).await.unwrap();
    s3.get_object().bucket(&bucket).key("seed.txt").send().await.unwrap();

    // The owner's keys cannot be narrowed: such a class refuses narrowed claims.
    let mut shared = options(&claim(&bucket), &with(&params, &[("createBucketUser", "false")]));
    shared.access_mode = AccessMode::ReadOnly;
    assert_eq!(reason(&backend.validate(&shared).unwrap_err()), "InvalidParameters");
}

/// Rotation as the library repeats it after a crash: a second `rotate` keeping the same key
/// deletes the first attempt's key (its secret never reached anyone), so IAM never holds more
/// than the kept key and one new one; `retire_key` deletes only a key of the claim's own user.
#[tokio::test]
async fn a_repeated_rotation_keeps_two_keys_and_retires_only_the_claims_own() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let params = moto_parameters(&moto);
    let claim = claim(&format!("rotate-{}", common::suffix()));
    let options = options(&claim, &with(&params, &[]));
    let provisioned = backend.provision(&options).await.unwrap();
    let other_claim = common::claim(&format!("other-{}", common::suffix()));
    let other_options = common::options(&other_claim, &with(&params, &[]));
    let other = backend.provision(&other_options).await.unwrap();
    let bound = object_bucket(&claim, Some(&provisioned));
    let user = iam::user_name(&options.user_id);
    let keep = provisioned.credentials.access_key_id.clone();

    let lost = backend.rotate(&bound, &keep).await.unwrap();
    let new = backend.rotate(&bound, &keep).await.unwrap();
    let mut held = moto.access_keys(&user).await;
    held.sort();
    let mut expected = vec![keep.clone(), new.access_key_id.clone()];
    expected.sort();
    assert_eq!(held, expected, "the first attempt's key {} is gone", lost.access_key_id);
    read_write(&moto.s3(&new), &options.bucket_name).await;
    read_write(&moto.s3(&provisioned.credentials), &options.bucket_name).await;

    // Another claim's key is never touched, nor kept in place of the claim's own.
    backend.retire_key(&bound, &other.credentials.access_key_id).await.unwrap();
    let other_user = iam::user_name(&other_options.user_id);
    assert_eq!(moto.access_keys(&other_user).await, [other.credentials.access_key_id.as_str()]);
    let refused = backend.rotate(&bound, &other.credentials.access_key_id).await.unwrap_err();
    assert_eq!(reason(&refused), "UnknownAccessKey");

    backend.retire_key(&bound, &keep).await.unwrap();
    backend.retire_key(&bound, &keep).await.expect("retiring twice is done");
    assert_eq!(moto.access_keys(&user).await, [new.access_key_id.as_str()]);
}

#[tokio::test]
async fn cors_rules_follow_the_claim_where_the_class_allows_them() {
    let moto = Moto::start().await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let base = moto_parameters(&moto);
    let params = with(&base, &[("allowCors", "true")]);
    let configured = claim(&format!("cors-{}", common::suffix()));
    let bucket = configured.spec.bucket_name.clone().unwrap();
    let rules = |origin: &str| {
        format!(
            r#"{{"CORSRules": [{{"ID": "uploads", "AllowedOrigins": ["{origin}"],
                "AllowedMethods": ["PUT", "GET"], "MaxAgeSeconds": 600}}]}}"#
        )
    };
    let mut asked = options(&configured, &params);
    asked.additional_config =
        TenantWritten::new([("cors".to_string(), rules("https://app.example.com"))].into());
    backend.validate(&asked).unwrap();
    let provisioned = backend.provision(&asked).await.unwrap();
    let owner = moto.s3(&moto.admin);
    let applied = owner.get_bucket_cors().bucket(&bucket).send().await.unwrap();
    let rule = &applied.cors_rules()[0];
    assert_eq!(rule.allowed_origins(), ["https://app.example.com"]);
    assert_eq!(rule.allowed_methods(), ["PUT", "GET"]);
    assert_eq!(rule.max_age_seconds(), Some(600));

    // A class that does not allow it, and rules S3 would refuse: named before anything is done.
    let mut unallowed =
        options(&configured, &base.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>());
    unallowed.additional_config = asked.additional_config.clone();
    let error = backend.validate(&unallowed).unwrap_err();
    assert_eq!(reason(&error), "InvalidParameters");
    assert!(error.to_string().contains("allowCors: \"true\""), "{error}");
    let mut wrong = asked.clone();
    wrong.additional_config.requested_mut().insert(
        "cors".into(),
        r#"{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]}"#.into(),
    );
    let error = backend.validate(&wrong).unwrap_err();
    assert!(error.to_string().contains("AllowedMethods \"PATCH\""), "{error}");

    // Changed on the bound claim: replaced; the key removed: the rules go.
    let mut record = object_bucket(&configured, Some(&provisioned));
    record.spec.endpoint.as_mut().unwrap().additional_config =
        Some(asked.additional_config.requested().clone());
    let mut changed = options(&configured, &params);
    changed.additional_config =
        TenantWritten::new([("cors".to_string(), rules("https://new.example.com"))].into());
    backend.update(&changed, &record).await.unwrap();
    let applied = owner.get_bucket_cors().bucket(&bucket).send().await.unwrap();
    assert_eq!(applied.cors_rules()[0].allowed_origins(), ["https://new.example.com"]);
    record.spec.endpoint.as_mut().unwrap().additional_config =
        Some(changed.additional_config.requested().clone());
    backend.update(&options(&configured, &params), &record).await.unwrap();
    let gone = owner.get_bucket_cors().bucket(&bucket).send().await;
    assert_eq!(error_code(gone), "NoSuchCORSConfiguration");

    // A claim granted the bucket may not set rules for everyone sharing it.
    let sharer = claim(&bucket);
    let mut shared = options(&sharer, &params);
    shared.additional_config = TenantWritten::new([("cors".to_string(), rules("*"))].into());
    let error = backend.grant(&shared).await.unwrap_err();
    assert!(error.to_string().contains("only the claim that created a bucket"), "{error}");
    assert_eq!(
        error_code(owner.get_bucket_cors().bucket(&bucket).send().await),
        "NoSuchCORSConfiguration"
    );

    // What the class does not allow is refused by name, never ignored.
    for key in ["versioning", "objectLock"] {
        let mut feature = options(&configured, &params);
        feature.additional_config =
            TenantWritten::new([(key.to_string(), "Enabled".to_string())].into());
        let error = backend.validate(&feature).unwrap_err();
        assert!(error.to_string().contains(&format!("{key} is not allowed")), "{error}");
    }
    record.spec.endpoint.as_mut().unwrap().additional_config = None;
    backend.delete(&record).await.unwrap();
    assert!(!moto.bucket_exists(&bucket).await);
}

//! The checks that keep a claim's writes off objects that are not its own: a Secret or ConfigMap
//! under its name made by someone else, and credentials changed behind the controller's back.

use std::sync::Arc;

use bucket_api::ObjectBucket;
use bucket_api::contract::annotations;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use crate::bucket::error::Error;
use crate::bucket::objects::controlled_by;
use crate::kubernetes::cache::summary::{Summaries, Summarized, Summary};
use serde::Serialize;

/// What the claim's Secret holds, compared with the ObjectBucket's record of it.
#[derive(Debug, PartialEq, Eq)]
pub enum CredentialsCheck {
    /// Exactly the credentials that were written.
    Recorded,
    /// No Secret, or one without both keys.
    Missing,
    /// Other credentials than the ones written.
    Changed,
}

/// Compares the claim's Secret (as cached) with what `bucket` records of the credentials written
/// to it.
pub(crate) fn check_credentials(
    secret: Option<&Summary>,
    bucket: &ObjectBucket,
) -> CredentialsCheck {
    let Some(digest) = secret.and_then(Summary::credentials) else {
        return CredentialsCheck::Missing;
    };
    let digest = hex::encode(digest);
    match bucket.annotations().get(annotations::CREDENTIALS_DIGEST) {
        Some(recorded) if *recorded == digest => CredentialsCheck::Recorded,
        // No record (an ObjectBucket written by another program): nothing proves these are ours.
        Some(_) | None => CredentialsCheck::Changed,
    }
}

/// Fails when the caches know an object `name` that the claim does not control. (Objects that
/// are not this provisioner's are not cached; [`ensure_owned`] finds those when it writes.)
pub(crate) fn check_not_foreign<K: Summarized>(
    cached: &Summaries<K>,
    namespace: &str,
    name: &str,
    claim_uid: &str,
    foreign: fn(String) -> Error,
) -> Result<Option<Arc<Summary>>, Error> {
    match cached.get(namespace, name) {
        Some(existing) if !existing.controlled_by(claim_uid) => Err(foreign(name.to_string())),
        existing => Ok(existing),
    }
}

/// Creates `desired`, or replaces the object of that name when the claim controls it and its
/// data differs; nothing is written when the newest known copy already matches. An object the
/// claim does not control is never touched: one the cache holds is refused at once, and any
/// other is found by the create failing because the name is taken, which is the one case that
/// reads from the apiserver.
pub(crate) async fn ensure_owned<K>(
    api: &Api<K>,
    cached: &Summaries<K>,
    desired: K,
    claim_uid: &str,
    foreign: fn(String) -> Error,
) -> Result<(), Error>
where
    K: Summarized + Serialize,
{
    let name = desired.name_any();
    let namespace = desired.namespace().unwrap_or_default();
    let existing = match check_not_foreign(cached, &namespace, &name, claim_uid, foreign)? {
        Some(existing) => existing,
        None => match api.create(&PostParams::default(), &desired).await {
            Ok(created) => {
                cached.wrote(&created);
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = api.get(&name).await?;
                if !controlled_by(&existing, claim_uid) {
                    return Err(foreign(name));
                }
                Arc::new(existing.summary())
            }
            Err(e) => return Err(e.into()),
        },
    };
    if !existing.same_data(&desired) {
        let mut replacement = desired;
        replacement.meta_mut().resource_version = existing.resource_version();
        cached.wrote(&api.replace(&name, &PostParams::default(), &replacement).await?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bucket_api::ReclaimPolicy;
    use bucket_api::contract::{self, annotations};
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    use super::*;
    use crate::Credentials;
    use crate::bucket::objects::tests::{claim, endpoint};
    use crate::bucket::objects::{BucketRecord, BucketSource, object_bucket, secret};

    #[test]
    fn credentials_are_recorded_until_the_secret_changes() {
        let claim = claim();
        let credentials =
            Credentials { access_key_id: "AK".into(), secret_access_key: "SK".into() };
        let endpoint = endpoint("us-east-1");
        let bucket = object_bucket(&BucketRecord {
            name: "obc-team-photos",
            claim: &claim,
            provisioner: "p",
            bucket: "b-1",
            source: BucketSource::New,
            reclaim_policy: ReclaimPolicy::Retain,
            endpoint: &endpoint,
            credentials: &credentials,
            additional_state: BTreeMap::new(),
            additional_config: &BTreeMap::new(),
            access_mode: Default::default(),
        });
        let written = secret(&claim, "p", &credentials);
        let check = |secret: &Secret, bucket| check_credentials(Some(&secret.summary()), bucket);
        assert_eq!(check(&written, &bucket), CredentialsCheck::Recorded);
        let mut edited = written.clone();
        edited
            .data
            .as_mut()
            .unwrap()
            .insert(contract::SECRET_SECRET_ACCESS_KEY.into(), ByteString(b"guessed".to_vec()));
        assert_eq!(check(&edited, &bucket), CredentialsCheck::Changed);
        edited.data.as_mut().unwrap().remove(contract::SECRET_SECRET_ACCESS_KEY);
        assert_eq!(check(&edited, &bucket), CredentialsCheck::Missing);
        assert_eq!(check_credentials(None, &bucket), CredentialsCheck::Missing);
        let mut unrecorded = bucket.clone();
        unrecorded.metadata.annotations.as_mut().unwrap().remove(annotations::CREDENTIALS_DIGEST);
        assert_eq!(check(&written, &unrecorded), CredentialsCheck::Changed);
    }
}

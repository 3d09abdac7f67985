//! The Kubernetes objects the controller writes for a claim, and writes that never touch an object
//! the claim does not own.

use std::collections::BTreeMap;

use bucket_api::contract::{self, LABEL_PROVISIONER};
use bucket_api::{
    AccessMode, BucketEndpoint, ObjectBucket, ObjectBucketClaim, ObjectBucketSpec, ReclaimPolicy,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use bucket_api::contract::annotations;

use crate::kubernetes::cache::summary::credentials_hash;
use crate::kubernetes::watch::label_value;
use crate::{Credentials, Endpoint};

/// Where a claim's bucket came from, which decides what deleting the claim may remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketSource {
    /// Created for the claim: deleted with it under the `Delete` policy.
    New,
    /// Named by the StorageClass: only the claim's access is ever removed.
    Existing,
}

impl BucketSource {
    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Existing => "existing",
        }
    }

    /// Parses the annotation value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "new" => Some(Self::New),
            "existing" => Some(Self::Existing),
            _ => None,
        }
    }
}

/// The annotation value of a reclaim policy.
pub fn reclaim_policy_str(policy: ReclaimPolicy) -> &'static str {
    match policy {
        ReclaimPolicy::Delete => "Delete",
        ReclaimPolicy::Retain => "Retain",
    }
}

/// Parses a reclaim policy as written in a StorageClass or annotation.
pub fn parse_reclaim_policy(value: &str) -> Option<ReclaimPolicy> {
    match value {
        "Delete" => Some(ReclaimPolicy::Delete),
        "Retain" => Some(ReclaimPolicy::Retain),
        _ => None,
    }
}

fn owned_meta(claim: &ObjectBucketClaim, provisioner: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(claim.name_any()),
        namespace: claim.namespace(),
        labels: Some(BTreeMap::from([(LABEL_PROVISIONER.into(), label_value(provisioner))])),
        owner_references: claim.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

/// The claim's Secret: exactly the two credential keys.
pub fn secret(claim: &ObjectBucketClaim, provisioner: &str, credentials: &Credentials) -> Secret {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    Secret {
        metadata: owned_meta(claim, provisioner),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([
            (contract::SECRET_ACCESS_KEY_ID.into(), bytes(&credentials.access_key_id)),
            (contract::SECRET_SECRET_ACCESS_KEY.into(), bytes(&credentials.secret_access_key)),
        ])),
        ..Default::default()
    }
}

/// The claim's ConfigMap: the contract keys plus the two variables AWS SDKs read by themselves.
pub fn config_map(
    claim: &ObjectBucketClaim,
    provisioner: &str,
    endpoint: &Endpoint,
    bucket: &str,
) -> ConfigMap {
    let mut data = BTreeMap::from([
        (contract::CONFIG_BUCKET_HOST.to_string(), endpoint.host.clone()),
        (contract::CONFIG_BUCKET_PORT.to_string(), endpoint.port.to_string()),
        (contract::CONFIG_BUCKET_NAME.to_string(), bucket.to_string()),
        (contract::CONFIG_BUCKET_REGION.to_string(), endpoint.region.clone()),
        (contract::CONFIG_BUCKET_SUBREGION.to_string(), endpoint.sub_region.clone()),
        (contract::CONFIG_AWS_ENDPOINT_URL.to_string(), endpoint.url()),
    ]);
    // An empty AWS_REGION makes SDKs fail, where an absent one lets them fall back.
    if !endpoint.region.is_empty() {
        data.insert(contract::CONFIG_AWS_REGION.to_string(), endpoint.region.clone());
    }
    ConfigMap { metadata: owned_meta(claim, provisioner), data: Some(data), ..Default::default() }
}

/// `config_map` with what the SDKs' web identity provider reads, when `bound` records
/// ServiceAccounts of the claim (see [`crate::bucket::web_identity`]); STS needs a region, so a
/// claim without one gets `us-east-1`, as the SDKs would assume.
pub fn with_web_identity(mut config_map: ConfigMap, bound: &ObjectBucket) -> ConfigMap {
    let entries = crate::bucket::web_identity::config_entries(bound);
    if entries.is_empty() {
        return config_map;
    }
    let data = config_map.data.get_or_insert_default();
    data.extend(entries);
    data.entry(contract::CONFIG_AWS_REGION.to_string()).or_insert_with(|| "us-east-1".into());
    config_map
}

/// Everything an ObjectBucket records about a bound claim.
pub struct BucketRecord<'a> {
    /// The ObjectBucket's name.
    pub name: &'a str,
    /// The claim it is bound to.
    pub claim: &'a ObjectBucketClaim,
    /// The provisioner that bound it.
    pub provisioner: &'a str,
    /// The bucket.
    pub bucket: &'a str,
    /// Where the bucket came from.
    pub source: BucketSource,
    /// What happens to it when the claim goes.
    pub reclaim_policy: ReclaimPolicy,
    /// How consumers reach it.
    pub endpoint: &'a Endpoint,
    /// The credentials written to the claim's Secret (only their digest is recorded).
    pub credentials: &'a Credentials,
    /// Backend bookkeeping.
    pub additional_state: BTreeMap<String, String>,
    /// The `additionalConfig` in force (what the backend was handed).
    pub additional_config: &'a BTreeMap<String, String>,
    /// What the claim's credentials may do.
    pub access_mode: AccessMode,
}

/// The ObjectBucket for a bound claim; it keeps the finalizer until the claim's cleanup is done.
pub fn object_bucket(record: &BucketRecord<'_>) -> ObjectBucket {
    let claim = record.claim;
    let endpoint = record.endpoint;
    let mut recorded = BTreeMap::from([
        (annotations::BUCKET_SOURCE.into(), record.source.as_str().into()),
        (annotations::ENDPOINT_SCHEME.into(), endpoint.scheme.clone()),
        (annotations::PROVISIONER.into(), record.provisioner.into()),
        (annotations::CREDENTIALS_DIGEST.into(), credentials_digest(record.credentials)),
        (annotations::ACCESS_MODE.into(), record.access_mode.as_str().into()),
    ]);
    // A claim created asking for a rotation has new keys already; only a later change asks.
    if let Some(rotation) = crate::bucket::rotation_record::RotationRecord::initial(claim) {
        recorded.insert(annotations::ROTATION.into(), rotation);
    }
    ObjectBucket {
        metadata: ObjectMeta {
            name: Some(record.name.to_string()),
            labels: Some(BTreeMap::from([(
                LABEL_PROVISIONER.into(),
                label_value(record.provisioner),
            )])),
            annotations: Some(recorded),
            finalizers: Some(vec![contract::FINALIZER.into()]),
            ..Default::default()
        },
        spec: ObjectBucketSpec {
            storage_class_name: claim.spec.storage_class_name.clone(),
            reclaim_policy: Some(record.reclaim_policy),
            claim_ref: Some(claim_ref(claim)),
            endpoint: Some(BucketEndpoint {
                bucket_host: endpoint.host.clone(),
                bucket_port: i32::from(endpoint.port),
                bucket_name: record.bucket.to_string(),
                region: endpoint.region.clone(),
                sub_region: endpoint.sub_region.clone(),
                // What is in force, so that a change to the claim or to its class's limits is
                // noticed; the same as the claim's own unless either uses limits or modes.
                additional_config: Some(record.additional_config.clone()).filter(|c| !c.is_empty()),
            }),
            additional_state: Some(record.additional_state.clone()),
        },
        status: None,
    }
}

/// SHA-256 of the key pair: recognises the Secret's credentials without keeping them (the secret
/// half is random and long, so the digest reveals nothing).
pub fn credentials_digest(credentials: &Credentials) -> String {
    hex::encode(credentials_hash(&credentials.access_key_id, &credentials.secret_access_key))
}

/// A reference to the claim, as stored in `ObjectBucket.spec.claimRef`.
pub fn claim_ref(claim: &ObjectBucketClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some(format!("{}/{}", bucket_api::GROUP, bucket_api::VERSION)),
        kind: Some("ObjectBucketClaim".into()),
        namespace: claim.namespace(),
        name: Some(claim.name_any()),
        uid: claim.uid(),
        ..Default::default()
    }
}

/// The endpoint an ObjectBucket records, so the ConfigMap can be rebuilt without the backend.
pub fn endpoint_of(bucket: &ObjectBucket) -> Option<Endpoint> {
    let recorded = bucket.spec.endpoint.as_ref()?;
    Some(Endpoint {
        scheme: bucket.annotations().get(annotations::ENDPOINT_SCHEME).cloned()?,
        host: recorded.bucket_host.clone(),
        port: u16::try_from(recorded.bucket_port).ok()?,
        region: recorded.region.clone(),
        sub_region: recorded.sub_region.clone(),
    })
}

/// Whether `object` is controlled by the object with `owner_uid`.
pub fn controlled_by(object: &impl Resource, owner_uid: &str) -> bool {
    meta_controlled_by(object.meta(), owner_uid)
}

/// Whether the object with `meta` is controlled by the object with `owner_uid`.
pub fn meta_controlled_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.uid == owner_uid && o.controller == Some(true))
}

#[cfg(test)]
pub(crate) mod tests {
    use bucket_api::ObjectBucketClaimSpec;

    use super::*;

    /// A claim `team/photos` with UID `uid-1`.
    pub(crate) fn claim() -> ObjectBucketClaim {
        let mut claim = ObjectBucketClaim::new(
            "photos",
            ObjectBucketClaimSpec { storage_class_name: "class".into(), ..Default::default() },
        );
        claim.metadata.namespace = Some("team".into());
        claim.metadata.uid = Some("uid-1".into());
        claim
    }

    /// An endpoint in `region`.
    pub(crate) fn endpoint(region: &str) -> Endpoint {
        Endpoint {
            scheme: "http".into(),
            host: "s3.svc".into(),
            port: 9000,
            region: region.into(),
            sub_region: String::new(),
        }
    }

    #[test]
    fn config_map_has_the_contract_keys_and_sdk_variables() {
        let map = config_map(&claim(), "example.com/bucket", &endpoint("us-east-1"), "b-1");
        let data = map.data.unwrap();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "AWS_ENDPOINT_URL",
                "AWS_REGION",
                "BUCKET_HOST",
                "BUCKET_NAME",
                "BUCKET_PORT",
                "BUCKET_REGION",
                "BUCKET_SUBREGION"
            ]
        );
        assert_eq!(data["AWS_ENDPOINT_URL"], "http://s3.svc:9000");
        assert_eq!(data["BUCKET_PORT"], "9000");
        let owner = &map.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.uid.as_str(), owner.controller), ("uid-1", Some(true)));
        let no_region = config_map(&claim(), "p", &endpoint(""), "b").data.unwrap();
        assert!(!no_region.contains_key("AWS_REGION"));
    }

    #[test]
    fn secret_holds_exactly_the_credentials() {
        let credentials =
            Credentials { access_key_id: "AK".into(), secret_access_key: "SK".into() };
        let secret = secret(&claim(), "p", &credentials);
        let data = secret.data.unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data["AWS_ACCESS_KEY_ID"].0, b"AK");
        assert_eq!(data["AWS_SECRET_ACCESS_KEY"].0, b"SK");
        assert!(controlled_by(
            &Secret { metadata: secret.metadata, ..Default::default() },
            "uid-1"
        ));
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("example.com/hostpath-bucket"), "example.com_hostpath-bucket");
        assert_eq!(label_value(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn object_bucket_round_trips_the_endpoint() {
        let claim = claim();
        let endpoint = endpoint("eu-west-1");
        let credentials =
            Credentials { access_key_id: "AK".into(), secret_access_key: "SK".into() };
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
            access_mode: AccessMode::ReadOnly,
        });
        assert_eq!(crate::access_mode_of(&bucket), AccessMode::ReadOnly);
        assert_eq!(endpoint_of(&bucket), Some(endpoint));
        assert_eq!(bucket.spec.claim_ref.unwrap().uid.as_deref(), Some("uid-1"));
        assert_eq!(bucket.metadata.finalizers.unwrap(), [contract::FINALIZER]);
    }
}

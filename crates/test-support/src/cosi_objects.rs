//! COSI objects as each version spells them: v1alpha1 keeps a class's fields at the top level and
//! names one claim per access; v1alpha2 nests them under `spec` and lists claims with a mode.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

use crate::cosi::CosiVersion;
use crate::eventually;

/// The credentials and bucket a consumer pod gets from an access Secret, whichever the version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Access {
    /// The S3 endpoint URL.
    pub endpoint: String,
    /// The region.
    pub region: String,
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The bucket to use.
    pub bucket: String,
}

/// `fields` with `parameters` added unless there are none: v1alpha2 refuses an empty map.
fn with_parameters(mut fields: Value, parameters: Value) -> Value {
    if parameters.as_object().is_some_and(|p| !p.is_empty()) {
        fields["parameters"] = parameters;
    }
    fields
}

impl CosiVersion {
    /// A BucketClass for `driver` with `deletion` (`Delete` or `Retain`) and `parameters`.
    pub fn bucket_class(
        self,
        name: &str,
        driver: &str,
        deletion: &str,
        parameters: Value,
    ) -> DynamicObject {
        let fields = with_parameters(
            json!({ "driverName": driver, "deletionPolicy": deletion }),
            parameters,
        );
        self.object("BucketClass", name, None, self.class_body(fields))
    }

    /// A BucketAccessClass for `driver` handing out keys, with `parameters`.
    pub fn access_class(self, name: &str, driver: &str, parameters: Value) -> DynamicObject {
        let fields = with_parameters(
            json!({ "driverName": driver, "authenticationType": "Key" }),
            parameters,
        );
        self.object("BucketAccessClass", name, None, self.class_body(fields))
    }

    fn class_body(self, fields: Value) -> Value {
        match self {
            CosiVersion::V1Alpha1 => fields,
            CosiVersion::V1Alpha2 => json!({ "spec": fields }),
        }
    }

    /// A BucketClaim of a new S3 bucket of class `class`.
    pub fn claim(self, namespace: &str, name: &str, class: &str) -> DynamicObject {
        let spec = json!({ "spec": { "bucketClassName": class, "protocols": ["S3"] } });
        self.object("BucketClaim", name, Some(namespace), spec)
    }

    /// A BucketClaim binding the existing Bucket object `bucket` (no class).
    pub fn claim_of_existing(self, namespace: &str, name: &str, bucket: &str) -> DynamicObject {
        let spec = json!({ "spec": { "existingBucketName": bucket, "protocols": ["S3"] } });
        self.object("BucketClaim", name, Some(namespace), spec)
    }

    /// A BucketAccess to claim `claim` through access class `class`, its Secret named `secret`,
    /// with `mode` (`ReadWrite`, `ReadOnly`, `WriteOnly`; v1alpha1 has no modes and ignores it).
    pub fn access(
        self,
        namespace: &str,
        name: &str,
        class: &str,
        claim: &str,
        secret: &str,
        mode: &str,
    ) -> DynamicObject {
        let spec = match self {
            CosiVersion::V1Alpha1 => json!({
                "bucketClaimName": claim, "bucketAccessClassName": class, "protocol": "S3",
                "credentialsSecretName": secret,
            }),
            CosiVersion::V1Alpha2 => json!({
                "bucketAccessClassName": class, "protocol": "S3",
                "bucketClaims": [{ "bucketClaimName": claim, "accessMode": mode,
                    "accessSecretName": secret }],
            }),
        };
        self.object("BucketAccess", name, Some(namespace), json!({ "spec": spec }))
    }

    /// Whether a claim's status says its bucket is ready.
    pub fn claim_ready(self, claim: &DynamicObject) -> bool {
        let status = &claim.data["status"];
        match self {
            CosiVersion::V1Alpha1 => status["bucketReady"] == true,
            CosiVersion::V1Alpha2 => status["readyToUse"] == true,
        }
    }

    /// Whether the controller has put its finalizer on a claim. v0.2.2 writes a claim's status
    /// before its finalizer, and a claim deleted in between goes without its Bucket's deletion
    /// ever being asked for; v1alpha2's claims need no such wait.
    pub fn claim_protected(self, claim: &DynamicObject) -> bool {
        match self {
            CosiVersion::V1Alpha1 => claim
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == "cosi.objectstorage.k8s.io/bucketclaim-protection"),
            CosiVersion::V1Alpha2 => true,
        }
    }

    /// The Bucket object a claim is bound to, once it says.
    pub fn claim_bucket(self, claim: &DynamicObject) -> Option<String> {
        let status = &claim.data["status"];
        let name = match self {
            CosiVersion::V1Alpha1 => &status["bucketName"],
            CosiVersion::V1Alpha2 => &status["boundBucketName"],
        };
        name.as_str().filter(|n| !n.is_empty()).map(Into::into)
    }

    /// Whether an access's status says it was granted.
    pub fn access_ready(self, access: &DynamicObject) -> bool {
        let status = &access.data["status"];
        match self {
            CosiVersion::V1Alpha1 => status["accessGranted"] == true,
            CosiVersion::V1Alpha2 => status["readyToUse"] == true,
        }
    }

    /// Waits until Secret `name` of `namespace` holds this version's S3 credentials, and reads
    /// them as a consumer would: v1alpha1's `BucketInfo` JSON, v1alpha2's flat `COSI_S3_*` keys.
    pub async fn wait_access_secret(
        self,
        client: &Client,
        namespace: &str,
        name: &str,
    ) -> S3Access {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let what = format!("Secret {namespace}/{name} with S3 credentials");
        eventually(&what, || async {
            let secret = secrets.get_opt(name).await.ok().flatten()?;
            self.read_access_secret(&secret).ok()
        })
        .await
    }

    /// This version's S3 credentials in `secret`.
    pub fn read_access_secret(self, secret: &Secret) -> Result<S3Access> {
        let data = secret.data.as_ref().context("a Secret without data")?;
        let text = |key: &str| -> Result<String> {
            let value = data.get(key).with_context(|| format!("no key {key}"))?;
            Ok(String::from_utf8(value.0.clone())?)
        };
        match self {
            CosiVersion::V1Alpha1 => {
                let info: Value = serde_json::from_str(&text("BucketInfo")?)?;
                let spec = &info["spec"];
                let s3 = &spec["secretS3"];
                let field = |v: &Value, what: &str| -> Result<String> {
                    match v.as_str() {
                        Some(s) if !s.is_empty() => Ok(s.to_owned()),
                        _ => bail!("BucketInfo has no {what}"),
                    }
                };
                Ok(S3Access {
                    endpoint: field(&s3["endpoint"], "spec.secretS3.endpoint")?,
                    region: field(&s3["region"], "spec.secretS3.region")?,
                    access_key_id: field(&s3["accessKeyID"], "spec.secretS3.accessKeyID")?,
                    secret_access_key: field(
                        &s3["accessSecretKey"],
                        "spec.secretS3.accessSecretKey",
                    )?,
                    bucket: field(&spec["bucketName"], "spec.bucketName")?,
                })
            }
            CosiVersion::V1Alpha2 => Ok(S3Access {
                endpoint: text("COSI_S3_ENDPOINT")?,
                region: text("COSI_S3_REGION")?,
                access_key_id: text("COSI_S3_ACCESS_KEY_ID")?,
                secret_access_key: text("COSI_S3_ACCESS_SECRET_KEY")?,
                bucket: text("COSI_S3_BUCKET_ID")?,
            }),
        }
    }
}

//! Names that consumers and operators depend on. Changing any of these breaks running workloads.

/// Secret key holding the access key id handed to the claim.
pub const SECRET_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// Secret key holding the secret access key handed to the claim.
pub const SECRET_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";

/// ConfigMap key: host name of the S3 endpoint.
pub const CONFIG_BUCKET_HOST: &str = "BUCKET_HOST";
/// ConfigMap key: port of the S3 endpoint.
pub const CONFIG_BUCKET_PORT: &str = "BUCKET_PORT";
/// ConfigMap key: name of the bucket.
pub const CONFIG_BUCKET_NAME: &str = "BUCKET_NAME";
/// ConfigMap key: region of the bucket.
pub const CONFIG_BUCKET_REGION: &str = "BUCKET_REGION";
/// ConfigMap key: sub-region of the bucket.
pub const CONFIG_BUCKET_SUBREGION: &str = "BUCKET_SUBREGION";
/// ConfigMap key beyond the established contract: `scheme://host:port`, which AWS SDKs read from
/// the environment by themselves.
pub const CONFIG_AWS_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
/// ConfigMap key beyond the established contract: the region, read by AWS SDKs from the environment.
pub const CONFIG_AWS_REGION: &str = "AWS_REGION";

/// The ConfigMap keys of the established contract, in a stable order.
pub const CONFIG_CONTRACT_KEYS: [&str; 5] = [
    CONFIG_BUCKET_HOST,
    CONFIG_BUCKET_PORT,
    CONFIG_BUCKET_NAME,
    CONFIG_BUCKET_REGION,
    CONFIG_BUCKET_SUBREGION,
];

/// Finalizer the controller puts on claims (and the ObjectBuckets it writes) until cleanup is done.
pub const FINALIZER: &str = "objectbucket.io/finalizer";

/// StorageClass parameter naming an existing bucket: claims against such a class are granted
/// access to it instead of getting a new bucket (the brownfield case).
pub const STORAGE_CLASS_BUCKET_NAME: &str = "bucketName";

/// `additionalConfig` key of a claim: the access mode it asks for, `ReadWrite` (the default),
/// `ReadOnly` or `WriteOnly`. Read by the controller; backends get it as a field of its own.
pub const CLAIM_ACCESS_MODE: &str = "accessMode";
/// `additionalConfig` key of a claim: the name of another claim of its namespace, or
/// `<namespace>/<claim>` of one of another namespace that consents with a `BucketShareGrant`,
/// whose bucket it is granted a key of its own on (the other claim must have created its
/// bucket). Read by the controller; backends never see it.
pub const CLAIM_SHARE_FROM: &str = "shareFrom";
/// `additionalConfig` key of a claim: the ServiceAccount(s) of its own namespace whose tokens
/// may be traded for short-lived credentials of its bucket, comma-separated, where its
/// StorageClass allows it (see [`class_web_identity`]). Read by the controller; backends get the
/// subjects as a field of their own.
pub const CLAIM_SERVICE_ACCOUNT_NAME: &str = "serviceAccountName";
/// `additionalConfig` key of a claim (Rook, NooBaa): most objects its key may store.
pub const CLAIM_MAX_OBJECTS: &str = "maxObjects";
/// `additionalConfig` key of a claim (Rook, NooBaa): most bytes its key may store, a Kubernetes
/// quantity such as `2Gi`.
pub const CLAIM_MAX_SIZE: &str = "maxSize";

/// StorageClass parameters the controller reads and never passes to backends: limits a claim
/// of the class cannot lift.
pub mod class_limits {
    /// `maxObjects` of a claim that sets none (default: the limit, if any; else unlimited).
    pub const DEFAULT_MAX_OBJECTS: &str = "defaultMaxObjects";
    /// The most `maxObjects` a claim may ask for.
    pub const LIMIT_MAX_OBJECTS: &str = "limitMaxObjects";
    /// `maxSize` of a claim that sets none (default: the limit, if any; else unlimited).
    pub const DEFAULT_MAX_SIZE: &str = "defaultMaxSize";
    /// The most `maxSize` a claim may ask for.
    pub const LIMIT_MAX_SIZE: &str = "limitMaxSize";
    /// The widest access mode a claim may ask for; also the mode of a claim that asks none.
    pub const LIMIT_ACCESS_MODE: &str = "limitAccessMode";
    /// All of them.
    pub const ALL: [&str; 5] = [
        DEFAULT_MAX_OBJECTS,
        LIMIT_MAX_OBJECTS,
        DEFAULT_MAX_SIZE,
        LIMIT_MAX_SIZE,
        LIMIT_ACCESS_MODE,
    ];
}

/// StorageClass parameters the controller reads and never passes to backends: when a claim's
/// credentials are replaced by new ones.
pub mod class_rotation {
    /// How long a claim's key lives before a new one replaces it, e.g. `720h` or `1.5h` (a Go
    /// duration, at most `876000h`). Unset: keys are replaced only on demand.
    pub const ROTATION_PERIOD: &str = "rotationPeriod";
    /// How long the previous key keeps working once a new one is in the Secret, e.g. `1h` (the
    /// default; a Go duration, at most `876000h`): time for pods reading the Secret through
    /// `envFrom` to restart.
    pub const ROTATION_OVERLAP: &str = "rotationOverlap";
    /// Both of them.
    pub const ALL: [&str; 2] = [ROTATION_PERIOD, ROTATION_OVERLAP];
}

/// StorageClass parameters the controller reads and never passes to backends: the operator's
/// consent to sharing across namespaces.
pub mod class_sharing {
    /// On the class of a claim whose bucket is shared: `"true"` lets claims of other namespaces
    /// share it where the claim's namespace consents with a `BucketShareGrant`. Off by default.
    pub const ALLOW_CROSS_NAMESPACE_SHARING: &str = "allowCrossNamespaceSharing";
    /// On the same class, optional: only claims of namespaces whose labels match this selector
    /// may share its claims' buckets. Comma-separated terms, all of which must hold: `key=value`
    /// (the label has that value) or `key` (the label is there). Namespace labels are the
    /// operator's to write, not a tenant's. Unset: every namespace a grant names.
    pub const CROSS_NAMESPACE_SHARING_NAMESPACE_SELECTOR: &str =
        "crossNamespaceSharingNamespaceSelector";
    /// All of them.
    pub const ALL: [&str; 2] =
        [ALLOW_CROSS_NAMESPACE_SHARING, CROSS_NAMESPACE_SHARING_NAMESPACE_SELECTOR];
}

/// StorageClass parameters the controller reads and never passes to backends: whether claims
/// may name ServiceAccounts that get short-lived credentials in place of (or beside) a key.
pub mod class_web_identity {
    /// `off` (the default): claims may not name ServiceAccounts; `allowed`: they may, and still
    /// get a key in their Secret; `only`: they must, and no key is written anywhere.
    pub const WEB_IDENTITY: &str = "webIdentity";
    /// The longest session a claim's ServiceAccounts get, a duration such as `1h` (the
    /// default), between `1m` and `12h`.
    pub const WEB_IDENTITY_MAX_SESSION: &str = "webIdentityMaxSession";
    /// All of them.
    pub const ALL: [&str; 2] = [WEB_IDENTITY, WEB_IDENTITY_MAX_SESSION];
}

/// ConfigMap keys of a claim whose ServiceAccounts get short-lived credentials: what the AWS
/// SDKs' web identity provider reads, beside `AWS_ENDPOINT_URL` and `AWS_REGION`.
pub mod config_web_identity {
    /// The role the SDK assumes.
    pub const AWS_ROLE_ARN: &str = "AWS_ROLE_ARN";
    /// Where the SDK reads the pod's projected ServiceAccount token.
    pub const AWS_WEB_IDENTITY_TOKEN_FILE: &str = "AWS_WEB_IDENTITY_TOKEN_FILE";
    /// Where the SDK sends `AssumeRoleWithWebIdentity`.
    pub const AWS_ENDPOINT_URL_STS: &str = "AWS_ENDPOINT_URL_STS";
    /// The path `AWS_WEB_IDENTITY_TOKEN_FILE` names: a pod mounts its projected token there.
    pub const TOKEN_PATH: &str = "/var/run/secrets/objectbucket.io/serviceaccount/token";
}

/// Label put on every object the controller writes, valued with the provisioner name.
pub const LABEL_PROVISIONER: &str = "objectbucket.io/provisioner";

/// Annotations the library keeps on claims and ObjectBuckets.
pub mod annotations {
    /// On a claim: the provisioner that recorded its intent. Tenant-writable like all of a
    /// claim: it narrows which claims cleanup looks at, and decides nothing else.
    pub const PROVISIONER: &str = "objectbucket.io/provisioner";
    /// On a claim and its ObjectBucket: `new` (the library created the bucket) or `existing`
    /// (access to a bucket named by the StorageClass).
    pub const BUCKET_SOURCE: &str = "objectbucket.io/bucket-source";
    /// On a claim: the reclaim policy recorded before the backend was first called; it may
    /// narrow the StorageClass's (`Retain`), never widen it.
    pub const RECLAIM_POLICY: &str = "objectbucket.io/reclaim-policy";
    /// On an ObjectBucket: `http` or `https`, to rebuild `AWS_ENDPOINT_URL` without the backend.
    pub const ENDPOINT_SCHEME: &str = "objectbucket.io/endpoint-scheme";
    /// On a claim, set by a person: `"true"` finishes deletion without cleaning up the bucket.
    pub const ABANDON_BUCKET: &str = "objectbucket.io/abandon-bucket";
    /// On an ObjectBucket: its claim was deleted with [`ABANDON_BUCKET`] while the backend could
    /// not revoke the claim's access; the sweep revokes it, and never deletes the bucket.
    pub const ABANDONED: &str = "objectbucket.io/abandoned";
    /// On a claim: the bucket name the library generated from `generateBucketName` (so it may
    /// generate another should the backend find it taken).
    pub const GENERATED_BUCKET_NAME: &str = "objectbucket.io/generated-bucket-name";
    /// On an ObjectBucket: a digest of the credentials written to the claim's Secret, so an
    /// edited or emptied Secret is noticed and repaired (the credentials themselves are kept
    /// nowhere else).
    pub const CREDENTIALS_DIGEST: &str = "objectbucket.io/credentials-digest";
    /// On an ObjectBucket: the access mode its claim's credentials were given (absent on
    /// ObjectBuckets written before modes existed: `ReadWrite`).
    pub const ACCESS_MODE: &str = "objectbucket.io/access-mode";
    /// On a claim, set by its tenant: any new value (a timestamp, say) asks for the claim's
    /// credentials to be replaced by new ones. Only a change counts; the value means nothing.
    pub const ROTATE_CREDENTIALS: &str = "objectbucket.io/rotate-credentials";
    /// On an ObjectBucket: where the rotation of its claim's credentials stands (JSON, written
    /// by the controller alone): the last request handled, the step in progress, the previous
    /// key and when it stops working.
    pub const ROTATION: &str = "objectbucket.io/rotation";
    /// On an ObjectBucket of a claim sharing another claim's bucket: the UID of that claim.
    pub const SHARED_FROM: &str = "objectbucket.io/shared-from";
    /// On a sharing claim's ObjectBucket: `<namespace>/<claim>` of the claim it shares from, as
    /// consented when it was bound; its consent is checked again under this name, whatever the
    /// claim's `shareFrom` says now.
    pub const SHARED_FROM_CLAIM: &str = "objectbucket.io/shared-from-claim";
    /// On an ObjectBucket of a sharing claim: the bucket went with the claim it was shared
    /// from (`true`), and the sharing claim's key is revoked (`revoked`).
    pub const BUCKET_LOST: &str = "objectbucket.io/bucket-lost";
    /// On an ObjectBucket taken over from a lib-bucket-provisioner provisioner: that
    /// provisioner's label value.
    pub const ADOPTED_FROM: &str = "objectbucket.io/adopted-from";
    /// On an ObjectBucket: the subjects (`system:serviceaccount:<ns>:<name>`, comma-separated)
    /// that may get short-lived credentials of the claim's bucket, as the backend was told.
    pub const WEB_IDENTITY_SUBJECTS: &str = "objectbucket.io/web-identity-subjects";
    /// On an ObjectBucket: the role those subjects assume.
    pub const WEB_IDENTITY_ROLE: &str = "objectbucket.io/web-identity-role-arn";
    /// On an ObjectBucket: where they assume it (an STS endpoint URL).
    pub const WEB_IDENTITY_STS: &str = "objectbucket.io/web-identity-sts-endpoint";
    /// On an ObjectBucket, `"true"`: the claim gets no key in a Secret, only sessions.
    pub const WEB_IDENTITY_ONLY: &str = "objectbucket.io/web-identity-only";
}

/// What a provisioner built on lib-bucket-provisioner (the Go library of the same API) leaves
/// behind, for recognising it; see the bucket controller's adoption.
pub mod legacy {
    /// The label it puts on everything it writes: its provisioner name with every character
    /// not allowed in a label value as `-` (see [`label_value`]).
    pub const LABEL_PROVISIONER: &str = "bucket-provisioner";
    /// The claim `spec` field it records the ObjectBucket's name in (a Go field with no JSON
    /// name, so written capitalised), kept by this API's CRD so that rolling back works.
    pub const OBJECT_BUCKET_NAME_FIELD: &str = "ObjectBucketName";
    /// The prefix of the ObjectBuckets it names `obc-<namespace>-<claim>`.
    pub const OBJECT_BUCKET_PREFIX: &str = "obc-";

    /// The value of [`LABEL_PROVISIONER`] for a provisioner name, as that library writes it: the
    /// name itself when it is a valid label value, otherwise its first 63 characters with every
    /// `/` as `-` (nothing else is replaced).
    pub fn label_value(provisioner: &str) -> String {
        let valid = |v: &str| {
            let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
            v.is_empty()
                || (v.len() <= 63
                    && edge(v.chars().next())
                    && edge(v.chars().last())
                    && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        };
        if valid(provisioner) {
            return provisioner.to_string();
        }
        provisioner.chars().take(63).collect::<String>().replace('/', "-")
    }

    /// The ObjectBucket name it gives the claim `name` of `namespace`.
    pub fn object_bucket_name(namespace: &str, name: &str) -> String {
        format!("{OBJECT_BUCKET_PREFIX}{namespace}-{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::legacy;

    #[test]
    fn legacy_label_values_replace_only_slashes_and_only_when_invalid() {
        assert_eq!(legacy::label_value("aws-s3.io/bucket"), "aws-s3.io-bucket");
        assert_eq!(legacy::label_value("aws-s3.io_bucket"), "aws-s3.io_bucket");
        let long = format!("{}/b", "a".repeat(70));
        assert_eq!(legacy::label_value(&long), "a".repeat(63));
        assert_eq!(legacy::object_bucket_name("apps", "g4"), "obc-apps-g4");
    }
}

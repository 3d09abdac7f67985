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

/// Label put on every object the controller writes, valued with the provisioner name.
pub const LABEL_PROVISIONER: &str = "objectbucket.io/provisioner";

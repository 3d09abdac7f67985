//! Where a bucket is and the key to it: what every backend answers, through either front.

use std::fmt;

/// How consumers reach a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name (or address) of the S3 endpoint.
    pub host: String,
    /// Port of the S3 endpoint.
    pub port: u16,
    /// Region; empty when the store has none.
    pub region: String,
    /// Sub-region; usually empty.
    pub sub_region: String,
}

impl Endpoint {
    /// `scheme://host:port`, the form AWS SDKs read from `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// An access key pair. Its `Debug` output never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

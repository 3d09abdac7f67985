//! Object tags and bucket CORS rules at the endpoint: through the AWS SDK, and as a browser
//! speaks to it (a preflight `OPTIONS` and cross-origin requests, sent as raw HTTP); a module
//! per feature, in one test binary.

#[path = "../common/mod.rs"]
mod common;

mod cors;
mod tagging;

use aws_sdk_s3::Client;

/// The tags of `key`, as `(key, value)` pairs in the order GetObjectTagging lists them.
async fn tags(client: &Client, bucket: &str, key: &str) -> Vec<(String, String)> {
    let out = client.get_object_tagging().bucket(bucket).key(key).send().await.unwrap();
    out.tag_set().iter().map(|t| (t.key().to_owned(), t.value().to_owned())).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

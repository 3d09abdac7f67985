//! The public access block as S3 and s3-tests' test_put_get_delete_public_block use it: set,
//! read back whole, deleted with 204, and `NoSuchPublicAccessBlockConfiguration` (404) when
//! there is none; kept across a restart; and, a bucket-wide setting, changed only by the
//! creating claim's full-access key. It decides nothing: nothing here is public either way.

use aws_sdk_s3::Client;
use aws_sdk_s3::types::PublicAccessBlockConfiguration;

use crate::common::{Server, code, status};

async fn block_of(s3: &Client, bucket: &str) -> Result<[Option<bool>; 4], String> {
    let got = s3.get_public_access_block().bucket(bucket).send().await.map_err(|e| code(&e))?;
    let c = got.public_access_block_configuration().unwrap();
    Ok([
        c.block_public_acls(),
        c.ignore_public_acls(),
        c.block_public_policy(),
        c.restrict_public_buckets(),
    ])
}

fn config(acls: bool, ignore: bool, policy: bool) -> PublicAccessBlockConfiguration {
    PublicAccessBlockConfiguration::builder()
        .block_public_acls(acls)
        .ignore_public_acls(ignore)
        .block_public_policy(policy)
        .build()
}

#[tokio::test]
async fn the_block_is_set_read_and_deleted_as_s3_does() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("blocked", "obc-b").await;
    let s3 = server.client(&key);
    let err = s3.get_public_access_block().bucket("blocked").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchPublicAccessBlockConfiguration");
    assert_eq!(status(&err), Some(404));
    // Deleting none is no error, as in S3.
    s3.delete_public_access_block().bucket("blocked").send().await.unwrap();

    let put = s3.put_public_access_block().bucket("blocked");
    put.public_access_block_configuration(config(true, true, true)).send().await.unwrap();
    let expected = [Some(true), Some(true), Some(true), Some(false)];
    assert_eq!(block_of(&s3, "blocked").await.unwrap(), expected, "one left out is off");
    server.stop().await;

    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    assert_eq!(block_of(&s3, "blocked").await.unwrap(), expected, "kept across a restart");
    s3.delete_public_access_block().bucket("blocked").send().await.unwrap();
    let gone = block_of(&s3, "blocked").await.unwrap_err();
    assert_eq!(gone, "NoSuchPublicAccessBlockConfiguration");
    server.stop().await;
}

#[tokio::test]
async fn only_the_creators_full_access_key_changes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let owner = server.client(&server.bucket_with_key("shared", "obc-owner").await);
    let sharer = server.client(&server.store.issue_key("obc-sharer", "shared").await.unwrap());
    let set = owner.put_public_access_block().bucket("shared");
    set.public_access_block_configuration(config(true, false, false)).send().await.unwrap();

    let set = sharer.put_public_access_block().bucket("shared");
    let err = set.public_access_block_configuration(config(false, false, false)).send().await;
    assert_eq!(code(&err.unwrap_err()), "AccessDenied");
    let err = sharer.delete_public_access_block().bucket("shared").send().await.unwrap_err();
    assert_eq!(code(&err), "AccessDenied");
    let expected = [Some(true), Some(false), Some(false), Some(false)];
    assert_eq!(block_of(&sharer, "shared").await.unwrap(), expected, "a sharer reads it");
    server.stop().await;
}

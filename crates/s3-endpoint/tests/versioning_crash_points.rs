//! A versioned write or delete aborted at each of its crash points (`BUCKET_PROVISIONER_CRASH_AT`,
//! see the store's `crash_point`): once the store opens again, the key reads as before the
//! operation, every version is listed once, the usage matches, and the key takes further
//! writes. The operation runs in a child process (this binary, running its ignored `child_op`
//! test), so that the abort is a real one.

mod common;

use std::process::{Command, Stdio};

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use common::Server;
use s3_endpoint::store::{ObjectAttrs, PutCheck};
use s3_endpoint::{BucketStore, Usage, Writer};

const CHILD_ROOT: &str = "S3_ENDPOINT_VERSION_POINTS_ROOT";
const CHILD_OP: &str = "S3_ENDPOINT_VERSION_POINTS_OP";
const BUCKET: &str = "points";
const USER: &str = "obc-points";

/// The child: one operation on `k`, aborted at the crash point its parent set.
#[tokio::test]
#[ignore = "the child process of every_crash_point_leaves_the_key_as_it_was"]
async fn child_op() {
    let (Ok(root), Ok(op)) = (std::env::var(CHILD_ROOT), std::env::var(CHILD_OP)) else {
        return;
    };
    let store = BucketStore::open(root.into(), "test-identity").unwrap();
    match op.split_once(':') {
        Some(("delete", id)) => {
            store.delete_object_version(BUCKET, "k", Some(id)).await.unwrap();
        }
        _ if op == "delete" => {
            store.delete_object_version(BUCKET, "k", None).await.unwrap();
        }
        _ => {
            let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from("new"))]);
            let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
            let writer = Writer::Claim(USER.to_owned());
            store.put_object(BUCKET, "k", attrs, body, check, &writer).await.unwrap();
        }
    }
    eprintln!("the operation {op} finished before its crash point");
}

fn run_child(root: &std::path::Path, op: &str, step: &str) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["child_op", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_ROOT, root)
        .env(CHILD_OP, op)
        .env("BUCKET_PROVISIONER_CRASH_AT", step)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "{op} reached {step} and aborted");
}

async fn put(s3: &Client, body: &'static [u8]) -> String {
    let put = s3.put_object().bucket(BUCKET).key("k").body(ByteStream::from_static(body));
    put.send().await.unwrap().version_id().unwrap().to_owned()
}

async fn read(s3: &Client, version: Option<&str>) -> Result<Vec<u8>, String> {
    let get = s3.get_object().bucket(BUCKET).key("k").set_version_id(version.map(str::to_owned));
    match get.send().await {
        Ok(out) => Ok(out.body.collect().await.unwrap().into_bytes().to_vec()),
        Err(e) => Err(common::code(&e)),
    }
}

/// Version ids of `k`, newest first (versions and markers), and which is the latest.
async fn history(s3: &Client) -> (Vec<String>, Option<String>) {
    let listed = s3.list_object_versions().bucket(BUCKET).send().await.unwrap();
    let mut all: Vec<(String, bool)> = listed
        .versions()
        .iter()
        .map(|v| (v.version_id().unwrap().to_owned(), v.is_latest() == Some(true)))
        .chain(
            listed
                .delete_markers()
                .iter()
                .map(|m| (m.version_id().unwrap().to_owned(), m.is_latest() == Some(true))),
        )
        .collect();
    all.sort_by(|a, b| b.0.cmp(&a.0));
    let latest = all.iter().find(|v| v.1).map(|v| v.0.clone());
    (all.into_iter().map(|v| v.0).collect(), latest)
}

async fn listed_keys(s3: &Client) -> Vec<String> {
    let listed = s3.list_objects_v2().bucket(BUCKET).send().await.unwrap();
    listed.contents().iter().map(|o| o.key().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_leaves_the_key_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key(BUCKET, USER).await;
    let s3 = server.client(&key);
    let config = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled);
    let set = s3.put_bucket_versioning().bucket(BUCKET);
    set.versioning_configuration(config.build()).send().await.unwrap();
    let one = put(&s3, b"one").await;
    let two = put(&s3, b"two").await;
    server.stop().await;
    let usage = |server: &Server| server.store.usage(BUCKET, Some(USER)).unwrap().1;

    // A write archived the version in place and died: "two" is still the newest, once.
    run_child(tmp.path(), "put", "version:archived");
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    assert_eq!(read(&s3, None).await.unwrap(), b"two");
    assert_eq!(history(&s3).await, (vec![two.clone(), one.clone()], Some(two.clone())));
    assert_eq!(usage(&server), Usage { objects: 2, bytes: 6 });
    let three = put(&s3, b"three").await;
    assert_eq!(history(&s3).await.0, [three.clone(), two.clone(), one.clone()]);
    assert_eq!(read(&s3, Some(&two)).await.unwrap(), b"two");
    server.stop().await;

    // A delete took the version out of place and died before its marker: the key reads as
    // before, and its newest version is put back in place (listed again).
    run_child(tmp.path(), "delete", "version:unplaced");
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    assert_eq!(read(&s3, None).await.unwrap(), b"three");
    assert_eq!(
        history(&s3).await,
        (vec![three.clone(), two.clone(), one.clone()], Some(three.clone()))
    );
    assert_eq!(listed_keys(&s3).await, ["k"]);
    assert_eq!(usage(&server), Usage { objects: 3, bytes: 11 });
    let marker = s3.delete_object().bucket(BUCKET).key("k").send().await.unwrap();
    let marker = marker.version_id().unwrap().to_owned();
    assert_eq!(read(&s3, None).await.unwrap_err(), "NoSuchKey");
    server.stop().await;

    // Removing the marker died before the next version was put back: it reads again.
    run_child(tmp.path(), &format!("delete:{marker}"), "version:unrecorded");
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    assert_eq!(read(&s3, None).await.unwrap(), b"three");
    assert_eq!(history(&s3).await, (vec![three.clone(), two, one], Some(three)));
    assert_eq!(listed_keys(&s3).await, ["k"]);
    assert_eq!(usage(&server), Usage { objects: 3, bytes: 11 });
    server.stop().await;
}

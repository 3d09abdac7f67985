//! Retention changes killed (SIGKILL) at any moment: every retention acknowledged before the
//! kill is there when the store opens again (or the longer one that was being written), the
//! objects' bytes untouched and still protected. The writer is a child process (this binary,
//! running its ignored `child_retention_writer` test), so that the kill is a real one.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use s3_endpoint::BucketStore;
use s3_endpoint::store::{Bypass, LockMode, Retention, unix_ms};

use super::{DAY, lock_bucket, put};
use crate::common::Server;

/// Where the child finds the store.
const CHILD_ROOT: &str = "S3_ENDPOINT_LOCK_CRASH_ROOT";
/// The base date the child lengthens retentions from, in ms.
const CHILD_BASE: &str = "S3_ENDPOINT_LOCK_CRASH_BASE";
const BUCKET: &str = "crash";
const OBJECTS: u64 = 8;

fn key(i: u64) -> String {
    // Half plain files, half kept beside the bucket (a key that is also a prefix).
    if i.is_multiple_of(2) { format!("k{i}") } else { format!("p{i}") }
}

/// Retention `n` of the child: always longer than `n - 1` of the same object.
fn until(base: u64, n: u64) -> u64 {
    base + n * 1000
}

/// The child: lengthens the objects' retentions in turn, printing each acknowledged step.
#[tokio::test]
#[ignore = "the child process of acknowledged_retentions_survive_a_kill"]
async fn child_retention_writer() {
    let Ok(root) = std::env::var(CHILD_ROOT) else { return };
    let base: u64 = std::env::var(CHILD_BASE).unwrap().parse().unwrap();
    let store = BucketStore::open(root.into(), "test-identity").unwrap();
    for n in 1.. {
        let retention = Retention { mode: LockMode::Compliance, until_ms: until(base, n) };
        let object = key(n % OBJECTS);
        store
            .set_object_retention(BUCKET, &object, None, Some(retention), Bypass::No)
            .await
            .unwrap();
        println!("{n}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_retentions_survive_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, BUCKET).await;
    let s3 = server.client(&owner);
    for i in 0..OBJECTS {
        put(&s3, BUCKET, &key(i), None).await.unwrap();
        if i % 2 == 1 {
            put(&s3, BUCKET, &format!("{}/below", key(i)), None).await.unwrap();
        }
    }
    server.stop().await;
    let first = unix_ms(SystemTime::now() + DAY);

    for round in 0..3 {
        // Each round's child lengthens past everything the one before could have written.
        let base = first + round * 1_000_000_000;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["crash::child_retention_writer", "--exact", "--ignored", "--nocapture"])
            .env(CHILD_ROOT, tmp.path())
            .env(CHILD_BASE, base.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Killed after a varying number of acknowledged changes, mid-write most likely.
        let wanted = 50 + round * 37;
        let mut acked = 0u64;
        let deadline = Instant::now() + Duration::from_secs(120);
        while acked < wanted && Instant::now() < deadline {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Ok(n) = line.trim().parse() {
                        acked = n;
                    }
                }
                _ => break,
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(acked >= wanted, "the child acknowledged {acked} changes");

        let store = BucketStore::open(tmp.path().to_owned(), "test-identity").unwrap();
        let checks = futures::stream::iter(0..OBJECTS).map(|i| {
            let store = &store;
            async move {
                // The last acknowledged change of object `i`.
                let last = (1..=acked).rev().find(|n| n % OBJECTS == i).unwrap();
                let lock = store.object_lock(BUCKET, &key(i), None).await.unwrap();
                let kept = lock.retention.unwrap();
                assert_eq!(kept.mode, LockMode::Compliance);
                assert!(kept.until_ms >= until(base, last), "object {i}: {kept:?} < step {last}");
                // The child may have gone on past what was read before the kill, never further
                // than this round's writes.
                assert!(kept.until_ms < base + 1_000_000_000, "object {i}: {kept:?}");
                let (info, _) = store.open_object(BUCKET, &key(i)).await.unwrap();
                assert_eq!(info.size, 4, "object {i}");
                let version = info.version_id.as_deref();
                let refused = store.delete_object_version(BUCKET, &key(i), version).await;
                assert!(matches!(refused, Err(s3_endpoint::StoreError::ObjectLocked(_))));
            }
        });
        checks.buffer_unordered(4).collect::<Vec<()>>().await;
        eprintln!("round {round}: killed after {acked} acknowledged changes, all kept");
    }
}

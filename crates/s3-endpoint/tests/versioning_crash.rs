//! An endpoint killed (SIGKILL) amid a stream of versioned overwrites, delete markers and
//! deletes by version id: once it opens again, every acknowledged version is readable by its
//! id with its bytes, no version whose removal was acknowledged comes back, each key's newest
//! version is its last acknowledged one (or the write in flight at the kill), and the usage
//! counted matches what the versions hold. The endpoint runs in a child process (this binary,
//! running its ignored `child_endpoint` test), so that the kill is a real one.

mod common;

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use common::{Server, client_for, pattern};
use s3_endpoint::BucketStore;

/// Where the child finds the store, and writes the address it serves on.
const CHILD_ROOT: &str = "S3_ENDPOINT_VERSIONING_CRASH_ROOT";
const BUCKET: &str = "vcrash";
const USER: &str = "obc-vcrash";
const KEYS: usize = 4;
/// Operations acknowledged before the kill.
const BEFORE_KILL: usize = 240;

fn body(i: usize) -> Vec<u8> {
    pattern(i as u64, 500 + i % 300)
}

/// The child: serves the store until it is killed.
#[tokio::test]
#[ignore = "the child process of acknowledged_versions_survive_a_kill"]
async fn child_endpoint() {
    let Ok(root) = std::env::var(CHILD_ROOT) else { return };
    let store = Arc::new(BucketStore::open(root.clone().into(), "test-identity").unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::fs::write(format!("{root}/addr.tmp"), &addr).unwrap();
    std::fs::rename(format!("{root}/addr.tmp"), format!("{root}/addr")).unwrap();
    s3_endpoint::serve(listener, store, std::future::pending()).await;
}

/// What one key's writer saw acknowledged.
#[derive(Default)]
struct Seen {
    /// Version id of every acknowledged PUT, with its body's number.
    versions: HashMap<String, usize>,
    /// Acknowledged delete markers.
    markers: HashSet<String>,
    /// Versions whose removal by id was acknowledged.
    removed: HashSet<String>,
    /// The version whose removal was in flight at the kill: it may be gone or not.
    removing: Option<String>,
    /// The id of the key's newest version after the last acknowledged operation.
    latest: Option<String>,
}

/// One key's stream: overwrites, a marker every ten, a removal by id every ten.
async fn writer(s3: Client, key: String, seed: usize, done: Arc<AtomicUsize>) -> Seen {
    let mut seen = Seen::default();
    let mut alive: Vec<String> = Vec::new();
    for j in 0.. {
        let n = seed * 100_000 + j;
        let result = match j % 10 {
            7 => s3
                .delete_object()
                .bucket(BUCKET)
                .key(&key)
                .send()
                .await
                .map(|out| {
                    let id = out.version_id().unwrap().to_owned();
                    seen.markers.insert(id.clone());
                    seen.latest = Some(id);
                })
                .is_ok(),
            8 if alive.len() > 1 => {
                let victim = alive.remove(0);
                let sent =
                    s3.delete_object().bucket(BUCKET).key(&key).version_id(&victim).send().await;
                match sent {
                    Ok(_) => seen.removed.insert(victim),
                    Err(_) => {
                        seen.removing = Some(victim);
                        false
                    }
                }
            }
            _ => {
                let put = s3.put_object().bucket(BUCKET).key(&key).body(ByteStream::from(body(n)));
                put.send()
                    .await
                    .map(|out| {
                        let id = out.version_id().unwrap().to_owned();
                        seen.versions.insert(id.clone(), n);
                        alive.push(id.clone());
                        seen.latest = Some(id);
                    })
                    .is_ok()
            }
        };
        if !result {
            break; // the endpoint is gone
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_versions_survive_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key(BUCKET, USER).await;
    let s3 = server.client(&key);
    let config = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled);
    let set = s3.put_bucket_versioning().bucket(BUCKET);
    set.versioning_configuration(config.build()).send().await.unwrap();
    server.stop().await;

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_endpoint", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_ROOT, tmp.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let addr_file = tmp.path().join("addr");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !addr_file.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let addr = std::fs::read_to_string(&addr_file).unwrap().parse().unwrap();
    let client = client_for(addr, &key.access_key_id, &key.secret_access_key);
    let done = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..KEYS)
        .map(|i| tokio::spawn(writer(client.clone(), format!("k{i}"), i, done.clone())))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.load(Ordering::SeqCst) < BEFORE_KILL && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let mut seen = Vec::new();
    for writer in writers {
        seen.push(writer.await.unwrap());
    }
    let acknowledged = done.load(Ordering::SeqCst);
    eprintln!("killed after {acknowledged} acknowledged operations");
    assert!(acknowledged >= BEFORE_KILL, "the stream ran");

    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    let mut listed = Vec::new();
    let (mut key_marker, mut id_marker) = (None, None);
    loop {
        let page = s3
            .list_object_versions()
            .bucket(BUCKET)
            .max_keys(50)
            .set_key_marker(key_marker.clone())
            .set_version_id_marker(id_marker.clone())
            .send()
            .await
            .unwrap();
        listed.extend(page.versions().iter().map(|v| {
            let key = v.key().unwrap().to_owned();
            (key, v.version_id().unwrap().to_owned(), v.is_latest(), v.size().unwrap_or(0), false)
        }));
        listed.extend(page.delete_markers().iter().map(|m| {
            let key = m.key().unwrap().to_owned();
            (key, m.version_id().unwrap().to_owned(), m.is_latest(), 0, true)
        }));
        if page.is_truncated() != Some(true) {
            break;
        }
        key_marker = page.next_key_marker().map(str::to_owned);
        id_marker = page.next_version_id_marker().map(str::to_owned);
    }
    for (i, seen) in seen.iter().enumerate() {
        let key = format!("k{i}");
        for (id, n) in &seen.versions {
            let got = s3.get_object().bucket(BUCKET).key(&key).version_id(id).send().await;
            if seen.removed.contains(id) {
                assert!(got.is_err(), "{key} {id}: its removal was acknowledged");
                continue;
            }
            if seen.removing.as_ref() == Some(id) && got.is_err() {
                continue;
            }
            let got = got.unwrap_or_else(|e| panic!("{key} {id} acknowledged but lost: {e:?}"));
            let bytes = got.body.collect().await.unwrap().into_bytes();
            assert!(bytes.to_vec() == body(*n), "{key} {id}: other bytes");
        }
        for id in &seen.markers {
            assert!(listed.iter().any(|v| v.0 == key && &v.1 == id && v.4), "marker {id} lost");
        }
        let ours: Vec<_> = listed.iter().filter(|v| v.0 == key).collect();
        let latest: Vec<_> = ours.iter().filter(|v| v.2 == Some(true)).collect();
        assert_eq!(latest.len(), 1, "{key}: one newest version: {ours:?}");
        let known = |id: &str| seen.versions.contains_key(id) || seen.markers.contains(id);
        let newest = &latest[0].1;
        // The last acknowledged, or the write in flight at the kill (never acknowledged).
        assert!(
            Some(newest) == seen.latest.as_ref() || !known(newest),
            "{key}: newest {newest}, last acknowledged {:?}",
            seen.latest
        );
        let unknown = ours.iter().filter(|v| !known(&v.1)).count();
        assert!(unknown <= 1, "{key}: only the write in flight may be new: {ours:?}");
    }
    let bytes: u64 = listed.iter().map(|v| u64::try_from(v.3).unwrap()).sum();
    let objects = listed.iter().filter(|v| !v.4).count() as u64;
    let (usage, _) = server.store.usage(BUCKET, None).unwrap();
    assert_eq!((usage.objects, usage.bytes), (objects, bytes), "usage counted as on disk");
    server.stop().await;
}

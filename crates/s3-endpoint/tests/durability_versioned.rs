//! What a versioned PUT and DELETE do on disk before they are acknowledged, recorded with
//! strace: the version replaced is linked into the versions area and recorded, synced, before
//! the new one is renamed over it; every name made or removed (links, renames, directories,
//! the removal of a version in place before its marker) is synced in its directory before the
//! answer, and every byte written before it is synced. Alone in its binary so that the trace
//! holds this test's requests only.

mod common;

use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use common::Server;
use common::strace::{Trace, answers, calls, parent, synced};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_versioned_change_is_synced_all_the_way_to_its_names() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("durable", "obc-d").await;
    let s3 = server.client(&key);
    let config = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled);
    let set = s3.put_bucket_versioning().bucket("durable");
    set.versioning_configuration(config.build()).send().await.unwrap();
    let root = server.store.root().display().to_string();
    s3.put_object().bucket("durable").key("warm").body(b"w".to_vec().into()).send().await.unwrap();

    let trace = Trace::start(&tmp.path().join("strace.log")).await;
    let mut ids = Vec::new();
    // A first version, two that replace one, then a delete marker.
    for round in 0..3u64 {
        let body = common::pattern(round, 4096);
        let put = s3.put_object().bucket("durable").key("dir/k").body(body.into());
        ids.push(put.send().await.unwrap().version_id().unwrap().to_owned());
    }
    let marker = s3.delete_object().bucket("durable").key("dir/k").send().await.unwrap();
    let log = trace.stop().await;
    let all = calls(&log);
    let answers = answers(&all);
    assert_eq!(answers.len(), 4, "every request answered:\n{log}");
    let mut start = 0;
    let mut links = 0;
    for answer in answers {
        let before = &all[start..answer];
        let under_root = |p: &String| p.starts_with(&root);
        for (i, call) in before.iter().enumerate() {
            match call.name.as_str() {
                "mkdir" | "mkdirat" => {
                    let Some(dir) = call.paths.iter().find(|p| under_root(p)) else { continue };
                    assert!(synced(&before[i..], &parent(dir)), "{dir} made, not synced:\n{log}");
                }
                "rename" | "renameat" | "renameat2" | "link" | "linkat" => {
                    // (`linkat` also shows the working directory its AT_FDCWD stands for.)
                    let [from, to, ..] = &call.paths[..] else { panic!("{call:?}") };
                    if !under_root(to) {
                        continue;
                    }
                    if call.name.starts_with("link") {
                        links += 1;
                    } else {
                        assert!(synced(&before[..i], from), "{from} renamed before its sync");
                    }
                    assert!(
                        synced(&before[i..], &parent(to)),
                        "{to} named but its directory not synced before the answer:\n{log}"
                    );
                }
                "unlink" | "unlinkat" if !call.failed => {
                    let Some(gone) = call.paths.iter().find(|p| under_root(p)) else { continue };
                    // Temporary files beside a record need no sync; a version's do.
                    if gone.contains("/.provisioner/tmp/") || gone.contains(".tmp-") {
                        continue;
                    }
                    // Its directory, or the nearest one left where emptied ones were pruned.
                    let mut dir = std::path::PathBuf::from(gone);
                    let mut found = false;
                    while dir.pop() && dir.starts_with(&root) && !found {
                        found = synced(&before[i..], &dir.display().to_string());
                    }
                    assert!(found, "{gone} removed, no directory synced after:\n{log}");
                }
                "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2"
                    if call.paths.first().is_some_and(under_root) =>
                {
                    let file = &call.paths[0];
                    assert!(synced(&before[i..], file), "{file} written, not synced:\n{log}");
                }
                "fsetxattr" => {
                    let file = &call.paths[0];
                    assert!(synced(&before[i..], file), "{file} metadata not synced:\n{log}");
                }
                _ => {}
            }
        }
        start = answer + 1;
    }
    assert_eq!(links, 3, "each replaced version (and the one the marker hides) is linked:\n{log}");
    for (round, id) in ids.iter().enumerate() {
        let get = s3.get_object().bucket("durable").key("dir/k").version_id(id);
        let got = get.send().await.unwrap().body.collect().await.unwrap().into_bytes();
        assert!(got.to_vec() == common::pattern(round as u64, 4096), "version {round}");
    }
    assert_eq!(marker.delete_marker(), Some(true));
}

//! What a PUT does on disk before it is acknowledged, recorded with strace: the data is synced
//! (with the metadata attached to it) before it is renamed into place, and every name on the
//! way to it (each directory made for the key, the data's rename) is synced in its directory
//! before the answer, so that an acknowledged object survives a power cut; and a small PUT into
//! an existing directory costs two syncs, its file's and its directory's. Alone in its binary so
//! that the trace holds this test's requests only.

mod common;

use common::Server;
use common::strace::{Trace, answers, calls, is_sync, parent, synced};
use md5::Digest;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_put_is_synced_all_the_way_to_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("durable", "obc-d").await;
    let s3 = server.client(&key);
    let root = server.store.root().display().to_string();
    // Warm up connections and the store, so that the trace holds the PUTs' own work.
    s3.put_object().bucket("durable").key("warm").body(b"w".to_vec().into()).send().await.unwrap();

    let trace = Trace::start(&tmp.path().join("strace.log")).await;
    // New directories, one made already, the bucket's own, a replacement, and a body large
    // enough to be written by a thread of its own while it arrives.
    let keys = ["fresh/deeper/object", "fresh/second", "top-level", "top-level", "large"];
    for key in keys {
        let size = if key == "large" { 3 << 20 } else { 4096 };
        let body = common::pattern(7, size);
        s3.put_object().bucket("durable").key(key).body(body.into()).send().await.unwrap();
    }
    let log = trace.stop().await;
    let all = calls(&log);
    let answers = answers(&all);
    assert_eq!(answers.len(), keys.len(), "every PUT answered:\n{log}");
    let mut start = 0;
    let mut syncs_per_put = Vec::new();
    for answer in answers {
        let before = &all[start..answer];
        let mut named = 0;
        let mut made = 0;
        let mut written = 0;
        for (i, call) in before.iter().enumerate() {
            let under_root = |p: &String| p.starts_with(&root);
            match call.name.as_str() {
                "mkdir" | "mkdirat" => {
                    let Some(dir) = call.paths.iter().find(|p| under_root(p)) else { continue };
                    named += 1;
                    made += 1;
                    assert!(
                        synced(&before[i..], &parent(dir)),
                        "{dir} made but its parent not synced before the answer:\n{log}"
                    );
                }
                "rename" | "renameat" | "renameat2" => {
                    let [from, to] = &call.paths[..] else { panic!("{call:?}") };
                    if !under_root(to) {
                        continue;
                    }
                    named += 1;
                    assert!(synced(&before[..i], from), "{from} renamed before it was synced");
                    assert!(
                        synced(&before[i..], &parent(to)),
                        "{to} renamed into place but its directory not synced before the \
                         answer:\n{log}"
                    );
                }
                // Every byte written is covered by a sync that comes after it, whichever thread
                // wrote it.
                "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2"
                    if call.paths.first().is_some_and(under_root) =>
                {
                    written += 1;
                    let file = &call.paths[0];
                    assert!(
                        synced(&before[i..], file),
                        "{file} written after its last sync before the answer:\n{log}"
                    );
                }
                // Metadata attached to a file is synced by the file's own sync.
                "fsetxattr" => {
                    let file = &call.paths[0];
                    assert!(
                        synced(&before[i..], file),
                        "metadata attached to {file} but the file not synced after:\n{log}"
                    );
                }
                _ => {}
            }
        }
        assert!(named >= 1, "the data was renamed into place:\n{log}");
        assert!(written >= 1, "the data was written:\n{log}");
        let syncs = before.iter().filter(|c| is_sync(c)).count();
        // Each directory made costs the sync of its name in its parent; beyond those, the data
        // (with its metadata) and its name in its directory.
        assert_eq!(syncs - made, 2, "syncs of a PUT into an existing directory:\n{log}");
        syncs_per_put.push(syncs);
        start = answer + 1;
    }
    eprintln!("fsyncs per PUT of {keys:?}: {syncs_per_put:?}");
    let bucket = server.store.bucket_path("durable").unwrap();
    assert_eq!(
        std::fs::read(bucket.join("fresh/deeper/object")).unwrap(),
        common::pattern(7, 4096)
    );
    assert!(std::fs::read(bucket.join("large")).unwrap() == common::pattern(7, 3 << 20));
    // What was synced with the data is the object's metadata: its ETag is the body's MD5.
    let head = s3.head_object().bucket("durable").key("top-level").send().await.unwrap();
    let md5 = format!("\"{}\"", hex::encode(md5::Md5::digest(common::pattern(7, 4096))));
    assert_eq!(head.e_tag(), Some(md5.as_str()));
}

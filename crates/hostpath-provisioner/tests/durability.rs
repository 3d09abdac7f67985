//! What a PUT does on disk before it is acknowledged, recorded with strace: the data is synced
//! before it is renamed into place, and every name on the way to it (each directory made for
//! the key, the data's and the metadata's renames) is synced in its directory before the answer,
//! so that an acknowledged object survives a power cut. Alone in its binary so that the trace
//! holds this test's requests only.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Server;

/// One traced call: its name, the paths it names (`-y` shows a descriptor's path), and for a
/// write on a socket whether it is an HTTP answer.
#[derive(Debug)]
struct Call {
    name: String,
    paths: Vec<String>,
    answer: bool,
}

/// The calls of an `strace -f -y` log, in the order they started.
fn calls(log: &str) -> Vec<Call> {
    let mut out = Vec::new();
    for line in log.lines() {
        // "<pid> name(args" ... ; resumed halves carry nothing new.
        let Some(rest) = line.split_once(' ').map(|(_, rest)| rest.trim_start()) else { continue };
        if rest.starts_with("<...") || rest.starts_with("+++") || rest.starts_with("---") {
            continue;
        }
        let Some((name, args)) = rest.split_once('(') else { continue };
        let mut paths = Vec::new();
        // Quoted paths ("...") and descriptor paths (<...>).
        for (open, close) in [('"', '"'), ('<', '>')] {
            let mut rest = args;
            while let Some(start) = rest.find(open) {
                let after = &rest[start + 1..];
                let Some(end) = after.find(close) else { break };
                if after[..end].starts_with('/') {
                    paths.push(after[..end].to_owned());
                }
                rest = &after[end + 1..];
            }
        }
        let answer = name == "writev" && args.contains("HTTP/1.1 200");
        out.push(Call { name: name.to_owned(), paths, answer });
    }
    out
}

fn parent(path: &str) -> String {
    Path::new(path).parent().unwrap().display().to_string()
}

/// Whether an fsync of `path` comes in `calls` (before the answer).
fn synced(calls: &[Call], path: &str) -> bool {
    calls.iter().any(|c| matches!(c.name.as_str(), "fsync" | "fdatasync") && c.paths[0] == path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_put_is_synced_all_the_way_to_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("durable", "obc-d").await;
    let s3 = server.client(&key);
    let root = server.store.root().display().to_string();
    // Warm up connections and the store, so that the trace holds the PUTs' own work.
    s3.put_object().bucket("durable").key("warm").body(b"w".to_vec().into()).send().await.unwrap();

    let log = tmp.path().join("strace.log");
    let mut strace = Command::new("strace")
        .args(["-f", "-qq", "-y", "-s", "64", "-o"])
        .arg(&log)
        .args(["-e", "trace=mkdir,mkdirat,rename,renameat,renameat2,fsync,fdatasync,writev"])
        .args(["-p", &std::process::id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace runs");
    // Traced once the kernel says so.
    for _ in 0..100 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        if status.lines().any(|l| l.starts_with("TracerPid:") && l.trim() != "TracerPid:\t0") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for key in ["fresh/deeper/object", "fresh/second", "top-level"] {
        let body = common::pattern(7, 4096);
        s3.put_object().bucket("durable").key(key).body(body.into()).send().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SIGINT, so that strace detaches and writes out its log.
    Command::new("kill").args(["-INT", &strace.id().to_string()]).status().unwrap();
    strace.wait().unwrap();

    let log = std::fs::read_to_string(&log).unwrap();
    let all = calls(&log);
    let answers: Vec<usize> =
        all.iter().enumerate().filter(|(_, c)| c.answer).map(|(i, _)| i).collect();
    assert_eq!(answers.len(), 3, "three PUTs answered:\n{log}");
    let mut start = 0;
    for answer in answers {
        let before = &all[start..answer];
        let mut named = 0;
        for (i, call) in before.iter().enumerate() {
            let under_root = |p: &String| p.starts_with(&root);
            match call.name.as_str() {
                "mkdir" | "mkdirat" => {
                    let Some(dir) = call.paths.iter().find(|p| under_root(p)) else { continue };
                    named += 1;
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
                _ => {}
            }
        }
        assert!(named >= 2, "the data and its metadata were renamed into place:\n{log}");
        start = answer + 1;
    }
    let object = server.store.bucket_path("durable").unwrap().join("fresh/deeper/object");
    assert_eq!(std::fs::read(object).unwrap(), common::pattern(7, 4096));
}

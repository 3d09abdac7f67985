//! Tracing this test process's file system calls with strace, and reading the trace back: for
//! the tests of what a request does on disk before it is answered.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The calls traced: those that name, write or sync files.
const TRACED: &str = "trace=mkdir,mkdirat,rename,renameat,renameat2,fsync,fdatasync,fsetxattr,\
                      fremovexattr,unlink,unlinkat,link,linkat,write,writev,pwrite64,pwritev,\
                      pwritev2";

/// strace attached to this process, writing to a log.
pub struct Trace {
    strace: Child,
    log: std::path::PathBuf,
}

impl Trace {
    /// Attaches strace to this process (every thread), logging to `log`; returns once the kernel
    /// says the process is traced.
    pub async fn start(log: &Path) -> Self {
        let strace = Command::new("strace")
            .args(["-f", "-qq", "-y", "-s", "64", "-o"])
            .arg(log)
            .args(["-e", TRACED])
            .args(["-p", &std::process::id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("strace runs");
        for _ in 0..100 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            if status.lines().any(|l| l.starts_with("TracerPid:") && l.trim() != "TracerPid:\t0") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        Self { strace, log: log.to_owned() }
    }

    /// Detaches strace (SIGINT, so that it writes out its log) and returns the log.
    pub async fn stop(mut self) -> String {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Command::new("kill").args(["-INT", &self.strace.id().to_string()]).status().unwrap();
        self.strace.wait().unwrap();
        std::fs::read_to_string(&self.log).unwrap()
    }
}

/// One traced call: its name, the paths it names (`-y` shows a descriptor's path), and for a
/// write on a socket whether it is an HTTP answer (of any 2xx status).
#[derive(Debug)]
pub struct Call {
    pub name: String,
    pub paths: Vec<String>,
    pub answer: bool,
    /// Whether the call failed (its result is on its own line: not for calls resumed later).
    pub failed: bool,
}

/// The calls of an `strace -f -y` log, in the order they started.
pub fn calls(log: &str) -> Vec<Call> {
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
        let answer = name == "writev" && args.contains("HTTP/1.1 20");
        let failed = args.contains(") = -1 ");
        out.push(Call { name: name.to_owned(), paths, answer, failed });
    }
    out
}

/// The directory of `path`.
pub fn parent(path: &str) -> String {
    Path::new(path).parent().unwrap().display().to_string()
}

/// Whether `call` syncs a file or directory.
pub fn is_sync(call: &Call) -> bool {
    matches!(call.name.as_str(), "fsync" | "fdatasync")
}

/// Whether an fsync of `path` comes in `calls` (before the answer).
pub fn synced(calls: &[Call], path: &str) -> bool {
    calls.iter().any(|c| is_sync(c) && c.paths.first().is_some_and(|p| p == path))
}

/// The indexes of the HTTP answers among `calls`.
pub fn answers(calls: &[Call]) -> Vec<usize> {
    calls.iter().enumerate().filter(|(_, c)| c.answer).map(|(i, _)| i).collect()
}

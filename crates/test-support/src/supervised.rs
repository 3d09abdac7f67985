//! Child processes that cannot outlive the test process.
//!
//! The programs run under a small bash supervisor whose standard input is a pipe held by the test
//! process. However the test process ends (return, panic, abort, kill), the pipe closes, and the
//! supervisor kills the programs and removes their directory.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use anyhow::{Context, Result};

/// Programs running under one supervisor. Dropping it stops them and removes their directory.
pub struct Supervised {
    dir: PathBuf,
    supervisor: Child,
    stdin: Option<ChildStdin>,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Supervised {
    /// Starts every `(name, argv)` in the background, with `env` added to the environment and
    /// output in `<dir>/<name>.log`. `dir` must exist and is removed when the programs stop.
    pub fn start(
        dir: &Path,
        programs: &[(&str, Vec<String>)],
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let mut script = String::from("set -u\n");
        for (name, argv) in programs {
            let command: Vec<String> = argv.iter().map(|a| quote(a)).collect();
            let log = quote(&dir.join(format!("{name}.log")).display().to_string());
            script.push_str(&format!("{} >{log} 2>&1 &\n", command.join(" ")));
        }
        // Wait for the test process to close our stdin, then stop everything and clean up. The
        // data is throwaway, and a kube-apiserver whose etcd is gone can hang in graceful
        // shutdown: SIGKILL.
        script.push_str("read -r _ || true\nkill -9 $(jobs -p) 2>/dev/null\nwait\n");
        script.push_str(&format!("rm -rf {}\n", quote(&dir.display().to_string())));
        let mut supervisor = Command::new("bash")
            .arg("-c")
            .arg(script)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            // Not inherited: a supervisor outliving the test must not hold the test's output open.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting a process supervisor (bash)")?;
        let stdin = supervisor.stdin.take();
        Ok(Supervised { dir: dir.to_owned(), supervisor, stdin })
    }

    /// The directory holding the programs' logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of one program's log.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// The last `lines` lines one program printed.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log(name)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // Closing the pipe tells the supervisor to stop everything and clean up.
        drop(self.stdin.take());
        let _ = self.supervisor.wait();
    }
}

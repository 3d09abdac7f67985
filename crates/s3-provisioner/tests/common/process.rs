//! A child process that cannot outlive the test process.
//!
//! The program runs under a bash supervisor whose standard input is a pipe held by the test
//! process. However the test process ends (return, panic, abort, kill), the pipe closes, and the
//! supervisor kills the program and removes its log directory.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// A supervised program. Dropping it stops the program.
pub struct Supervised {
    /// Where the program's standard output and error go.
    pub log: PathBuf,
    supervisor: Child,
    stdin: Option<ChildStdin>,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Supervised {
    /// Starts `program` with `args` and extra environment `env`.
    pub fn start(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Supervised {
        let dir = tempfile::Builder::new().prefix("s3-test-").tempdir().unwrap().keep();
        let log = dir.join("output.log");
        let command: Vec<String> = std::iter::once(program.display().to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .map(|a| quote(&a))
            .collect();
        let script = format!(
            "set -u\n{} >{} 2>&1 &\nread -r _ || true\nkill -9 $(jobs -p) 2>/dev/null\nwait\nrm -rf {}\n",
            command.join(" "),
            quote(&log.display().to_string()),
            quote(&dir.display().to_string()),
        );
        let mut supervisor = Command::new("bash")
            .arg("-c")
            .arg(script)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            // Not inherited: a supervisor outliving the test must not hold the test's output open.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {} under bash: {e}", program.display()));
        let stdin = supervisor.stdin.take();
        Supervised { log, supervisor, stdin }
    }

    /// The last `lines` lines the program printed.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // Closing the pipe tells the supervisor to stop the program and clean up.
        drop(self.stdin.take());
        let _ = self.supervisor.wait();
    }
}

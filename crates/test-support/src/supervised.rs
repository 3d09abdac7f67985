//! Child processes that cannot outlive the test process.
//!
//! The programs run under a small bash supervisor whose standard input is a pipe held by the test
//! process. However the test process ends (return, panic, abort, kill), the pipe closes, and the
//! supervisor kills the programs and removes their directory. While it runs, the test can stop
//! and start single programs through the same pipe (an outage of one component).

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use anyhow::{Context, Result};

/// Programs running under one supervisor. Dropping it stops them and removes their directory.
pub struct Supervised {
    dir: PathBuf,
    supervisor: Child,
    stdin: Option<ChildStdin>,
    names: Vec<String>,
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
        let mut script = String::from("set -u\ndeclare -a pids\n");
        for (index, (name, argv)) in programs.iter().enumerate() {
            let command: Vec<String> = argv.iter().map(|a| quote(a)).collect();
            let log = quote(&dir.join(format!("{name}.log")).display().to_string());
            script.push_str(&format!(
                "start_{index}() {{ {} >>{log} 2>&1 & pids[{index}]=$!; }}\nstart_{index}\n",
                command.join(" ")
            ));
        }
        // Commands from the test ("stop N", "start N") until it closes our stdin; then stop
        // everything and clean up. The data is throwaway, and a kube-apiserver whose etcd is
        // gone can hang in graceful shutdown: SIGKILL.
        script.push_str(
            "while read -r command index; do\n\
             case \"$command\" in\n\
             stop) kill -9 \"${pids[$index]}\" 2>/dev/null; wait \"${pids[$index]}\" 2>/dev/null ;;\n\
             start) \"start_$index\" ;;\n\
             esac\n\
             done\n\
             kill -9 $(jobs -p) 2>/dev/null\nwait\n",
        );
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
        let names = programs.iter().map(|(name, _)| (*name).to_owned()).collect();
        Ok(Supervised { dir: dir.to_owned(), supervisor, stdin, names })
    }

    /// Kills the program `name` (as a crash or a power cut would); [`Supervised::start_again`]
    /// brings it back with the same arguments.
    pub fn stop(&mut self, name: &str) -> Result<()> {
        self.command("stop", name)
    }

    /// Starts the program `name` again after [`Supervised::stop`].
    pub fn start_again(&mut self, name: &str) -> Result<()> {
        self.command("start", name)
    }

    fn command(&mut self, command: &str, name: &str) -> Result<()> {
        use std::io::Write;
        let index = self
            .names
            .iter()
            .position(|n| n == name)
            .with_context(|| format!("no program named {name}"))?;
        let stdin = self.stdin.as_mut().context("the supervisor is gone")?;
        writeln!(stdin, "{command} {index}")?;
        stdin.flush()?;
        Ok(())
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

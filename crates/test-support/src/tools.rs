//! Tools the tests run that a script of `tests/` builds or installs into the cache.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The tool `variable` names, else the path the workspace's `script` (relative to the workspace
/// root) prints as its last line once it has built or found the tool.
pub fn tool_from_script(variable: &str, script: &str) -> PathBuf {
    if let Ok(path) = std::env::var(variable) {
        return PathBuf::from(path);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(script);
    let output = Command::new(&path).output().unwrap_or_else(|e| panic!("{script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(stdout.lines().last().expect("the script prints the tool's path").trim())
}

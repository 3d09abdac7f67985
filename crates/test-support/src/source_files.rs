//! The workspace's own Rust files, for tests that read the code as text (the layout's rules,
//! the reference's reasons).

use std::path::{Path, PathBuf};

/// Adds every `.rs` file under `dir`, at any depth, to `into`; a missing `dir` adds none.
pub fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

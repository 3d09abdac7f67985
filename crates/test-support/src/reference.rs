//! The book's reference pages that are generated from the code (`docs/src/reference/`): a test
//! renders a page and fails when the committed file differs, naming the command that rewrites
//! it; with `UPDATE_REFERENCE=1` in its environment the test writes the file instead.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that makes [`check_generated`] write the page instead of comparing.
pub const UPDATE_ENV: &str = "UPDATE_REFERENCE";

/// `docs/src/reference/<relative>` of this repository.
pub fn reference_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/reference").join(relative)
}

/// Compares `generated` with the committed `docs/src/reference/<relative>`, or writes it there
/// when `UPDATE_REFERENCE=1`. `test` is the `cargo test` command that runs the caller, for the
/// message.
pub fn check_generated(relative: &str, generated: &str, test: &str) {
    let path = reference_file(relative);
    if std::env::var(UPDATE_ENV).is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("the reference folder");
        std::fs::write(&path, generated).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let differs = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "in length".to_owned(), |n| format!("from line {}", n + 1));
        panic!(
            "docs/src/reference/{relative} is not what the code generates (it differs {differs}); \
             run `{UPDATE_ENV}=1 {test}` and commit the result"
        );
    }
}

/// What `binary --help` prints, run with an empty environment (so that no flag's `[env: ...]`
/// shows a value of this machine's).
pub fn help_text(binary: &str) -> String {
    let output = Command::new(binary)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap_or_else(|e| panic!("running {binary} --help: {e}"));
    assert!(
        output.status.success(),
        "{binary} --help: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("help is text")
}

/// Checks the book's page of `name`'s flags, `docs/src/reference/flags/<name>.txt`, against
/// what `binary --help` prints; `test` as for [`check_generated`].
pub fn check_help(binary: &str, name: &str, test: &str) {
    check_generated(&format!("flags/{name}.txt"), &help_text(binary), test);
}

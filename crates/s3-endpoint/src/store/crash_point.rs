//! Crash points of the store, for tests only: the same `BUCKET_PROVISIONER_CRASH_AT` variable
//! the provisioner's runtime reads (this crate stands below it, so it reads the variable itself).
//!
//! | step | after |
//! |---|---|
//! | `bucket:recorded` | a new bucket's record is written (its directory not yet made) |
//! | `bucket:keys-removed` | a deleted bucket's keys are gone (its data and record not yet) |
//! | `bucket:data-removed` | its data is gone too (its record not yet) |
//! | `version:archived` | a versioned write archived the version in place (the new one not yet in place) |
//! | `version:unplaced` | a delete marker's key has nothing in place (the marker not yet recorded) |
//! | `version:record-removed` | an archived version's record is removed for good (its bytes not yet) |
//! | `version:unrecorded` | the newest version (a marker) is removed for good (the next not yet in place) |

use std::sync::LazyLock;

/// The environment variable naming the step to abort at.
const CRASH_AT: &str = "BUCKET_PROVISIONER_CRASH_AT";

static STEP: LazyLock<Option<String>> =
    LazyLock::new(|| std::env::var(CRASH_AT).ok().filter(|s| !s.is_empty()));

/// Aborts the process (as a SIGKILL would stop it) if [`CRASH_AT`] names `step`.
pub(super) fn crash_point(step: &str) {
    if STEP.as_deref() == Some(step) {
        eprintln!("{CRASH_AT}={step}: aborting here, as a test asked");
        std::process::abort();
    }
}

//! Crash points, for tests only: the process aborts at a named step, so that a test can stop it
//! exactly there (not merely "about then") and check that a restart finishes the work.
//!
//! With `BUCKET_PROVISIONER_CRASH_AT=<step>` in its environment, the process aborts (no
//! unwinding, no clean-up: as a SIGKILL would stop it) the first time it reaches `<step>`, right
//! after that step's effect is recorded. Unset or empty, every crash point does nothing; nothing
//! but tests sets it. The steps of a credential rotation (the bucket side's `rotation`):
//!
//! | step | after |
//! |---|---|
//! | `rotation:issuing` | `Issuing` is recorded on the ObjectBucket (no new key yet) |
//! | `rotation:key-issued` | the backend issued the new key (not yet recorded) |
//! | `rotation:issued` | `Issued` is recorded (the Secret not yet written) |
//! | `rotation:secret-written` | the Secret holds the new key (`Overlap` not yet recorded) |
//! | `rotation:overlap` | `Overlap` is recorded |
//! | `rotation:key-retired` | the backend retired the previous key (the record not yet idle) |
//!
//! The steps of withdrawing a key shared across namespaces (the bucket side's `cross_namespace`):
//!
//! | step | after |
//! |---|---|
//! | `withdraw:key-revoked` | the backend revoked the key (its Secret, ConfigMap, ObjectBucket stay) |
//! | `withdraw:objects-removed` | the Secret and ConfigMap are removed (the ObjectBucket stays) |
//!
//! The steps of the COSI calls on the hostPath backend (create, grant, revoke, delete), where a
//! crash leaves the work half done or done but unanswered; the `bucket:` ones are the store's
//! (`s3-endpoint`, which reads the same variable):
//!
//! | step | after |
//! |---|---|
//! | `bucket:recorded` | the new bucket's record is written (its directory not yet made) |
//! | `cosi:bucket-created` | the bucket and its quota are in place (not yet answered) |
//! | `cosi:key-issued` | the access's key is written (not yet answered) |
//! | `cosi:key-revoked` | the access's keys are removed (not yet answered) |
//! | `bucket:keys-removed` | a deleted bucket's keys are gone (its data and record not yet) |
//! | `bucket:data-removed` | its data is gone too (its record not yet) |
//! | `cosi:bucket-deleted` | the bucket is gone (not yet answered) |

use std::sync::LazyLock;

/// The environment variable naming the step to abort at.
pub const CRASH_AT: &str = "BUCKET_PROVISIONER_CRASH_AT";

/// The steps of a withdrawal, in the order it reaches them.
pub const WITHDRAW_STEPS: [&str; 2] = ["withdraw:key-revoked", "withdraw:objects-removed"];

/// Every step a crash point names, in the order a rotation reaches them.
pub const ROTATION_STEPS: [&str; 6] = [
    "rotation:issuing",
    "rotation:key-issued",
    "rotation:issued",
    "rotation:secret-written",
    "rotation:overlap",
    "rotation:key-retired",
];

/// Every COSI step a crash point names, in the order create, grant, revoke, delete reach them.
pub const COSI_STEPS: [&str; 7] = [
    "bucket:recorded",
    "cosi:bucket-created",
    "cosi:key-issued",
    "cosi:key-revoked",
    "bucket:keys-removed",
    "bucket:data-removed",
    "cosi:bucket-deleted",
];

static STEP: LazyLock<Option<String>> =
    LazyLock::new(|| std::env::var(CRASH_AT).ok().filter(|s| !s.is_empty()));

/// Aborts the process if [`CRASH_AT`] names `step`; does nothing otherwise.
pub fn crash_point(step: &str) {
    if STEP.as_deref() == Some(step) {
        eprintln!("{CRASH_AT}={step}: aborting here, as a test asked");
        std::process::abort();
    }
}

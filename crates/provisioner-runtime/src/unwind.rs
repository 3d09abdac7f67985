//! A panic inside the work on one object (a reconcile, one step of a loop over objects) fails
//! that object, never the controller or the process: one tenant's claim that trips a defect
//! must not stop the provisioner for everyone else.
//!
//! The release profile keeps `panic = "unwind"` (the default), which this relies on.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

/// Runs `work`; a panic inside it comes back as `Err` with the panic's message. Shared state
/// is kept consistent by the callers' own means (locks taken poisoned-or-not, caches written
/// whole), so continuing after an unwind is sound.
pub async fn caught<F: Future>(work: F) -> Result<F::Output, String> {
    AssertUnwindSafe(work).catch_unwind().await.map_err(|panic| panic_message(panic.as_ref()))
}

/// As [`caught`], for work that does not wait.
pub fn caught_now<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(AssertUnwindSafe(work)).map_err(|panic| panic_message(panic.as_ref()))
}

/// The text a panic was raised with.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_comes_back_as_its_message_and_work_goes_on() {
        let divisor = std::hint::black_box(0u128);
        let failed = caught(async move { 7 % divisor }).await;
        assert!(failed.unwrap_err().contains("divisor of zero"));
        assert_eq!(caught(async { 7 }).await, Ok(7));
        let named = String::from("record without a name");
        assert_eq!(caught_now(|| -> u8 { panic!("{named}") }), Err(named));
        assert_eq!(caught_now(|| 3), Ok(3));
    }
}

//! Per-object exponential backoff, and the action each kind of [`Retry`] asks of a controller.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::controller::Action;

use crate::failure::Retry;

/// The longest an object waits to be retried after the Kubernetes API failed it: a restarted or
/// overloaded apiserver answers again within seconds, and nothing should wait minutes after.
pub const API_RETRY_MAX: Duration = Duration::from_secs(4);

/// Per-object exponential backoff: `initial * 2^failures`, capped.
pub struct Backoff {
    initial: Duration,
    /// The longest wait, whatever the number of failures.
    pub max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// No failures yet; delays from `initial` doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max, failures: Mutex::default() }
    }

    /// The delay before retrying `key` after one more failure.
    pub fn next(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_string()).or_insert(0);
        let delay = self.initial.saturating_mul(2u32.saturating_pow(*count)).min(self.max);
        *count = count.saturating_add(1);
        delay
    }

    /// What the controller does after `key` failed in a way that asks for `retry`.
    pub fn after(&self, retry: Retry, key: &str) -> Action {
        self.delay(retry, key).map_or_else(Action::await_change, Action::requeue)
    }

    /// How long `key` waits after it failed in a way that asks for `retry`; `None`: until it
    /// changes.
    pub fn delay(&self, retry: Retry, key: &str) -> Option<Duration> {
        match retry {
            Retry::Backoff => Some(self.next(key)),
            Retry::Api => Some(self.next(key).min(API_RETRY_MAX)),
            Retry::Slowly => Some(self.max),
            Retry::OnChange => None,
        }
    }

    /// `key` succeeded: its next failure starts from `initial` again.
    pub fn reset(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let delays: Vec<u128> = (0..5).map(|_| backoff.next("a").as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(backoff.next("b").as_millis(), 100, "objects back off independently");
        backoff.reset("a");
        assert_eq!(backoff.next("a").as_millis(), 100);
    }

    #[test]
    fn each_retry_maps_to_its_action() {
        let backoff = Backoff::new(Duration::from_secs(3), Duration::from_secs(300));
        let requeue = |d: u64| Action::requeue(Duration::from_secs(d));
        assert_eq!(backoff.after(Retry::Backoff, "a"), requeue(3));
        assert_eq!(backoff.after(Retry::Backoff, "a"), requeue(6));
        assert_eq!(backoff.after(Retry::Api, "a"), requeue(API_RETRY_MAX.as_secs()));
        assert_eq!(backoff.after(Retry::Slowly, "a"), requeue(300));
        assert_eq!(backoff.after(Retry::OnChange, "a"), Action::await_change());
    }
}

//! A rate limit for log lines that repeat while something stays broken: the first occurrence is
//! logged at once, the repeats once per period with how many were held back, so an outage or a
//! missing permission is told every minute instead of every retry.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a repeated failure is logged again.
pub const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// Lets one log line through per period; clones are not shared (wrap it in a [`Mutex`] or use
/// [`SharedThrottle`] where several tasks log the same thing).
#[derive(Debug)]
pub struct Throttle {
    period: Duration,
    last: Option<Instant>,
    held_back: u64,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new(REPEAT_EVERY)
    }
}

impl Throttle {
    /// Lets a line through at most once per `period`.
    pub fn new(period: Duration) -> Self {
        Self { period, last: None, held_back: 0 }
    }

    /// `Some(held back)` when this occurrence is to be logged, with how many were held back since
    /// the last one; `None` when it is to be held back.
    pub fn allow(&mut self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < self.period) {
            self.held_back += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }

    /// The failure is over: the next one is logged at once.
    pub fn reset(&mut self) {
        self.last = None;
        self.held_back = 0;
    }

    /// Whether a failure is being held back or was logged and not yet reset.
    pub fn is_failing(&self) -> bool {
        self.last.is_some()
    }
}

/// A [`Throttle`] several tasks share.
#[derive(Debug, Default)]
pub struct SharedThrottle(Mutex<Throttle>);

impl SharedThrottle {
    /// See [`Throttle::allow`].
    pub fn allow(&self) -> Option<u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).allow()
    }

    /// See [`Throttle::reset`]; `true` if a failure was being reported.
    pub fn reset(&self) -> bool {
        let mut throttle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let was_failing = throttle.is_failing();
        throttle.reset();
        was_failing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_held_back_for_a_period_and_counted() {
        let mut throttle = Throttle::new(Duration::from_secs(60));
        let now = Instant::now();
        assert_eq!(throttle.allow_at(now), Some(0), "the first is told at once");
        assert_eq!(throttle.allow_at(now + Duration::from_secs(1)), None);
        assert_eq!(throttle.allow_at(now + Duration::from_secs(59)), None);
        assert_eq!(throttle.allow_at(now + Duration::from_secs(60)), Some(2));
        assert_eq!(throttle.allow_at(now + Duration::from_secs(61)), None);
        throttle.reset();
        assert!(!throttle.is_failing());
        assert_eq!(throttle.allow_at(now + Duration::from_secs(62)), Some(0), "a new failure");
    }
}

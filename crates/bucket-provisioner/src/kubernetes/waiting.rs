//! Objects waiting on their backend after a transient failure, and their prompt retry once it
//! answers again.
//!
//! Backoff spaces the retries of each object on its own; after a long outage every waiting
//! object sits in a long delay (up to the backoff cap) and would bind that long after the
//! backend came back. So the objects waiting on one backend (one group: a StorageClass) are
//! known together:
//!
//! - while all of a group's objects are due later than a probe interval from now, the one due
//!   soonest is retried now, as a probe (one object per group and interval, whatever the
//!   number waiting);
//! - when a waiting object's retry gets an answer from the backend (it succeeds, or is refused
//!   for good), every other object of its group is retried at once: one wave, each object
//!   once, its backoff left as it was, so a backend that fails again is not stampeded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::Stream;
use futures::stream::{self, StreamExt};
use tokio::sync::mpsc;

/// How often a group whose objects all wait long is probed: [`PROBE`], or the first backoff
/// delay when that is longer; never more often than objects are retried anyway (the backoff
/// cap), where probes would gain nothing.
pub(crate) fn probe_interval(backoff_initial: Duration, backoff_max: Duration) -> Duration {
    backoff_initial.max(PROBE).min(backoff_max)
}

/// How long objects may wait after their backend answers again, with the default backoff.
pub(crate) const PROBE: Duration = Duration::from_secs(4);

struct Entry<R> {
    group: String,
    target: R,
    due: Instant,
}

/// The objects waiting on their backend, by key, with the retries they asked for.
pub(crate) struct Waiting<R> {
    probe: Duration,
    /// An entry due this long ago and not retried since belongs to an object gone.
    forget_after: Duration,
    entries: Mutex<HashMap<String, Entry<R>>>,
    retry: mpsc::UnboundedSender<R>,
}

impl<R: Clone + Send + 'static> Waiting<R> {
    /// Nothing waiting; groups probed every `probe`. The stream answers the objects to retry
    /// now; it ends when this is dropped.
    pub(crate) fn new(
        probe: Duration,
        forget_after: Duration,
    ) -> (Self, mpsc::UnboundedReceiver<R>) {
        let (retry, retries) = mpsc::unbounded_channel();
        let waiting = Self { probe, forget_after, entries: Mutex::default(), retry };
        (waiting, retries)
    }

    /// `key` (retried as `target`) failed on the backend of `group` and is due again after
    /// `delay`.
    pub(crate) fn failed(&self, key: &str, group: &str, target: R, delay: Duration) {
        let entry = Entry { group: group.to_string(), target, due: Instant::now() + delay };
        self.lock().insert(key.to_string(), entry);
    }

    /// `key`'s backend answered it: if it was waiting, every other object of its group is
    /// retried now, once. Answers how many were.
    pub(crate) fn answered(&self, key: &str) -> usize {
        let mut entries = self.lock();
        let Some(answered) = entries.remove(key) else { return 0 };
        let woken: Vec<String> = entries
            .iter()
            .filter(|(_, e)| e.group == answered.group)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &woken {
            if let Some(entry) = entries.remove(key) {
                let _ = self.retry.send(entry.target);
            }
        }
        woken.len()
    }

    /// `key` no longer waits on its backend, which says nothing of the backend (it failed for
    /// another reason).
    pub(crate) fn left(&self, key: &str) {
        self.lock().remove(key);
    }

    /// One probe: in each group none of whose objects is due within the probe interval, the
    /// one due soonest is retried now. Objects due already are being retried (or are gone) and
    /// count for nothing; entries overdue for long are dropped.
    pub(crate) fn probe(&self, now: Instant) {
        let mut entries = self.lock();
        entries.retain(|_, e| now.saturating_duration_since(e.due) <= self.forget_after);
        let mut soonest: HashMap<&str, (&String, Instant)> = HashMap::new();
        for (key, entry) in entries.iter().filter(|(_, e)| e.due > now) {
            let slot = soonest.entry(&entry.group).or_insert((key, entry.due));
            if entry.due < slot.1 {
                *slot = (key, entry.due);
            }
        }
        let probes: Vec<String> = soonest
            .into_values()
            .filter(|(_, due)| *due > now + self.probe)
            .map(|(key, _)| key.clone())
            .collect();
        for key in probes {
            if let Some(entry) = entries.get_mut(&key) {
                entry.due = now;
                let _ = self.retry.send(entry.target.clone());
            }
        }
    }

    /// How many objects wait.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry<R>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The objects to retry: those `retries` answers (a wave after an answer, a probe), and a
/// probe of `waiting` once per `interval`.
pub(crate) fn retries<R: Clone + Send + 'static>(
    waiting: std::sync::Arc<Waiting<R>>,
    retries: mpsc::UnboundedReceiver<R>,
) -> impl Stream<Item = R> + Send + 'static {
    let interval = waiting.probe;
    let ticks = stream::unfold(waiting, move |waiting| async move {
        tokio::time::sleep(interval).await;
        waiting.probe(Instant::now());
        Some(((), waiting))
    })
    .filter_map(|()| async { None::<R> });
    let retries = stream::unfold(retries, |mut retries| async move {
        let next = retries.recv().await?;
        Some((next, retries))
    });
    stream::select(retries, ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> (Waiting<&'static str>, mpsc::UnboundedReceiver<&'static str>) {
        Waiting::new(Duration::from_secs(4), Duration::from_secs(600))
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<&'static str>) -> Vec<&'static str> {
        let mut got = Vec::new();
        while let Ok(next) = rx.try_recv() {
            got.push(next);
        }
        got.sort();
        got
    }

    #[test]
    fn an_answer_retries_the_rest_of_its_group_once() {
        let (waiting, mut rx) = waiting();
        let long = Duration::from_secs(64);
        waiting.failed("ns/a", "garage", "a", long);
        waiting.failed("ns/b", "garage", "b", long);
        waiting.failed("ns/c", "garage", "c", long);
        waiting.failed("ns/x", "other", "x", long);
        assert_eq!(waiting.answered("ns/a"), 2);
        assert_eq!(drain(&mut rx), ["b", "c"], "the group, not the answered one nor others");
        assert_eq!(waiting.answered("ns/b"), 0, "one wave: the woken wait no more");
        assert!(drain(&mut rx).is_empty());
        assert_eq!(waiting.answered("ns/unknown"), 0);
        waiting.left("ns/x");
        assert_eq!(waiting.len(), 0);
    }

    #[test]
    fn a_group_all_waiting_long_is_probed_through_its_soonest_object() {
        let (waiting, mut rx) = waiting();
        let now = Instant::now();
        waiting.failed("ns/a", "garage", "a", Duration::from_secs(64));
        waiting.failed("ns/b", "garage", "b", Duration::from_secs(32));
        waiting.failed("ns/s", "soon", "s", Duration::from_secs(1));
        waiting.probe(now);
        assert_eq!(drain(&mut rx), ["b"], "one probe per group; a group due soon has none");
        // The probe failed again: the next probe takes the other object, and one due already
        // (being retried) is left to its retry.
        waiting.failed("ns/b", "garage", "b", Duration::from_secs(128));
        waiting.probe(now + Duration::from_secs(5));
        assert_eq!(drain(&mut rx), ["a"]);
        waiting.failed("ns/a", "garage", "a", Duration::from_secs(8));
        waiting.probe(now + Duration::from_secs(6));
        assert!(drain(&mut rx).is_empty(), "a group with an object due soon is not probed");
    }

    #[test]
    fn entries_of_objects_gone_are_forgotten() {
        let (waiting, _rx) = waiting();
        waiting.failed("ns/gone", "garage", "gone", Duration::from_secs(1));
        waiting.probe(Instant::now() + Duration::from_secs(700));
        assert_eq!(waiting.len(), 0);
    }

    #[test]
    fn the_probe_interval_is_short_and_never_below_what_backoff_does_anyway() {
        let secs = Duration::from_secs;
        assert_eq!(probe_interval(secs(1), secs(300)), PROBE);
        assert_eq!(probe_interval(secs(10), secs(300)), secs(10));
        assert_eq!(probe_interval(Duration::from_millis(100), secs(2)), secs(2));
    }
}

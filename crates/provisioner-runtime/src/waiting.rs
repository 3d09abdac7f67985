//! Objects waiting on their backend after a transient failure, and their prompt retry once it
//! answers again.
//!
//! Backoff spaces the retries of each object on its own; after a long outage every waiting
//! object sits in a long delay (up to the backoff cap) and would be retried that long after the
//! backend came back. So the objects waiting on one backend (one group: a StorageClass) are
//! known together:
//!
//! - a group all of whose objects are due later than a probe interval from now is probed: its
//!   backend is asked whether it answers (silently, when the backend can tell), or else the
//!   object due soonest is retried now;
//! - when the backend is seen answering again (a probe after a failed one, or a waiting
//!   object's retry getting an answer: success, or a refusal for good), every object of the
//!   group is retried at once: one wave, each object once, its backoff left as it was, so a
//!   backend that fails again is not stampeded.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::Stream;
use futures::stream;
use tokio::sync::mpsc;

/// How long objects may wait after their backend answers again, with the default backoff.
pub const PROBE: Duration = Duration::from_secs(4);

/// How often a group whose objects all wait long is probed: [`PROBE`], or the first backoff
/// delay when that is longer; never more often than objects are retried anyway (the backoff
/// cap), where probes would gain nothing.
pub fn probe_interval(backoff_initial: Duration, backoff_max: Duration) -> Duration {
    backoff_initial.max(PROBE).min(backoff_max)
}

struct Entry<R> {
    group: String,
    target: R,
    due: Instant,
}

#[derive(Default)]
struct State<R> {
    entries: HashMap<String, Entry<R>>,
    /// Groups whose backend a probe found not answering.
    down: HashSet<String>,
}

/// The objects waiting on their backend, by key, with the retries they asked for.
pub struct Waiting<R> {
    /// How often groups are probed.
    pub interval: Duration,
    /// An entry due this long ago and not retried since belongs to an object gone.
    forget_after: Duration,
    state: Mutex<State<R>>,
    retry: mpsc::UnboundedSender<R>,
}

impl<R: Clone + Send + 'static> Waiting<R> {
    /// Nothing waiting; groups probed every `interval`. The receiver answers the objects to
    /// retry now.
    pub fn new(interval: Duration, forget_after: Duration) -> (Self, mpsc::UnboundedReceiver<R>) {
        let (retry, retries) = mpsc::unbounded_channel();
        let state = Mutex::new(State { entries: HashMap::new(), down: HashSet::new() });
        (Self { interval, forget_after, state, retry }, retries)
    }

    /// `key` (retried as `target`) failed on the backend of `group` and is due again after
    /// `delay`.
    pub fn failed(&self, key: &str, group: &str, target: R, delay: Duration) {
        let entry = Entry { group: group.to_string(), target, due: Instant::now() + delay };
        self.lock().entries.insert(key.to_string(), entry);
    }

    /// `key`'s backend answered it: if it was waiting, every other object of its group is
    /// retried now, once. Answers how many were.
    pub fn answered(&self, key: &str) -> usize {
        let mut state = self.lock();
        let Some(answered) = state.entries.remove(key) else { return 0 };
        self.wake(&mut state, &answered.group)
    }

    /// `key` no longer waits on its backend, which says nothing of the backend (it failed for
    /// another reason).
    pub fn left(&self, key: &str) {
        self.lock().entries.remove(key);
    }

    /// The groups to probe now: those none of whose objects is due within the probe interval.
    /// Objects due already are being retried (or are gone) and count for nothing; entries
    /// overdue for long are dropped.
    pub fn to_probe(&self, now: Instant) -> Vec<String> {
        let mut state = self.lock();
        let forget_after = self.forget_after;
        state.entries.retain(|_, e| now.saturating_duration_since(e.due) <= forget_after);
        let groups: HashSet<String> = state.entries.values().map(|e| e.group.clone()).collect();
        state.down.retain(|g| groups.contains(g));
        let mut soonest: HashMap<&str, Instant> = HashMap::new();
        for entry in state.entries.values().filter(|e| e.due > now) {
            let due = soonest.entry(&entry.group).or_insert(entry.due);
            *due = (*due).min(entry.due);
        }
        soonest
            .into_iter()
            .filter(|(_, due)| *due > now + self.interval)
            .map(|(group, _)| group.to_string())
            .collect()
    }

    /// The probe of `group` by its backend: not answering. Answers whether it was answering
    /// before.
    pub fn backend_down(&self, group: &str) -> bool {
        self.lock().down.insert(group.to_string())
    }

    /// The probe of `group` by its backend: answering. If the last probe found it not
    /// answering, every object of the group is retried now; answers how many.
    pub fn backend_up(&self, group: &str) -> usize {
        let mut state = self.lock();
        if !state.down.remove(group) {
            return 0;
        }
        self.wake(&mut state, group)
    }

    /// A probe of `group` through its objects, for a backend that cannot be asked: the one due
    /// soonest is retried now.
    pub fn retry_soonest(&self, group: &str, now: Instant) {
        let mut state = self.lock();
        let soonest = state
            .entries
            .iter_mut()
            .filter(|(_, e)| e.group == group && e.due > now)
            .min_by_key(|(_, e)| e.due);
        if let Some((_, entry)) = soonest {
            entry.due = now;
            let _ = self.retry.send(entry.target.clone());
        }
    }

    fn wake(&self, state: &mut State<R>, group: &str) -> usize {
        state.down.remove(group);
        let woken: Vec<String> = state
            .entries
            .iter()
            .filter(|(_, e)| e.group == group)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &woken {
            if let Some(entry) = state.entries.remove(key) {
                let _ = self.retry.send(entry.target);
            }
        }
        woken.len()
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The objects `retries` answers, as a stream.
pub fn retries<R: Send + 'static>(
    retries: mpsc::UnboundedReceiver<R>,
) -> impl Stream<Item = R> + Send + 'static {
    stream::unfold(retries, |mut retries| async move {
        let next = retries.recv().await?;
        Some((next, retries))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type Receiver = mpsc::UnboundedReceiver<&'static str>;

    fn waiting() -> (Waiting<&'static str>, Receiver) {
        Waiting::new(Duration::from_secs(4), Duration::from_secs(600))
    }

    fn drain(rx: &mut Receiver) -> Vec<&'static str> {
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
        assert!(waiting.to_probe(Instant::now()).is_empty());
    }

    #[test]
    fn only_groups_all_waiting_long_are_probed() {
        let (waiting, _rx) = waiting();
        waiting.failed("ns/a", "garage", "a", Duration::from_secs(64));
        waiting.failed("ns/b", "garage", "b", Duration::from_secs(32));
        waiting.failed("ns/s", "soon", "s", Duration::from_secs(2));
        waiting.failed("ns/t", "soon", "t", Duration::from_secs(60));
        let now = Instant::now();
        assert_eq!(waiting.to_probe(now), ["garage"]);
        // Once the soon one is being retried (due already), its group is probed too.
        let mut later = waiting.to_probe(now + Duration::from_secs(3));
        later.sort();
        assert_eq!(later, ["garage", "soon"]);
    }

    #[test]
    fn a_backend_answering_after_a_failed_probe_retries_its_whole_group() {
        let (waiting, mut rx) = waiting();
        waiting.failed("ns/a", "garage", "a", Duration::from_secs(64));
        waiting.failed("ns/b", "garage", "b", Duration::from_secs(32));
        assert_eq!(waiting.backend_up("garage"), 0, "answering all along: claims' own trouble");
        assert!(drain(&mut rx).is_empty());
        assert!(waiting.backend_down("garage"));
        assert!(!waiting.backend_down("garage"));
        assert_eq!(waiting.backend_up("garage"), 2);
        assert_eq!(drain(&mut rx), ["a", "b"]);
        assert_eq!(waiting.backend_up("garage"), 0, "one wave");
    }

    #[test]
    fn a_backend_that_cannot_be_asked_is_probed_through_its_soonest_object() {
        let (waiting, mut rx) = waiting();
        let now = Instant::now();
        waiting.failed("ns/a", "garage", "a", Duration::from_secs(64));
        waiting.failed("ns/b", "garage", "b", Duration::from_secs(32));
        waiting.retry_soonest("garage", now);
        assert_eq!(drain(&mut rx), ["b"]);
        // The retry failed again: the next probe takes the other object.
        waiting.failed("ns/b", "garage", "b", Duration::from_secs(128));
        waiting.retry_soonest("garage", now + Duration::from_secs(4));
        assert_eq!(drain(&mut rx), ["a"]);
    }

    #[test]
    fn entries_of_objects_gone_are_forgotten() {
        let (waiting, _rx) = waiting();
        waiting.failed("ns/gone", "garage", "gone", Duration::from_secs(1));
        waiting.backend_down("garage");
        assert!(waiting.to_probe(Instant::now() + Duration::from_secs(700)).is_empty());
        assert_eq!(waiting.backend_up("garage"), 0, "nor is its group remembered down");
    }

    #[test]
    fn the_probe_interval_is_short_and_never_below_what_backoff_does_anyway() {
        let secs = Duration::from_secs;
        assert_eq!(probe_interval(secs(1), secs(300)), PROBE);
        assert_eq!(probe_interval(secs(10), secs(300)), secs(10));
        assert_eq!(probe_interval(Duration::from_millis(100), secs(2)), secs(2));
    }
}

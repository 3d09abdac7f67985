//! Liveness and readiness of a provisioner process, derived from its loops themselves.
//!
//! Every loop that must keep turning holds a [`Pulse`]: it beats while it makes progress, and
//! dropping it (the loop returned, failed or panicked) marks the loop as ended for good unless it
//! was [retired](Pulse::retire) on purpose. So a loop cannot end and be forgotten: `/healthz`
//! fails until the process is restarted (the runtime exits first; see [`crate::runtime`]).
//!
//! Besides the loops, `/healthz` fails when the apiserver keeps refusing the provisioner
//! (401/403) for longer than a freshly started apiserver takes to fill its authentication and RBAC
//! caches — a misconfiguration, named in the answer — and when a watch keeps failing although the
//! API answers other requests. An outage of the apiserver alone never fails it: restarting the
//! process cannot end an outage.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the apiserver may refuse a loop (401/403) before that counts as a misconfiguration:
/// longer than a restarted apiserver takes to fill its caches, well within a probe's patience.
pub const ACCESS_GRACE: Duration = Duration::from_secs(15);

/// How long a watch may fail while the API answers other requests before the process counts as
/// stuck.
const WATCH_STUCK_AFTER: Duration = Duration::from_secs(120);

/// Readiness (`/readyz`) and liveness (`/healthz`) of the process; clones share the state.
#[derive(Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Every loop ever given a pulse and not retired, by pulse id.
    loops: BTreeMap<u64, Loop>,
    /// Source → since when, and what, the apiserver has refused it.
    denied: BTreeMap<String, (Instant, String)>,
    /// Watch name → since when it has failed without a success in between.
    failing_watches: BTreeMap<String, Instant>,
    /// The last time anything got an answer from the API.
    last_api_success: Option<Instant>,
}

struct Loop {
    name: String,
    last_beat: Instant,
    max_silence: Duration,
    ended: bool,
}

/// A loop's pulse on [`Health`]. Beat it at least every `max_silence`; retire it when the loop
/// stops on purpose. Dropped without retiring, it marks the loop as ended.
pub struct Pulse {
    retirement: Retirement,
}

/// Retires a [`Pulse`] from outside its loop: for a task that is aborted on purpose, which
/// drops its pulse where it stands.
#[derive(Clone)]
pub struct Retirement {
    health: Health,
    id: u64,
    retired: Arc<AtomicBool>,
}

impl Retirement {
    /// The loop stops on purpose (shutdown, leadership handed over): its silence means nothing.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
        self.health.state().loops.remove(&self.id);
    }
}

impl Pulse {
    /// The loop made progress.
    pub fn beat(&self) {
        let Retirement { health, id, .. } = &self.retirement;
        if let Some(entry) = health.state().loops.get_mut(id) {
            entry.last_beat = Instant::now();
        }
    }

    /// The loop stops on purpose (shutdown, leadership handed over): its silence means nothing.
    pub fn retire(self) {
        self.retirement.retire();
    }

    /// A handle that retires this pulse from outside its loop.
    pub fn retirement(&self) -> Retirement {
        self.retirement.clone()
    }
}

impl Drop for Pulse {
    fn drop(&mut self) {
        let Retirement { health, id, retired } = &self.retirement;
        if !retired.load(Ordering::Acquire)
            && let Some(entry) = health.state().loops.get_mut(id)
        {
            entry.ended = true;
        }
    }
}

impl Health {
    /// Marks the process ready (or no longer ready) to do its work.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Whether the process is currently ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pulse for the loop `name`, which promises to beat at least every `max_silence`.
    pub fn pulse(&self, name: impl Into<String>, max_silence: Duration) -> Pulse {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let entry =
            Loop { name: name.into(), last_beat: Instant::now(), max_silence, ended: false };
        self.state().loops.insert(id, entry);
        let retired = Arc::new(AtomicBool::new(false));
        Pulse { retirement: Retirement { health: self.clone(), id, retired } }
    }

    /// Something reached the API successfully.
    pub fn api_succeeded(&self) {
        self.state().last_api_success = Some(Instant::now());
    }

    /// The apiserver refused `source` (401 or 403) with `what`; reported once it has lasted
    /// [`ACCESS_GRACE`].
    pub fn denied(&self, source: &str, what: &str) {
        let mut state = self.state();
        match state.denied.get_mut(source) {
            Some((_, current)) => what.clone_into(current),
            None => {
                state.denied.insert(source.to_owned(), (Instant::now(), what.to_owned()));
            }
        }
    }

    /// `source` got through to the API: whatever refused it before is fixed.
    pub fn permitted(&self, source: &str) {
        let mut state = self.state();
        state.denied.remove(source);
        state.last_api_success = Some(Instant::now());
    }

    /// The watch `name` delivered something.
    pub fn watch_succeeded(&self, name: &str) {
        let mut state = self.state();
        state.failing_watches.remove(name);
        state.denied.remove(&watch_source(name));
        state.last_api_success = Some(Instant::now());
    }

    /// The watch `name` failed; `refused` says what, when the apiserver refused it (401/403).
    /// Any other failure (the apiserver unreachable, say) ends a refusal seen before: a refusal
    /// during a restarted apiserver's warm-up, followed by an outage, is no refusal that lasts.
    pub fn watch_failed(&self, name: &str, refused: Option<&str>) {
        match refused {
            Some(what) => self.denied(&watch_source(name), what),
            None => {
                self.state().denied.remove(&watch_source(name));
            }
        }
        self.state().failing_watches.entry(name.to_owned()).or_insert_with(Instant::now);
    }

    /// `Ok` while every loop beats in time, none has ended, nothing is refused for long and no
    /// watch is stuck; otherwise what is wrong.
    pub fn check(&self) -> Result<(), String> {
        self.check_at(Instant::now())
    }

    /// [`Health::check`] as it would answer at `now`.
    pub fn check_at(&self, now: Instant) -> Result<(), String> {
        let state = self.state();
        let mut problems = Vec::new();
        for entry in state.loops.values() {
            let silent = now.saturating_duration_since(entry.last_beat);
            if entry.ended {
                problems.push(format!("the {} loop has ended", entry.name));
            } else if silent > entry.max_silence {
                let seconds = silent.as_secs();
                problems
                    .push(format!("the {} loop has made no progress for {seconds}s", entry.name));
            }
        }
        for (source, (since, what)) in &state.denied {
            let refused = now.saturating_duration_since(*since);
            if refused > ACCESS_GRACE {
                problems.push(format!(
                    "the apiserver has refused the {source} for {}s: {what}",
                    refused.as_secs()
                ));
            }
        }
        for (name, since) in &state.failing_watches {
            let failing = now.saturating_duration_since(*since);
            let api_answers = state.last_api_success.is_some_and(|t| t > *since);
            let refused = state.denied.contains_key(&watch_source(name));
            if failing > WATCH_STUCK_AFTER && api_answers && !refused {
                problems.push(format!(
                    "the {name} watch has failed for {}s while the API answers",
                    failing.as_secs()
                ));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }
}

/// The source a watch's refusals are reported under.
fn watch_source(name: &str) -> String {
    format!("{name} watch")
}

/// What a refusal says is missing, when `error` is the apiserver refusing the credentials (401)
/// or the permission (403) of the request; `None` for every other error.
pub fn refusal(error: &kube::Error) -> Option<String> {
    let kube::Error::Api(status) = error else { return None };
    match status.code {
        401 => Some("401 Unauthorized: the apiserver does not accept the credentials".to_owned()),
        403 => {
            // RBAC's message names the user, verb, resource and namespace: keep that part.
            let message = &status.message;
            let what = message.find("User ").map_or(message.as_str(), |at| &message[at..]);
            Some(format!("403 Forbidden: {what}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_loop_fails_the_check_and_a_retired_one_does_not() {
        let health = Health::default();
        let now = Instant::now();
        let pulse = health.pulse("election", Duration::from_secs(10));
        assert_eq!(health.check_at(now + Duration::from_secs(5)), Ok(()));
        let problem = health.check_at(now + Duration::from_secs(11)).unwrap_err();
        assert!(problem.contains("election loop has made no progress"), "{problem}");
        pulse.retire();
        assert_eq!(health.check_at(now + Duration::from_secs(11)), Ok(()));
    }

    #[test]
    fn a_loop_that_ends_without_retiring_fails_the_check_for_good() {
        let health = Health::default();
        let pulse = health.pulse("controller", Duration::from_secs(3600));
        pulse.beat();
        drop(pulse);
        let problem = health.check().unwrap_err();
        assert_eq!(problem, "the controller loop has ended");
        // A later pulse of the same name does not hide that one ended.
        let _again = health.pulse("controller", Duration::from_secs(3600));
        assert!(health.check().is_err());
    }

    #[test]
    fn a_loop_retired_from_outside_before_it_is_dropped_has_not_ended() {
        let health = Health::default();
        let pulse = health.pulse("sweep", Duration::from_secs(3600));
        let retirement = pulse.retirement();
        retirement.retire();
        drop(pulse);
        assert_eq!(health.check(), Ok(()));
    }

    #[test]
    fn a_panicking_loop_counts_as_ended() {
        let health = Health::default();
        let pulse = health.pulse("sweep", Duration::from_secs(3600));
        let result = std::thread::spawn(move || {
            let _pulse = pulse;
            panic!("a bug in the loop");
        })
        .join();
        assert!(result.is_err());
        assert_eq!(health.check().unwrap_err(), "the sweep loop has ended");
    }

    #[test]
    fn refusals_fail_the_check_only_when_they_last() {
        let health = Health::default();
        let now = Instant::now();
        health
            .denied("leader election", "403 Forbidden: User \"x\" cannot get resource \"leases\"");
        assert_eq!(health.check_at(now + Duration::from_secs(5)), Ok(()), "warm-up is expected");
        let problem = health.check_at(now + ACCESS_GRACE + Duration::from_secs(1)).unwrap_err();
        assert!(problem.contains("refused the leader election"), "{problem}");
        assert!(problem.contains("cannot get resource \"leases\""), "{problem}");
        health.permitted("leader election");
        assert_eq!(health.check_at(now + ACCESS_GRACE + Duration::from_secs(1)), Ok(()));
    }

    #[test]
    fn a_watch_refused_then_unreachable_is_no_lasting_refusal() {
        let health = Health::default();
        let now = Instant::now();
        health.watch_failed("accounts", Some("403 Forbidden"));
        // The apiserver stops before the watch gets through again.
        health.watch_failed("accounts", None);
        let later = now + ACCESS_GRACE + Duration::from_secs(1);
        assert_eq!(health.check_at(later), Ok(()), "an outage is no reason to restart");
        health.watch_failed("accounts", Some("403 Forbidden"));
        let problem = health.check_at(Instant::now() + ACCESS_GRACE + Duration::from_secs(1));
        assert!(problem.unwrap_err().contains("refused the accounts watch"));
    }

    #[test]
    fn stuck_watches_fail_the_check_while_the_api_answers() {
        let health = Health::default();
        let now = Instant::now();
        health.watch_failed("claims", None);
        let later = now + WATCH_STUCK_AFTER + Duration::from_secs(1);
        assert_eq!(health.check_at(later), Ok(()), "an outage is no reason to restart");
        health.api_succeeded();
        let problem = health.check_at(later).unwrap_err();
        assert!(problem.contains("claims watch has failed"), "{problem}");
        health.watch_succeeded("claims");
        assert_eq!(health.check_at(later), Ok(()));
    }

    #[test]
    fn refusals_name_what_is_missing() {
        let status = |code, message: &str| {
            kube::Error::Api(
                kube::core::Status::failure(message, "Forbidden").with_code(code).boxed(),
            )
        };
        let forbidden = status(
            403,
            "leases.coordination.k8s.io \"l\" is forbidden: User \"system:serviceaccount:a:b\" \
             cannot get resource \"leases\" in API group \"coordination.k8s.io\"",
        );
        assert_eq!(
            refusal(&forbidden).unwrap(),
            "403 Forbidden: User \"system:serviceaccount:a:b\" cannot get resource \"leases\" in \
             API group \"coordination.k8s.io\""
        );
        assert!(refusal(&status(401, "Unauthorized")).unwrap().starts_with("401"));
        assert_eq!(refusal(&status(500, "boom")), None);
        assert_eq!(refusal(&status(404, "gone")), None);
    }
}

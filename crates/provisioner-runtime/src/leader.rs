//! Leader election on a `coordination.k8s.io/v1` Lease, so that only one replica of the
//! provisioner acts on claims at a time.
//!
//! The protocol is the usual one for Leases: a candidate takes the Lease when it is unheld, or when
//! the holder's `renewTime + leaseDurationSeconds` lies in the past, and the holder keeps it by
//! refreshing `renewTime` well within that window. Every write carries the `resourceVersion` that
//! was read, so of two candidates racing for the same Lease exactly one write succeeds.
//!
//! Expiry is judged against the wall clock of the candidate, so the replicas' clocks need to be
//! roughly in sync (as they are for Kubernetes itself). The holder is stricter with itself: it
//! measures its term on its own monotonic clock from the moment it *sent* its last successful
//! write, ends the term a tenth of the lease duration early (for timer lateness and clock drift),
//! and declares the leadership lost as soon as the term runs out. A partitioned holder therefore
//! stops acting before any other candidate may consider the Lease expired.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::health::{Health, Pulse, refusal};
use crate::log_limit::Throttle;

/// The name the election loop beats under on [`Health`].
pub const ELECTION_LOOP: &str = "leader election";

/// What the election loop may be late by beyond its own timing, before it counts as stuck.
const SLACK: Duration = Duration::from_secs(5);

/// `start + by`, or, when that is beyond what the clock counts, a time so far ahead that it
/// never comes (about 30 years, as tokio's own far future).
fn after(start: Instant, by: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    start.checked_add(by).or_else(|| start.checked_add(FAR)).unwrap_or(start)
}

/// Where the Lease lives, who we are, and how the timing of the election works.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Namespace of the Lease; it must exist.
    pub namespace: String,
    /// Name of the Lease; every replica of one deployment uses the same name.
    pub name: String,
    /// This candidate's identity. It must be unique per process (for example the pod name), since
    /// two processes with one identity would both believe they lead.
    pub identity: String,
    /// How long a holder's claim stays valid after its last renewal. Written to the Lease as
    /// `leaseDurationSeconds`, rounded up to whole seconds; the holder itself gives up after nine
    /// tenths of it without a successful renewal.
    pub lease_duration: Duration,
    /// How often the holder renews; should be well below `lease_duration` so that a few failed
    /// renewals can be retried before the term runs out.
    pub renew_interval: Duration,
    /// How often a standby checks the Lease again, and how soon a failed renewal is retried.
    pub retry_interval: Duration,
}

/// Competes for one Lease on behalf of one identity.
#[derive(Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    health: Health,
}

impl LeaderElector {
    /// An elector for the Lease described by `config`; nothing is contacted until
    /// [`acquire`](Self::acquire).
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        if config.renew_interval >= config.lease_duration {
            // Not fatal, but the holder would lose its term between two renewals.
            warn!(
                lease = %config.name,
                renew_interval = ?config.renew_interval,
                lease_duration = ?config.lease_duration,
                "the renew interval is not shorter than the lease duration; leadership will not last"
            );
        }
        let api = Api::namespaced(client, &config.namespace);
        LeaderElector { api, config, health: Health::default() }
    }

    /// Reports the election's progress to `health`: every attempt and renewal beats
    /// [`ELECTION_LOOP`], and lasting refusals are reported under that name.
    pub fn reporting_to(mut self, health: Health) -> Self {
        self.health = health;
        self
    }

    /// The longest the election loop stays silent while it works: one attempt bounded by the
    /// lease duration, one pause, and slack.
    fn max_silence(&self) -> Duration {
        let config = &self.config;
        config
            .lease_duration
            .saturating_mul(2)
            .saturating_add(config.retry_interval)
            .saturating_add(SLACK)
    }

    /// Waits until this identity holds the lease (creating the Lease if absent, taking it over when
    /// the holder's renewTime + leaseDurationSeconds has passed), then renews it in a background
    /// tokio task.
    ///
    /// Every error is retried every `retry_interval`, whatever it is: a freshly started apiserver
    /// answers 401 and 403 for a moment, and RBAC fixed by an operator heals the process without a
    /// restart. Repeated failures are logged once a minute; a refusal (401/403) that lasts is
    /// reported on [`Health`], naming what is missing. If this future is dropped right after a
    /// successful write, the Lease is left held but unrenewed and simply expires.
    pub async fn acquire(&self) -> LeaderGuard {
        let pulse = self.health.pulse(ELECTION_LOOP, self.max_silence());
        let mut failures = Throttle::default();
        let mut last_holder: Option<String> = None;
        loop {
            pulse.beat();
            // Taken before the request: the term is counted from no later than the write.
            let attempt_started = Instant::now();
            // A request hanging on a half-dead apiserver must not stall the campaign.
            let attempt = tokio::time::timeout(self.config.lease_duration, self.try_acquire())
                .await
                .unwrap_or(Err(Failure::TimedOut));
            match attempt {
                Ok(Attempt::Acquired { transitions }) => {
                    self.answered(&mut failures);
                    info!(
                        lease = %self.config.name,
                        namespace = %self.config.namespace,
                        identity = %self.config.identity,
                        transitions,
                        "acquired leadership"
                    );
                    let deadline = after(attempt_started, self.term());
                    return LeaderGuard::start(self.clone(), deadline, pulse);
                }
                Ok(Attempt::HeldBy(holder)) => {
                    self.answered(&mut failures);
                    if last_holder.as_deref() != Some(holder.as_str()) {
                        info!(
                            lease = %self.config.name,
                            holder = %holder,
                            identity = %self.config.identity,
                            "lease is held by another candidate; standing by"
                        );
                        last_holder = Some(holder);
                    }
                }
                Ok(Attempt::Contended) => {
                    self.answered(&mut failures);
                    debug!(lease = %self.config.name, "lost a race for the lease; will re-read it");
                }
                Err(failure) => self.failed("could not check the lease", &failure, &mut failures),
            }
            tokio::time::sleep(self.config.retry_interval).await;
        }
    }

    /// The apiserver answered: whatever refused the election before is fixed.
    fn answered(&self, failures: &mut Throttle) {
        if failures.is_failing() {
            info!(lease = %self.config.name, "the lease answers again");
        }
        failures.reset();
        self.health.permitted(ELECTION_LOOP);
    }

    /// Reports a failed request: a refusal to [`Health`], and a log line at most once a minute.
    fn failed(&self, doing: &str, failure: &Failure, failures: &mut Throttle) {
        if let Failure::Api(error) = failure
            && let Some(what) = refusal(error)
        {
            self.health.denied(ELECTION_LOOP, &what);
        }
        if let Some(held_back) = failures.allow() {
            warn!(
                lease = %self.config.name,
                namespace = %self.config.namespace,
                error = %failure,
                repeats_since_last_report = held_back,
                "{doing}; retrying"
            );
        }
    }

    /// How long one successful write lets this holder act: a little less than the Lease lasts.
    fn term(&self) -> Duration {
        self.config.lease_duration - self.config.lease_duration / 10
    }

    async fn try_acquire(&self) -> Result<Attempt, Failure> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return self.create().await;
        };
        let now = Timestamp::now();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        match assess(spec, &self.config.identity, now, self.config.lease_duration) {
            LeaseState::HeldByOther(holder) => return Ok(Attempt::HeldBy(holder)),
            LeaseState::Ours => {
                // A restart with the same identity continues the term it already had.
                spec.renew_time = Some(MicroTime(now));
            }
            LeaseState::Free | LeaseState::Expired => {
                spec.lease_transitions =
                    Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                spec.holder_identity = Some(self.config.identity.clone());
                spec.acquire_time = Some(MicroTime(now));
                spec.renew_time = Some(MicroTime(now));
            }
        }
        spec.lease_duration_seconds = Some(whole_seconds(self.config.lease_duration));
        let transitions = spec.lease_transitions.unwrap_or(0);
        // `lease` still carries the resourceVersion we read, so a concurrent writer makes this fail.
        match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Acquired { transitions }),
            Err(kube::Error::Api(status)) if status.is_conflict() => Ok(Attempt::Contended),
            Err(err) => Err(err.into()),
        }
    }

    async fn create(&self) -> Result<Attempt, Failure> {
        let now = MicroTime(Timestamp::now());
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(whole_seconds(self.config.lease_duration)),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Acquired { transitions: 0 }),
            Err(kube::Error::Api(status)) if status.is_already_exists() || status.is_conflict() => {
                Ok(Attempt::Contended)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// One renewal: refreshes `renewTime` if the Lease is still ours.
    async fn renew_once(&self) -> Result<Renewal, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            // Recreating it could overlap with a standby that creates it first; step down instead.
            return Ok(Renewal::Lost("the Lease was deleted".to_owned()));
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            let holder = spec.holder_identity.clone().unwrap_or_default();
            return Ok(Renewal::Lost(format!("the lease is now held by {holder:?}")));
        }
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = Some(whole_seconds(self.config.lease_duration));
        self.api.replace(&self.config.name, &PostParams::default(), &lease).await?;
        Ok(Renewal::Renewed)
    }

    /// Clears `holderIdentity` if the Lease is still ours, so a standby need not wait for expiry.
    async fn clear_holder(&self) -> Result<bool, kube::Error> {
        // A conflict means someone wrote in between; read again and decide again.
        for _ in 0..3 {
            let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
                return Ok(false);
            };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            spec.holder_identity = None;
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
                Ok(_) => return Ok(true),
                Err(kube::Error::Api(status)) if status.is_conflict() => continue,
                Err(err) => return Err(err),
            }
        }
        Ok(false)
    }

    /// Keeps the lease until told to stop or until the term cannot be extended.
    async fn renew_until_lost(
        self,
        mut deadline: Instant,
        mut stop: oneshot::Receiver<()>,
        lost: watch::Sender<bool>,
        pulse: Pulse,
    ) {
        let config = &self.config;
        let mut failures = Throttle::default();
        let mut next_renewal = after(Instant::now(), config.renew_interval);
        let reason = loop {
            tokio::select! {
                biased;
                _ = &mut stop => return pulse.retire(),
                () = tokio::time::sleep_until(next_renewal.min(deadline)) => {}
            }
            pulse.beat();
            if Instant::now() >= deadline {
                break "the lease could not be renewed within its duration".to_owned();
            }
            let attempt_started = Instant::now();
            let attempt = tokio::select! {
                biased;
                _ = &mut stop => return pulse.retire(),
                attempt = tokio::time::timeout_at(deadline, self.renew_once()) => attempt,
            };
            match attempt {
                Ok(Ok(Renewal::Renewed)) => {
                    debug!(lease = %config.name, "renewed the lease");
                    self.answered(&mut failures);
                    deadline = after(attempt_started, self.term());
                    next_renewal = after(attempt_started, config.renew_interval);
                }
                Ok(Ok(Renewal::Lost(reason))) => break reason,
                Ok(Err(err)) => {
                    self.failed("renewing the lease failed", &Failure::Api(err), &mut failures);
                    next_renewal = after(Instant::now(), config.retry_interval);
                }
                Err(_) => break "the lease could not be renewed within its duration".to_owned(),
            }
        };
        // Ending a term on purpose: the runtime campaigns again under a new pulse.
        pulse.retire();
        info!(
            lease = %config.name,
            namespace = %config.namespace,
            identity = %config.identity,
            reason = %reason,
            "lost leadership"
        );
        lost.send_replace(true);
    }
}

/// Proof of leadership; renews the Lease in the background for as long as it lives.
///
/// Dropping the guard without [`release`](Self::release) stops the renewals but leaves the Lease
/// held, so a standby takes over only after it expires (as after a crash).
pub struct LeaderGuard {
    elector: LeaderElector,
    lost: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    renewals: Option<JoinHandle<()>>,
}

impl LeaderGuard {
    fn start(elector: LeaderElector, deadline: Instant, pulse: Pulse) -> Self {
        let (lost_tx, lost_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = oneshot::channel();
        let renewals =
            tokio::spawn(elector.clone().renew_until_lost(deadline, stop_rx, lost_tx, pulse));
        LeaderGuard { elector, lost: lost_rx, stop: Some(stop_tx), renewals: Some(renewals) }
    }

    /// Resolves when leadership is lost (a renewal failed for longer than the lease duration, or
    /// another identity took the lease). Callers stop acting immediately.
    ///
    /// Cancel-safe, so it can sit in `tokio::select!`; it resolves at once if already lost.
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        // An error means the renewal task is gone (it panicked), which is as good as lost.
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// Whether leadership has already been lost, for checks outside of `select!`.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow() || self.lost.has_changed().is_err()
    }

    /// Graceful shutdown: stops renewing and clears holderIdentity (only if still ours) so a
    /// standby takes over at once.
    ///
    /// Failures are logged, not returned: the Lease then just expires as if the process had died.
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(renewals) = self.renewals.take() {
            // Waiting keeps a renewal in flight from landing after the Lease was cleared.
            let _ = renewals.await;
        }
        let config = &self.elector.config;
        match self.elector.clear_holder().await {
            Ok(true) => info!(
                lease = %config.name,
                namespace = %config.namespace,
                identity = %config.identity,
                "released leadership"
            ),
            Ok(false) => debug!(lease = %config.name, "lease no longer ours; nothing to release"),
            Err(err) => warn!(
                lease = %config.name,
                error = %err,
                "could not release the lease; it will expire instead"
            ),
        }
    }
}

impl Drop for LeaderGuard {
    fn drop(&mut self) {
        if let Some(renewals) = self.renewals.take() {
            renewals.abort();
        }
    }
}

enum Attempt {
    Acquired { transitions: i32 },
    HeldBy(String),
    Contended,
}

enum Renewal {
    Renewed,
    Lost(String),
}

/// What a candidate may do with a Lease as read.
#[derive(Debug, PartialEq, Eq)]
enum LeaseState {
    /// Nobody holds it.
    Free,
    /// Its holder failed to renew it in time.
    Expired,
    /// We hold it.
    Ours,
    /// Another identity holds it and its term still runs.
    HeldByOther(String),
}

/// Decides the state of a Lease at `now`. `default_duration` applies when the Lease does not say.
fn assess(
    spec: &LeaseSpec,
    identity: &str,
    now: Timestamp,
    default_duration: Duration,
) -> LeaseState {
    let holder = match spec.holder_identity.as_deref() {
        None | Some("") => return LeaseState::Free,
        Some(holder) if holder == identity => return LeaseState::Ours,
        Some(holder) => holder,
    };
    // Without any timestamp nothing shows the holder is alive, and waiting would never end.
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return LeaseState::Expired;
    };
    let seconds = match spec.lease_duration_seconds {
        Some(seconds) if seconds > 0 => seconds,
        _ => whole_seconds(default_duration),
    };
    if now.duration_since(renewed.0) >= SignedDuration::from_secs(i64::from(seconds)) {
        LeaseState::Expired
    } else {
        LeaseState::HeldByOther(holder.to_owned())
    }
}

/// `leaseDurationSeconds` for a duration: rounded up, so others never wait less than we assume.
fn whole_seconds(duration: Duration) -> i32 {
    let seconds = duration.as_secs().saturating_add(u64::from(duration.subsec_nanos() > 0));
    i32::try_from(seconds).unwrap_or(i32::MAX).max(1)
}

/// Why one attempt at the Lease failed.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// The apiserver refused or failed the request, or could not be reached.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// No answer within the lease duration.
    #[error("no answer within the lease duration")]
    TimedOut,
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "me";
    const DURATION: Duration = Duration::from_secs(15);

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn held(holder: &str, renewed_at: i64, duration_seconds: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            renew_time: Some(MicroTime(at(renewed_at))),
            acquire_time: Some(MicroTime(at(renewed_at - 100))),
            lease_duration_seconds: duration_seconds,
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_without_holder_is_free() {
        assert_eq!(assess(&LeaseSpec::default(), ME, at(0), DURATION), LeaseState::Free);
        let released = LeaseSpec { holder_identity: Some(String::new()), ..held("x", 0, Some(10)) };
        assert_eq!(assess(&released, ME, at(1), DURATION), LeaseState::Free);
    }

    #[test]
    fn our_own_lease_is_ours_even_when_expired() {
        assert_eq!(assess(&held(ME, 0, Some(10)), ME, at(5), DURATION), LeaseState::Ours);
        assert_eq!(assess(&held(ME, 0, Some(10)), ME, at(500), DURATION), LeaseState::Ours);
    }

    #[test]
    fn another_holder_keeps_it_until_renew_time_plus_duration() {
        let spec = held("other", 0, Some(10));
        let held_by_other = LeaseState::HeldByOther("other".to_owned());
        assert_eq!(assess(&spec, ME, at(-3), DURATION), held_by_other, "renewTime in the future");
        assert_eq!(assess(&spec, ME, at(9), DURATION), held_by_other);
        assert_eq!(assess(&spec, ME, at(10), DURATION), LeaseState::Expired);
        assert_eq!(assess(&spec, ME, at(60), DURATION), LeaseState::Expired);
    }

    #[test]
    fn sub_second_precision_counts() {
        let spec = held("other", 0, Some(10));
        let just_before = at(10).checked_sub(SignedDuration::from_micros(1)).unwrap();
        assert_eq!(
            assess(&spec, ME, just_before, DURATION),
            LeaseState::HeldByOther("other".into())
        );
    }

    #[test]
    fn missing_duration_falls_back_to_ours() {
        let spec = held("other", 0, None);
        assert_eq!(assess(&spec, ME, at(14), DURATION), LeaseState::HeldByOther("other".into()));
        assert_eq!(assess(&spec, ME, at(15), DURATION), LeaseState::Expired);
        let nonsense = held("other", 0, Some(0));
        assert_eq!(
            assess(&nonsense, ME, at(14), DURATION),
            LeaseState::HeldByOther("other".into())
        );
    }

    #[test]
    fn acquire_time_stands_in_for_a_missing_renew_time() {
        let spec = LeaseSpec { renew_time: None, ..held("other", 0, Some(10)) };
        // acquireTime is 100s before renewTime in `held`.
        assert_eq!(assess(&spec, ME, at(-95), DURATION), LeaseState::HeldByOther("other".into()));
        assert_eq!(assess(&spec, ME, at(-90), DURATION), LeaseState::Expired);
        let no_times = LeaseSpec { acquire_time: None, ..spec };
        assert_eq!(assess(&no_times, ME, at(0), DURATION), LeaseState::Expired);
    }

    /// A Lease as the apiserver would answer it.
    fn lease_json(holder: &str) -> String {
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": { "name": "l", "namespace": "ns", "resourceVersion": "7" },
            "spec": { "holderIdentity": holder, "leaseDurationSeconds": 15 },
        })
        .to_string()
    }

    fn elector(client: kube::Client, health: &Health) -> LeaderElector {
        let config = LeaseConfig {
            namespace: "ns".into(),
            name: "l".into(),
            identity: ME.into(),
            lease_duration: DURATION,
            renew_interval: Duration::from_secs(3600),
            retry_interval: Duration::from_millis(10),
        };
        LeaderElector::new(client, config).reporting_to(health.clone())
    }

    #[tokio::test]
    async fn the_campaign_outlives_every_error_the_apiserver_answers_then_leads() {
        // 401, 403, 404 of the namespace, 409, 429, 500, 503 and 504 in turn; then the Lease
        // is created.
        let codes = [401, 403, 404, 409, 429, 500, 503, 504];
        let (client, seen) = crate::mock_api::client(move |n, method, _| match codes.get(n) {
            Some(code) => crate::mock_api::status(*code, "User \"me\" cannot get resource"),
            None if method == "GET" => crate::mock_api::status(404, "leases \"l\" not found"),
            None => (201, lease_json(ME)),
        });
        let health = Health::default();
        let guard =
            tokio::time::timeout(Duration::from_secs(10), elector(client, &health).acquire())
                .await
                .expect("the campaign ends with leadership, not with an error");
        assert!(!guard.is_lost());
        assert_eq!(crate::mock_api::seen(&seen), codes.len() + 2, "every error was retried");
        assert_eq!(health.check(), Ok(()), "refusals that ended are not reported");
    }

    #[tokio::test]
    async fn a_lasting_refusal_is_reported_while_the_campaign_goes_on() {
        let (client, seen) = crate::mock_api::client(|_, _, _| {
            crate::mock_api::status(
                403,
                "leases is forbidden: User \"me\" cannot get resource \"leases\"",
            )
        });
        let health = Health::default();
        let campaign = elector(client, &health);
        let campaign = tokio::spawn(async move { campaign.acquire().await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!campaign.is_finished(), "the campaign goes on");
        assert!(crate::mock_api::seen(&seen) > 5, "and keeps asking");
        let later =
            Instant::now().into_std() + crate::health::ACCESS_GRACE + Duration::from_secs(1);
        let problem = health.check_at(later).unwrap_err();
        assert!(problem.contains("cannot get resource \"leases\""), "{problem}");
        campaign.abort();
    }

    #[tokio::test]
    async fn a_lease_longer_than_the_clock_counts_leads_without_overflowing() {
        let (client, _) = crate::mock_api::client(|_, method, _| match method {
            "GET" => crate::mock_api::status(404, "leases \"l\" not found"),
            _ => (201, lease_json(ME)),
        });
        let mut campaign = elector(client, &Health::default());
        campaign.config.lease_duration = Duration::MAX;
        campaign.config.renew_interval = Duration::MAX;
        assert_eq!(campaign.max_silence(), Duration::MAX);
        let guard = tokio::time::timeout(Duration::from_secs(10), campaign.acquire())
            .await
            .expect("the campaign ends with leadership");
        assert!(!guard.is_lost());
    }

    #[test]
    fn durations_round_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::from_secs(3)), 3);
        assert_eq!(whole_seconds(Duration::from_millis(2500)), 3);
        assert_eq!(whole_seconds(Duration::from_millis(10)), 1);
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_secs(u64::MAX)), i32::MAX);
    }
}

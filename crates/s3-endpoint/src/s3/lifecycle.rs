//! The lifecycle worker: the store's lifecycle pass (see
//! [`BucketStore::lifecycle_pass_blocking`]) run by the server, once when it starts (whatever
//! expired while it was down goes first) and then every [`LifecycleSchedule`] interval, until
//! the server stops. A pass in progress when the server stops ends after the object it is at.
//! Each pass examines at most the schedule's budget of objects; a bucket it leaves unfinished
//! goes on at the next pass, and the endpoint's metrics say how far behind expiry runs.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::metrics::EndpointMetrics;
use crate::store::BucketStore;

/// How often the lifecycle pass runs by default.
pub const DEFAULT_LIFECYCLE_INTERVAL: Duration = Duration::from_secs(3600);
/// How many objects (versions and uploads count too) one pass examines by default: about a
/// million metadata reads an hour keeps a disk busy for minutes, not for the whole interval.
pub const DEFAULT_LIFECYCLE_BUDGET: u64 = 1_000_000;

/// What gives the lifecycle pass the current time.
type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// When the server runs the lifecycle pass, and which clock it reads.
#[derive(Clone)]
pub struct LifecycleSchedule {
    every: Duration,
    budget: u64,
    clock: Clock,
}

impl std::fmt::Debug for LifecycleSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleSchedule")
            .field("every", &self.every)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl Default for LifecycleSchedule {
    /// Every [`DEFAULT_LIFECYCLE_INTERVAL`], on the system clock.
    fn default() -> Self {
        Self::every(DEFAULT_LIFECYCLE_INTERVAL)
    }
}

impl LifecycleSchedule {
    /// A pass at start, then one every `interval` (at least 10 ms apart), on the system
    /// clock, each within [`DEFAULT_LIFECYCLE_BUDGET`].
    pub fn every(interval: Duration) -> Self {
        Self {
            every: interval.max(Duration::from_millis(10)),
            budget: DEFAULT_LIFECYCLE_BUDGET,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// The same schedule, each pass examining at most about `budget` objects (at least one).
    pub fn with_budget(self, budget: u64) -> Self {
        Self { budget: budget.max(1), ..self }
    }

    /// The same schedule, reading the time from `clock` (a test's clock ahead of the system's,
    /// so that objects are old without waiting days).
    pub fn with_clock(self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        Self { clock: Arc::new(clock), ..self }
    }

    /// The interval between two passes.
    pub fn interval(&self) -> Duration {
        self.every
    }
}

/// Runs the lifecycle pass on `store` on `schedule` until `stop` is cancelled, recording each
/// pass in `metrics`.
pub(super) async fn run(
    store: Arc<BucketStore>,
    schedule: LifecycleSchedule,
    metrics: Option<EndpointMetrics>,
    stop: CancellationToken,
) {
    loop {
        let now = (schedule.clock)();
        let (pass_store, pass_stop, budget) = (store.clone(), stop.clone(), schedule.budget);
        let pass = tokio::task::spawn_blocking(move || {
            pass_store.lifecycle_pass_blocking(now, budget, &|| pass_stop.is_cancelled())
        });
        let pass = pass.await;
        if let (Some(metrics), Ok(report)) = (&metrics, &pass) {
            metrics.lifecycle_pass(report);
        }
        if let Ok(report) = &pass
            && report.unfinished > 0
        {
            tracing::info!(
                unfinished = report.unfinished,
                lag_secs = report.lag.as_secs(),
                "the lifecycle budget left buckets to go on with at the next pass"
            );
        }
        match pass {
            Ok(report) if report.failed > 0 => {
                tracing::warn!(?report, "lifecycle pass done, with failures; retried next pass");
            }
            Ok(report) if report.expired + report.aborted > 0 => {
                tracing::info!(?report, "lifecycle pass done");
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "the lifecycle pass panicked"),
        }
        tokio::select! {
            () = tokio::time::sleep(schedule.every) => {}
            () = stop.cancelled() => return,
        }
    }
}

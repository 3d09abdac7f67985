//! Claims waiting on an unreachable Garage bind promptly once it answers again, not a backoff
//! period later.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bucket_api::{ClaimPhase, ObjectBucket};
use bucket_provisioner::{
    BackendError, BucketOptions, ControllerConfig, ProvisionedBucket, Provisioner, Removed,
};
use common::{Harness, setup, spec};
use garage_provisioner::GarageProvisioner;
use test_support::{Deployed, free_port, unique_suffix};

/// When one `provision` returned, and whether it succeeded.
type Attempt = (Instant, bool);

/// Each `provision` the controller asks for, by bucket.
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<HashMap<String, Vec<Attempt>>>>);

struct Recorded {
    inner: GarageProvisioner,
    attempts: Attempts,
    /// Whether Garage's own probe is used, or the library left to retry a claim instead.
    probe: bool,
}

impl Provisioner for Recorded {
    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        self.inner.validate(options)
    }

    fn cleanup_state(&self, options: &BucketOptions) -> BTreeMap<String, String> {
        self.inner.cleanup_state(options)
    }

    async fn provision(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let result = self.inner.provision(options).await;
        let mut attempts = self.attempts.0.lock().unwrap();
        let entry = attempts.entry(options.bucket_name.clone()).or_default();
        entry.push((Instant::now(), result.is_ok()));
        result
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        self.inner.grant(options).await
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<Removed, BackendError> {
        self.inner.delete(bucket).await
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        self.inner.revoke(bucket).await
    }

    async fn probe(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> Option<Result<(), BackendError>> {
        if self.probe { self.inner.probe(parameters).await } else { None }
    }
}

impl Attempts {
    /// For each bucket: its failures so far and when backoff alone would retry it (the
    /// controller's delay after `n` failures is `initial * 2^(n-1)`, capped).
    fn next_retries(&self, config: &ControllerConfig) -> Vec<(usize, Instant)> {
        let attempts = self.0.lock().unwrap();
        attempts
            .values()
            .map(|tries| {
                let failures = tries.iter().filter(|(_, ok)| !ok).count();
                let exponent = u32::try_from(failures.saturating_sub(1)).unwrap_or(u32::MAX);
                let delay = config
                    .backoff_initial
                    .saturating_mul(2u32.saturating_pow(exponent))
                    .min(config.backoff_max);
                let last = tries.last().map_or_else(Instant::now, |(at, _)| *at);
                (failures, last + delay)
            })
            .collect()
    }
}

/// Forwards connections to `port` on to `to`, from now on.
async fn forward(port: u16, to: u16) -> tokio::task::JoinHandle<()> {
    let listener =
        tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("binding the port");
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}

/// Claims wait on an unreachable Garage long enough for their backoff to reach half a minute
/// (the controller as deployed: 1 s doubling to 5 min); once Garage answers they all bind well
/// before backoff alone would have retried any of them, whether Garage is asked (`probe`) or
/// a waiting claim is retried instead.
async fn claims_bind_promptly_once_garage_answers(probe: bool) {
    const CLAIMS: usize = 3;
    const BACKOFF_REACHED: usize = 6;
    const MARGIN: Duration = Duration::from_secs(20);
    let s = setup("garage-outage").await;
    let attempts = Attempts::default();
    let backend = Recorded { inner: s.backend(), attempts: attempts.clone(), probe };
    let provisioner = format!("garage.test.objectbucket.io/{}", unique_suffix());
    let config = ControllerConfig::new(&provisioner);
    let controller = Harness::start_with(backend, config.clone(), Deployed::Garage);
    let port = free_port().unwrap();
    let address = format!("http://127.0.0.1:{port}");
    let class = s.class(&controller.provisioner, &[("adminEndpoint", &address)], "Delete").await;
    let suffix = unique_suffix();
    for i in 0..CLAIMS {
        s.claim(&format!("waiting-{i}"), spec(&class, &format!("waiting-{i}-{suffix}"), &[])).await;
    }

    // Wait until every claim failed often enough that its next retry is far off, then bring
    // Garage back at that moment.
    let deadline = Instant::now() + Duration::from_secs(240);
    let earliest_retry = loop {
        let retries = attempts.next_retries(&config);
        let now = Instant::now();
        let earliest = retries.iter().map(|(_, at)| *at).min();
        if retries.len() == CLAIMS
            && retries.iter().all(|(failures, _)| *failures >= BACKOFF_REACHED)
            && let Some(earliest) = earliest.filter(|at| *at >= now + MARGIN)
        {
            break earliest;
        }
        assert!(now < deadline, "claims did not back off as expected: {retries:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let back = Instant::now();
    let _garage = forward(port, s.garage.nodes[0].admin_port).await;
    let allowed = earliest_retry - back;

    let mut pending: Vec<String> = (0..CLAIMS).map(|i| format!("waiting-{i}")).collect();
    while !pending.is_empty() {
        assert!(
            Instant::now() < earliest_retry,
            "claims {pending:?} still not bound {:?} after Garage answered again; backoff \
             alone retries the first of them {allowed:?} after",
            back.elapsed()
        );
        let mut still = Vec::new();
        for name in pending {
            let claim = s.claims.get(&name).await.unwrap();
            let bound = claim.status.as_ref().and_then(|st| st.phase) == Some(ClaimPhase::Bound);
            if !bound {
                still.push(name);
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "all {CLAIMS} claims bound {:?} after Garage answered again (probe: {probe}); backoff \
         alone would have retried the first {allowed:?} after",
        back.elapsed()
    );
}

#[tokio::test]
async fn claims_bind_promptly_once_garage_answers_its_probe() {
    claims_bind_promptly_once_garage_answers(true).await;
}

#[tokio::test]
async fn claims_bind_promptly_once_a_retried_claim_gets_through() {
    claims_bind_promptly_once_garage_answers(false).await;
}

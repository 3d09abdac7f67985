//! Leader election against a real kube-apiserver: mutual exclusion, hand-over on release, and
//! take-over after the holder stops renewing (crash or network partition).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use provisioner_runtime::leader::{LeaderElector, LeaderGuard, LeaseConfig};
use test_support::{
    ControlPlane, DEPLOY_NAMESPACE, Deployed, Identity, deployed_identity, init_tracing,
    unique_suffix,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Barrier, watch};
use tokio::time::{Instant, timeout};

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_millis(200);
/// Far beyond any expected delay; only a hang or a real bug exceeds it.
const GENEROUS: Duration = Duration::from_secs(30);

fn lease_config(lease: &str, identity: &str, lease_duration: Duration) -> LeaseConfig {
    LeaseConfig {
        namespace: DEPLOY_NAMESPACE.to_owned(),
        name: lease.to_owned(),
        identity: identity.to_owned(),
        lease_duration,
        renew_interval: RENEW,
        retry_interval: RETRY,
    }
}

/// The electors act as the provisioners are deployed (the ServiceAccount and RBAC of
/// `deploy/hostpath/`, which may use Leases only in their namespace), on a Lease of the test's
/// own; the test reads (and, as an intruder, writes) the Lease as an administrator.
async fn setup(prefix: &str) -> (Client, Identity, String) {
    init_tracing();
    let plane = ControlPlane::shared();
    let admin = plane.client().await;
    let identity = deployed_identity(plane, Deployed::HostPath).await.unwrap();
    (admin, identity, format!("{prefix}-{}", unique_suffix()))
}

async fn read_lease(client: &Client, lease: &str) -> Lease {
    Api::<Lease>::namespaced(client.clone(), DEPLOY_NAMESPACE).get(lease).await.unwrap()
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

fn transitions(lease: &Lease) -> i32 {
    lease.spec.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0)
}

/// Starts `elector.acquire()` in the background; the task yields the guard and when it was won.
fn acquire_in_background(
    elector: LeaderElector,
) -> tokio::task::JoinHandle<(LeaderGuard, Instant)> {
    tokio::spawn(async move {
        let guard = elector.acquire().await;
        (guard, Instant::now())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_electors_never_hold_the_lease_at_once() {
    let (client, identity, lease) = setup("leader-exclusive").await;
    let deployed = identity.client().await;
    const CANDIDATES: usize = 3;
    const ROUNDS: usize = 4;
    let holders = Arc::new(AtomicUsize::new(0));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    // Everyone starts at once, so they also race to create the Lease.
    let start = Arc::new(Barrier::new(CANDIDATES));

    let mut candidates = Vec::new();
    for i in 0..CANDIDATES {
        let identity = format!("candidate-{i}");
        let elector = LeaderElector::new(deployed.clone(), lease_config(&lease, &identity, LEASE));
        let (client, lease) = (client.clone(), lease.clone());
        let (holders, acquisitions, start) = (holders.clone(), acquisitions.clone(), start.clone());
        candidates.push(tokio::spawn(async move {
            start.wait().await;
            for _ in 0..ROUNDS {
                let guard = elector.acquire().await;
                let others = holders.fetch_add(1, Ordering::SeqCst);
                assert_eq!(others, 0, "{identity} acquired while another candidate held the lease");
                acquisitions.fetch_add(1, Ordering::SeqCst);
                assert_eq!(holder(&read_lease(&client, &lease).await), Some(identity.as_str()));
                // Hold long enough for standbys to poll (and be refused) several times.
                tokio::select! {
                    () = guard.lost() => panic!("{identity} lost a lease it was renewing"),
                    () = tokio::time::sleep(Duration::from_millis(700)) => {}
                }
                // Stop acting before giving the lease up, as a real leader would.
                holders.fetch_sub(1, Ordering::SeqCst);
                guard.release().await;
            }
        }));
    }
    for candidate in candidates {
        timeout(Duration::from_secs(120), candidate).await.expect("candidates finished").unwrap();
    }

    assert_eq!(acquisitions.load(Ordering::SeqCst), CANDIDATES * ROUNDS);
    let last = read_lease(&client, &lease).await;
    assert_eq!(holder(&last), None, "the last holder released the lease");
    // Created with 0, then one transition for every later acquisition.
    assert_eq!(transitions(&last), (CANDIDATES * ROUNDS - 1) as i32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_hands_the_lease_to_the_standby_at_once() {
    let (client, identity, lease) = setup("leader-release").await;
    let deployed = identity.client().await;
    // A long lease, so that a hand-over by expiry could not pass for a hand-over by release.
    let lease_duration = Duration::from_secs(8);
    let first = LeaderElector::new(deployed.clone(), lease_config(&lease, "first", lease_duration));
    let second =
        LeaderElector::new(deployed.clone(), lease_config(&lease, "second", lease_duration));

    let guard = timeout(GENEROUS, first.acquire()).await.unwrap();
    let acquired = read_lease(&client, &lease).await;
    assert_eq!(holder(&acquired), Some("first"));
    let spec = acquired.spec.as_ref().unwrap();
    assert_eq!(spec.lease_duration_seconds, Some(8));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());

    let standby = acquire_in_background(second);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!standby.is_finished(), "the standby took a lease that was held and renewed");
    let renewed = read_lease(&client, &lease).await;
    assert_eq!(holder(&renewed), Some("first"));
    assert!(
        renewed.spec.as_ref().unwrap().renew_time > spec.renew_time,
        "the holder renews in the background"
    );

    let released_at = Instant::now();
    guard.release().await;
    let (second_guard, taken_at) = timeout(GENEROUS, standby).await.unwrap().unwrap();
    let handover = taken_at - released_at;
    assert!(
        handover < Duration::from_secs(3),
        "the standby needed {handover:?} after the release; expiry would take about 7s"
    );

    let taken = read_lease(&client, &lease).await;
    assert_eq!(holder(&taken), Some("second"));
    assert_eq!(transitions(&taken), 1);
    assert!(taken.spec.as_ref().unwrap().acquire_time > spec.acquire_time);
    second_guard.release().await;
    assert_eq!(holder(&read_lease(&client, &lease).await), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_stops_renewing_is_replaced_after_expiry() {
    let (client, identity, lease) = setup("leader-crash").await;
    let deployed = identity.client().await;
    let first = LeaderElector::new(deployed.clone(), lease_config(&lease, "first", LEASE));
    let second = LeaderElector::new(deployed.clone(), lease_config(&lease, "second", LEASE));

    let guard = timeout(GENEROUS, first.acquire()).await.unwrap();
    let standby = acquire_in_background(second);
    // Longer than one lease duration: only the renewals keep the standby out.
    tokio::time::sleep(LEASE + Duration::from_millis(1500)).await;
    assert!(!standby.is_finished(), "the standby took a lease that was being renewed");

    // Dropping without release is what a crash looks like: no more renewals, holder not cleared.
    let dropped_at = Instant::now();
    drop(guard);
    let (second_guard, taken_at) = timeout(GENEROUS, standby).await.unwrap().unwrap();
    let waited = taken_at - dropped_at;
    // The last renewal was at most RENEW before the drop, so the lease ran at least LEASE - RENEW
    // longer (with a little slack for request latency).
    assert!(
        waited >= LEASE - RENEW - Duration::from_millis(300),
        "the standby took over {waited:?} after the holder stopped, before the lease expired"
    );
    assert!(waited < LEASE + Duration::from_secs(5), "take-over took {waited:?}");

    let taken = read_lease(&client, &lease).await;
    assert_eq!(holder(&taken), Some("second"));
    assert_eq!(transitions(&taken), 1);
    second_guard.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_steps_down_before_the_standby_takes_over() {
    let (client, identity, lease) = setup("leader-partition").await;
    let deployed = identity.client().await;
    let proxy = Proxy::start().await;
    let first =
        LeaderElector::new(proxy.client(&identity).await, lease_config(&lease, "first", LEASE));
    let second = LeaderElector::new(deployed.clone(), lease_config(&lease, "second", LEASE));

    let guard = timeout(GENEROUS, first.acquire()).await.unwrap();
    let standby = acquire_in_background(second);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!guard.is_lost());
    assert!(!standby.is_finished());

    let watching = tokio::spawn(async move {
        guard.lost().await;
        (guard, Instant::now())
    });
    let cut_at = Instant::now();
    proxy.cut(true);

    let (guard, lost_at) = timeout(GENEROUS, watching).await.unwrap().unwrap();
    let (second_guard, taken_at) = timeout(GENEROUS, standby).await.unwrap().unwrap();
    assert!(guard.is_lost());
    assert!(
        lost_at - cut_at <= LEASE,
        "the holder noticed only {:?} after its renewals started failing",
        lost_at - cut_at
    );
    assert!(
        lost_at < taken_at,
        "the standby took over {:?} before the old holder stepped down",
        lost_at - taken_at
    );
    assert_eq!(holder(&read_lease(&client, &lease).await), Some("second"));

    // Back online, the old holder's release must not clear the new holder's lease.
    proxy.cut(false);
    guard.release().await;
    assert_eq!(holder(&read_lease(&client, &lease).await), Some("second"));
    assert!(!second_guard.is_lost());
    second_guard.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_notices_when_another_identity_takes_the_lease() {
    let (client, identity, lease) = setup("leader-usurped").await;
    let deployed = identity.client().await;
    let elector = LeaderElector::new(deployed.clone(), lease_config(&lease, "first", LEASE));
    let guard = timeout(GENEROUS, elector.acquire()).await.unwrap();

    let leases = Api::<Lease>::namespaced(client.clone(), DEPLOY_NAMESPACE);
    let mut written = leases.get(&lease).await.unwrap();
    written.spec.as_mut().unwrap().holder_identity = Some("intruder".to_owned());
    leases.replace(&lease, &PostParams::default(), &written).await.unwrap();

    let written_at = Instant::now();
    timeout(GENEROUS, guard.lost()).await.expect("lost() resolves");
    let noticed = written_at.elapsed();
    // The next renewal (at most RENEW away) sees the new holder.
    assert!(noticed < RENEW + Duration::from_secs(2), "noticed only after {noticed:?}");
    // lost() stays resolved for later callers.
    timeout(Duration::from_millis(100), guard.lost()).await.unwrap();
    guard.release().await;
    assert_eq!(holder(&read_lease(&client, &lease).await), Some("intruder"));
}

/// A TCP forwarder to the apiserver that can simulate a network partition for one client.
struct Proxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start() -> Proxy {
        let upstream = apiserver_addr().await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, cut_rx) = watch::channel(false);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut downstream, _)) = listener.accept().await else { continue };
                if *cut_rx.borrow() {
                    // Partitioned: refuse by closing at once.
                    continue;
                }
                let mut cut_rx = cut_rx.clone();
                tokio::spawn(async move {
                    let Ok(mut up) = TcpStream::connect(upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut downstream, &mut up) => {}
                        _ = cut_rx.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Proxy { addr, cut, accept }
    }

    /// Drops every open connection and refuses new ones (`true`), or forwards again (`false`).
    fn cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }

    /// A client of `identity` whose traffic goes through this proxy.
    async fn client(&self, identity: &Identity) -> Client {
        let kubeconfig = Kubeconfig::read_from(&identity.kubeconfig).unwrap();
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        config.cluster_url = format!("https://{}", self.addr).parse().unwrap();
        Client::try_from(config).unwrap()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn admin_config() -> kube::Config {
    let kubeconfig = Kubeconfig::read_from(ControlPlane::shared().kubeconfig_path()).unwrap();
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap()
}

async fn apiserver_addr() -> SocketAddr {
    let config = admin_config().await;
    let host = config.cluster_url.host().unwrap();
    let port = config.cluster_url.port_u16().unwrap();
    tokio::net::lookup_host((host, port)).await.unwrap().next().unwrap()
}

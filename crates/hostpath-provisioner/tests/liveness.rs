//! The real binary through an apiserver outage: with leader election on and off, it keeps (or
//! takes back) the lease, watches again, and binds and deletes claims made after recovery
//! promptly, while /healthz says it is fine. Each test has a control plane of its own, since it
//! stops that apiserver.

mod harness;

use std::time::{Duration, Instant};

use bucket_api::ClaimPhase;
use harness::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use test_support::{ControlPlane, install_crds};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How soon after the apiserver is back a new claim must be Bound (and a deleted one gone).
const AFTER_RECOVERY: Duration = Duration::from_secs(10);

async fn healthz(port: u16) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

/// Polls `check` until it yields, failing after `limit`.
async fn within<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < limit, "{what} did not happen within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn outage_then_new_work(leader_elect: bool, outage: Duration) {
    let mut plane = ControlPlane::start().expect("starting a control plane of our own");
    let client = plane.client().await;
    install_crds(&client).await.unwrap();
    let env = Env::on(client.clone(), plane.kubeconfig_path(), "live").await;
    let lease_namespace = format!("--leader-election-namespace={}", env.ns);
    let elect = format!("--leader-elect={leader_elect}");
    let provisioner =
        env.start_with("node-a", &[&elect, &lease_namespace, "--leader-identity=node-a"]);
    let class = env.class(&[], "Delete").await;
    env.claim("before", &class, None).await;
    env.wait("before", ClaimPhase::Bound, "Bound").await;

    plane.stop_apiserver().unwrap();
    tokio::time::sleep(outage).await;
    // An outage is no reason to restart: the process itself is fine.
    assert_eq!(healthz(provisioner.metrics_port).await.0, 200);
    plane.start_apiserver().unwrap();

    let recovered = Instant::now();
    env.claim("after", &class, None).await;
    let claims = env.claims.clone();
    within(AFTER_RECOVERY, "the claim made after recovery to bind", || async {
        let claim = claims.get_opt("after").await.ok()??;
        (claim.status?.phase == Some(ClaimPhase::Bound)).then_some(())
    })
    .await;
    claims.delete("before", &Default::default()).await.unwrap();
    within(AFTER_RECOVERY, "the claim deleted after recovery to go", || async {
        claims.get_opt("before").await.ok()?.is_none().then_some(())
    })
    .await;
    eprintln!("bound and deleted {:?} after the apiserver was back", recovered.elapsed());

    if leader_elect {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &env.ns);
        let lease = leases.list(&Default::default()).await.unwrap().items.remove(0);
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("node-a"), "the lease is ours again");
        let renewed = spec.renew_time.unwrap().0;
        let age = jiff::Timestamp::now().duration_since(renewed);
        assert!(age < jiff::SignedDuration::from_secs(15), "the lease is renewed again: {age:?}");
    }
    let (status, body) = healthz(provisioner.metrics_port).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
}

#[tokio::test]
async fn with_leader_election_the_lease_and_the_work_come_back_after_an_outage() {
    // Longer than the 15 s lease: leadership is lost on the way.
    outage_then_new_work(true, Duration::from_secs(20)).await;
}

#[tokio::test]
async fn without_leader_election_watches_come_back_promptly_after_an_outage() {
    outage_then_new_work(false, Duration::from_secs(30)).await;
}

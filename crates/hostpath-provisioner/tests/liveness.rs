//! The real binary, as the Deployment runs it (the ServiceAccount token and RBAC of
//! `deploy/hostpath/`), through apiserver restarts and RBAC taken away: with leader election on
//! and off it keeps (or takes back) the lease, watches again, and binds and deletes claims made
//! after recovery promptly, without a restart, while /healthz tells the truth. Each test has a
//! control plane of its own, since it stops that apiserver or changes its RBAC. Flags out of
//! their range stop it at start.

mod harness;

use std::time::{Duration, Instant};

use bucket_api::ClaimPhase;
use bucket_provisioner::runtime::lease_name;
use harness::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams};
use test_support::{ControlPlane, DEPLOY_NAMESPACE, Deployed, install_rbac};
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

/// Creates claim `name` and waits (at most [`AFTER_RECOVERY`]) until it is Bound.
async fn binds_promptly(env: &Env, class: &str, name: &str) {
    env.claim(name, class, None).await;
    let claims = env.claims.clone();
    within(AFTER_RECOVERY, &format!("claim {name} to bind"), || async {
        let claim = claims.get_opt(name).await.ok()??;
        (claim.status?.phase == Some(ClaimPhase::Bound)).then_some(())
    })
    .await;
}

/// Deletes claim `name` and waits (at most [`AFTER_RECOVERY`]) until it is gone.
async fn goes_promptly(env: &Env, name: &str) {
    env.claims.delete(name, &DeleteParams::default()).await.unwrap();
    let claims = env.claims.clone();
    within(AFTER_RECOVERY, &format!("claim {name} to go"), || async {
        claims.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// Apiserver outages of 3, 10, 30 and 60 s in a row; after each the same process binds a new
/// claim and lets a deleted one go within [`AFTER_RECOVERY`].
async fn restarts_in_a_row(leader_elect: bool) {
    let mut plane = ControlPlane::start().expect("starting a control plane of our own");
    let client = plane.client().await;
    let env = Env::on(&plane, "live").await;
    let lease_namespace = format!("--leader-election-namespace={DEPLOY_NAMESPACE}");
    let elect = format!("--leader-elect={leader_elect}");
    let mut provisioner =
        env.start_with("node-a", &[&elect, &lease_namespace, "--leader-identity=node-a"]);
    let pid = provisioner.pid();
    let class = env.class(&[], "Delete").await;
    binds_promptly(&env, &class, "before-0").await;

    for (round, outage) in [3, 10, 30, 60].into_iter().enumerate() {
        plane.stop_apiserver().unwrap();
        tokio::time::sleep(Duration::from_secs(outage)).await;
        // An outage is no reason to restart: the process itself is fine.
        let (status, body) = healthz(provisioner.metrics_port).await;
        assert_eq!((status, body.as_str()), (200, "ok"), "during a {outage}s outage");
        plane.start_apiserver().unwrap();

        let recovered = Instant::now();
        binds_promptly(&env, &class, &format!("before-{}", round + 1)).await;
        goes_promptly(&env, &format!("before-{round}")).await;
        eprintln!("after a {outage}s outage: bound and deleted within {:?}", recovered.elapsed());
        assert!(provisioner.is_running(), "the process is still the one started");
        assert_eq!(provisioner.pid(), pid);
        let (status, body) = healthz(provisioner.metrics_port).await;
        assert_eq!((status, body.as_str()), (200, "ok"), "after a {outage}s outage");
    }

    if leader_elect {
        let leases: Api<Lease> = Api::namespaced(client.clone(), DEPLOY_NAMESPACE);
        let lease = leases.get(&lease_name(&env.name)).await.unwrap();
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("node-a"), "the lease is ours again");
        let renewed = spec.renew_time.unwrap().0;
        let age = jiff::Timestamp::now().duration_since(renewed);
        assert!(age < jiff::SignedDuration::from_secs(15), "the lease is renewed again: {age:?}");
    }
}

#[tokio::test]
async fn with_leader_election_restarts_of_3_to_60_seconds_are_outlived() {
    restarts_in_a_row(true).await;
}

#[tokio::test]
async fn without_leader_election_restarts_of_3_to_60_seconds_are_outlived() {
    restarts_in_a_row(false).await;
}

/// The RBAC bindings of `deploy/hostpath/` deleted for 30 s: `/healthz` fails naming what is
/// refused; re-applied, the same process heals by itself.
#[tokio::test]
async fn rbac_taken_away_fails_healthz_and_given_back_heals_without_a_restart() {
    let plane = ControlPlane::start().expect("starting a control plane of our own");
    let admin = plane.client().await;
    let env = Env::on(&plane, "rbac").await;
    let lease_namespace = format!("--leader-election-namespace={DEPLOY_NAMESPACE}");
    let mut provisioner = env.start_with("node-a", &["--leader-elect=true", &lease_namespace]);
    let pid = provisioner.pid();
    let class = env.class(&[], "Delete").await;
    binds_promptly(&env, &class, "before").await;

    let account = Deployed::HostPath.service_account();
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), DEPLOY_NAMESPACE);
    cluster_bindings.delete(account, &DeleteParams::default()).await.unwrap();
    bindings.delete(&format!("{account}-leader"), &DeleteParams::default()).await.unwrap();
    let taken = Instant::now();

    let port = provisioner.metrics_port;
    let problem = within(Duration::from_secs(30), "/healthz to fail", || async {
        let (status, body) = healthz(port).await;
        (status == 503).then_some(body)
    })
    .await;
    eprintln!("/healthz failed {:?} after the RBAC went: {problem}", taken.elapsed());
    assert!(problem.contains("403 Forbidden"), "{problem}");
    assert!(problem.contains("cannot"), "the refused permission is named: {problem}");
    assert!(problem.contains(&Deployed::HostPath.user()), "{problem}");
    tokio::time::sleep(Duration::from_secs(30).saturating_sub(taken.elapsed())).await;

    install_rbac(&admin, Deployed::HostPath).await.unwrap();
    let given = Instant::now();
    within(Duration::from_secs(15), "/healthz to pass again", || async {
        (healthz(port).await.0 == 200).then_some(())
    })
    .await;
    binds_promptly(&env, &class, "after").await;
    goes_promptly(&env, "before").await;
    eprintln!("healed {:?} after the RBAC came back", given.elapsed());
    assert!(provisioner.is_running());
    assert_eq!(provisioner.pid(), pid, "healed without a restart");
}

/// A duration flag no Duration can hold stops the process at start with a message naming the
/// flag and its range, before anything is contacted: never a panic once leading.
#[test]
fn a_flag_out_of_its_range_is_refused_at_start() {
    for (flag, value, range) in [
        ("--leader-lease-seconds", "18446744073709551615", "2..=3600"),
        ("--usage-interval-seconds", "18446744073709551615", "1..=86400"),
        ("--api-timeout-seconds", "0", "1..=3600"),
    ] {
        // A root of its own: a binary that took the value would open its root before failing.
        let root = tempfile::tempdir().unwrap();
        let root_flag = format!("--root={}", root.path().display());
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"))
            .args([flag, value, "--kubeconfig=/nonexistent", &root_flag])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag) && stderr.contains(range), "{flag} {value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

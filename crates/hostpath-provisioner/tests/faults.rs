//! The real binary, as the Deployment runs it (the ServiceAccount token and RBAC of
//! `deploy/hostpath/`, leader election on), behind a proxy to the apiserver that turns dishonest
//! for one kind of request at a time: every error status the apiserver may answer, a reset
//! connection, or no answer at all. After each fault, once the proxy is honest again, a claim
//! made during the fault binds and one deleted during it goes within 10 s, every time, and the
//! process was never restarted. Each test has a control plane of its own.
//!
//! Watches meet their faults while the claims' streaming lists end late, as a busy apiserver's
//! may: a relist after a fault then delivers its claims a while before the cache may hold them,
//! and after the other kinds' relists.
//!
//! The kinds are those the provisioner sends: Lease reads and writes, watches, the patches,
//! creates and deletes of its reconciles, and the reads (GET) and replacements (PUT) of single
//! objects. Every round also asks for a new key for one claim, since a rotation reads the
//! claim's Secret and replaces it; that claim must have its new key once the proxy is honest
//! again. The provisioner never lists (its watches list by streaming); the first test checks
//! that no list request is ever made.

mod harness;

use std::time::{Duration, Instant};

use bucket_api::ClaimPhase;
use harness::*;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use test_support::{
    ControlPlane, DEPLOY_NAMESPACE, Deployed, Fault, FaultProxy, RequestKind, deployed_identity,
};

/// How soon after the proxy is honest again the work done during a fault must be done.
const AFTER_RECOVERY: Duration = Duration::from_secs(10);

/// How long a fault lasts: long enough for the provisioner to meet it (a Lease is renewed every
/// 5 s), short enough to stay below /healthz's patience for refusals.
fn window(kind: RequestKind) -> Duration {
    if kind == RequestKind::Lease { Duration::from_secs(7) } else { Duration::from_secs(2) }
}

/// How late the end of each streaming list of claims comes while watches meet their faults.
const LATE_LIST_END: Duration = Duration::from_secs(2);

/// Runs every fault on each of `kinds` in turn; answers the proxy for checks of its own.
async fn each_fault_for(kinds: &[RequestKind]) -> FaultProxy {
    let plane = ControlPlane::start().expect("starting a control plane of our own");
    let mut env = Env::on(&plane, "faults").await;
    let identity = deployed_identity(&plane, Deployed::HostPath).await.unwrap();
    let proxy = FaultProxy::start(&plane).await.unwrap();
    env.kubeconfig = proxy.kubeconfig(&plane, &identity.token).unwrap();
    let lease_namespace = format!("--leader-election-namespace={DEPLOY_NAMESPACE}");
    let mut provisioner = env.start_with("node-a", &["--leader-elect=true", &lease_namespace]);
    let pid = provisioner.pid();
    let class = env.class(&[], "Delete").await;
    let mut previous = "claim-0".to_owned();
    env.claim(&previous, &class, None).await;
    env.wait(&previous, ClaimPhase::Bound, "Bound").await;
    let rotating_class = env.class(&[("rotationOverlap", "1s")], "Delete").await;
    env.claim("rotating", &rotating_class, None).await;
    env.wait("rotating", ClaimPhase::Bound, "Bound").await;
    if kinds.contains(&RequestKind::Watch) {
        proxy.delay_list_ends("objectbucketclaims", LATE_LIST_END);
    }

    for (round, (kind, fault)) in kinds.iter().flat_map(|k| Fault::ALL.map(|f| (*k, f))).enumerate()
    {
        let seen = proxy.seen(kind);
        proxy.inject(kind, Some(fault));
        // Work for the provisioner while the fault lasts: a claim to bind, one to delete, a key
        // to replace.
        let current = format!("claim-{}", round + 1);
        env.claim(&current, &class, None).await;
        env.claims.delete(&previous, &DeleteParams::default()).await.unwrap();
        let key_before = rotating_key(&env).await;
        // Whole seconds, as the status has it.
        let asked_at = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap();
        let rotate = json!({ "metadata": { "annotations": {
            "objectbucket.io/rotate-credentials": format!("round-{round}") } } });
        let patch = Patch::Merge(&rotate);
        env.claims.patch("rotating", &PatchParams::default(), &patch).await.unwrap();
        tokio::time::sleep(window(kind)).await;
        proxy.honest();
        let met = proxy.seen(kind) - seen;
        assert!(met > 0, "no {kind:?} request met {fault:?}: the round proves nothing");

        let honest = Instant::now();
        let claims = env.claims.clone();
        let (bound, gone) = (current.clone(), previous.clone());
        let recovered = tokio::time::timeout(AFTER_RECOVERY, async {
            loop {
                let bound = claims.get_opt(&bound).await.ok().flatten().and_then(|c| c.status);
                let gone = claims.get_opt(&gone).await.is_ok_and(|c| c.is_none());
                // A key issued since the request, the previous one retired too (so that the next
                // round's request starts at once).
                let credentials = claims.get_opt("rotating").await.ok().flatten();
                let credentials = credentials.and_then(|c| c.status?.credentials);
                let rotated = rotating_key(&env).await != key_before
                    && credentials.is_some_and(|c| {
                        c.previous_expires_at.is_none()
                            && c.created_at.is_some_and(|t| t.0 >= asked_at)
                    });
                if gone && rotated && bound.and_then(|s| s.phase) == Some(ClaimPhase::Bound) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        assert!(
            recovered.is_ok(),
            "{kind:?} requests answered {fault:?} ({met} met it): the work was not done within \
             {AFTER_RECOVERY:?} of the proxy turning honest"
        );
        eprintln!("{kind:?} {fault:?}: {met} requests met it; recovered in {:?}", honest.elapsed());
        assert!(provisioner.is_running(), "the process is still the one started");
        assert_eq!(provisioner.pid(), pid);
        previous = current;
    }
    proxy
}

/// The access key id in the Secret of the claim whose key is replaced every round.
async fn rotating_key(env: &Env) -> Option<Vec<u8>> {
    let secret = env.home().secret("rotating").await?;
    Some(secret.data?.get("AWS_ACCESS_KEY_ID")?.0.clone())
}

#[tokio::test]
async fn every_fault_on_lease_and_delete_requests_is_outlived() {
    let proxy = each_fault_for(&[RequestKind::Lease, RequestKind::Delete]).await;
    assert_eq!(proxy.seen(RequestKind::List), 0, "the provisioner lists by streaming watches");
}

#[tokio::test]
async fn every_fault_on_watch_requests_is_outlived() {
    each_fault_for(&[RequestKind::Watch]).await;
}

#[tokio::test]
async fn every_fault_on_patch_and_create_requests_is_outlived() {
    each_fault_for(&[RequestKind::Patch, RequestKind::Create]).await;
}

#[tokio::test]
async fn every_fault_on_get_and_update_requests_is_outlived() {
    each_fault_for(&[RequestKind::Get, RequestKind::Update]).await;
}

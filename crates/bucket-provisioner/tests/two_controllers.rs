//! Two replicas of a provisioner on one Lease: only the leader acts, and a standby takes over when
//! the leader shuts down.

use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use bucket_provisioner::runtime::{ControllerArgs, RunError, run};
mod common;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use std::path::Path;

use test_support::{
    ControlPlane, DEPLOY_NAMESPACE, Deployed, client_with_crds, deployed_identity, eventually,
    test_namespace, unique_suffix,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct Replica {
    backend: MemoryBackend,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), RunError>>,
}

fn start_replica(provisioner: &str, kubeconfig: &Path, lease: &str, identity: &str) -> Replica {
    let args = ControllerArgs {
        kubeconfig: Some(kubeconfig.to_owned()),
        metrics_address: "127.0.0.1:0".parse().unwrap(),
        workers: 2,
        leader_elect: true,
        leader_election_namespace: Some(DEPLOY_NAMESPACE.into()),
        leader_election_name: Some(lease.into()),
        leader_identity: Some(identity.into()),
        leader_lease_seconds: 3,
        usage_interval_seconds: 60,
        log_format: Default::default(),
        api_timeout_seconds: 5,
    };
    let backend = MemoryBackend::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let provisioner = provisioner.to_string();
    let replica_backend = backend.clone();
    let task = tokio::spawn(async move {
        let stop = async move {
            let _ = stopped.await;
        };
        run(replica_backend, &provisioner, &args, stop, Vec::new()).await
    });
    Replica { backend, stop, task }
}

async fn holder(leases: &Api<Lease>, lease: &str) -> Option<String> {
    leases.get_opt(lease).await.ok()??.spec?.holder_identity
}

#[tokio::test]
async fn only_the_leader_acts_and_a_standby_takes_over() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "lease").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let leases: Api<Lease> = Api::namespaced(client.clone(), DEPLOY_NAMESPACE);
    let provisioner = format!("lease.objectbucket.io/{}", unique_suffix());
    let lease = format!("bucket-leader-{}", unique_suffix());
    // The replicas act as deployed: the ServiceAccount and RBAC of `deploy/hostpath/`.
    let identity = deployed_identity(ControlPlane::shared(), Deployed::HostPath).await.unwrap();
    let kubeconfig = identity.kubeconfig.as_path();
    let class = storage_class(&client, &provisioner, &[], None).await;
    let spec = |bucket: &str| ObjectBucketClaimSpec {
        bucket_name: Some(bucket.into()),
        ..claim_spec(&class)
    };

    let first = start_replica(&provisioner, kubeconfig, &lease, "replica-a");
    eventually("replica-a to lead", || async {
        (holder(&leases, &lease).await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let second = start_replica(&provisioner, kubeconfig, &lease, "replica-b");

    for bucket in ["lead-one", "lead-two", "lead-three"] {
        create_claim(&claims, bucket, spec(bucket)).await;
    }
    for bucket in ["lead-one", "lead-two", "lead-three"] {
        wait_for(&claims, bucket, ClaimPhase::Bound, "Bound").await;
    }
    assert_eq!(first.backend.calls(Op::Provision), 3);
    assert!(second.backend.all_calls().is_empty(), "the standby never acts");
    assert_eq!(holder(&leases, &lease).await.as_deref(), Some("replica-a"));

    // Graceful shutdown releases the Lease, and the standby takes over.
    first.stop.send(()).unwrap();
    first.task.await.unwrap().expect("a graceful shutdown is not an error");
    eventually("replica-b to lead", || async {
        (holder(&leases, &lease).await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    create_claim(&claims, "after", spec("after-failover")).await;
    wait_for(&claims, "after", ClaimPhase::Bound, "Bound").await;
    assert_eq!(second.backend.calls(Op::Provision), 1);
    assert_eq!(first.backend.calls(Op::Provision), 3);

    second.stop.send(()).unwrap();
    second.task.await.unwrap().unwrap();
    assert_eq!(holder(&leases, &lease).await, None, "a graceful shutdown clears the holder");
}

//! A claim's bucket on S3 + IAM (moto, IAM enforced) with each request of its whole life cut in
//! turn (provisioning, a rotation of its key, the old key retired, deletion): the request reaches
//! moto and takes effect, its answer is lost. Whatever the SDK's own retry or the controller's
//! repeat of the call then meets, the claim's user holds exactly the keys handed out, and
//! deletion leaves nothing.

mod common;

use std::sync::Arc;

use bucket_provisioner::{BackendError, Provisioner};
use common::cut_proxy::CutProxy;
use common::moto::Moto;
use common::{FixedOwner, claim, object_bucket, options, read_write};
use s3_provisioner::{S3Provisioner, iam};

/// The call, repeated once if it failed transiently, as the controller's requeue repeats it. A
/// permanent failure is not repeated (the claim waits for a person), so a lost answer must
/// never turn into one.
async fn twice<T, F, Fut>(what: &str, call: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    match call().await {
        Ok(answer) => answer,
        Err(first) if first.is_permanent() => panic!("{what} failed permanently: {first}"),
        Err(_) => call().await.unwrap_or_else(|e| panic!("{what} repeated: {e}")),
    }
}

/// Provision, use and delete one claim's bucket, checked; answers how many requests reached
/// the proxy.
async fn whole_life(moto: &Moto, proxy: &CutProxy, backend: &S3Provisioner, label: &str) -> u64 {
    let start = proxy.requests();
    let claim = claim(&format!("claim-fault-{}", common::suffix()));
    let parameters = [
        ("endpoint", proxy.endpoint.as_str()),
        ("forcePathStyle", "true"),
        ("secretName", "owner"),
        ("secretNamespace", "infra"),
    ];
    let options = options(&claim, &parameters);
    let provisioned = twice("provision", || backend.provision(&options)).await;
    let user = iam::user_name(&options.user_id);
    let keys = moto.access_keys(&user).await;
    let handed = provisioned.credentials.access_key_id.as_str();
    assert_eq!(keys, [handed], "{label}: the claim's user holds one key, the one handed out");
    read_write(&moto.s3(&provisioned.credentials), &options.bucket_name).await;
    let record = object_bucket(&claim, Some(&provisioned));
    // A rotation: a second key beside the one handed out, then the first one retired.
    let rotated = twice("rotate", || backend.rotate(&record, handed)).await;
    let mut keys = moto.access_keys(&user).await;
    keys.sort();
    let mut both = [handed, rotated.access_key_id.as_str()];
    both.sort();
    assert_eq!(keys, both, "{label}: the user holds the kept key and the new one, no other");
    twice("retire", || backend.retire_key(&record, handed)).await;
    let keys = moto.access_keys(&user).await;
    assert_eq!(keys, [rotated.access_key_id.as_str()], "{label}: only the new key is left");
    read_write(&moto.s3(&rotated), &options.bucket_name).await;
    twice("delete", || backend.delete(&record)).await;
    assert!(moto.provisioned_users().await.is_empty(), "{label}: no user is left");
    assert!(!moto.bucket_exists(&options.bucket_name).await, "{label}: the bucket is gone");
    proxy.requests() - start
}

#[tokio::test]
async fn each_request_of_a_claims_life_cut_in_turn_leaves_one_key_and_nothing_behind() {
    let moto = Moto::start().await;
    let proxy = CutProxy::start(moto.endpoint.trim_start_matches("http://").to_owned()).await;
    let backend = S3Provisioner::new(Arc::new(FixedOwner(moto.admin.clone())));
    let requests = whole_life(&moto, &proxy, &backend, "no fault").await;
    eprintln!("a claim's whole life takes {requests} requests; each is cut in turn");
    assert!(requests > 5, "the calls went through the proxy: {requests}");
    for n in 1..=requests {
        proxy.cut_in(n);
        whole_life(&moto, &proxy, &backend, &format!("request {n} cut")).await;
        assert!(proxy.was_cut(), "request {n} of {requests} was cut");
    }
}

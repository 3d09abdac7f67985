//! The COSI front's calls on S3 + IAM (moto, IAM enforced) with each request of a whole
//! create, grant, revoke, delete cut in turn: the request reaches moto and takes effect, but its
//! answer is lost. Whatever the SDK's own retry or the sidecar's repeat of the call then meets,
//! the call finishes, the access holds exactly one key that works, and nothing is left.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bucket_provisioner::bucket::standalone::{
    KeyBucket, KeyRequest, NewBucket, Quotas, cosi_account_id, cosi_bucket_owner,
};
use bucket_provisioner::{AccessMode, BackendError, Provisioner};
use common::cut_proxy::CutProxy;
use common::moto::Moto;
use common::{FixedOwner, read_write};
use s3_provisioner::backend::standalone::COSI_OWNER_ACTIONS;
use s3_provisioner::owner::OWNER_ACTIONS;
use s3_provisioner::{S3Provisioner, iam};

/// The backend as the driver runs it, its store reached through `proxy`.
async fn backend(moto: &Moto, proxy: &CutProxy) -> S3Provisioner {
    let actions: Vec<&str> = OWNER_ACTIONS.iter().chain(&COSI_OWNER_ACTIONS).copied().collect();
    let owner = moto.user_allowed("cosi-fault-owner", &actions).await;
    let parameters = common::store_parameters(&proxy.endpoint);
    S3Provisioner::new(Arc::new(FixedOwner(owner))).with_standalone(&parameters).unwrap()
}

/// The call, repeated once if it failed (as the sidecar repeats it).
async fn twice<T, F, Fut>(what: &str, call: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    match call().await {
        Ok(answer) => answer,
        Err(_) => call().await.unwrap_or_else(|e| panic!("{what} repeated: {e}")),
    }
}

/// Create, grant, revoke, delete of a new bucket and access, each checked; answers how many
/// requests reached the proxy.
async fn whole_life(moto: &Moto, proxy: &CutProxy, backend: &S3Provisioner, label: &str) -> u64 {
    let start = proxy.requests();
    let name = format!("fault-{}", common::suffix());
    let bucket = NewBucket {
        bucket_name: name.clone(),
        owner_id: cosi_bucket_owner(&name, &BTreeMap::new()),
        parameters: BTreeMap::new(),
        quotas: Quotas::default(),
    };
    twice("create", || backend.create_bucket(&bucket)).await;
    let request = KeyRequest {
        owner_id: cosi_account_id(&format!("ba-{}", common::suffix())),
        buckets: vec![KeyBucket { bucket_name: name.clone(), access_mode: AccessMode::ReadWrite }],
        parameters: BTreeMap::new(),
        quotas: Quotas::default(),
        web_identity: None,
    };
    let issued = twice("grant", || backend.issue_key(&request)).await;
    let user = iam::user_name(&request.owner_id);
    // Keys become usable in moto at once; a repeated grant would answer a new one.
    read_write(&moto.s3(&issued.credentials), &name).await;
    let keys = moto.access_keys(&user).await;
    assert_eq!(keys, [issued.credentials.access_key_id.as_str()], "{label}: one key per access");
    twice("revoke", || backend.revoke_key(&request.owner_id)).await;
    assert!(moto.access_keys(&user).await.is_empty(), "{label}: the key is gone");
    let admin_iam = moto.iam(&moto.admin);
    assert!(admin_iam.get_user().user_name(&user).send().await.is_err(), "{label}: user gone");
    twice("delete", || backend.delete_bucket(&name, &bucket.owner_id)).await;
    let admin_s3 = moto.s3(&moto.admin);
    let left = admin_s3.head_bucket().bucket(&name).send().await;
    assert!(left.is_err(), "{label}: the bucket is gone");
    proxy.requests() - start
}

#[tokio::test]
async fn each_request_of_a_whole_life_cut_in_turn_leaves_one_key_and_nothing_behind() {
    let moto = Moto::start().await;
    let upstream = moto.endpoint.trim_start_matches("http://").to_owned();
    let proxy = CutProxy::start(upstream).await;
    let backend = backend(&moto, &proxy).await;
    let requests = whole_life(&moto, &proxy, &backend, "no fault").await;
    eprintln!("a whole life takes {requests} requests; each is cut in turn");
    assert!(requests > 5, "the calls went through the proxy: {requests}");
    for n in 1..=requests {
        proxy.cut_in(n);
        whole_life(&moto, &proxy, &backend, &format!("request {n} cut")).await;
        assert!(proxy.was_cut(), "request {n} of {requests} was cut");
    }
}

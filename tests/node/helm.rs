//! The Helm chart on a real node, as the book's Helm chapter tells an operator to use it:
//! `helm install` with the defaults (only the image named), a claim that binds and a consumer pod
//! that uses it; `helm upgrade` changing a value keeps the claim Bound and its data;
//! `helm uninstall` removes the provisioner and leaves claims, buckets, their data and the CRDs.
//!
//! A test binary of its own, so its node (and the default root) is its alone. Run by `make e2e`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use node_tests::{
    Node, consumer_pod, helm, image_values, run_to_completion, s3_client, wait_rollout,
};
use test_support::eventually;

const NS: &str = "bucket-provisioner";
const RELEASE: &str = "buckets";
const DEPLOYMENT: &str = "hostpath-bucket-provisioner";
const ROOT: &str = "/var/lib/bucket-provisioner";
const APP: &str = "helm-app";

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

async fn wait_phase(claims: &Api<ObjectBucketClaim>, name: &str, phase: ClaimPhase) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let claim = claims.get_opt(name).await.ok().flatten();
        let status = claim.and_then(|c| c.status);
        if status.as_ref().and_then(|s| s.phase) == Some(phase) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "claim {name} not {phase:?}: {status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn provisioner_pods(client: &Client) -> Vec<String> {
    wait_rollout(client, NS, DEPLOYMENT).await.unwrap()
}

#[tokio::test]
async fn helm_install_upgrade_and_uninstall_keep_claims_and_data() {
    let node = Node::shared();
    let client = node.client().await;
    let chart = repo("charts/bucket-provisioner");
    let chart = chart.to_str().unwrap();
    let image = image_values(node);

    // 1. Install: the CRDs from the chart's crds/, the hostPath provisioner, its classes.
    helm(
        node,
        &["install", RELEASE, chart, "-n", NS, "--create-namespace", "--set", &image, "--wait"],
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt("objectbucketclaims.objectbucket.io").await.unwrap().is_some());
    let first_pods = provisioner_pods(&client).await;
    assert_eq!(first_pods.len(), 1, "{first_pods:?}");

    // 2. A claim binds and a consumer pod uses it.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta { name: Some(APP.into()), ..Default::default() },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &namespace).await.unwrap();
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), APP);
    let claim = ObjectBucketClaim::new(
        "photos",
        ObjectBucketClaimSpec {
            storage_class_name: "hostpath-bucket".into(),
            generate_bucket_name: Some("photos".into()),
            ..Default::default()
        },
    );
    claims.create(&PostParams::default(), &claim).await.unwrap();
    wait_phase(&claims, "photos", ClaimPhase::Bound).await;
    let consumer = consumer_pod("photos-consumer", &node.images().consumer, "photos", &[], &[]);
    let first = run_to_completion(&client, APP, &consumer).await.unwrap();
    println!("{}", first.logs);
    assert_eq!(first.phase, "Succeeded", "{}", first.logs);

    // Data of its own, written from this machine with the claim's keys through the Service.
    let secret = Api::<Secret>::namespaced(client.clone(), APP).get("photos").await.unwrap();
    let key = |name: &str| {
        String::from_utf8(secret.data.as_ref().unwrap()[name].0.clone()).expect("a UTF-8 key")
    };
    let service = Api::<Service>::namespaced(client.clone(), NS).get("hostpath-s3").await.unwrap();
    let endpoint = format!("http://{}:9000", service.spec.unwrap().cluster_ip.unwrap());
    let s3 = s3_client(&endpoint, &key("AWS_ACCESS_KEY_ID"), &key("AWS_SECRET_ACCESS_KEY"));
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), APP).get("photos").await.unwrap();
    let bucket = config_map.data.unwrap()["BUCKET_NAME"].clone();
    let kept = format!("written before the upgrade, {}", test_support::unique_suffix());
    eventually("the Service to pass the upload on", || async {
        let body = ByteStream::from(kept.clone().into_bytes());
        s3.put_object().bucket(&bucket).key("kept.txt").body(body).send().await.ok()
    })
    .await;

    // 3. An upgrade that changes a value replaces the pod; the claim stays Bound, data stays.
    helm(
        node,
        &[
            "upgrade",
            RELEASE,
            chart,
            "-n",
            NS,
            "--reuse-values",
            "--set",
            "hostpath.logLevel=debug",
            "--wait",
        ],
    );
    let deployment =
        Api::<Deployment>::namespaced(client.clone(), NS).get(DEPLOYMENT).await.unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let log_level = container.env.iter().flatten().find(|e| e.name == "RUST_LOG");
    assert_eq!(
        log_level.and_then(|e| e.value.as_deref()),
        Some("debug"),
        "the value reached the pod"
    );
    let second_pods = provisioner_pods(&client).await;
    assert_eq!(second_pods.len(), 1);
    assert_ne!(first_pods, second_pods, "the changed value rolled the pod");
    wait_phase(&claims, "photos", ClaimPhase::Bound).await;
    let reader =
        consumer_pod("photos-after-upgrade", &node.images().consumer, "photos", &["kept.txt"], &[]);
    let after = run_to_completion(&client, APP, &reader).await.unwrap();
    println!("{}", after.logs);
    assert_eq!(after.phase, "Succeeded", "{}", after.logs);
    assert!(
        after.logs.contains(&format!("read s3://{bucket}/kept.txt: {kept:?}")),
        "{}",
        after.logs
    );

    // 4. Uninstall removes what the chart made and nothing else: claims, their ObjectBuckets,
    // the buckets' data and the CRDs stay (the book's Helm chapter, "Uninstall").
    helm(node, &["uninstall", RELEASE, "-n", NS, "--wait"]);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    assert!(deployments.get_opt(DEPLOYMENT).await.unwrap().is_none());
    let classes: Api<StorageClass> = Api::all(client.clone());
    assert!(classes.get_opt("hostpath-bucket").await.unwrap().is_none());
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    eventually("the provisioner pods to go", || async {
        let selector = format!("app.kubernetes.io/name={DEPLOYMENT}");
        pods.list(&ListParams::default().labels(&selector))
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    let claim = claims.get("photos").await.unwrap();
    assert_eq!(claim.status.and_then(|s| s.phase), Some(ClaimPhase::Bound));
    let object_bucket = claim.spec.object_bucket_name.expect("the claim names its ObjectBucket");
    let buckets: Api<ObjectBucket> = Api::all(client.clone());
    assert!(buckets.get_opt(&object_bucket).await.unwrap().is_some(), "{object_bucket} stays");
    assert!(crds.get_opt("objectbuckets.objectbucket.io").await.unwrap().is_some());
    let on_disk = Path::new(ROOT).join("buckets").join(&bucket).join("kept.txt");
    assert!(on_disk.is_file(), "{} stays on the node", on_disk.display());
    println!(
        "helm: installed, claim Bound and used, upgraded (pod {} -> {}), data kept, uninstalled \
         with claim, ObjectBucket {object_bucket}, bucket data and CRDs left",
        first_pods[0], second_pods[0]
    );
}

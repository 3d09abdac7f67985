//! The provisioners as a user runs them: the image built from the `Dockerfile`, `crds/` and
//! `deploy/` applied to a cluster with a real node, and pods consuming their claims through
//! nothing but `envFrom` of the claim's Secret and ConfigMap, or a PersistentVolumeClaim.
//!
//! Run by `make e2e` (root; it builds the node and the images first). The consumer pods' output
//! is printed, so `make e2e` shows what an application on the cluster sees.

use std::net::Ipv4Addr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use aws_sdk_s3::error::DisplayErrorContext;
use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service, ServicePort,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, LogParams, ObjectMeta, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use node_tests::{
    Finished, Moto, Node, consumer_pod, is_split_endpoint, pod_get, pod_processes, pod_ready,
    run_to_completion, s3_client, set_images, wait_rollout,
};
use test_support::garage::GarageCluster;
use test_support::{Apply, apply_manifests, apply_objects, eventually, read_manifests};

const NS: &str = "bucket-provisioner";
const HOSTPATH: &str = "hostpath-bucket-provisioner";
const S3: &str = "s3-bucket-provisioner";
const HOSTPATH_ROOT: &str = "/var/lib/bucket-provisioner";

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// `kubectl apply -f crds/`, then wait until the API serves them.
async fn apply_crds(client: &Client) {
    apply_manifests(client, &repo("crds"), Apply::ForReal).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in ["objectbucketclaims.objectbucket.io", "objectbuckets.objectbucket.io"] {
        let established = await_condition(crds.clone(), crd, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(60), established).await.unwrap().unwrap();
    }
}

/// The objects of a manifest directory with the image references pointed at the node's images,
/// and `edit` applied to each.
fn manifests(
    dir: &str,
    node: &Node,
    mut edit: impl FnMut(&mut DynamicObject),
) -> Vec<(PathBuf, DynamicObject)> {
    let mut objects = read_manifests(&repo(dir)).unwrap();
    for (_, object) in &mut objects {
        set_images(object, node.images()).unwrap();
        edit(object);
    }
    objects
}

fn kind(object: &DynamicObject) -> &str {
    object.types.as_ref().map(|t| t.kind.as_str()).unwrap_or_default()
}

/// Waits for claim `name` to be Bound; on time-out, says where it is and what the provisioner
/// pods (of Deployment `provisioner`) logged.
async fn wait_bound(
    client: &Client,
    claims: &Api<ObjectBucketClaim>,
    name: &str,
    provisioner: &str,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let claim = claims.get_opt(name).await.ok().flatten();
        let status = claim.as_ref().and_then(|c| c.status.clone());
        if status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
            let selector = format!("app.kubernetes.io/name={provisioner}");
            let mut logs = String::new();
            for pod in pods.list(&ListParams::default().labels(&selector)).await.unwrap() {
                for container in pod.spec.iter().flat_map(|s| &s.containers) {
                    let params = LogParams {
                        tail_lines: Some(30),
                        container: Some(container.name.clone()),
                        ..Default::default()
                    };
                    let tail = pods.logs(&pod.name_any(), &params).await.unwrap_or_default();
                    logs.push_str(&format!(
                        "--- {} {} ---\n{tail}\n",
                        pod.name_any(),
                        container.name
                    ));
                }
            }
            panic!("claim {name} not Bound within 90s: {status:?}\n{logs}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn delete_claim(claims: &Api<ObjectBucketClaim>, name: &str) {
    claims.delete(name, &DeleteParams::default()).await.unwrap();
    eventually(&format!("claim {name} to be gone"), || async {
        claims.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

async fn bucket_of(client: &Client, ns: &str, claim: &str) -> String {
    let config = Api::<ConfigMap>::namespaced(client.clone(), ns).get(claim).await.unwrap();
    config.data.unwrap()["BUCKET_NAME"].clone()
}

/// Runs a consumer pod and prints what it printed.
async fn consume(
    node: &Node,
    client: &Client,
    ns: &str,
    pod: &str,
    claim: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Finished {
    let spec = consumer_pod(pod, &node.images().consumer, claim, args, env);
    let finished = run_to_completion(client, ns, &spec)
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n--- kubelet ---\n{}", node.log_tail("kubelet", 40)));
    println!("--- pod {ns}/{pod} ({}), claim {claim} ---", finished.phase);
    print!("{}", finished.logs);
    finished
}

/// Namespace `app` with claim `name` of `class` (its bucket name generated from `name`), Bound
/// by `provisioner`'s pods, whose ConfigMap names `endpoint`, and a consumer pod that writes,
/// reads and lists with it; answers the namespace's claims and the bucket.
async fn claim_and_consume(
    node: &Node,
    client: &Client,
    app: &str,
    name: &str,
    class: &str,
    provisioner: &str,
    endpoint: &str,
) -> Result<(Api<ObjectBucketClaim>, String)> {
    let namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": app }
    }))?;
    apply_objects(client, &[(PathBuf::from(app), namespace)], Apply::ForReal).await?;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), app);
    let spec = ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        generate_bucket_name: Some(name.into()),
        ..Default::default()
    };
    claims.create(&PostParams::default(), &ObjectBucketClaim::new(name, spec)).await?;
    wait_bound(client, &claims, name, provisioner).await;
    let bucket = bucket_of(client, app, name).await;
    let config = Api::<ConfigMap>::namespaced(client.clone(), app).get(name).await?;
    assert_eq!(config.data.unwrap()["AWS_ENDPOINT_URL"], endpoint);
    let used = consume(node, client, app, &format!("{name}-consumer"), name, &[], &[]).await;
    assert_eq!(used.phase, "Succeeded", "{}", used.logs);
    assert!(used.logs.contains(&format!("consumer: wrote s3://{bucket}/hello.txt")));
    Ok((claims, bucket))
}

/// A claim of a class giving sessions of one minute only, and a pod running as the claim's
/// ServiceAccount with nothing but its projected token and `envFrom` of the ConfigMap: the AWS
/// SDK for Rust in the consumer image trades the token and renews the session by itself, and
/// the pod writes and reads for two minutes with no failed request while the endpoint grants at
/// least three sessions (two renewals, each after the one before expired or was about to).
async fn keyless_pod_renews_its_session(
    node: &Node,
    client: &Client,
    app: &str,
    provisioner: &str,
) {
    let objects = serde_json::json!([
        { "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
          "metadata": { "name": "hostpath-keyless" },
          "provisioner": "hostpath.objectbucket.io/bucket", "reclaimPolicy": "Delete",
          "parameters": { "webIdentity": "only", "webIdentityMaxSession": "1m" } },
        { "apiVersion": "v1", "kind": "ServiceAccount",
          "metadata": { "name": "app", "namespace": app } },
        { "apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucketClaim",
          "metadata": { "name": "keyless", "namespace": app },
          "spec": { "storageClassName": "hostpath-keyless", "generateBucketName": "keyless",
                    "additionalConfig": { "serviceAccountName": "app" } } },
    ]);
    let objects: Vec<(PathBuf, DynamicObject)> =
        serde_json::from_value::<Vec<DynamicObject>>(objects)
            .unwrap()
            .into_iter()
            .map(|o| (PathBuf::from("keyless"), o))
            .collect();
    apply_objects(client, &objects, Apply::ForReal).await.unwrap();
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), app);
    wait_bound(client, &claims, "keyless", HOSTPATH).await;
    assert!(
        Api::<Secret>::namespaced(client.clone(), app).get_opt("keyless").await.unwrap().is_none(),
        "a claim of sessions only has no Secret"
    );
    // The series of one label set reads as a metric of its own name and labels.
    let granted = |metrics: &str| {
        metric(metrics, "bucket_provisioner_s3_web_identity_sessions_total{code=\"granted\"}")
    };
    // The endpoint's own /metrics (it runs apart from the controller).
    let before = granted(&pod_get(client, NS, provisioner, 8082, "/metrics").await.unwrap());
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "keyless-consumer" },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "app",
            "automountServiceAccountToken": false,
            "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
            "containers": [{
                "name": "app",
                "image": node.images().consumer,
                "env": [{ "name": "CONSUMER_KEEP_USING_SECONDS", "value": "135" }],
                "envFrom": [{ "configMapRef": { "name": "keyless" } }],
                "volumeMounts": [{ "name": "token", "readOnly": true,
                    "mountPath": "/var/run/secrets/objectbucket.io/serviceaccount" }],
            }],
            "volumes": [{ "name": "token", "projected": { "sources": [{ "serviceAccountToken": {
                "path": "token", "audience": "objectbucket.io", "expirationSeconds": 600 } }] } }],
        }
    }))
    .unwrap();
    let finished = run_to_completion(client, app, &pod)
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n--- kubelet ---\n{}", node.log_tail("kubelet", 40)));
    println!("--- pod {app}/keyless-consumer ({}), claim keyless ---", finished.phase);
    print!("{}", finished.logs);
    assert_eq!(finished.phase, "Succeeded", "{}", finished.logs);
    assert!(finished.logs.contains("none failed"), "{}", finished.logs);
    let after = granted(&pod_get(client, NS, provisioner, 8082, "/metrics").await.unwrap());
    assert!(after - before >= 3.0, "sessions granted during the run: {before} -> {after}");
    println!("keyless pod: {} sessions over its run, no failed request", after - before);
    delete_claim(&claims, "keyless").await;
}

/// The provisioner's metric `name` (summed over its label sets) from `/metrics` of `pod`.
fn metric(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn provisioner_pod(client: &Client, deployment: &str) -> String {
    let pods = wait_rollout(client, NS, deployment).await.unwrap();
    assert_eq!(pods.len(), 1, "one provisioner pod: {pods:?}");
    pods[0].clone()
}

#[tokio::test]
async fn hostpath_provisioner_serves_pods_on_a_node() {
    let node = Node::shared();
    let client = node.client().await;
    apply_crds(&client).await;

    // 1. deploy/hostpath/ as a user applies it, with only the image references set.
    let deploy = manifests("deploy/hostpath", node, |_| {});
    apply_objects(&client, &deploy, Apply::ForReal).await.unwrap();
    let pod_name = provisioner_pod(&client, HOSTPATH).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = pods.get(&pod_name).await.unwrap();
    let status = pod.status.clone().unwrap();
    let init = &status.init_container_statuses.as_ref().expect("an init container ran")[0];
    let init_exit = init.state.as_ref().and_then(|s| s.terminated.as_ref()).map(|t| t.exit_code);
    assert_eq!(init_exit, Some(0), "the init container handed over the root: {init:?}");
    let processes = pod_processes("hostpath-bucket-provisioner");
    assert_eq!(processes.len(), 2, "the controller and the endpoint in a pod: {processes:?}");
    let (endpoints, controllers): (Vec<_>, Vec<_>) =
        processes.iter().partition(|(pid, _, _)| is_split_endpoint(*pid));
    let [(endpoint_pid, endpoint_uid, endpoint_env)] = endpoints[..] else {
        panic!("one endpoint process (--serve-store): {processes:?}")
    };
    let [(pid, uid, env)] = controllers[..] else { panic!("one controller: {processes:?}") };
    assert_eq!(*uid, 65532, "the provisioner (pid {pid}) runs as the image's non-root user");
    assert_eq!(*endpoint_uid, 65532, "so does the endpoint (pid {endpoint_pid})");
    assert!(!env.contains_key("KUBECONFIG"), "in-cluster configuration, no kubeconfig");
    assert!(env.contains_key("KUBERNETES_SERVICE_HOST"), "the in-cluster address is given");
    let account_dir = "var/run/secrets/kubernetes.io/serviceaccount";
    let token = format!("/proc/{pid}/root/{account_dir}/token");
    assert!(Path::new(&token).is_file(), "its ServiceAccount token is mounted");
    // The process tenants talk to holds no credential: no token anywhere in its mounts.
    let endpoint_token = format!("/proc/{endpoint_pid}/root/{account_dir}/token");
    assert!(!Path::new(&endpoint_token).exists(), "the endpoint has no token at {account_dir}");
    let mounts = std::fs::read_to_string(format!("/proc/{endpoint_pid}/mountinfo")).unwrap();
    assert!(
        !mounts.lines().any(|m| m.contains("serviceaccount") || m.contains("kube-api-access")),
        "no ServiceAccount token is mounted into the endpoint:\n{mounts}"
    );
    assert!(!endpoint_env.contains_key("KUBECONFIG"), "nor a kubeconfig");
    let account = pod.spec.as_ref().and_then(|s| s.service_account_name.as_deref());
    assert_eq!(account, Some(HOSTPATH), "it acts as the deployed ServiceAccount");
    let root = std::fs::metadata(HOSTPATH_ROOT).unwrap();
    assert_eq!((root.uid(), root.permissions().mode() & 0o777), (65532, 0o700));
    println!(
        "provisioner pod {pod_name}: uid {uid}, ServiceAccount {HOSTPATH} with its token, \
         init container exit 0, no kubeconfig"
    );

    // 2. The example claim binds; its consumer writes, reads and lists through its environment.
    let example = manifests("examples/manifests", node, |_| {});
    let (claim_objects, rest): (Vec<_>, Vec<_>) = example
        .into_iter()
        .partition(|(file, o)| kind(o) == "Namespace" || file.ends_with("10-claim.yaml"));
    apply_objects(&client, &claim_objects, Apply::ForReal).await.unwrap();
    let app = "photo-app";
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), app);
    wait_bound(&client, &claims, "photos", HOSTPATH).await;
    let photos_bucket = bucket_of(&client, app, "photos").await;
    let first = consume(node, &client, app, "photos-consumer", "photos", &[], &[]).await;
    assert_eq!(first.phase, "Succeeded", "{}", first.logs);
    assert!(first.logs.contains(&format!("consumer: wrote s3://{photos_bucket}/hello.txt")));
    assert!(first.logs.contains("consumer: read it back"));
    assert!(first.logs.contains("consumer: listed hello.txt"));

    // A second claim's keys do not open the first claim's bucket.
    let other = ObjectBucketClaim::new(
        "others",
        ObjectBucketClaimSpec {
            storage_class_name: "hostpath-bucket".into(),
            generate_bucket_name: Some("others".into()),
            ..Default::default()
        },
    );
    claims.create(&PostParams::default(), &other).await.unwrap();
    wait_bound(&client, &claims, "others", HOSTPATH).await;
    let denied = consume(
        node,
        &client,
        app,
        "others-consumer",
        "others",
        &[],
        &[("BUCKET_NAME", &photos_bucket)],
    )
    .await;
    assert_eq!(denied.phase, "Failed", "{}", denied.logs);
    assert!(denied.logs.contains("AccessDenied"), "{}", denied.logs);

    // 2b. No key at all: a pod with a projected ServiceAccount token and the ConfigMap only.
    keyless_pod_renews_its_session(node, &client, app, &pod_name).await;

    // 3. Brownfield: the operator's bucket, granted to a claim of the bucketName class.
    let admin_key = format!("operator-{}", test_support::unique_suffix());
    let admin_secret = Secret {
        metadata: ObjectMeta { name: Some("hostpath-s3-admin".into()), ..Default::default() },
        string_data: Some(
            [
                ("AWS_ACCESS_KEY_ID".to_string(), "operator".to_string()),
                ("AWS_SECRET_ACCESS_KEY".to_string(), admin_key.clone()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &admin_secret)
        .await
        .unwrap();
    // The operator works from this machine through the hostpath-s3 Service, as the book says.
    let service = Api::<Service>::namespaced(client.clone(), NS).get("hostpath-s3").await.unwrap();
    let cluster_ip = service.spec.unwrap().cluster_ip.unwrap();
    let operator = s3_client(&format!("http://{cluster_ip}:9000"), "operator", &admin_key);
    eventually("the operator credential to create shared-data", || async {
        operator.create_bucket().bucket("shared-data").send().await.ok()
    })
    .await;
    let note = "left here by the operator";
    operator
        .put_object()
        .bucket("shared-data")
        .key("operator-note.txt")
        .body(note.as_bytes().to_vec().into())
        .send()
        .await
        .unwrap();
    let static_claim: Vec<_> =
        rest.into_iter().filter(|(file, _)| file.ends_with("30-static-claim.yaml")).collect();
    apply_objects(&client, &static_claim, Apply::ForReal).await.unwrap();
    wait_bound(&client, &claims, "shared", HOSTPATH).await;
    assert_eq!(bucket_of(&client, app, "shared").await, "shared-data");
    let reader =
        consume(node, &client, app, "shared-consumer", "shared", &["operator-note.txt"], &[]).await;
    assert_eq!(reader.phase, "Succeeded", "{}", reader.logs);
    assert!(
        reader.logs.contains(&format!("read s3://shared-data/operator-note.txt: {note:?}")),
        "{}",
        reader.logs
    );
    delete_claim(&claims, "shared").await;
    let kept = operator.get_object().bucket("shared-data").key("operator-note.txt").send().await;
    let kept = kept.unwrap().body.collect().await.unwrap().into_bytes();
    assert_eq!(kept.as_ref(), note.as_bytes(), "deleting the claim keeps the operator's data");
    assert!(Path::new(HOSTPATH_ROOT).join("buckets/shared-data/operator-note.txt").exists());

    // 4. A restart of the provisioner pod changes nothing for bound claims.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), app);
    let before: Vec<String> = [
        secrets.get("photos").await.unwrap().resource_version().unwrap(),
        secrets.get("others").await.unwrap().resource_version().unwrap(),
    ]
    .into();
    pods.delete(&pod_name, &DeleteParams::default()).await.unwrap();
    let ours = ListParams::default().labels(&format!("app.kubernetes.io/name={HOSTPATH}"));
    let restarted = eventually("a new provisioner pod", || async {
        let listed = pods.list(&ours).await.ok()?;
        listed
            .items
            .into_iter()
            .find(|p| {
                p.name_any() != pod_name && pod_ready(p) && p.metadata.deletion_timestamp.is_none()
            })
            .map(|p| p.name_any())
    })
    .await;
    // Until the new process has looked at both claims, "no backend call" would prove nothing.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let metrics = loop {
        let metrics = pod_get(&client, NS, &restarted, 8080, "/metrics").await;
        if let Ok(metrics) = &metrics
            && metric(metrics, "bucket_provisioner_reconciles_total") >= 2.0
        {
            break metrics.clone();
        }
        if tokio::time::Instant::now() > deadline {
            let params = LogParams { container: Some("provisioner".into()), ..Default::default() };
            let logs = pods.logs(&restarted, &params).await.unwrap_or_default();
            panic!("{restarted} did not reconcile both claims in 90s: {metrics:?}\n{logs}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let backend_calls = metric(&metrics, "bucket_provisioner_provisioning_duration_seconds_count");
    assert_eq!(backend_calls, 0.0, "no backend call for unchanged claims:\n{metrics}");
    // What the BucketProvisionerNotLeading alert watches: the only replica leads.
    assert_eq!(metric(&metrics, "bucket_provisioner_leading"), 1.0, "{metrics}");
    for name in ["photos", "others"] {
        let claim = claims.get(name).await.unwrap();
        assert_eq!(claim.status.unwrap().phase, Some(ClaimPhase::Bound), "{name} stays Bound");
    }
    let after: Vec<String> = [
        secrets.get("photos").await.unwrap().resource_version().unwrap(),
        secrets.get("others").await.unwrap().resource_version().unwrap(),
    ]
    .into();
    assert_eq!(before, after, "the claims' credentials are untouched");
    // Ready is not yet routed: the Service's endpoints and the node's rules follow the new pod a
    // moment later. A consumer starting before would be sent to the old pod's address.
    eventually("the hostpath-s3 Service to route to the new pod", || async {
        // A new client each time: a kept connection goes on to wherever the node's rules sent it
        // when it opened (the old pod, or, while the Service had no endpoint, out of the node to
        // whatever answers there; CI met a 404 from such a server).
        let operator = s3_client(&format!("http://{cluster_ip}:9000"), "operator", &admin_key);
        for _ in 0..3 {
            if let Err(e) = operator.list_buckets().send().await {
                println!("hostpath-s3 not yet routed to {restarted}: {}", DisplayErrorContext(&e));
                return None;
            }
        }
        Some(())
    })
    .await;
    let again = consume(node, &client, app, "photos-after-restart", "photos", &[], &[]).await;
    assert_eq!(again.phase, "Succeeded", "{}", again.logs);
    println!("provisioner restarted as {restarted}: claims Bound, no backend call, consumers work");
}

#[tokio::test]
async fn s3_provisioner_serves_pods_on_a_node() -> Result<()> {
    let node = Node::shared();
    let client = node.client().await;
    apply_crds(&client).await;

    // moto on this machine, reached by pods through a Service of their cluster.
    let moto = Moto::start().await?;
    let moto_ns = "moto";
    apply_objects(
        &client,
        &[(
            PathBuf::from("moto"),
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": moto_ns }
            }))?,
        )],
        Apply::ForReal,
    )
    .await?;
    let service = Service {
        metadata: ObjectMeta { name: Some("moto".into()), ..Default::default() },
        spec: Some(k8s_openapi::api::core::v1::ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 5000,
                target_port: Some(IntOrString::Int(moto.port.into())),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<Service>::namespaced(client.clone(), moto_ns)
        .create(&PostParams::default(), &service)
        .await?;
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some("moto".into()),
            labels: Some([("kubernetes.io/service-name".to_string(), "moto".to_string())].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: Some(vec![Endpoint {
            addresses: vec![node_tests::NODE_IP.to_string()],
            ..Default::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(moto.port.into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
    };
    Api::<EndpointSlice>::namespaced(client.clone(), moto_ns)
        .create(&PostParams::default(), &slice)
        .await?;
    let endpoint = format!("http://moto.{moto_ns}.svc:5000");

    // The owner the book's S3 chapter describes, and deploy/s3/ with its keys and moto's address
    // filled in.
    let owner_policy = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Action": s3_provisioner::owner::OWNER_ACTIONS,
            "Resource": "*"
        }]
    });
    let (owner_key, owner_secret) = moto.user("bucket-owner", &owner_policy.to_string()).await?;
    let deploy = manifests("deploy/s3", node, |object| match kind(object) {
        "Secret" => {
            object.data["stringData"]["AWS_ACCESS_KEY_ID"] = owner_key.clone().into();
            object.data["stringData"]["AWS_SECRET_ACCESS_KEY"] = owner_secret.clone().into();
        }
        "StorageClass" => {
            object.data["parameters"]["endpoint"] = endpoint.clone().into();
            object.data["parameters"]["forcePathStyle"] = "true".into();
        }
        _ => {}
    });
    apply_objects(&client, &deploy, Apply::ForReal).await?;
    wait_rollout(&client, NS, S3).await?;

    let app = "s3-app";
    let (claims, bucket) =
        claim_and_consume(node, &client, app, "reports", "s3-buckets", S3, &endpoint).await?;
    let listed = moto.s3().list_objects_v2().bucket(&bucket).send().await?;
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["hello.txt"], "the object is in moto's bucket");

    // The class deletes what its claims made, data included.
    delete_claim(&claims, "reports").await;
    let gone = moto.s3().head_bucket().bucket(&bucket).send().await;
    assert!(gone.is_err(), "bucket {bucket} deleted with its claim");
    Ok(())
}

const VOLUMES: &str = "hostpath-volume-provisioner";
const VOLUMES_ROOT: &str = "/var/lib/hostpath-volumes";

/// The seed's story on a real node: `deploy/hostpath-volumes/` as a user applies it, then the
/// example claim and the pod that writes into it; the file on the host; pod and claim deleted,
/// the directory gone.
#[tokio::test]
async fn hostpath_volumes_serve_pods_on_a_node() -> Result<()> {
    let node = Node::shared();
    let client = node.client().await;
    let deploy = manifests("deploy/hostpath-volumes", node, |_| {});
    apply_objects(&client, &deploy, Apply::ForReal).await?;
    let provisioners: Api<Pod> = Api::namespaced(client.clone(), NS);
    let ours = ListParams::default().labels(&format!("app.kubernetes.io/name={VOLUMES}"));
    let deadline = tokio::time::Instant::now() + node_tests::POD_WAIT;
    let provisioner = loop {
        let listed = provisioners.list(&ours).await?;
        if let Some(pod) = listed.items.iter().find(|p| pod_ready(p)) {
            break pod.name_any();
        }
        if tokio::time::Instant::now() > deadline {
            let pods: Vec<_> = listed.items.iter().map(|p| (p.name_any(), &p.status)).collect();
            panic!("no Ready pod of DaemonSet {VOLUMES}: {pods:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("volume provisioner pod {provisioner} Ready on {}", node_tests::NODE_NAME);

    // The example as it is, in a namespace of its own, with the node's shell image.
    let app = "volume-app";
    let busybox = node.images().busybox.clone();
    let example = manifests("examples/hostpath-volumes", node, |object| {
        object.metadata.namespace = Some(app.into());
        if kind(object) == "Pod" {
            object.data["spec"]["containers"][0]["image"] = busybox.clone().into();
        }
    });
    let namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": app }
    }))?;
    apply_objects(&client, &[(PathBuf::from(app), namespace)], Apply::ForReal).await?;
    apply_objects(&client, &example, Apply::ForReal).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), app);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), app);
    let deadline = tokio::time::Instant::now() + node_tests::POD_WAIT;
    let phase = loop {
        let pod = pods.get("hostpath-pvc-writer").await?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            break phase;
        }
        if tokio::time::Instant::now() > deadline {
            let claim = claims.get("hostpath-pvc").await?;
            let logs = provisioners.logs(&provisioner, &LogParams::default()).await?;
            panic!("the writer is {phase:?}: {:?}\nclaim: {:?}\n{logs}", pod.status, claim.status);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let logs = pods.logs("hostpath-pvc-writer", &LogParams::default()).await?;
    println!("--- pod {app}/hostpath-pvc-writer ({phase}) ---\n{logs}");
    assert_eq!(phase, "Succeeded", "{logs}");

    let claim = claims.get("hostpath-pvc").await?;
    let selected = claim.annotations().get("volume.kubernetes.io/selected-node").cloned();
    assert_eq!(selected.as_deref(), Some(node_tests::NODE_NAME), "the scheduler chose the node");
    let pv_name = claim.spec.and_then(|s| s.volume_name).expect("the claim is bound");
    assert_eq!(pv_name, format!("pvc-{}", claim.metadata.uid.unwrap()));
    let pv = Api::<PersistentVolume>::all(client.clone()).get(&pv_name).await?;
    let spec = pv.spec.unwrap();
    let path = spec.host_path.unwrap().path;
    assert_eq!(path, format!("{VOLUMES_ROOT}/{pv_name}"));
    let affinity = serde_json::to_value(spec.node_affinity)?;
    assert_eq!(
        affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
        node_tests::NODE_NAME
    );
    let written = Path::new(&path).join("SUCCESS");
    assert!(written.is_file(), "the pod's file is on the host at {}", written.display());
    println!(
        "on the host: {} ({})",
        written.display(),
        pv.metadata.annotations.unwrap()["hostpath-volume.bucket-provisioner.io/capacity"]
    );

    pods.delete("hostpath-pvc-writer", &DeleteParams::default()).await?;
    eventually("the writer pod gone", || async {
        pods.get_opt("hostpath-pvc-writer").await.ok()?.is_none().then_some(())
    })
    .await;
    claims.delete("hostpath-pvc", &DeleteParams::default()).await?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    eventually("the volume gone", || async {
        volumes.get_opt(&pv_name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(!Path::new(&path).exists(), "the directory went with the claim");
    println!("pod and claim deleted: {path} is gone");
    Ok(())
}

const GARAGE: &str = "garage-bucket-provisioner";

/// `deploy/garage/` as a user applies it (the admin token and the cluster's addresses filled
/// in), against a three-node Garage cluster on this machine: a claim binds, a consumer pod with
/// only its `envFrom` writes and reads in Garage, and deleting the claim deletes the bucket.
#[tokio::test]
async fn garage_provisioner_serves_pods_on_a_node() -> Result<()> {
    let node = Node::shared();
    let client = node.client().await;
    apply_crds(&client).await;
    // Listening on every address, so that pods reach it on the node's bridge.
    let garage = GarageCluster::start_listening(3, Ipv4Addr::UNSPECIFIED).await?;
    let admin = format!("http://{}:{}", node_tests::NODE_IP, garage.nodes[0].admin_port);
    let endpoint = format!("http://{}:{}", node_tests::NODE_IP, garage.nodes[1].s3_port);
    let deploy = manifests("deploy/garage", node, |object| match kind(object) {
        "Secret" => {
            object.data["stringData"]["GARAGE_ADMIN_TOKEN"] = garage.admin_token.clone().into();
        }
        "StorageClass" => {
            object.data["parameters"]["adminEndpoint"] = admin.clone().into();
            object.data["parameters"]["endpoint"] = endpoint.clone().into();
        }
        _ => {}
    });
    apply_objects(&client, &deploy, Apply::ForReal).await?;
    wait_rollout(&client, NS, GARAGE).await?;

    let app = "garage-app";
    let (claims, bucket) =
        claim_and_consume(node, &client, app, "media", "garage-buckets", GARAGE, &endpoint).await?;
    let info = format!("/v2/GetBucketInfo?globalAlias={bucket}");
    eventually("Garage to count the consumer's object", || async {
        let (status, body) = garage.get(0, &info).await.ok()?;
        let info: serde_json::Value = serde_json::from_str(&body).ok()?;
        (status == 200 && info["objects"].as_u64()? >= 1).then_some(())
    })
    .await;

    // The class deletes what its claims made, data included.
    delete_claim(&claims, "media").await;
    eventually("the bucket gone from Garage", || async {
        let (status, _) = garage.get(0, &info).await.ok()?;
        (status == 404).then_some(())
    })
    .await;
    println!("garage: claim bound, consumer wrote s3://{bucket}/hello.txt, bucket deleted");
    Ok(())
}

//! The Helm chart in `charts/bucket-provisioner`: it lints, its schema accepts good values and
//! names the bad one, it renders exactly the plain manifests of `deploy/` (so the two cannot
//! drift), its objects are accepted by the real apiserver, and its alert rules pass their
//! promtool tests over metric names the provisioners really export.
//!
//! helm comes from `tests/helm/build.sh` (or `$BUCKET_PROVISIONER_HELM_BIN`), promtool from
//! `tests/prometheus/install.sh` (or `$BUCKET_PROVISIONER_PROMTOOL`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use kube::api::DynamicObject;
use serde::Deserialize;
use serde_json::Value;
use test_support::tools::tool_from_script;
use test_support::{Apply, KUSTOMIZATION, apply_objects, client_with_crds, read_manifests};

const NAMESPACE: &str = "bucket-provisioner";
const RELEASE: &str = "bucket-provisioner";
/// Labels the chart adds for Helm's and tools' bookkeeping; they change no behaviour.
const RELEASE_LABEL: &str = "app.kubernetes.io/instance";

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative)
}

fn chart() -> PathBuf {
    repo("charts/bucket-provisioner")
}

fn helm_bin() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| tool_from_script("BUCKET_PROVISIONER_HELM_BIN", "tests/helm/build.sh"))
}

fn promtool_bin() -> &'static Path {
    static PROMTOOL: OnceLock<PathBuf> = OnceLock::new();
    PROMTOOL.get_or_init(|| {
        tool_from_script("BUCKET_PROVISIONER_PROMTOOL", "tests/prometheus/install.sh")
    })
}

fn helm(args: &[&str]) -> Output {
    Command::new(helm_bin()).args(args).output().expect("running helm")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `helm template` of the chart with `args` added; panics with helm's message on failure.
fn render(args: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut all = vec!["template", RELEASE, chart.to_str().unwrap(), "--namespace", NAMESPACE];
    all.extend_from_slice(args);
    let output = helm(&all);
    assert!(output.status.success(), "helm {all:?} failed:\n{}", text(&output.stderr));
    documents(&text(&output.stdout))
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|document| Value::deserialize(document).expect("helm renders valid YAML"))
        .filter(|value| !value.is_null())
        .collect()
}

fn values_file(name: &str) -> String {
    chart().join("ci").join(name).to_str().unwrap().to_owned()
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn key(object: &Value) -> String {
    let metadata = &object["metadata"];
    format!(
        "{} {}/{}",
        kind(object),
        metadata["namespace"].as_str().unwrap_or(""),
        metadata["name"].as_str().unwrap_or("")
    )
}

/// An object as it behaves: the release label and the objects' own labels (bookkeeping) gone,
/// and the defaults the apiserver fills in for fields one of the two sources leaves out.
fn normalized(mut object: Value) -> Value {
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("labels");
    }
    drop_key(&mut object, RELEASE_LABEL);
    if kind(&object) == "Service" && object["spec"].get("type").is_none() {
        object["spec"]["type"] = "ClusterIP".into();
    }
    if let Some(spec) = object.pointer_mut("/spec/template/spec") {
        for list in ["initContainers", "containers"] {
            for container in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten()
            {
                let image = container["image"].as_str().unwrap_or_default();
                let default = if image.ends_with(":latest") { "Always" } else { "IfNotPresent" };
                if container.get("imagePullPolicy").is_none() {
                    container["imagePullPolicy"] = default.into();
                }
            }
        }
    }
    object
}

fn drop_key(value: &mut Value, key: &str) {
    match value {
        Value::Object(map) => {
            map.remove(key);
            map.values_mut().for_each(|v| drop_key(v, key));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| drop_key(v, key)),
        _ => {}
    }
}

fn by_key(objects: impl IntoIterator<Item = Value>) -> BTreeMap<String, Value> {
    objects.into_iter().map(|o| (key(&o), normalized(o))).collect()
}

/// The chart with `values` renders exactly the objects of `deploy/<dir>` but its Namespace
/// (Helm creates that with `--create-namespace`).
fn assert_chart_reproduces(dir: &str, values: &str) {
    let deployed = read_manifests(&repo(dir)).unwrap();
    let deployed = by_key(
        deployed
            .into_iter()
            .map(|(_, object)| serde_json::to_value(object).unwrap())
            .filter(|object| kind(object) != "Namespace"),
    );
    let rendered = by_key(render(&["-f", &values_file(values)]));
    let only = |a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>| {
        a.keys().filter(|k| !b.contains_key(*k)).cloned().collect::<Vec<_>>()
    };
    assert!(
        deployed.keys().eq(rendered.keys()),
        "{dir} and the chart differ in objects: only in {dir}: {:?}; only in the chart: {:?}",
        only(&deployed, &rendered),
        only(&rendered, &deployed)
    );
    for (key, object) in &deployed {
        assert_eq!(
            object, &rendered[key],
            "{key} differs between {dir} (left) and the chart with ci/{values} (right)"
        );
    }
}

#[test]
fn chart_reproduces_deploy_hostpath() {
    assert_chart_reproduces("deploy/hostpath", "deploy-hostpath-values.yaml");
}

#[test]
fn chart_reproduces_deploy_s3() {
    assert_chart_reproduces("deploy/s3", "deploy-s3-values.yaml");
}

#[test]
fn chart_reproduces_deploy_hostpath_volumes() {
    assert_chart_reproduces("deploy/hostpath-volumes", "deploy-hostpath-volumes-values.yaml");
}

/// The drift check notices a difference: a chart value that changes one field makes the
/// comparison fail.
#[test]
fn a_changed_value_is_a_difference_from_deploy() {
    let deployed = read_manifests(&repo("deploy/hostpath")).unwrap();
    let deployed = by_key(deployed.into_iter().map(|(_, o)| serde_json::to_value(o).unwrap()));
    let rendered = by_key(render(&["--set", "hostpath.workers=8"]));
    let key = format!("Deployment {NAMESPACE}/hostpath-bucket-provisioner");
    assert_ne!(deployed[&key], rendered[&key]);
}

#[test]
fn chart_crds_are_the_repository_crds() {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(repo("crds")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        let in_chart = std::fs::read(chart().join("crds").join(&name))
            .unwrap_or_else(|e| panic!("{name:?} is missing from the chart's crds/: {e}"));
        assert!(std::fs::read(&path).unwrap() == in_chart, "{name:?} differs; run `make crds`");
        names.insert(name);
    }
    let in_chart: BTreeSet<_> = std::fs::read_dir(chart().join("crds"))
        .unwrap()
        .map(|e| e.unwrap().path().file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, in_chart, "the chart's crds/ holds exactly crds/");
    assert_eq!(names.len(), 3, "ObjectBucketClaim, ObjectBucket, BucketShareGrant");
}

#[test]
fn every_deploy_folder_has_a_kustomization_listing_its_manifests() {
    let dirs = [
        "deploy/hostpath",
        "deploy/s3",
        "deploy/hostpath-volumes",
        "deploy/garage",
        "deploy/cosi/hostpath",
        "deploy/cosi/s3",
        "deploy/cosi/garage",
    ];
    for dir in dirs {
        let folder = repo(dir);
        let kustomization: Value =
            serde_yaml::from_str(&std::fs::read_to_string(folder.join(KUSTOMIZATION)).unwrap())
                .unwrap();
        assert_eq!(kustomization["kind"], "Kustomization", "{dir}");
        let listed: Vec<&str> = kustomization["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let mut files: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".yaml") && name != KUSTOMIZATION)
            .collect();
        files.sort();
        assert_eq!(listed, files, "{dir}/{KUSTOMIZATION} lists every manifest, in order");
    }
}

#[test]
fn chart_lints_with_every_values_file() {
    let chart = chart();
    for values in [None, Some("everything-values.yaml"), Some("deploy-s3-values.yaml")] {
        let mut args = vec!["lint", "--strict", chart.to_str().unwrap()];
        let file = values.map(values_file);
        if let Some(file) = &file {
            args.extend(["-f", file.as_str()]);
        }
        let output = helm(&args);
        assert!(
            output.status.success(),
            "helm lint with {values:?}:\n{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }
}

#[test]
fn mounting_volumes_makes_the_volume_provisioner_privileged_with_bidirectional_propagation() {
    let privileged = |args: &[&str]| {
        let objects = render(args);
        let daemonset = objects
            .iter()
            .find(|o| kind(o) == "DaemonSet" && key(o).contains("hostpath-volume-provisioner"))
            .expect("the volume provisioner's DaemonSet")
            .clone();
        let container = &daemonset["spec"]["template"]["spec"]["containers"][0];
        let propagation = container["volumeMounts"][0]["mountPropagation"].clone();
        (container["securityContext"]["privileged"] == true, propagation)
    };
    let (on, propagation) = privileged(&["-f", &values_file("everything-values.yaml")]);
    assert!(on, "mountVolumes: privileged");
    assert_eq!(propagation, "Bidirectional", "the kubelet sees the mounts it makes");
    let (on, propagation) = privileged(&["--set", "hostpathVolumes.enabled=true"]);
    assert!(!on && propagation.is_null(), "by default neither privileged nor propagating");
}

#[test]
fn good_values_render() {
    let everything = render(&["-f", &values_file("everything-values.yaml")]);
    let kinds: BTreeSet<&str> = everything.iter().map(kind).collect();
    for wanted in ["Deployment", "DaemonSet", "ConfigMap", "Secret", "StorageClass"] {
        assert!(kinds.contains(wanted), "no {wanted} in {kinds:?}");
    }
    // Values reach the objects: the prefix names them, the image and node selection are used.
    let deployment = everything
        .iter()
        .find(|o| {
            kind(o) == "Deployment" && o["metadata"]["name"] == "team-a-hostpath-bucket-provisioner"
        })
        .expect("the prefixed hostPath Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["kubernetes.io/hostname"], "node-7");
    let image = "registry.example.com/storage/bucket-provisioner:0.1.0-rc1";
    assert_eq!(container(deployment, "endpoint")["image"], image);
    assert_eq!(container(deployment, "provisioner")["image"], image);
    assert_eq!(pod["initContainers"][0]["image"], image, "the init container uses the same image");
    let args = |name: &str| -> Vec<String> {
        let args = container(deployment, name)["args"].as_array().unwrap();
        args.iter().map(|a| a.as_str().unwrap().to_owned()).collect()
    };
    // The store's identity is the endpoint's, which opens it; the rest is the controller's.
    assert!(args("endpoint").contains(&"--identity=node-7".to_owned()), "{:?}", args("endpoint"));
    for wanted in ["--region=eu-west-1", "--leader-elect=false"] {
        let controller = args("provisioner");
        assert!(controller.iter().any(|a| a == wanted), "{wanted} missing from {controller:?}");
    }
    // Nothing in any rendering comes from a public registry.
    for object in &everything {
        for image in images(object) {
            assert!(image.starts_with("registry.example.com/"), "{image} in {}", key(object));
        }
    }
    // By default, the image `make image` builds, as in deploy/.
    let default_image = format!("localhost/bucket-provisioner:{}", env!("CARGO_PKG_VERSION"));
    let defaults = render(&[]);
    let default_images: Vec<String> = defaults.iter().flat_map(images).collect();
    assert_eq!(
        default_images,
        [default_image.clone(), default_image.clone(), default_image],
        "init container, endpoint and provisioner"
    );
}

/// The object of `kind` named `name` among `objects`.
fn find<'a>(objects: &'a [Value], kind_: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind(o) == kind_ && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind_} {name}"))
}

/// Container `name` of a Deployment.
fn container<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    containers.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no container {name}"))
}

/// With `cosi.enabled`, each driver pod (hostPath, S3) gets the upstream sidecar as
/// `deploy/cosi/` runs it, the socket on an emptyDir both mount, `--cosi-endpoint` on the
/// provisioner, and its ServiceAccount the rules of `deploy/cosi/<backend>/10-rbac.yaml`.
#[test]
fn cosi_adds_the_upstream_sidecar_and_the_rbac_of_deploy_cosi() {
    let plain = render(&["--set", "s3.enabled=true"]);
    for object in &plain {
        let names: Vec<String> = images(object);
        assert!(!names.iter().any(|i| i.contains("objectstorage")), "{}", key(object));
        assert!(!key(object).ends_with("-cosi"), "{} without cosi.enabled", key(object));
    }

    let rendered = render(&["--set", "s3.enabled=true,cosi.enabled=true"]);
    let socket = "unix:///var/lib/cosi/cosi.sock";
    for (component, folder, driver) in [
        ("hostpath-bucket-provisioner", "deploy/cosi/hostpath", "hostpath-cosi-driver"),
        ("s3-bucket-provisioner", "deploy/cosi/s3", "s3-cosi-driver"),
    ] {
        let deployed: Vec<Value> = read_manifests(&repo(folder))
            .unwrap()
            .into_iter()
            .map(|(_, o)| normalized(serde_json::to_value(o).unwrap()))
            .collect();
        let ours = normalized(find(&rendered, "Deployment", component).clone());
        let theirs = find(&deployed, "Deployment", driver);
        let names: Vec<&Value> = ours["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["name"])
            .collect();
        if component == "hostpath-bucket-provisioner" {
            // The endpoint apart, with no token; the sidecar mounts it, as in deploy/cosi.
            assert_eq!(names, ["endpoint", "provisioner", "cosi-sidecar"], "{component}");
        } else {
            assert_eq!(names, ["provisioner", "cosi-sidecar"], "{component}");
        }
        assert_eq!(
            container(&ours, "cosi-sidecar"),
            container(theirs, "cosi-sidecar"),
            "{component}'s sidecar (left) differs from {folder}'s (right)"
        );
        let pod = &ours["spec"]["template"]["spec"];
        let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "cosi-socket");
        assert_eq!(volume.map(|v| &v["emptyDir"]), Some(&serde_json::json!({})), "{component}");
        assert_eq!(pod["securityContext"]["fsGroup"], 65532, "{component}");
        let provisioner = container(&ours, "provisioner");
        let mounts = provisioner["volumeMounts"].as_array().unwrap();
        assert!(
            mounts.iter().any(|m| m["name"] == "cosi-socket" && m["mountPath"] == "/var/lib/cosi"),
            "{component}: {mounts:?}"
        );
        let args = provisioner["args"].as_array().unwrap();
        assert!(args.contains(&format!("--cosi-endpoint={socket}").into()), "{args:?}");
        assert!(!args.contains(&"--cosi-only".into()), "the chart's pods serve claims too");

        let role = find(&rendered, "ClusterRole", &format!("{component}-cosi"));
        let deployed_role = find(&deployed, "ClusterRole", driver);
        assert_eq!(
            role["rules"], deployed_role["rules"],
            "{component}: rules differ from {folder}"
        );
        let binding = find(&rendered, "ClusterRoleBinding", &format!("{component}-cosi"));
        assert_eq!(binding["roleRef"]["name"], format!("{component}-cosi"));
        let subject = serde_json::json!([{
            "kind": "ServiceAccount", "name": component, "namespace": NAMESPACE
        }]);
        assert_eq!(binding["subjects"], subject);
        // The v1alpha1 sidecar's leader Lease: the provisioner's own Role grants what
        // deploy/cosi's does.
        let leader = find(&rendered, "Role", &format!("{component}-leader"));
        let deployed_leader = find(&deployed, "Role", &format!("{driver}-leader"));
        assert_eq!(leader["rules"], deployed_leader["rules"], "{component}");
    }

    // The S3 driver's store: the parameters given, the owner's Secret unless they name one.
    let store =
        render(&["--set", "s3.enabled=true,cosi.enabled=true,cosi.s3.parameters.region=eu-west-1"]);
    let args =
        &container(find(&store, "Deployment", "s3-bucket-provisioner"), "provisioner")["args"];
    let store_args: Vec<&str> = args
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str()?.strip_prefix("--cosi-parameter="))
        .collect();
    assert_eq!(
        store_args,
        [
            "region=eu-west-1",
            "secretName=s3-owner-credentials",
            &format!("secretNamespace={NAMESPACE}")
        ]
    );
    let hostpath = find(&store, "Deployment", "hostpath-bucket-provisioner");
    let hostpath_args = container(hostpath, "provisioner")["args"].to_string();
    assert!(!hostpath_args.contains("--cosi-parameter"), "hostPath serves its own root");

    // A driver name of its own reaches the driver.
    let named = render(&["--set", "cosi.enabled=true,cosi.hostpath.driverName=team.example.com"]);
    let deployment = find(&named, "Deployment", "hostpath-bucket-provisioner");
    let args = &container(deployment, "provisioner")["args"];
    assert!(
        args.as_array().unwrap().contains(&"--cosi-driver-name=team.example.com".into()),
        "{args}"
    );
}

fn images(object: &Value) -> Vec<String> {
    let spec = &object["spec"]["template"]["spec"];
    ["initContainers", "containers"]
        .iter()
        .flat_map(|list| spec[list].as_array().cloned().unwrap_or_default())
        .map(|c| c["image"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Each bad value fails `helm template` with a message that names it.
#[test]
fn bad_values_fail_naming_the_value() {
    let chart = chart();
    let cases: [(&[&str], &str); 14] = [
        (&["--set", "hostpath.replicas=2"], "/hostpath/replicas"),
        (&["--set", "hostpath.root=relative/path"], "/hostpath/root"),
        (&["--set", "image.pullPolicy=Sometimes"], "/image/pullPolicy"),
        (&["--set", "hostpth.enabled=true"], "'hostpth' not allowed"),
        (&["--set", "hostpath.s3.port=70000"], "/hostpath/s3/port"),
        (&["--set-string", "hostpath.workers=four"], "/hostpath/workers"),
        (
            &["--set", "hostpath.leaderElection.leaseSeconds=1"],
            "/hostpath/leaderElection/leaseSeconds",
        ),
        (&["--set", "namePrefix=Team_A"], "/namePrefix"),
        (
            &["--set", "monitoring.serviceMonitor.interval=soon"],
            "/monitoring/serviceMonitor/interval",
        ),
        (
            &[
                "--set",
                "hostpath.storageClasses[0].name=a,hostpath.storageClasses[0].reclaimPolicy=Recycle",
            ],
            "/hostpath/storageClasses/0/reclaimPolicy",
        ),
        (
            &["--set", "s3.enabled=true,s3.ownerCredentials.create=true"],
            "/s3/ownerCredentials/accessKeyId",
        ),
        (&["--set", "hostpathVolumes.reclaimPolicy=Recycle"], "/hostpathVolumes/reclaimPolicy"),
        (&["--set", "cosi.hostpath.driverName=-driver"], "/cosi/hostpath/driverName"),
        (&["--set", "cosi.sidecar.pullPolicy=Sometimes"], "/cosi/sidecar/pullPolicy"),
    ];
    for (args, named) in cases {
        let mut all = vec!["template", RELEASE, chart.to_str().unwrap()];
        all.extend_from_slice(args);
        let output = helm(&all);
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(stderr.contains("schema"), "{args:?} failed, not by the schema: {stderr}");
        assert!(stderr.contains(named), "{args:?}: the message does not name {named}: {stderr}");
    }
}

#[test]
fn monitoring_objects_only_where_the_operator_serves_them() {
    let plain = render(&[]);
    assert!(!plain.iter().any(|o| matches!(kind(o), "ServiceMonitor" | "PrometheusRule")));

    let monitored = render(&[
        "--set",
        "s3.enabled=true,hostpathVolumes.enabled=true",
        "--api-versions",
        "monitoring.coreos.com/v1/ServiceMonitor",
        "--api-versions",
        "monitoring.coreos.com/v1/PrometheusRule",
    ]);
    let monitors: Vec<&Value> = monitored.iter().filter(|o| kind(o) == "ServiceMonitor").collect();
    assert_eq!(monitors.len(), 3, "one per enabled provisioner");
    for monitor in monitors {
        let selector = &monitor["spec"]["selector"]["matchLabels"];
        let service = monitored
            .iter()
            .find(|o| {
                kind(o) == "Service"
                    && selector
                        .as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| &o["metadata"]["labels"][k] == v)
            })
            .unwrap_or_else(|| panic!("no Service for {}", key(monitor)));
        assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
        let scraped: Vec<&Value> =
            monitor["spec"]["endpoints"].as_array().unwrap().iter().collect();
        let ports: Vec<&str> = scraped.iter().filter_map(|e| e["port"].as_str()).collect();
        let name = monitor["metadata"]["name"].as_str().unwrap();
        if name.contains("volume") {
            // The volumes' usage is served on a port of its own.
            assert_eq!(ports, ["metrics", "usage"]);
            assert_eq!(service["spec"]["ports"][1]["targetPort"], "usage");
        } else if name.contains("hostpath") {
            // The S3 endpoint, a container of its own, serves its metrics apart.
            assert_eq!(ports, ["metrics", "s3-metrics"]);
            assert_eq!(service["spec"]["ports"][1]["targetPort"], "s3-metrics");
        } else {
            assert_eq!(ports, ["metrics"]);
        }
    }
    let rule = monitored.iter().find(|o| kind(o) == "PrometheusRule").expect("a PrometheusRule");
    let source: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart().join("files/alerts.yaml")).unwrap())
            .unwrap();
    assert_eq!(rule["spec"], source, "the PrometheusRule carries files/alerts.yaml unchanged");

    let switched_off = render(&[
        "--set",
        "monitoring.serviceMonitor.enabled=false,monitoring.prometheusRule.enabled=false",
        "--api-versions",
        "monitoring.coreos.com/v1/ServiceMonitor",
        "--api-versions",
        "monitoring.coreos.com/v1/PrometheusRule",
    ]);
    assert!(!switched_off.iter().any(|o| matches!(kind(o), "ServiceMonitor" | "PrometheusRule")));
}

#[test]
fn dashboard_is_valid_json_in_its_config_map() {
    let rendered = render(&["--set", "monitoring.dashboard.enabled=true"]);
    let map = rendered.iter().find(|o| kind(o) == "ConfigMap").expect("the dashboard ConfigMap");
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = map["data"]["bucket-provisioner.json"].as_str().unwrap();
    let dashboard: Value = serde_json::from_str(json).expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().unwrap().len() >= 6);
}

/// Every `bucket_provisioner_*` series the rules and the dashboard query is one a provisioner
/// exports: a renamed metric breaks this test, not the operator's alerts.
#[test]
fn alerts_and_dashboard_query_only_exported_metrics() {
    let metrics = bucket_provisioner::kubernetes::telemetry::Metrics::new();
    metrics.reconcile();
    metrics.error("DeleteFailed");
    metrics.observe_provisioning("provision", 1.0);
    let usage = bucket_provisioner::BucketUsage {
        objects: 1,
        bytes: 1,
        max_objects: Some(2),
        max_bytes: Some(2),
        ..Default::default()
    };
    metrics.set_bucket_usage("b", &usage);
    // The hostPath binary adds its endpoint's answers to the same registry.
    metrics.register(s3_endpoint::s3::EndpointMetrics::register).answered(200);
    let exported: BTreeSet<String> = metrics
        .encode()
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect();
    for file in ["files/alerts.yaml", "files/dashboard.json"] {
        let source = std::fs::read_to_string(chart().join(file)).unwrap();
        let used = source
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("bucket_provisioner_"));
        let mut count = 0;
        for name in used {
            count += 1;
            assert!(exported.contains(name), "{file} queries {name}, which is not exported");
        }
        assert!(count >= 4, "{file} queries the provisioners' metrics");
    }
}

/// `promtool test rules` passes, and every alert has a test case in which it fires.
#[test]
fn alert_rules_pass_their_promtool_tests() {
    let rules = chart().join("files/alerts.yaml");
    let tests = repo("tests/prometheus/alerts-test.yaml");
    for args in [vec!["check", "rules"], vec!["test", "rules"]] {
        let file = if args[0] == "check" { &rules } else { &tests };
        let output =
            Command::new(promtool_bin()).args(&args).arg(file).output().expect("running promtool");
        assert!(
            output.status.success(),
            "promtool {args:?}:\n{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }
    let source: Value = serde_yaml::from_str(&std::fs::read_to_string(&rules).unwrap()).unwrap();
    let alerts: BTreeSet<&str> = source["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str())
        .collect();
    let cases: Value = serde_yaml::from_str(&std::fs::read_to_string(&tests).unwrap()).unwrap();
    let fired: BTreeSet<&str> = cases["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .filter(|case| case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|case| case["alertname"].as_str())
        .collect();
    assert_eq!(alerts, fired, "every alert has a case where it fires (and only those)");
}

/// Every object the chart makes with every provisioner enabled passes the real apiserver's
/// validation (server-side dry-run), as `helm install` would.
#[tokio::test]
async fn chart_objects_are_accepted_by_the_apiserver() {
    let client = client_with_crds().await;
    let rendered = render(&["-f", &values_file("everything-values.yaml")]);
    let namespace = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}
    });
    let objects: Vec<(PathBuf, DynamicObject)> = std::iter::once(namespace)
        .chain(rendered)
        .map(|o| (PathBuf::from(key(&o)), serde_json::from_value(o).unwrap()))
        .collect();
    assert!(objects.len() > 20);
    apply_objects(&client, &objects, Apply::DryRun).await.unwrap_or_else(|e| panic!("{e:#}"));
}

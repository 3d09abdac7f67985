//! What the benchmarks share: counting a program's API requests from the audit log of a control
//! plane started with [`Options::audit`](crate::Options::audit) (who asked for what, by verb and
//! resource), its memory, percentiles, and waiting at scale.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::{ControlPlane, Options, TokenUser, create_namespace, unique_suffix};

/// One request, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// `get`, `list`, `watch`, `create`, `patch`, ...
    pub verb: String,
    /// The resource, with `/subresource` when there is one.
    pub resource: String,
}

impl Request {
    /// Whether it changes something.
    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
    }

    /// Whether it reads one object.
    pub fn is_read(&self) -> bool {
        self.verb == "get"
    }
}

/// The requests of `user` in the audit log from byte `from` on, and the offset to read on from.
pub fn requests_since(log: &Path, user: &str, from: u64) -> (Vec<Request>, u64) {
    let text = std::fs::read(log).unwrap_or_default();
    let start = (from as usize).min(text.len());
    let mut requests = Vec::new();
    for line in String::from_utf8_lossy(&text[start..]).lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if event["user"]["username"] != user {
            continue;
        }
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or("").to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let verb = event["verb"].as_str().unwrap_or("").to_owned();
        requests.push(Request { verb, resource });
    }
    (requests, text.len() as u64)
}

/// Writes and reads per object of `count`, in total and by verb and resource, as report lines.
pub fn per_object(requests: &[Request], count: usize, noun: &str) -> String {
    let mut out = String::new();
    let writes = requests.iter().filter(|r| r.is_write()).count();
    let reads = requests.iter().filter(|r| r.is_read()).count();
    let lists = requests.iter().filter(|r| matches!(r.verb.as_str(), "list" | "watch")).count();
    let n = count.max(1) as f64;
    writeln!(
        out,
        "  API writes per {noun}: {:.2}   reads (GET) per {noun}: {:.2}   list/watch: {lists}",
        writes as f64 / n,
        reads as f64 / n
    )
    .unwrap();
    let mut by_kind: BTreeMap<&Request, usize> = BTreeMap::new();
    for request in requests.iter().filter(|r| r.is_write() || r.is_read()) {
        *by_kind.entry(request).or_default() += 1;
    }
    for (request, count) in by_kind {
        let (verb, resource) = (&request.verb, &request.resource);
        writeln!(out, "    {verb:>7} {resource:<32} {:6.2} per {noun}", count as f64 / n).unwrap();
    }
    out
}

/// `--output FILE` from the benchmark's command line, if given.
pub fn output_arg() -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--output" {
            return args.next();
        }
    }
    None
}

/// The number in environment variable `name`, or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Resident and peak resident memory of process `pid` in MiB, from the kernel's accounting.
pub fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The `p` quantile (0 to 1) of sorted durations, in seconds.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64()
}

/// Polls `done` until it holds, saying every 30 s what it still waits for; panics after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    let mut last_report = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} did not happen within {limit:?}");
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!("bench: still waiting for {what} ({:.0} s)", started.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates namespaces `<prefix>-0` to `<prefix>-<count - 1>` and answers their names.
pub async fn namespaces(client: &Client, prefix: &str, count: usize) -> Vec<String> {
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    for name in &names {
        create_namespace(client, name).await;
    }
    names
}

/// Requests in flight while creating or deleting many objects, as a burst of users would.
pub const IN_FLIGHT: usize = 32;

/// A control plane that audits the requests of one user, and that user's kubeconfig.
pub struct AuditedPlane {
    /// The control plane.
    pub plane: ControlPlane,
    /// An administrator's client, for the benchmark itself.
    pub client: Client,
    /// A kubeconfig of `user` (cluster administrator too), for the program measured.
    pub kubeconfig: PathBuf,
    /// The audit log.
    pub audit: PathBuf,
}

impl AuditedPlane {
    /// Starts a control plane whose audit log records every request of `user`.
    pub async fn start(user: &str) -> AuditedPlane {
        let token = format!("bench-{}", unique_suffix());
        let options = Options {
            audit: true,
            tokens: vec![TokenUser {
                token: token.clone(),
                user: user.into(),
                groups: vec!["system:masters".into()],
            }],
            ..Default::default()
        };
        let plane = ControlPlane::start_with(&options).expect("starting the control plane");
        let client = plane.client().await;
        let kubeconfig = plane.kubeconfig_for_token(&token).expect("a kubeconfig");
        let audit = plane.audit_log().expect("an audited control plane").to_owned();
        AuditedPlane { plane, client, kubeconfig, audit }
    }
}

/// Creates `count` objects made by `object(i)`, in namespace `namespaces[i % len]`, with
/// [`IN_FLIGHT`] requests at a time; answers `namespace/name` of each and when its create
/// returned.
pub async fn create_all<K>(
    client: &Client,
    namespaces: &[String],
    count: usize,
    object: impl Fn(usize) -> K,
) -> Vec<(String, Instant)>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    futures::stream::iter(0..count)
        .map(|i| {
            let api: Api<K> = Api::namespaced(client.clone(), &namespaces[i % namespaces.len()]);
            let object = object(i);
            async move {
                let created = api.create(&PostParams::default(), &object).await.unwrap();
                let key =
                    format!("{}/{}", created.namespace().unwrap_or_default(), created.name_any());
                (key, Instant::now())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await
}

/// Deletes the objects named `namespace/name` in `keys`, [`IN_FLIGHT`] requests at a time.
pub async fn delete_all<K>(client: &Client, keys: &[(String, Instant)])
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    futures::stream::iter(keys.iter().map(|(key, _)| key.clone()))
        .map(|key| {
            let client = client.clone();
            async move {
                let (namespace, name) = key.split_once('/').unwrap();
                let api: Api<K> = Api::namespaced(client, namespace);
                api.delete(name, &DeleteParams::default()).await.unwrap();
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
}

/// A report line of latencies from each create in `created` to when `seen` saw it done.
pub fn latencies(
    what: &str,
    created: &[(String, Instant)],
    seen: &std::collections::HashMap<String, Instant>,
) -> String {
    let mut latencies: Vec<Duration> =
        created.iter().map(|(key, at)| seen[key].saturating_duration_since(*at)).collect();
    latencies.sort();
    format!(
        "  {what}: p50 {:.2} s, p99 {:.2} s, max {:.2} s\n",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    )
}

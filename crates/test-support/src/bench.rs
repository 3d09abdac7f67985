//! What the benchmarks share: counting a program's API requests from the audit log of a control
//! plane started with [`Options::audit`](crate::Options::audit) (who asked for what, by verb and
//! resource), its memory, percentiles, and waiting at scale.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

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
        let namespace = Namespace {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("creating a benchmark namespace");
    }
    names
}

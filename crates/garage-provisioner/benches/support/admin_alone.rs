//! Garage's admin API alone, driven with exactly the calls the provisioner makes for a claim, by
//! as many tasks as the controller has workers, each claim's calls one after the other: the
//! rate the provisioner is measured against. Its own plain HTTP client and its own key in the
//! provisioner's place, so nothing of the provisioner is in the way.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use test_support::bench::percentile;

type Http = Client<HttpConnector, Full<Bytes>>;

/// One phase's figures: how long it took and each operation's latencies.
pub struct Phase {
    /// From the first call to the last answer.
    pub elapsed: Duration,
    /// Claims done.
    pub claims: usize,
    /// Calls sent.
    pub calls: usize,
    /// Latencies by operation, in the order first seen.
    pub latencies: Vec<(&'static str, Vec<Duration>)>,
}

impl Phase {
    /// Claims per second.
    pub fn rate(&self) -> f64 {
        self.claims as f64 / self.elapsed.as_secs_f64()
    }

    /// `CreateBucket 135 ms, ...`: the median of each operation.
    pub fn medians(&self) -> String {
        self.latencies
            .iter()
            .map(|(operation, latencies)| {
                let mut sorted = latencies.clone();
                sorted.sort();
                format!("{operation} {:.0} ms", percentile(&sorted, 0.5) * 1000.0)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The admin API at `url` with `token`, and the calls made so far.
struct Admin {
    http: Http,
    url: String,
    token: String,
    latencies: Mutex<Vec<(&'static str, Vec<Duration>)>>,
    calls: AtomicUsize,
}

impl Admin {
    async fn call(&self, operation: &'static str, query: &str, body: Option<Value>) -> Value {
        let method = if body.is_some() || operation.starts_with("Delete") {
            Method::POST
        } else {
            Method::GET
        };
        let body = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(format!("{}/v2/{operation}{query}", self.url))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(body))
            .unwrap();
        let started = Instant::now();
        let response = self.http.request(request).await.expect("an answer of the admin API");
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let took = started.elapsed();
        self.calls.fetch_add(1, Ordering::Relaxed);
        assert!(
            status.is_success(),
            "{operation}{query}: {status} {}",
            String::from_utf8_lossy(&bytes)
        );
        let mut latencies = self.latencies.lock().await;
        match latencies.iter_mut().find(|(o, _)| *o == operation) {
            Some((_, list)) => list.push(took),
            None => latencies.push((operation, vec![took])),
        }
        drop(latencies);
        if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() }
    }
}

/// A key id of Garage's form, random.
fn key_id() -> String {
    format!("GK{:024x}", rand::random::<u128>() >> 32)
}

fn secret() -> String {
    format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>())
}

/// Runs `work(i)` for every claim `i` below `claims`, on `tasks` tasks; answers the time taken.
async fn on_tasks<F, Fut>(claims: usize, tasks: usize, work: F) -> Duration
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let work = Arc::new(work);
    let started = Instant::now();
    let running: Vec<_> = (0..tasks)
        .map(|_| {
            let (next, work) = (next.clone(), work.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= claims {
                        return;
                    }
                    work(i).await;
                }
            })
        })
        .collect();
    for task in running {
        task.await.unwrap();
    }
    started.elapsed()
}

/// Provisions `claims` claims' buckets and keys with the provisioner's four calls
/// (`CreateBucket` with the ownership record, `AddBucketAlias` with the name, `ImportKey`,
/// `AllowBucketKey`), then deletes them with its deletion's calls (`DeleteKey`, `GetKeyInfo` of
/// its own key, `GetBucketInfo`, `AllowBucketKey`, `DeleteBucket`), on `tasks` tasks. Answers
/// both phases.
pub async fn run(url: &str, token: &str, claims: usize, tasks: usize) -> (Phase, Phase) {
    let admin = Arc::new(Admin {
        http: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
        url: url.to_owned(),
        token: token.to_owned(),
        latencies: Mutex::default(),
        calls: AtomicUsize::new(0),
    });
    let service = key_id();
    let body = json!({"accessKeyId": service, "secretAccessKey": secret(), "name": "alone"});
    admin.call("ImportKey", "", Some(body)).await;
    let prefix = format!("alone-{:08x}", rand::random::<u32>());
    let keys: Arc<Vec<String>> = Arc::new((0..claims).map(|_| key_id()).collect());

    admin.calls.store(0, Ordering::Relaxed);
    admin.latencies.lock().await.clear();
    let (a, s, p, k) = (admin.clone(), service.clone(), prefix.clone(), keys.clone());
    let elapsed = on_tasks(claims, tasks, move |i| {
        let (admin, service, name, key) = (a.clone(), s.clone(), format!("{p}-{i}"), k[i].clone());
        async move {
            let record = json!({"accessKeyId": service, "alias": format!("obc-{name}.delete"),
                "allow": {"read": true, "write": true, "owner": true}});
            let made = admin.call("CreateBucket", "", Some(json!({"localAlias": record}))).await;
            let id = made["id"].as_str().unwrap().to_owned();
            let alias = json!({"bucketId": id, "globalAlias": name});
            admin.call("AddBucketAlias", "", Some(alias)).await;
            let import = json!({"accessKeyId": key, "secretAccessKey": secret(), "name": name});
            admin.call("ImportKey", "", Some(import)).await;
            let allow = json!({"bucketId": id, "accessKeyId": key,
                "permissions": {"read": true, "write": true, "owner": false}});
            admin.call("AllowBucketKey", "", Some(allow)).await;
        }
    })
    .await;
    let calls = admin.calls.swap(0, Ordering::Relaxed);
    let latencies = std::mem::take(&mut *admin.latencies.lock().await);
    let provision = Phase { elapsed, claims, calls, latencies };

    let (a, s, p, k) = (admin.clone(), service.clone(), prefix.clone(), keys.clone());
    let elapsed = on_tasks(claims, tasks, move |i| {
        let (admin, service, name, key) = (a.clone(), s.clone(), format!("{p}-{i}"), k[i].clone());
        async move {
            admin.call("DeleteKey", &format!("?id={key}"), None).await;
            admin.call("GetKeyInfo", &format!("?id={service}&showSecretKey=true"), None).await;
            let info = admin.call("GetBucketInfo", &format!("?globalAlias={name}"), None).await;
            let id = info["id"].as_str().unwrap().to_owned();
            let allow = json!({"bucketId": id, "accessKeyId": service,
                "permissions": {"read": true, "write": true, "owner": true}});
            admin.call("AllowBucketKey", "", Some(allow)).await;
            admin.call("DeleteBucket", &format!("?id={id}"), None).await;
        }
    })
    .await;
    let calls = admin.calls.swap(0, Ordering::Relaxed);
    let latencies = std::mem::take(&mut *admin.latencies.lock().await);
    (provision, Phase { elapsed, claims, calls, latencies })
}

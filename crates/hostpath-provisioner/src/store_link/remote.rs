//! The controller's side: store calls sent to the endpoint's Unix socket.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use s3_endpoint::{Quota, StoreError, Usage};
use tokio::net::UnixStream;

use super::call::{Call, Reply};
use super::wire::{Failure, receive, send};

/// What a bucket holds and what one claim's key stored in it, and the bucket's quota.
pub type UsageFigures = (Usage, Usage, Quota);

/// Usage as last read from the endpoint, by bucket and claim, with when it was last asked for.
type UsageCache = HashMap<(String, Option<String>), (Option<UsageFigures>, Instant)>;

/// The endpoint's store, reached over its socket.
#[derive(Debug, Clone)]
pub struct RemoteStore {
    socket: PathBuf,
    identity: String,
    root: PathBuf,
    usage: Arc<Mutex<UsageCache>>,
}

impl RemoteStore {
    /// Reaches the store behind `socket`, waiting (with `wait` between tries) until it answers:
    /// the endpoint's container may start after the controller's.
    pub async fn connect(socket: &Path, wait: std::time::Duration) -> RemoteStore {
        let mut told = false;
        loop {
            match call(socket, Call::Hello).await {
                Ok(Reply::Hello { identity, root }) => {
                    let usage = Arc::default();
                    return RemoteStore { socket: socket.to_owned(), identity, root, usage };
                }
                Ok(_) => tracing::warn!("the store socket answered hello with something else"),
                Err(e) if !told => {
                    told = true;
                    tracing::info!(socket = %socket.display(), error = %e,
                        "waiting for the endpoint's store socket");
                }
                Err(_) => {}
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// The store's identity, as the endpoint opened it.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The store's root, as the endpoint sees it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) async fn call(&self, call: Call) -> Result<Reply, StoreError> {
        self::call(&self.socket, call).await
    }

    /// The usage last read of `bucket` (and `user_id`'s share), from memory: the library asks
    /// it of every bound bucket each usage interval. A pair never asked before is read at the
    /// next [`RemoteStore::refresh_usage`].
    pub fn usage_now(&self, bucket: &str, user_id: Option<&str>) -> Option<UsageFigures> {
        let mut cache = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        let entry = cache
            .entry((bucket.to_owned(), user_id.map(str::to_owned)))
            .or_insert((None, Instant::now()));
        entry.1 = Instant::now();
        entry.0
    }

    /// Reads the usage asked for again every `every` until `stop` completes: what the library
    /// asks of [`RemoteStore::usage_now`] is then at most one interval old.
    pub async fn follow_usage(&self, every: Duration, stop: impl std::future::Future<Output = ()>) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                _ = ticks.tick() => self.refresh_usage(every * 3).await,
                () = &mut stop => return,
            }
        }
    }

    /// Reads again the usage of every pair asked for within `recent`, and forgets the others.
    pub async fn refresh_usage(&self, recent: Duration) {
        let asked: Vec<(String, Option<String>)> = {
            let mut cache = self.usage.lock().unwrap_or_else(|e| e.into_inner());
            cache.retain(|_, (_, asked)| asked.elapsed() <= recent);
            cache.keys().cloned().collect()
        };
        let mut failed = 0usize;
        for (bucket, user_id) in asked {
            let call = Call::Usage { bucket: bucket.clone(), user_id: user_id.clone() };
            let figures = match self.call(call).await {
                Ok(Reply::Usage { usage, quota }) => {
                    usage.map(|(total, claim)| (total, claim, quota.unwrap_or_default()))
                }
                _ => {
                    failed += 1;
                    continue;
                }
            };
            let mut cache = self.usage.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = cache.get_mut(&(bucket, user_id)) {
                entry.0 = figures;
            }
        }
        if failed > 0 {
            tracing::warn!(
                failed,
                "could not read some buckets' usage from the endpoint; \
                their last figures stand"
            );
        }
    }
}

async fn call(socket: &Path, call: Call) -> Result<Reply, StoreError> {
    let unreachable = |e: io::Error| {
        StoreError::Io(io::Error::new(
            e.kind(),
            format!("the endpoint's store at {} did not answer: {e}", socket.display()),
        ))
    };
    let mut stream = UnixStream::connect(socket).await.map_err(unreachable)?;
    send(&mut stream, &call).await.map_err(unreachable)?;
    let answer: Result<Reply, Failure> = receive(&mut stream).await.map_err(unreachable)?;
    answer.map_err(StoreError::from)
}

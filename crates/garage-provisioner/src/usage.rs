//! What bound buckets hold, kept in memory: the library asks from memory only
//! ([`bucket_provisioner::Provisioner::usage`]), so a loop of the binary refreshes the buckets
//! asked about with `GetBucketInfo`, and every provision or update records what it saw.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bucket_provisioner::BucketUsage;

use crate::api::BucketInfo;
use crate::params::Settings;

/// Buckets asked about, with where they live and what they held when last seen.
#[derive(Default)]
pub struct UsageCache {
    buckets: Mutex<HashMap<String, Watched>>,
}

struct Watched {
    settings: Settings,
    usage: Option<BucketUsage>,
    asked: Instant,
}

impl UsageCache {
    /// What `bucket` held when last seen; remembers that it is asked about.
    pub fn get(&self, bucket: &str, settings: Settings) -> Option<BucketUsage> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let entry = buckets.entry(bucket.to_string()).or_insert_with(|| Watched {
            settings: settings.clone(),
            usage: None,
            asked: Instant::now(),
        });
        entry.settings = settings;
        entry.asked = Instant::now();
        entry.usage.clone()
    }

    /// Records what `info` says `bucket` holds.
    pub fn record(&self, bucket: &str, settings: &Settings, info: &BucketInfo) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let entry = buckets.entry(bucket.to_string()).or_insert_with(|| Watched {
            settings: settings.clone(),
            usage: None,
            asked: Instant::now(),
        });
        entry.usage = Some(usage_of(info));
    }

    /// Forgets `bucket` (deleted, or no longer this claim's).
    pub fn forget(&self, bucket: &str) {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).remove(bucket);
    }

    /// The buckets asked about within `recent`, with their settings; older ones are forgotten
    /// (their claims went, or this process lost the lead).
    pub fn watched(&self, recent: Duration) -> Vec<(String, Settings)> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.retain(|_, w| w.asked.elapsed() <= recent);
        buckets.iter().map(|(name, w)| (name.clone(), w.settings.clone())).collect()
    }
}

/// Usage as Garage counts it: objects, bytes including unfinished multipart uploads, and the
/// bucket's quotas. Garage does not tell keys apart, so the per-claim figures stay unknown.
pub fn usage_of(info: &BucketInfo) -> BucketUsage {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    BucketUsage {
        objects: count(info.objects),
        bytes: count(info.bytes) + count(info.unfinished_multipart_upload_bytes),
        claim_objects: None,
        claim_bytes: None,
        max_objects: info.quotas.max_objects,
        max_bytes: info.quotas.max_size,
    }
}

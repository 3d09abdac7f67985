//! Events, published through recorders that are replaced before their memory grows for ever.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::log_limit::SharedThrottle;

/// How long one [`Recorder`] serves before a fresh one replaces it.
const RECORDER_LIFETIME: Duration = Duration::from_secs(600);

/// Publishes Events through a [`Recorder`] replaced every [`RECORDER_LIFETIME`]. A recorder keeps
/// each Event it published for six minutes, to count repeats into a series, in a map that never
/// shrinks: kept for good, a burst of thousands of Events (a mass deletion) would hold its memory
/// for good too. A repeat across a replacement starts a new Event instead of counting on.
pub struct Events {
    client: Client,
    reporter: Reporter,
    current: Mutex<(Instant, Recorder)>,
    /// Publishing fails with the API: told once a minute.
    failing: SharedThrottle,
}

impl Events {
    /// Events reported as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let recorder = Recorder::new(client.clone(), reporter.clone());
        let current = Mutex::new((Instant::now(), recorder));
        Self { client, reporter, current, failing: SharedThrottle::default() }
    }

    fn recorder(&self) -> Recorder {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.0.elapsed() > RECORDER_LIFETIME {
            let fresh = Recorder::new(self.client.clone(), self.reporter.clone());
            *current = (Instant::now(), fresh);
        }
        current.1.clone()
    }
}

/// Publishes an Event on `subject`; a failure to publish is logged, never fatal.
pub async fn publish(
    events: &Events,
    subject: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: &str,
    action: &str,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        // Events are limited to 1 kB of message.
        note: Some(note.chars().take(1000).collect()),
        action: action.into(),
        secondary: None,
    };
    match events.recorder().publish(&event, subject).await {
        Ok(()) => {
            events.failing.reset();
        }
        Err(e) => {
            if let Some(held_back) = events.failing.allow() {
                let name = subject.name.as_deref().unwrap_or("");
                tracing::warn!(object = name, error = %e, repeats_since_last_report = held_back,
                    "could not publish event {reason}");
            }
        }
    }
}

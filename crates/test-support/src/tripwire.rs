//! An address no operator wrote, for hostile-tenant tests: a tenant names it wherever it can, and
//! the test asserts that nothing ever connected to it, which would mean a credential could leave
//! for an address the tenant chose.

use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A listener on loopback that records the start of every connection made to it.
pub struct Tripwire {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The host and port alone.
    pub address: String,
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Tripwire {
    /// Listens on a free loopback port.
    pub async fn start() -> Tripwire {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding a loopback port");
        let address = listener.local_addr().expect("the tripwire's address").to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let record = record.clone();
                tokio::spawn(async move {
                    let mut head = vec![0; 4096];
                    let read = tokio::time::timeout(
                        std::time::Duration::from_secs(2),
                        stream.read(&mut head),
                    )
                    .await;
                    let n = match read {
                        Ok(Ok(n)) => n,
                        _ => 0,
                    };
                    let text = String::from_utf8_lossy(&head[..n]).into_owned();
                    record.lock().unwrap_or_else(|e| e.into_inner()).push(text);
                });
            }
        });
        Tripwire { url: format!("http://{address}"), address, seen, task }
    }

    /// The first bytes of every connection made so far (empty when none was).
    pub fn connections(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Fails the test, showing what arrived, if anything connected.
    pub fn assert_untouched(&self, context: &str) {
        let seen = self.connections();
        assert!(
            seen.is_empty(),
            "{context}: {} connection(s) reached the tenant's address: {seen:?}",
            seen.len()
        );
    }
}

impl Drop for Tripwire {
    fn drop(&mut self) {
        self.task.abort();
    }
}

//! A proxy between a backend and moto that loses one answer: it serves one request per
//! connection (asking moto to close after each) and, for the request it is told to cut,
//! forwards the request whole (so it takes effect) and drops the answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A proxy in front of moto that serves one request per connection (it asks moto to close
/// after each) and, for the request numbered `cut`, forwards it whole and drops the answer.
pub struct CutProxy {
    /// `http://127.0.0.1:PORT`, for a StorageClass's `endpoint`.
    pub endpoint: String,
    seen: Arc<AtomicU64>,
    cut: Arc<AtomicU64>,
    was_cut: Arc<AtomicBool>,
}

impl CutProxy {
    /// A proxy to `upstream` (`host:port`) cutting nothing yet.
    pub async fn start(upstream: String) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let (seen, cut) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let was_cut = Arc::new(AtomicBool::new(false));
        let proxy =
            CutProxy { endpoint, seen: seen.clone(), cut: cut.clone(), was_cut: was_cut.clone() };
        tokio::spawn(async move {
            loop {
                let (client, _) = listener.accept().await.unwrap();
                let number = seen.fetch_add(1, Ordering::SeqCst) + 1;
                let dropped = number == cut.load(Ordering::SeqCst);
                if dropped {
                    was_cut.store(true, Ordering::SeqCst);
                }
                tokio::spawn(relay(client, upstream.clone(), dropped));
            }
        });
        proxy
    }

    /// Cuts the `n`th request from now (1 is the next one).
    pub fn cut_in(&self, n: u64) {
        self.was_cut.store(false, Ordering::SeqCst);
        self.cut.store(self.seen.load(Ordering::SeqCst) + n, Ordering::SeqCst);
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Whether the request [`CutProxy::cut_in`] named was cut.
    pub fn was_cut(&self) -> bool {
        self.was_cut.load(Ordering::SeqCst)
    }
}

/// One request of `client` to `upstream`, with `Connection: close`; its answer is handed back
/// unless `dropped`.
async fn relay(mut client: TcpStream, upstream: String, dropped: bool) {
    let mut head = Vec::new();
    let mut byte = [0u8; 4096];
    let end = loop {
        let n = client.read(&mut byte).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        head.extend_from_slice(&byte[..n]);
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let mut lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    lines.retain(|l| !l.to_ascii_lowercase().starts_with("connection:"));
    lines.insert(1, "Connection: close");
    let mut request = (lines.join("\r\n") + "\r\n\r\n").into_bytes();
    request.extend_from_slice(&head[end..]);
    let Ok(mut server) = TcpStream::connect(&upstream).await else { return };
    if server.write_all(&request).await.is_err() {
        return;
    }
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // The rest of the body, as it comes.
    tokio::spawn(async move { tokio::io::copy(&mut client_read, &mut server_write).await });
    let mut answer = Vec::new();
    let _ = server_read.read_to_end(&mut answer).await;
    if !dropped {
        let _ = client_write.write_all(&answer).await;
        let _ = client_write.shutdown().await;
    }
}

//! An HTTPS proxy that sends programs which only know a service's public host name (and honour
//! `HTTPS_PROXY` and `SSL_CERT_FILE`) to a server on loopback: it terminates TLS with
//! certificates of a CA made for the test and passes the plain bytes on. Python's standard
//! library does the TLS (`tls_proxy.py`), `openssl` makes the certificates.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::Supervised;

const SCRIPT: &str = include_str!("tls_proxy.py");

/// A running proxy; dropping it stops the proxy and removes its CA.
pub struct TlsProxy {
    /// `http://127.0.0.1:PORT`, for `HTTPS_PROXY`.
    pub url: String,
    /// The CA's certificate (PEM), for `SSL_CERT_FILE`.
    pub ca: PathBuf,
    process: Supervised,
}

fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let output =
        Command::new("openssl").args(args).current_dir(dir).output().context("running openssl")?;
    if !output.status.success() {
        bail!("openssl {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(())
}

impl TlsProxy {
    /// Starts a proxy sending every CONNECT to `127.0.0.1:upstream_port`.
    pub fn start(upstream_port: u16) -> Result<TlsProxy> {
        let dir = tempfile::Builder::new().prefix("tls-proxy-").tempdir()?.keep();
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=bucket-provisioner test CA",
            ],
        )?;
        let script = dir.join("tls_proxy.py");
        std::fs::write(&script, SCRIPT)?;
        let argv = [
            "python3",
            &script.display().to_string(),
            &dir.display().to_string(),
            "127.0.0.1",
            &upstream_port.to_string(),
        ]
        .map(String::from);
        let process = Supervised::start(&dir, &[("proxy", argv.to_vec())], &[])?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            let log = std::fs::read_to_string(process.log("proxy")).unwrap_or_default();
            if let Some(port) = log.split("listening on ").nth(1).and_then(|rest| {
                rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u16>().ok()
            }) {
                break port;
            }
            if Instant::now() > deadline {
                bail!("the TLS proxy did not start:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ok(TlsProxy { url: format!("http://127.0.0.1:{port}"), ca: dir.join("ca.pem"), process })
    }

    /// The last lines of its log (connections that failed).
    pub fn log_tail(&self) -> String {
        self.process.log_tail("proxy", 40)
    }
}

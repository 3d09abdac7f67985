//! What the endpoint benchmarks share: the client they drive servers with, the CPU time of a
//! process, and free ports for the servers they start.

#![allow(dead_code)] // each bench uses its own subset

pub mod web_identity;

use std::process::Command;
use std::sync::OnceLock;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Credentials, Region};

/// An aws-sdk-s3 client of a server on `port` of the loopback, path style, over plain HTTP.
pub fn client(port: u16, key: &str, secret: &str) -> Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(Credentials::new(key, secret, None, None, "bench"))
        .force_path_style(true)
        .build();
    Client::from_conf(config)
}

/// A port of the loopback free at the time of asking, for a server started next.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The median of `values` (the upper one of an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// CPU seconds of process `pid` so far (all threads), as user and system time.
pub fn cpu_times(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let seconds = |field: &str| field.parse::<f64>().unwrap() / clock_ticks();
    (seconds(fields[11]), seconds(fields[12]))
}

fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output().ok();
        out.and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok()).unwrap_or(100.0)
    })
}

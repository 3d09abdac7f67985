//! Ports for the servers a test starts, chosen below the kernel's ephemeral range.
//!
//! A port from `bind(0)` comes from the ephemeral range, the range every outgoing connection
//! takes its local port from. Between choosing such a port and the server binding it, any client
//! socket on the machine may take it, and the server fails with "Address already in use". Below
//! that range only a deliberate bind takes a port, so a port found free there stays free.

use std::io::{Error, ErrorKind, Result};
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

/// How many ports below the ephemeral range are handed out.
const SPAN: u16 = 12_000;

/// Where the ephemeral range starts when the kernel does not say (Linux's default).
const DEFAULT_EPHEMERAL_START: u16 = 32_768;

/// A port free on loopback now, outside the ephemeral range, not handed out before by this
/// process (until all of the range has been).
pub fn free_port() -> Result<u16> {
    free_port_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// [`free_port`] for a server that binds `address`.
pub fn free_port_on(address: IpAddr) -> Result<u16> {
    // One sequence for the whole process: two servers of one test never get the same port
    // before either binds it.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (first, span) = unclaimed_range();
    // Each process starts at its own place, so test binaries running side by side rarely try
    // the same ports.
    let start = std::process::id().wrapping_mul(7_919);
    let candidates = (0..span).map(|_| {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        first + (start.wrapping_add(step) % span) as u16
    });
    first_bindable(address, candidates).ok_or_else(|| {
        Error::new(
            ErrorKind::AddrInUse,
            format!("no free port on {address} in {first}..{}", u32::from(first) + span),
        )
    })
}

/// The first of `candidates` nothing listens on at `address`.
fn first_bindable(address: IpAddr, mut candidates: impl Iterator<Item = u16>) -> Option<u16> {
    candidates.find(|port| TcpListener::bind((address, *port)).is_ok())
}

/// The first port and the number of ports below the ephemeral range that are handed out.
fn unclaimed_range() -> (u16, u32) {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_START);
    // Never the privileged ports.
    let first = ephemeral_start.saturating_sub(SPAN).max(1_024);
    (first, u32::from(ephemeral_start.saturating_sub(first)).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_and_never_repeat() {
        let (first, span) = unclaimed_range();
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        for port in &ports {
            assert!(
                u32::from(*port) >= u32::from(first) && u32::from(*port) < u32::from(first) + span
            );
        }
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    }

    #[test]
    fn a_port_in_use_is_passed_over() {
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, free_port().unwrap())).unwrap();
        let in_use = taken.local_addr().unwrap().port();
        let next = free_port().unwrap();
        let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(first_bindable(localhost, [in_use, next].into_iter()), Some(next));
        assert_eq!(first_bindable(localhost, [in_use].into_iter()), None);
    }
}

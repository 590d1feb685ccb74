//! Loopback ports for the `sluice serve` children the failover bench and
//! the end-to-end tests start.
//!
//! A port is picked below the kernel's ephemeral range (32768 and up on
//! Linux). A port the kernel handed out for `:0` is also a candidate
//! source port of the next outgoing connection, so a child told to listen
//! there a moment later could find it taken. Each call in a process tries
//! the next port of a stride that starts at a place picked from the
//! process id, so parallel tests and test binaries rarely try the same one.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port tried.
const LOW: u32 = 10_000;
/// How many ports are tried: 10,000 up to 31,999.
const SPAN: u32 = 22_000;

/// A loopback port that was free when checked, below the ephemeral range
/// when one is free there; otherwise whatever `:0` gives.
pub fn free_port() -> std::io::Result<u16> {
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(u32::MAX, start(std::process::id()), Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..SPAN {
        let port = port_at(NEXT.fetch_add(1, Ordering::SeqCst));
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Where a process's stride starts.
fn start(pid: u32) -> u32 {
    pid.wrapping_mul(7919) % SPAN
}

/// The port at step `n` of a stride.
fn port_at(n: u32) -> u16 {
    u16::try_from(LOW + n % SPAN).expect("LOW + SPAN is below 65536")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_below_the_ephemeral_range() {
        for n in [0, 1, SPAN - 1, SPAN, SPAN + 5, u32::MAX - 1] {
            let p = port_at(n);
            assert!((10_000..32_768).contains(&p), "step {n} gave {p}");
        }
        assert_eq!(port_at(0), 10_000);
        assert_eq!(port_at(SPAN - 1), 31_999);
        assert_eq!(port_at(SPAN), 10_000);
    }

    #[test]
    fn strides_of_different_processes_start_apart() {
        assert_ne!(start(1000), start(1001));
        assert!(start(u32::MAX) < SPAN);
    }

    #[test]
    fn a_picked_port_can_be_bound_and_the_next_pick_differs() {
        let a = free_port().unwrap();
        let b = free_port().unwrap();
        assert_ne!(a, b);
        TcpListener::bind(("127.0.0.1", a)).unwrap();
    }
}

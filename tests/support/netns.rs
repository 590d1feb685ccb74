//! Real network partitions: each node in a network namespace of its own,
//! joined to the host by a veth pair on one bridge, and cut with iptables
//! rules inside its namespace (so a rule dies with the namespace).
//!
//! ```text
//!   host (root namespace)            namespace <tag>n0
//!   bridge <tag>br 10.<k>.0.1/24 ── veth ── 10.<k>.0.10   node 0
//!                                ── veth ── 10.<k>.0.11   node 1 (namespace <tag>n1)
//!                                ...
//! ```
//!
//! The host end (10.<k>.0.1) is where the test's own listeners sit (the
//! proxies in front of S3 and DynamoDB Local) and where its clients come
//! from; the nodes talk to each other over the bridge. Needs root, `ip` and
//! `iptables`; [`Net::create`] says why not otherwise, and callers skip.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

/// What a [`Cut`] separates a node from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The other nodes, both ways (the host and its stores stay reachable).
    Peers,
    /// One TCP port on the host (a store's proxy), both ways.
    Port(u16),
    /// Answers from these host ports only: requests reach the store and
    /// apply, their replies never arrive.
    RepliesFrom(u16, u16),
}

pub struct Net {
    tag: String,
    /// The second octet of 10.<k>.0.0/24.
    k: u8,
    nodes: usize,
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// A bridge and `nodes` namespaces, named from `tag` (at most 6
    /// characters: interface names are short). `Err` says what is missing.
    pub fn create(tag: &str, nodes: usize) -> Result<Net, String> {
        assert!(tag.len() <= 6 && nodes < 80);
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root".into());
        }
        for tool in ["ip", "iptables"] {
            if Command::new(tool).arg("-V").output().is_err() && Command::new(tool).arg("--version").output().is_err() {
                return Err(format!("no `{tool}`"));
            }
        }
        // A /24 of 10.0.0.0/8 nobody on this host uses, from the process id.
        let k = 100 + (std::process::id() % 150) as u8;
        let net = Net {
            tag: tag.to_string(),
            k,
            nodes,
        };
        net.teardown();
        let br = net.bridge();
        let host = format!("{}/24", net.host());
        run(&["ip", "link", "add", &br, "type", "bridge"])?;
        run(&["ip", "addr", "add", &host, "dev", &br])?;
        run(&["ip", "link", "set", &br, "up"])?;
        for n in 0..nodes {
            let (ns, outer, inner) = (net.ns(n), format!("{}h{n}", net.tag), format!("{}n{n}", net.tag));
            let addr = format!("{}/24", net.addr(n));
            run(&["ip", "netns", "add", &ns])?;
            run(&["ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner])?;
            run(&["ip", "link", "set", &outer, "master", &br])?;
            run(&["ip", "link", "set", &outer, "up"])?;
            run(&["ip", "link", "set", &inner, "netns", &ns])?;
            run(&["ip", "netns", "exec", &ns, "ip", "addr", "add", &addr, "dev", &inner])?;
            run(&["ip", "netns", "exec", &ns, "ip", "link", "set", &inner, "up"])?;
            run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
            // iptables must work in the namespace, or no cut can be made.
            run(&["ip", "netns", "exec", &ns, "iptables", "-L", "-n"])?;
        }
        // Traffic between bridge ports must not go through the host's own
        // iptables FORWARD chain (Docker-style hosts drop it).
        let _ = run(&["iptables", "-I", "FORWARD", "-i", &br, "-o", &br, "-j", "ACCEPT"]);
        Ok(net)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    /// The namespace of node `n`.
    pub fn ns(&self, n: usize) -> String {
        format!("{}n{n}", self.tag)
    }

    /// The host's address on the bridge.
    pub fn host(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, self.k, 0, 1))
    }

    /// Node `n`'s address.
    pub fn addr(&self, n: usize) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, self.k, 0, 10 + n as u8))
    }

    /// The prefix that runs a command in node `n`'s namespace.
    pub fn exec_prefix(&self, n: usize) -> Vec<String> {
        ["ip", "netns", "exec"]
            .map(String::from)
            .into_iter()
            .chain([self.ns(n)])
            .collect()
    }

    fn iptables(&self, n: usize, rule: &[&str]) -> Result<(), String> {
        let ns = self.ns(n);
        let mut args = vec!["ip", "netns", "exec", &ns, "iptables"];
        args.extend_from_slice(rule);
        run(&args)
    }

    /// Cut node `n` as `cut` says, on top of any cut already made.
    pub fn cut(&self, n: usize, cut: Cut) -> Result<(), String> {
        let host = self.host().to_string();
        match cut {
            Cut::Peers => {
                for peer in (0..self.nodes).filter(|m| *m != n) {
                    let peer = self.addr(peer).to_string();
                    self.iptables(n, &["-A", "OUTPUT", "-d", &peer, "-j", "DROP"])?;
                    self.iptables(n, &["-A", "INPUT", "-s", &peer, "-j", "DROP"])?;
                }
                Ok(())
            }
            Cut::Port(port) => {
                let port = port.to_string();
                self.iptables(
                    n,
                    &["-A", "OUTPUT", "-d", &host, "-p", "tcp", "--dport", &port, "-j", "DROP"],
                )?;
                self.iptables(
                    n,
                    &["-A", "INPUT", "-s", &host, "-p", "tcp", "--sport", &port, "-j", "DROP"],
                )
            }
            Cut::RepliesFrom(a, b) => {
                for port in [a, b] {
                    let port = port.to_string();
                    self.iptables(
                        n,
                        &["-A", "INPUT", "-s", &host, "-p", "tcp", "--sport", &port, "-j", "DROP"],
                    )?;
                }
                Ok(())
            }
        }
    }

    /// Remove every cut of node `n`.
    pub fn heal(&self, n: usize) -> Result<(), String> {
        self.iptables(n, &["-F", "INPUT"])?;
        self.iptables(n, &["-F", "OUTPUT"])
    }

    fn teardown(&self) {
        for n in 0..self.nodes {
            let _ = run(&["ip", "netns", "del", &self.ns(n)]);
            let _ = run(&["ip", "link", "del", &format!("{}h{n}", self.tag)]);
        }
        let br = self.bridge();
        let _ = run(&["iptables", "-D", "FORWARD", "-i", &br, "-o", &br, "-j", "ACCEPT"]);
        let _ = run(&["ip", "link", "del", &br]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown();
    }
}

//! Several "hosts" on this machine for multi-node tests: each host is a
//! network namespace with a veth (its `eth0`) into a bridge the test
//! creates in the root namespace, the underlay (`172.20.<octet>.0/24`,
//! `.1` the bridge, `.10+i` host i, `<octet>` the test's CIDR lease, so
//! parallel tests never share a name or an address). A `skiff agent`
//! runs inside each host's namespace with its own data dir, containerd
//! and CNI bridge, and joins the server with a token. Traffic stays on
//! loopback, the bridge and those namespaces.
//!
//! Dropping it stops each agent by PID, runs `skiff reset` inside its
//! namespace (its pods, bridge, iptables, CNI state), deletes the
//! namespaces and the bridge.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use std::time::Duration;

use super::{free_port, wait_for, CidrLease, Cluster, Options, SKIFF};

/// A server on the underlay's bridge address and `count` hosts that
/// joined it with the command it printed, every node Ready. Fields drop
/// in order: the hosts first, while the server still holds the test's
/// lease, then the server, then the dir.
pub struct Env {
    pub underlay: Underlay,
    pub c: Cluster,
    _dir: tempfile::TempDir,
}

impl Env {
    /// `options` with the server bound to the underlay; `node_args` go to
    /// every node (the server's and the agents'), as the flags a cluster's
    /// nodes must share (the pod network's backend).
    pub fn start(count: usize, mut options: Options, node_args: &[&str]) -> Env {
        let cidr = CidrLease::take();
        let dir = tempfile::tempdir().unwrap();
        let mut underlay = Underlay::new(&cidr, count, dir.path());
        let node_args: Vec<String> = node_args.iter().map(|a| a.to_string()).collect();
        underlay.agent_args = node_args.clone();
        let gateway = underlay.gateway();
        options.bind_address = Some(gateway.clone());
        options.node_ip = Some(gateway.clone());
        options.extra.extend(underlay.vni_args());
        options.extra.extend(node_args);
        let c = Cluster::start_with(options, cidr);
        let mut env = Env {
            underlay,
            c,
            _dir: dir,
        };
        let (server, token) = env.c.printed_join();
        assert!(
            server.starts_with(&format!("https://{gateway}:")),
            "{server}"
        );
        for i in 0..count {
            env.underlay.join(i, &server, &token);
        }
        for host in &env.underlay.hosts {
            let node = format!("node/{}", host.node_name);
            wait_for("the host's node", Duration::from_secs(90), || {
                env.c
                    .kubectl_output(&["get", &node])
                    .status
                    .success()
                    .then_some(())
            });
            env.c.wait(&node, "condition=Ready", 90);
        }
        env
    }
}

/// Runs `ip ARGS`, panicking with its stderr when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The underlay: the bridge and its hosts.
pub struct Underlay {
    octet: u8,
    bridge: String,
    pub hosts: Vec<Host>,
    /// More flags for every agent [`Underlay::join`] starts.
    pub agent_args: Vec<String>,
}

/// One host: a network namespace, its address and its agent.
pub struct Host {
    pub netns: String,
    pub ip: String,
    pub node_name: String,
    pub data_dir: PathBuf,
    pub cni_bridge: String,
    pub kubelet_port: u16,
    agent: Option<Child>,
}

impl Underlay {
    /// The bridge (made before the server starts, so it can bind to
    /// [`Underlay::gateway`]) and `count` hosts under `dir`.
    pub fn new(cidr: &CidrLease, count: usize, dir: &Path) -> Self {
        let octet = cidr.octet;
        let bridge = format!("sku{octet}");
        // Left over by a test killed before its cleanup.
        let _ = Command::new("ip").args(["link", "del", &bridge]).output();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        let mut underlay = Underlay {
            octet,
            bridge: bridge.clone(),
            hosts: Vec::new(),
            agent_args: Vec::new(),
        };
        ip(&[
            "addr",
            "add",
            &format!("{}/24", underlay.gateway()),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        for i in 1..=count {
            let netns = format!("sk{octet}h{i}");
            let veth = format!("sk{octet}v{i}");
            let _ = Command::new("ip").args(["netns", "del", &netns]).output();
            // A namespace something still holds outlives `netns del`;
            // deleting our end of its veth frees the name either way.
            let _ = Command::new("ip").args(["link", "del", &veth]).output();
            ip(&["netns", "add", &netns]);
            let host = Host {
                netns: netns.clone(),
                ip: format!("172.20.{octet}.{}", 10 + i),
                node_name: format!("host-{octet}-{i}"),
                data_dir: dir.join(format!("host-{i}")),
                cni_bridge: format!("sk{octet}b{i}"),
                kubelet_port: free_port(),
                agent: None,
            };
            underlay.hosts.push(host);
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns,
            ]);
            ip(&["link", "set", &veth, "master", &bridge, "up"]);
            let h = underlay.hosts.last().unwrap();
            ip(&[
                "-n",
                &netns,
                "addr",
                "add",
                &format!("{}/24", h.ip),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &netns, "link", "set", "eth0", "up"]);
            ip(&["-n", &netns, "link", "set", "lo", "up"]);
            ip(&[
                "-n",
                &netns,
                "route",
                "add",
                "default",
                "via",
                &underlay.gateway(),
            ]);
        }
        underlay
    }

    /// The bridge's address: the server's, from the hosts.
    pub fn gateway(&self) -> String {
        format!("172.20.{}.1", self.octet)
    }

    /// The VXLAN network identifier of this test's nodes (its lease's
    /// octet: the server's node shares the root namespace with other
    /// tests' nodes, and two VXLAN devices there may not share one).
    pub fn vni_args(&self) -> Vec<String> {
        vec!["--vxlan-vni".into(), self.octet.to_string()]
    }

    /// Starts host `i`'s agent (0-based), joining `server` with the token
    /// in `token_file`.
    pub fn join(&mut self, i: usize, server: &str, token_file: &Path) {
        let host = &mut self.hosts[i];
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", host.netns))
            .args(["--", SKIFF, "agent"])
            .args(["--server", server])
            .arg("--token-file")
            .arg(token_file)
            .arg("--data-dir")
            .arg(&host.data_dir)
            .args(["--node-name", &host.node_name, "--node-ip", &host.ip])
            .args(["--bridge-name", &host.cni_bridge])
            .args(["--kubelet-port", &host.kubelet_port.to_string()])
            .args(["--vxlan-vni", &self.octet.to_string()])
            // The server's ranges, as an agent on another machine is told
            // them (its cluster DNS address is the Service range's 10th).
            .args(["--cluster-cidr", &format!("10.{}.0.0/17", self.octet)])
            .args(["--service-cidr", &format!("10.{}.128.0/17", self.octet)])
            .args(&self.agent_args)
            .env("SKIFF_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        host.agent = Some(child);
    }
}

impl Host {
    /// Runs `args` inside this host's network namespace (only that one:
    /// `ip netns exec` would also remount /sys, and with it the cgroup
    /// tree containerd needs).
    pub fn exec(&self, args: &[&str]) -> std::process::Output {
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.netns))
            .arg("--")
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `skiff reset` for this host's node in its namespace (its
    /// agent stopped first).
    pub fn reset(&mut self) -> std::process::Output {
        if let Some(mut agent) = self.agent.take() {
            // nsenter execs the agent: the child's PID is the agent's.
            super::stop_child(&mut agent);
        }
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.netns))
            .args(["--", SKIFF, "reset"])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--bridge-name", &self.cni_bridge])
            .output()
            .unwrap()
    }

    fn stop(&mut self) {
        self.reset();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
    }
}

/// Faults: a host's cable pulled and plugged back, its agent stopped.
impl Underlay {
    /// The bridge's end of host `i`'s veth (0-based).
    fn veth(&self, i: usize) -> String {
        format!("sk{}v{}", self.octet, i + 1)
    }

    /// Host `i` loses its link, as a pulled cable: the bridge's end of
    /// its veth goes down, so its `eth0` has no carrier but keeps its
    /// address and routes, and its agent keeps running cut off.
    pub fn cut_link(&self, i: usize) {
        ip(&["link", "set", &self.veth(i), "down"]);
    }

    /// Host `i`'s link comes back (the cable plugged in again).
    pub fn restore_link(&self, i: usize) {
        ip(&["link", "set", &self.veth(i), "up"]);
    }

    /// Stops host `i`'s agent by PID (SIGTERM), leaving its data dir,
    /// pods and namespace; [`Underlay::join`] starts it again.
    pub fn stop_agent(&mut self, i: usize) {
        if let Some(mut agent) = self.hosts[i].agent.take() {
            super::stop_child(&mut agent);
        }
    }
}

impl Drop for Underlay {
    fn drop(&mut self) {
        for host in &mut self.hosts {
            host.stop();
        }
        for i in 0..self.hosts.len() {
            let _ = Command::new("ip")
                .args(["link", "del", &self.veth(i)])
                .output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

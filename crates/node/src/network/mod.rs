//! The pod network: the CNI conflist the agent writes from its node's
//! podCIDR (bridge with host-local IPAM, then portmap; plugins from
//! Debian's containernetworking-plugins), the node's masquerade rule for
//! pod traffic leaving the podCIDR, the host settings pods need (IP
//! forwarding, bridge netfilter, overlayfs), and the clean-up of what the
//! plugins leave behind (the bridge device, host-local's leases).
//!
//! The chain is upstream's default shape (k3s: flannel's bridge, portmap,
//! bandwidth; containerd's example: bridge, portmap), and costs each
//! RunPodSandbox only what it must (`skiff-bench node --floor-variants`
//! measures each piece):
//! - no `loopback` plugin: containerd's CRI brings `lo` up itself (its
//!   built-in cni-loopback network), so a second one only cost an exec;
//! - masquerading is one rule set for the whole podCIDR, written once
//!   with the conflist (as flannel does it for k3s, whose bridge runs
//!   without ipMasq), not the bridge plugin's `ipMasq`, which makes and
//!   later deletes an iptables chain per pod: the same rules (the pod
//!   network accepted, the rest but multicast masqueraded), one copy.
//!
//! containerd calls the plugins; this module only writes their config,
//! the masquerade rule and checks the host. It does not allocate
//! addresses itself.

pub mod overlay;

use std::path::{Path, PathBuf};

/// Errors writing the network config.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot write the CNI config {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("podCIDR {0:?} is not an IPv4 CIDR")]
    BadCidr(String),
    #[error("cannot write the pod network's masquerade rule ({what}): {message}")]
    Masquerade { what: String, message: String },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The conflist's file name; containerd reads the first file in its dir.
pub const CONFLIST: &str = "10-skiff.conflist";

/// What the conflist is made from.
#[derive(Debug, Clone, Default)]
pub struct CniConfig {
    /// The bridge device (at most 15 bytes); tests give each node its own.
    pub bridge: String,
    /// The node's podCIDR, e.g. `10.244.0.0/24`.
    pub pod_cidr: String,
    /// host-local's lease dir (under the node's data dir).
    pub ipam_dir: PathBuf,
    /// The pods' MTU (the overlay's; the default, the bridge's, if none).
    pub mtu: Option<u32>,
    /// Other nodes' podCIDRs, reached through the overlay: routed, not
    /// masqueraded.
    pub peer_cidrs: Vec<String>,
}

/// Checks `cidr` is `a.b.c.d/n`.
fn check_cidr(cidr: &str) -> Result<()> {
    let (ip, bits) = cidr
        .split_once('/')
        .ok_or_else(|| Error::BadCidr(cidr.into()))?;
    let ok = ip.parse::<std::net::Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32);
    if ok {
        Ok(())
    } else {
        Err(Error::BadCidr(cidr.into()))
    }
}

impl CniConfig {
    /// The conflist's JSON.
    pub fn conflist(&self) -> Result<String> {
        check_cidr(&self.pod_cidr)?;
        let mut bridge = serde_json::json!({
            "type": "bridge",
            "bridge": self.bridge,
            "isGateway": true,
            // Masquerading is the node's rule (masquerade()).
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{ "subnet": self.pod_cidr }]],
                "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": self.ipam_dir,
            }
        });
        if let (Some(mtu), Some(fields)) = (self.mtu, bridge.as_object_mut()) {
            fields.insert("mtu".into(), mtu.into());
        }
        let doc = serde_json::json!({
            "cniVersion": "0.4.0",
            // The network is named after its bridge: nodes sharing a host
            // (tests) keep apart in libcni's cache and iptables comments.
            "name": self.bridge,
            "plugins": [
                bridge,
                { "type": "portmap", "capabilities": { "portMappings": true } }
            ]
        });
        Ok(serde_json::to_string_pretty(&doc).unwrap_or_default())
    }

    /// The chain of the node's masquerade rules (`CNI-<bridge>`, at most
    /// 19 bytes; never a plugin's: theirs are `CNI-` and 24 hex digits).
    pub fn masquerade_chain(&self) -> String {
        format!("CNI-{}", self.bridge)
    }

    /// The comment on the masquerade rules: the CNI plugins' form
    /// (`name: "NETWORK" id: "…"`), so that `skiff reset` removes them with
    /// the plugins' rules of this network.
    pub fn masquerade_comment(&self) -> String {
        format!("name: \"{}\" id: \"skiff-masquerade\"", self.bridge)
    }

    /// The masquerade chain's rules as `iptables-restore --noflush` input
    /// (declaring the chain flushes it): what the bridge plugin's `ipMasq`
    /// writes per pod, for the whole podCIDR, and the peers' podCIDRs
    /// accepted too (pod to pod across nodes keeps its address).
    pub fn masquerade_rules(&self) -> Result<String> {
        check_cidr(&self.pod_cidr)?;
        for peer in &self.peer_cidrs {
            check_cidr(peer)?;
        }
        let chain = self.masquerade_chain();
        let comment = self.masquerade_comment().replace('"', "\\\"");
        let mut rules = format!("*nat\n:{chain} - [0:0]\n");
        for cidr in std::iter::once(&self.pod_cidr).chain(&self.peer_cidrs) {
            rules.push_str(&format!(
                "-A {chain} -d {cidr} -m comment --comment \"{comment}\" -j ACCEPT\n"
            ));
        }
        rules.push_str(&format!(
            "-A {chain} ! -d 224.0.0.0/4 -m comment --comment \"{comment}\" -j MASQUERADE\nCOMMIT\n"
        ));
        // Forwarding to and from the pod network is accepted, as flannel
        // does: a host whose FORWARD policy is DROP (Docker sets it) would
        // otherwise drop pod traffic that leaves or crosses the node.
        rules.push_str(&format!("*filter\n:{chain} - [0:0]\n"));
        for cidr in std::iter::once(&self.pod_cidr).chain(&self.peer_cidrs) {
            for side in ["-s", "-d"] {
                rules.push_str(&format!(
                    "-A {chain} {side} {cidr} -m comment --comment \"{comment}\" -j ACCEPT\n"
                ));
            }
        }
        rules.push_str("COMMIT\n");
        Ok(rules)
    }

    /// The rules that send traffic to the node's chains, by table: the
    /// pods' traffic in nat's POSTROUTING to the masquerade chain, all
    /// forwarded traffic in filter's FORWARD to the accepting chain
    /// (iptables arguments after `-t TABLE -A|-C`).
    fn masquerade_jumps(&self) -> [(&'static str, Vec<String>); 2] {
        let comment = ["-m", "comment", "--comment"].map(String::from);
        let to_chain = ["-j".to_string(), self.masquerade_chain()];
        [
            (
                "nat",
                ["POSTROUTING", "-s", &self.pod_cidr]
                    .map(String::from)
                    .into_iter()
                    .chain(comment.clone())
                    .chain([self.masquerade_comment()])
                    .chain(to_chain.clone())
                    .collect(),
            ),
            (
                "filter",
                std::iter::once("FORWARD".to_string())
                    .chain(comment)
                    .chain([self.masquerade_comment()])
                    .chain(to_chain)
                    .collect(),
            ),
        ]
    }

    /// Writes the node's masquerade rules (idempotent): the chain, then
    /// the POSTROUTING jump to it unless it is there.
    pub fn masquerade(&self) -> Result<()> {
        use std::io::Write as _;
        use std::process::{Command, Stdio};
        let failed = |what: &str, message: String| Error::Masquerade {
            what: what.into(),
            message,
        };
        let rules = self.masquerade_rules()?;
        let mut child = Command::new("iptables-restore")
            .args(["-w", "5", "--noflush"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed("iptables-restore", e.to_string()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(rules.as_bytes())
                .map_err(|e| failed("iptables-restore", e.to_string()))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| failed("iptables-restore", e.to_string()))?;
        if !out.status.success() {
            return Err(failed(
                "iptables-restore",
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        for (table, jump) in self.masquerade_jumps() {
            let iptables = |op: &str| {
                Command::new("iptables")
                    .args(["-w", "5", "-t", table, op])
                    .args(&jump)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .output()
            };
            if iptables("-C").is_ok_and(|o| o.status.success()) {
                continue;
            }
            let out = iptables("-A").map_err(|e| failed("iptables", e.to_string()))?;
            if !out.status.success() {
                return Err(failed(
                    "iptables",
                    String::from_utf8_lossy(&out.stderr).trim().to_string(),
                ));
            }
        }
        Ok(())
    }

    /// Writes the masquerade rules ([`Self::masquerade`]), then the
    /// conflist into `dir` (atomically: containerd watches the dir), so
    /// that no pod starts before its traffic can leave the node.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let text = self.conflist()?;
        self.masquerade()?;
        let path = dir.join(CONFLIST);
        let tmp = dir.join(format!(".{CONFLIST}.tmp"));
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            std::fs::create_dir_all(&self.ipam_dir)?;
            if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
                return Ok(());
            }
            std::fs::write(&tmp, &text)?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}

/// The node's network problem until the CNI config is written (the
/// kubelet's words for containerd's "cni plugin not initialized").
pub fn plugin_not_ready() -> String {
    crate::registration::network_not_ready(
        "NetworkPluginNotReady",
        "Network plugin returns error: cni plugin not initialized",
    )
}

/// Sets what pods need from the host where it can, and names what it
/// cannot (for the Node's Ready condition and the log).
pub fn prepare_host() -> Vec<String> {
    let mut problems = vec![];
    if let Err(e) = set_proc("/proc/sys/net/ipv4/ip_forward", "1") {
        problems.push(format!("net.ipv4.ip_forward cannot be set to 1: {e}"));
    }
    let bridge_nf = Path::new("/proc/sys/net/bridge/bridge-nf-call-iptables");
    if !bridge_nf.exists() {
        // br_netfilter is a module; load it if we may.
        let _ = std::process::Command::new("modprobe")
            .arg("br_netfilter")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
    if bridge_nf.exists() {
        if let Err(e) = set_proc(bridge_nf, "1") {
            problems.push(format!(
                "net.bridge.bridge-nf-call-iptables cannot be set to 1: {e}"
            ));
        }
    }
    // Without br_netfilter, traffic between pods on one bridge skips
    // iptables; Services (when they come) need it. Pods still work, so
    // this is only logged.
    let overlay = std::fs::read_to_string("/proc/filesystems")
        .map(|f| {
            f.lines()
                .any(|l| l.split_whitespace().last() == Some("overlay"))
        })
        .unwrap_or(false);
    if !overlay {
        let _ = std::process::Command::new("modprobe")
            .arg("overlay")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let again = std::fs::read_to_string("/proc/filesystems")
            .map(|f| {
                f.lines()
                    .any(|l| l.split_whitespace().last() == Some("overlay"))
            })
            .unwrap_or(false);
        if !again {
            problems.push("the kernel has no overlay filesystem (containerd's overlayfs snapshotter needs it)".into());
        }
    }
    for binary in [
        "iptables",
        "/usr/lib/cni/bridge",
        "/usr/lib/cni/host-local",
        "/usr/lib/cni/portmap",
    ] {
        if !on_path(binary) {
            problems.push(format!("{binary} is not installed"));
        }
    }
    problems
}

fn set_proc(path: impl AsRef<Path>, value: &str) -> std::io::Result<()> {
    let path = path.as_ref();
    if std::fs::read_to_string(path)?.trim() == value {
        return Ok(());
    }
    std::fs::write(path, value)
}

fn on_path(binary: &str) -> bool {
    if binary.contains('/') {
        return Path::new(binary).exists();
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(binary).exists()))
        .unwrap_or(false)
        || ["/usr/sbin", "/sbin"]
            .iter()
            .any(|d| Path::new(d).join(binary).exists())
}

/// Removes the bridge device (the plugin never does) and host-local's
/// leases; for `skiff reset` and tests.
pub fn remove_bridge(bridge: &str) {
    let _ = std::process::Command::new("ip")
        .args(["link", "delete", bridge])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflist_has_the_chain_and_the_range() {
        let c = CniConfig {
            bridge: "skiff0".into(),
            pod_cidr: "10.244.3.0/24".into(),
            ipam_dir: "/d/ipam".into(),
            ..CniConfig::default()
        };
        let v: serde_json::Value = serde_json::from_str(&c.conflist().unwrap()).unwrap();
        let types: Vec<&str> = v["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["type"].as_str().unwrap())
            .collect();
        // containerd brings lo up itself; masquerading is the node's rule.
        assert_eq!(types, ["bridge", "portmap"]);
        assert_eq!(v["plugins"][0]["ipMasq"], false);
        assert_eq!(v["plugins"][0]["hairpinMode"], true);
        assert_eq!(
            v["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.3.0/24"
        );
        assert_eq!(v["plugins"][0]["bridge"], "skiff0");
    }

    #[test]
    fn the_masquerade_rules_are_the_bridge_plugins_for_the_whole_cidr() {
        let c = CniConfig {
            bridge: "skiff0".into(),
            pod_cidr: "10.244.3.0/24".into(),
            ipam_dir: "/d/ipam".into(),
            ..CniConfig::default()
        };
        let comment = r#""name: \"skiff0\" id: \"skiff-masquerade\"""#;
        assert_eq!(
            c.masquerade_rules().unwrap(),
            format!(
                "*nat\n:CNI-skiff0 - [0:0]\n\
                 -A CNI-skiff0 -d 10.244.3.0/24 -m comment --comment {comment} -j ACCEPT\n\
                 -A CNI-skiff0 ! -d 224.0.0.0/4 -m comment --comment {comment} -j MASQUERADE\n\
                 COMMIT\n\
                 *filter\n:CNI-skiff0 - [0:0]\n\
                 -A CNI-skiff0 -s 10.244.3.0/24 -m comment --comment {comment} -j ACCEPT\n\
                 -A CNI-skiff0 -d 10.244.3.0/24 -m comment --comment {comment} -j ACCEPT\n\
                 COMMIT\n"
            )
        );
        let [(nat, masquerade), (filter, forward)] = c.masquerade_jumps();
        assert_eq!((nat, filter), ("nat", "filter"));
        assert_eq!(
            masquerade.join(" "),
            r#"POSTROUTING -s 10.244.3.0/24 -m comment --comment name: "skiff0" id: "skiff-masquerade" -j CNI-skiff0"#
        );
        assert_eq!(
            forward.join(" "),
            r#"FORWARD -m comment --comment name: "skiff0" id: "skiff-masquerade" -j CNI-skiff0"#
        );
    }

    #[test]
    fn peers_pod_cidrs_are_routed_not_masqueraded_and_the_mtu_is_the_overlays() {
        let c = CniConfig {
            bridge: "skiff0".into(),
            pod_cidr: "10.244.3.0/24".into(),
            ipam_dir: "/d/ipam".into(),
            mtu: Some(1450),
            peer_cidrs: vec!["10.244.4.0/24".into(), "10.244.5.0/24".into()],
        };
        let rules = c.masquerade_rules().unwrap();
        let (nat, filter) = rules.split_once("*filter").unwrap();
        let accepted: Vec<&str> = nat
            .lines()
            .filter(|l| l.ends_with("-j ACCEPT"))
            .map(|l| l.split_whitespace().nth(3).unwrap())
            .collect();
        assert_eq!(
            accepted,
            ["10.244.3.0/24", "10.244.4.0/24", "10.244.5.0/24"]
        );
        assert!(rules.lines().nth(5).unwrap().ends_with("-j MASQUERADE"));
        // Forwarding to and from every pod network is accepted.
        assert_eq!(filter.matches("-j ACCEPT").count(), 6);
        let v: serde_json::Value = serde_json::from_str(&c.conflist().unwrap()).unwrap();
        assert_eq!(v["plugins"][0]["mtu"], 1450);
        let bad = CniConfig {
            peer_cidrs: vec!["10.244.4.0".into()],
            ..c
        };
        assert!(matches!(bad.masquerade_rules(), Err(Error::BadCidr(_))));
    }

    #[test]
    fn a_bad_cidr_is_refused() {
        let c = CniConfig {
            bridge: "b".into(),
            pod_cidr: "10.244.3.0".into(),
            ipam_dir: "/d".into(),
            ..CniConfig::default()
        };
        assert!(matches!(c.conflist(), Err(Error::BadCidr(_))));
    }
}

//! What the overlay should look like on this node, and the steps from
//! what the kernel has to that: pure functions of the Node objects and
//! of what [`super::links`] observed, so that every case is a unit test.
//!
//! For each peer (another node that published the same backend, with a
//! podCIDR, on another host) the `vxlan` backend wants, as flannel's:
//! - a route `PODCIDR via GW dev VXLAN onlink`, GW being the podCIDR's
//!   network address, which the peer puts on its own VXLAN device;
//! - a permanent ARP entry `GW lladdr VTEPMAC dev VXLAN`;
//! - a forwarding entry `VTEPMAC dst PUBLICIP dev VXLAN`, so the kernel
//!   knows which host to send the peer's frames to;
//!
//! and the `host-gw` backend a plain route `PODCIDR via PUBLICIP`. Our
//! routes carry the protocol [`ROUTE_PROTO`], so entries of nodes that
//! left are found (and removed) from the kernel's own tables, also after
//! a restart. It must not run commands or read the API.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Node;

/// The routing protocol number on our routes (`ip route … proto 165`): a
/// number no routing daemon in iproute2's `rt_protos` uses.
pub const ROUTE_PROTO: u8 = 165;

/// The annotation naming the node's overlay backend.
pub const BACKEND_TYPE: &str = "skiff.dev/backend-type";
/// The annotation holding the backend's data (`{"VNI":1,"VtepMAC":"…"}`).
pub const BACKEND_DATA: &str = "skiff.dev/backend-data";
/// The annotation with the address peers send the node's traffic to.
pub const PUBLIC_IP: &str = "skiff.dev/public-ip";

/// How pod traffic crosses nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Each node's pods behind a VXLAN device (UDP between hosts).
    Vxlan,
    /// Plain routes via the other nodes' addresses (nodes on one link).
    HostGw,
    /// No cross-node entries (pods reach only their own node's pods).
    None,
}

impl Backend {
    /// The name in flags and annotations (k3s's `--flannel-backend`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Vxlan => "vxlan",
            Backend::HostGw => "host-gw",
            Backend::None => "none",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "vxlan" => Ok(Backend::Vxlan),
            "host-gw" => Ok(Backend::HostGw),
            "none" => Ok(Backend::None),
            other => Err(format!(
                "unsupported backend {other:?}: use vxlan, host-gw or none"
            )),
        }
    }
}

/// An IPv4 CIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub network: Ipv4Addr,
    pub bits: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` (the address masked to its network).
    pub fn parse(s: &str) -> Option<Cidr> {
        let (ip, bits) = s.split_once('/')?;
        let ip: Ipv4Addr = ip.parse().ok()?;
        let bits: u8 = bits.parse().ok().filter(|b| *b <= 32)?;
        let mask = if bits == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(bits))
        };
        Some(Cidr {
            network: Ipv4Addr::from(u32::from(ip) & mask),
            bits,
        })
    }
}

impl Cidr {
    fn mask(self) -> u32 {
        if self.bits == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.bits))
        }
    }

    /// Whether `ip` is in this range.
    pub fn contains(self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.network)
    }

    /// Whether all of `other` is in this range.
    pub fn contains_cidr(self, other: &Cidr) -> bool {
        other.bits >= self.bits && self.contains(other.network)
    }

    /// Whether the two ranges share an address.
    pub fn overlaps(self, other: &Cidr) -> bool {
        self.contains(other.network) || other.contains(self.network)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.bits)
    }
}

/// Another node as the overlay needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub pod_cidr: Cidr,
    pub public_ip: Ipv4Addr,
    /// The MAC of its VXLAN device (vxlan only).
    pub vtep_mac: Option<String>,
}

/// This node as the overlay sees it in its own Node object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Own {
    pub pod_cidr: Option<Cidr>,
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// The backend data annotation's value.
pub fn backend_data(vni: u32, mac: &str) -> String {
    serde_json::json!({ "VNI": vni, "VtepMAC": mac }).to_string()
}

/// The annotations this node publishes: the backend, and for vxlan its
/// VTEP's MAC once the device exists.
pub fn own_annotations(
    backend: Backend,
    public_ip: Ipv4Addr,
    vni: u32,
    vtep_mac: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut out = vec![
        (BACKEND_TYPE, backend.name().to_string()),
        (PUBLIC_IP, public_ip.to_string()),
    ];
    if let Some(mac) = vtep_mac.filter(|_| backend == Backend::Vxlan) {
        out.push((BACKEND_DATA, backend_data(vni, mac)));
    }
    out
}

/// The annotations of `own` that differ from what should be published.
pub fn annotation_patch(own: &Own, wanted: &[(&'static str, String)]) -> Option<serde_json::Value> {
    let changed: serde_json::Map<String, serde_json::Value> = wanted
        .iter()
        .filter(|(k, v)| own.annotations.get(*k) != Some(v))
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
        .collect();
    (!changed.is_empty()).then(|| serde_json::json!({ "metadata": { "annotations": changed } }))
}

/// What this node knows of itself when it judges the others' claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Me<'a> {
    pub name: &'a str,
    /// Its public address (peers on it share this host: no entries).
    pub ip: Ipv4Addr,
    /// Its own podCIDR: no peer may claim any of it.
    pub pod_cidr: Option<Cidr>,
    /// The pod network, when the node was told it: peers' podCIDRs must
    /// lie in it.
    pub cluster_cidr: Option<Cidr>,
}

/// The peers among `nodes`: other nodes that published `backend`, have a
/// podCIDR, and live on another host than `me` (nodes sharing one
/// host, as tests run them, reach each other's pods without an overlay,
/// and a route of ours would shadow the other bridge's own). For vxlan a
/// peer is used once its VTEP MAC is known ([`candidates`] are all), and
/// a MAC two nodes publish (or this node's own, `own_mac`) is trusted for
/// the older of them only: a forwarding entry is per MAC, so a second
/// claim would move the first node's traffic to the second's host.
pub fn peers<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    me: &Me<'_>,
    backend: Backend,
    own_mac: Option<&str>,
) -> Vec<Peer> {
    let mut out = candidates(nodes, me, backend);
    if backend == Backend::Vxlan {
        out.retain(|p| p.vtep_mac.is_some());
        // `candidates` are oldest first: the first claim of a MAC stands.
        let mut macs: BTreeSet<String> = own_mac.map(str::to_lowercase).into_iter().collect();
        out.retain(|p| {
            let mac = p.vtep_mac.clone().unwrap_or_default();
            let fresh = macs.insert(mac);
            if !fresh {
                tracing::warn!(node = %p.name, "overlay peer ignored: its VTEP MAC is another node's");
            }
            fresh
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The nodes that would be peers, whether or not their VTEP is known yet
/// (a node makes its VXLAN device once it has one, and only then can
/// publish its MAC), oldest first.
///
/// A node writes its own Node, so its claims are checked before any
/// route follows them: a podCIDR that overlaps this node's, lies outside
/// the pod network (when known), or holds a node's public address (a
/// `0.0.0.0/0` would replace the host's default route) is refused, and
/// of two nodes claiming overlapping podCIDRs only the older (by
/// creation, then name) is routed: upstream lets a podCIDR be set only
/// once, so the newer claim is the suspect one.
pub fn candidates<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    me: &Me<'_>,
    backend: Backend,
) -> Vec<Peer> {
    if backend == Backend::None {
        return vec![];
    }
    let mut found: Vec<(Option<k8s_openapi::jiff::Timestamp>, Peer)> = nodes
        .into_iter()
        .filter_map(|node| {
            let name = node.metadata.name.clone()?;
            if name == me.name || node.metadata.deletion_timestamp.is_some() {
                return None;
            }
            let annotations = node.metadata.annotations.as_ref()?;
            if annotations.get(BACKEND_TYPE).map(String::as_str) != Some(backend.name()) {
                return None;
            }
            let pod_cidr = Cidr::parse(node.spec.as_ref()?.pod_cidr.as_deref()?)?;
            let public_ip: Ipv4Addr = annotations.get(PUBLIC_IP)?.parse().ok()?;
            if public_ip == me.ip
                || public_ip.is_loopback()
                || public_ip.is_unspecified()
                || public_ip.is_multicast()
                || public_ip.is_broadcast()
            {
                return None;
            }
            let vtep_mac = annotations
                .get(BACKEND_DATA)
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .and_then(|d| d.get("VtepMAC")?.as_str().map(str::to_lowercase))
                .filter(|mac| valid_mac(mac));
            let created = node.metadata.creation_timestamp.as_ref().map(|t| t.0);
            Some((
                created,
                Peer {
                    name,
                    pod_cidr,
                    public_ip,
                    vtep_mac,
                },
            ))
        })
        .collect();
    // Oldest first (a missing time sorts first: only tests leave it out).
    found.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    let addresses: BTreeSet<Ipv4Addr> = found
        .iter()
        .map(|(_, p)| p.public_ip)
        .chain(std::iter::once(me.ip))
        .collect();
    let mut out: Vec<Peer> = vec![];
    for (_, p) in found {
        let refused = if me.pod_cidr.is_some_and(|own| own.overlaps(&p.pod_cidr)) {
            Some("it overlaps this node's podCIDR")
        } else if me
            .cluster_cidr
            .is_some_and(|c| !c.contains_cidr(&p.pod_cidr))
        {
            Some("it is outside the cluster CIDR")
        } else if addresses.iter().any(|ip| p.pod_cidr.contains(*ip)) {
            Some("it holds a node's address")
        } else if out.iter().any(|q| q.pod_cidr.overlaps(&p.pod_cidr)) {
            Some("an older node claims it")
        } else {
            None
        };
        match refused {
            Some(why) => tracing::warn!(
                node = %p.name, pod_cidr = %p.pod_cidr,
                "overlay peer ignored: {why}"
            ),
            None => out.push(p),
        }
    }
    out
}

/// A hash of what the overlay reads of `nodes` (names, deletion,
/// podCIDRs, the three annotations): the same value means a sync would
/// find the same peers, so a Node update that changed only its status
/// (every heartbeat of every node) costs no commands.
pub fn fingerprint<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut relevant: Vec<_> = nodes
        .into_iter()
        .map(|n| {
            let annotation = |key: &str| {
                n.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(key))
                    .map(String::as_str)
            };
            (
                n.metadata.name.as_deref(),
                n.metadata.deletion_timestamp.is_some(),
                n.metadata.creation_timestamp.as_ref().map(|t| t.0),
                n.spec.as_ref().and_then(|s| s.pod_cidr.as_deref()),
                annotation(BACKEND_TYPE),
                annotation(BACKEND_DATA),
                annotation(PUBLIC_IP),
            )
        })
        .collect();
    relevant.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    relevant.hash(&mut hasher);
    hasher.finish()
}

/// A unicast MAC (a group one, broadcast included, is no VTEP).
fn valid_mac(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
        && mac != "00:00:00:00:00:00"
        && parts
            .first()
            .and_then(|p| u8::from_str_radix(p, 16).ok())
            .is_some_and(|first| first & 1 == 0)
}

/// A route of ours the kernel has.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    pub dst: Cidr,
    pub via: Ipv4Addr,
    /// The device, for routes through the VXLAN device.
    pub dev: Option<String>,
}

/// What [`super::links`] read from the kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Routes with protocol [`ROUTE_PROTO`].
    pub routes: Vec<Route>,
    /// Permanent ARP entries on the VXLAN device: (address, MAC).
    pub neighbors: Vec<(Ipv4Addr, String)>,
    /// Forwarding entries on the VXLAN device: (MAC, destination).
    pub fdb: Vec<(String, Ipv4Addr)>,
}

/// One change to the kernel's tables.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// Removed first, so a route moving to another node never points at
    /// a gone entry.
    DeleteRoute(Route),
    DeleteNeighbor(Ipv4Addr),
    DeleteFdb(String, Ipv4Addr),
    AddFdb(String, Ipv4Addr),
    AddNeighbor(Ipv4Addr, String),
    /// Added (or replaced) last, once its next hop resolves.
    AddRoute(Route),
}

/// The steps from `observed` to the entries `peers` need.
pub fn steps(backend: Backend, device: &str, peers: &[Peer], observed: &Observed) -> Vec<Step> {
    let mut routes = BTreeSet::new();
    let mut neighbors = BTreeSet::new();
    let mut fdb = BTreeSet::new();
    for p in peers {
        match backend {
            Backend::Vxlan => {
                let Some(mac) = &p.vtep_mac else { continue };
                let gateway = p.pod_cidr.network;
                routes.insert(Route {
                    dst: p.pod_cidr,
                    via: gateway,
                    dev: Some(device.to_string()),
                });
                neighbors.insert((gateway, mac.clone()));
                fdb.insert((mac.clone(), p.public_ip));
            }
            Backend::HostGw => {
                routes.insert(Route {
                    dst: p.pod_cidr,
                    via: p.public_ip,
                    dev: None,
                });
            }
            Backend::None => {}
        }
    }
    let mut out = vec![];
    let have_routes: BTreeSet<&Route> = observed.routes.iter().collect();
    for r in &observed.routes {
        if !routes.contains(r) {
            out.push(Step::DeleteRoute(r.clone()));
        }
    }
    let have_neighbors: BTreeSet<(Ipv4Addr, String)> = observed
        .neighbors
        .iter()
        .map(|(ip, mac)| (*ip, mac.to_lowercase()))
        .collect();
    for (ip, mac) in &have_neighbors {
        if !neighbors.contains(&(*ip, mac.clone())) && !neighbors.iter().any(|(i, _)| i == ip) {
            out.push(Step::DeleteNeighbor(*ip));
        }
    }
    let have_fdb: BTreeSet<(String, Ipv4Addr)> = observed
        .fdb
        .iter()
        .map(|(mac, ip)| (mac.to_lowercase(), *ip))
        .collect();
    for entry in &have_fdb {
        if !fdb.contains(entry) {
            out.push(Step::DeleteFdb(entry.0.clone(), entry.1));
        }
    }
    for entry in &fdb {
        if !have_fdb.contains(entry) {
            out.push(Step::AddFdb(entry.0.clone(), entry.1));
        }
    }
    for entry in &neighbors {
        if !have_neighbors.contains(entry) {
            out.push(Step::AddNeighbor(entry.0, entry.1.clone()));
        }
    }
    for r in &routes {
        if !have_routes.contains(r) {
            out.push(Step::AddRoute(r.clone()));
        }
    }
    out.sort();
    out
}

/// The VXLAN device's name for a node whose pod bridge is `bridge`:
/// nodes sharing a host (tests) keep apart by their bridges.
pub fn device_for_bridge(bridge: &str) -> String {
    let stem: String = bridge.chars().take(15 - ".vxlan".len()).collect();
    format!("{stem}.vxlan")
}

/// The MTU pods get over vxlan: the underlay's, less the 50 bytes VXLAN
/// over IPv4 adds (outer IP 20, UDP 8, VXLAN 8, inner Ethernet 14).
pub fn vxlan_mtu(underlay_mtu: u32) -> u32 {
    underlay_mtu.saturating_sub(50)
}

#[cfg(test)]
pub(crate) mod tests;

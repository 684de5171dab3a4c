//! The nftables ruleset, in nft's own syntax, laid out after upstream's
//! nftables proxier (its `kube-proxy` table): a fixed skeleton of base
//! chains and verdict maps ([`base`]), and per service port the map
//! elements that lead to it ([`render`]). A packet's lookup is a map
//! lookup whatever the number of Services.
//!
//! Where it differs from upstream: nft (Debian 12's 1.0.6) reads every
//! chain of the ruleset before each batch, so a small update in a large
//! table costs in proportion to its chains, while map and set elements
//! cost nothing there. So most ports have no chain at all: a plain
//! ClusterIP port (no affinity, no node-local policy, no external
//! traffic) is `endpoint-count` slots in that count's spread map, which
//! one rule per count and protocol DNATs through (`numgen random mod N`);
//! masquerading of traffic from outside the pod network and hairpin
//! (a set of `endpoint . endpoint` pairs) are rules of the skeleton. The
//! other ports get upstream's service chain (DNAT through a numgen map),
//! an external chain when they answer outside the cluster, and, under
//! ClientIP affinity, a chain per endpoint that remembers its clients.
//!
//! Pure: text in, text out. It must not run nft (see [`crate::nft`]) nor
//! decide what changed (see [`crate::sync`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use crate::model::{Endpoint, ServicePort};

/// The mark bit that asks the postrouting chain to masquerade (upstream's
/// 0x4000).
pub const MASQUERADE_MARK: &str = "0x4000";

/// The maps and sets the per-service parts add elements to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Map {
    /// `clusterIP . proto . port : verdict` (and external IPs).
    ServiceIps,
    /// `proto . nodePort : verdict`.
    ServiceNodeports,
    /// Ports without usable endpoints: reject or drop.
    NoEndpointServices,
    NoEndpointNodeports,
    /// Every ClusterIP (a set): other ports on them are rejected.
    ClusterIps,
    /// `endpoint . endpoint` (a set): a pod that reached itself through
    /// a Service is masqueraded (hairpin).
    Hairpin,
    /// `clusterIP . proto . port . slot : endpoint . port` for ClusterIP
    /// ports with this many endpoints and nothing else to do (no
    /// affinity, no node-local policy, no external traffic): the DNAT
    /// straight from the map, no chain of their own.
    Spread(u16),
}

impl Map {
    pub fn name(self) -> String {
        match self {
            Self::ServiceIps => "service-ips".into(),
            Self::ServiceNodeports => "service-nodeports".into(),
            Self::NoEndpointServices => "no-endpoint-services".into(),
            Self::NoEndpointNodeports => "no-endpoint-nodeports".into(),
            Self::ClusterIps => "cluster-ips".into(),
            Self::Hairpin => "hairpin".into(),
            Self::Spread(n) => format!("spread-{n}"),
        }
    }

    /// A set holds keys only.
    pub fn is_set(self) -> bool {
        matches!(self, Self::ClusterIps | Self::Hairpin)
    }
}

/// What one Service contributes to the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Chain name → its rules.
    pub chains: BTreeMap<String, Vec<String>>,
    /// Affinity set name → its declaration body.
    pub sets: BTreeMap<String, String>,
    /// (map, key) → value (empty for a set).
    pub elements: BTreeMap<(Map, String), String>,
}

impl Rendered {
    fn element(&mut self, map: Map, key: String, value: String) {
        self.elements.insert((map, key), value);
    }
}

/// The settings the skeleton depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skeleton {
    pub table: String,
    /// The node addresses node ports and load balancer IPs answer on.
    pub node_ips: Vec<Ipv4Addr>,
    /// Pod traffic (from this range) to a ClusterIP is not masqueraded.
    pub cluster_cidr: Option<String>,
    /// Unallocated ClusterIPs are dropped instead of routed out.
    pub service_cidr: Option<String>,
}

/// A short, stable hash of `s` (FNV-1a, base32), so that chain names stay
/// unique even when cut.
pub fn hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    (0..8)
        .map(|i| ALPHABET[((h >> (i * 5)) & 31) as usize] as char)
        .collect()
}

/// The skeleton: maps, sets, helper chains and base chains on the hooks,
/// as one `table` block (for the full sync).
pub fn base(s: &Skeleton) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "table ip {} {{", s.table);
    let _ = writeln!(out, "\tcomment \"skiff service proxy\"");
    let _ = writeln!(out, "\tset cluster-ips {{ type ipv4_addr; }}");
    let _ = writeln!(out, "\tset hairpin {{ type ipv4_addr . ipv4_addr; }}");
    if s.node_ips.is_empty() {
        let _ = writeln!(out, "\tset nodeport-ips {{ type ipv4_addr; }}");
    } else {
        let ips: Vec<String> = s.node_ips.iter().map(|ip| ip.to_string()).collect();
        let _ = writeln!(
            out,
            "\tset nodeport-ips {{ type ipv4_addr; elements = {{ {} }}; }}",
            ips.join(", ")
        );
    }
    for map in ["service-ips", "no-endpoint-services"] {
        let _ = writeln!(
            out,
            "\tmap {map} {{ type ipv4_addr . inet_proto . inet_service : verdict; }}"
        );
    }
    for map in ["service-nodeports", "no-endpoint-nodeports"] {
        let _ = writeln!(
            out,
            "\tmap {map} {{ type inet_proto . inet_service : verdict; }}"
        );
    }
    let m = MASQUERADE_MARK;
    let mut chain = |name: &str, rules: &[String]| {
        let _ = writeln!(out, "\tchain {name} {{");
        for r in rules {
            let _ = writeln!(out, "\t\t{r}");
        }
        let _ = writeln!(out, "\t}}");
    };
    chain(
        "mark-for-masquerade",
        &[format!("meta mark set meta mark | {m}")],
    );
    chain(
        "masquerading",
        &[
            format!("ct status dnat ip saddr . ip daddr @hairpin meta mark set meta mark | {m}"),
            format!("meta mark & {m} == 0 return"),
            format!("meta mark set meta mark ^ {m}"),
            "masquerade fully-random".into(),
        ],
    );
    chain("reject-chain", &["reject".into()]);
    let mut services = vec![];
    if let Some(cidr) = &s.cluster_cidr {
        // From outside the pod network to a ClusterIP: masquerade, so that
        // replies come back through this node (the spread maps' ports
        // have no chain of their own to say it).
        services.push(format!(
            "ip daddr @cluster-ips ip saddr != {cidr} jump mark-for-masquerade"
        ));
    }
    services.extend([
        "ip daddr . meta l4proto . th dport vmap @service-ips".to_string(),
        "fib daddr type local ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports".into(),
    ]);
    chain("services", &services);
    chain(
        "service-endpoints-check",
        &["ip daddr . meta l4proto . th dport vmap @no-endpoint-services".into()],
    );
    chain(
        "nodeport-endpoints-check",
        &["ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports".into()],
    );
    let mut check = vec!["ip daddr @cluster-ips reject".to_string()];
    if let Some(cidr) = &s.service_cidr {
        check.push(format!("ip daddr {cidr} drop"));
    }
    chain("cluster-ips-check", &check);
    let hooked = |kind: &str, hook: &str, prio: i32| {
        format!("type {kind} hook {hook} priority {prio}; policy accept;")
    };
    chain(
        "filter-input",
        &[
            hooked("filter", "input", -110),
            "ct state new jump nodeport-endpoints-check".into(),
            "ct state new jump service-endpoints-check".into(),
        ],
    );
    chain(
        "filter-forward",
        &[
            hooked("filter", "forward", -110),
            "ct state new jump service-endpoints-check".into(),
            "ct state new jump cluster-ips-check".into(),
        ],
    );
    chain(
        "filter-output",
        &[
            hooked("filter", "output", -110),
            "ct state new jump service-endpoints-check".into(),
        ],
    );
    chain(
        "filter-output-post-dnat",
        &[
            hooked("filter", "output", -90),
            "ct state new jump cluster-ips-check".into(),
        ],
    );
    chain(
        "nat-prerouting",
        &[hooked("nat", "prerouting", -100), "jump services".into()],
    );
    chain(
        "nat-output",
        &[hooked("nat", "output", -100), "jump services".into()],
    );
    chain(
        "nat-postrouting",
        &[
            hooked("nat", "postrouting", 100),
            "jump masquerading".into(),
        ],
    );
    out.push_str("}\n");
    out
}

/// The map of ClusterIP ports with `n` endpoints, and the rules of the
/// `services` chain that DNAT through it (one per protocol; a key not in
/// the map lets the packet on to the next rule).
pub fn spread_decl(table: &str, n: u16) -> Vec<String> {
    let mut lines = vec![format!(
        "add map ip {table} spread-{n} {{ typeof ip daddr . meta l4proto . th dport . numgen random mod {n} : ip daddr . th dport; }}"
    )];
    for proto in ["tcp", "udp", "sctp"] {
        lines.push(format!(
            "add rule ip {table} services meta l4proto {proto} dnat ip to ip daddr . meta l4proto . th dport . numgen random mod {n} map @spread-{n}"
        ));
    }
    lines
}

fn endpoint_suffix(sp_id: &str, ep: &Endpoint) -> String {
    let full = format!("{sp_id}__{}/{}", ep.ip, ep.port);
    format!("{}-{full}", hash(&full))
}

/// The chain of an endpoint.
pub fn endpoint_chain(sp_id: &str, ep: &Endpoint) -> String {
    format!("endpoint-{}", endpoint_suffix(sp_id, ep))
}

/// The set remembering clients of an endpoint; its name changes with the
/// timeout, so a new timeout is a new set rather than a changed one.
fn affinity_set(sp_id: &str, ep: &Endpoint, timeout: i32) -> String {
    let full = format!("{sp_id}__{}/{}", ep.ip, ep.port);
    format!("affinity-{}-{full}", hash(&format!("{full}@{timeout}")))
}

/// Rules that spread over `eps`: sticky ones first under ClientIP
/// affinity, then a random pick (one `numgen` map, upstream's shape).
fn spread(sp: &ServicePort, id: &str, eps: &[Endpoint]) -> Vec<String> {
    let Some(timeout) = sp.affinity_seconds else {
        // No affinity: the DNAT itself, one rule, no chain per endpoint
        // (what nft reads before every batch grows with the chains).
        let proto = sp.protocol.as_str();
        return match eps {
            [] => vec![],
            [one] => vec![format!(
                "meta l4proto {proto} dnat ip to {}:{}",
                one.ip, one.port
            )],
            many => {
                let arms: Vec<String> = many
                    .iter()
                    .enumerate()
                    .map(|(i, ep)| format!("{i} : {} . {}", ep.ip, ep.port))
                    .collect();
                vec![format!(
                    "meta l4proto {proto} dnat ip to numgen random mod {} map {{ {} }}",
                    many.len(),
                    arms.join(", ")
                )]
            }
        };
    };
    let mut rules = vec![];
    for ep in eps {
        rules.push(format!(
            "ip saddr @{} goto {}",
            affinity_set(id, ep, timeout),
            endpoint_chain(id, ep)
        ));
    }
    match eps {
        [] => {}
        [one] => rules.push(format!("goto {}", endpoint_chain(id, one))),
        many => {
            let arms: Vec<String> = many
                .iter()
                .enumerate()
                .map(|(i, ep)| format!("{i} : goto {}", endpoint_chain(id, ep)))
                .collect();
            rules.push(format!(
                "numgen random mod {} vmap {{ {} }}",
                many.len(),
                arms.join(", ")
            ));
        }
    }
    rules
}

/// What `ports` (one Service's) add to the table.
pub fn render(ports: &[ServicePort], skeleton: &Skeleton) -> Rendered {
    let mut out = Rendered::default();
    for sp in ports {
        render_port(sp, skeleton, &mut out);
    }
    out
}

fn render_port(sp: &ServicePort, skeleton: &Skeleton, out: &mut Rendered) {
    let id = sp.id();
    let h = hash(&id);
    let proto = sp.protocol.as_str();
    let service_chain = format!("service-{h}-{id}");
    let external_chain = format!("external-{h}-{id}");
    let reject = "goto reject-chain".to_string();

    // Every endpoint reached through the Service and sent back to itself
    // is masqueraded (hairpin), whichever chain chose it.
    let mut endpoints: Vec<&Endpoint> = sp
        .all_endpoints
        .iter()
        .chain(&sp.cluster_endpoints)
        .chain(&sp.local_endpoints)
        .collect();
    endpoints.sort();
    endpoints.dedup();
    for ep in &endpoints {
        out.element(
            Map::Hairpin,
            format!("{} . {}", ep.ip, ep.ip),
            String::new(),
        );
    }
    // Under ClientIP affinity, upstream's layout: a chain per endpoint
    // that remembers the client in the endpoint's set, then DNATs.
    if let Some(timeout) = sp.affinity_seconds {
        for ep in endpoints {
            let set = affinity_set(&id, ep, timeout);
            out.sets.insert(
                set.clone(),
                format!(
                    "{{ type ipv4_addr; flags dynamic,timeout; timeout {}s; }}",
                    timeout.max(1)
                ),
            );
            let rules = vec![
                format!("update @{set} {{ ip saddr }}"),
                format!("meta l4proto {proto} dnat ip to {}:{}", ep.ip, ep.port),
            ];
            out.chains.insert(endpoint_chain(&id, ep), rules);
        }
    }

    // Cluster traffic. A plain ClusterIP port (most are) DNATs straight
    // from the spread map of its endpoint count.
    let plain = sp.affinity_seconds.is_none() && !sp.internal_local && !sp.has_external();
    let n = u16::try_from(sp.cluster_endpoints.len()).unwrap_or(u16::MAX);
    if plain && n > 0 && n < u16::MAX {
        for ip in &sp.cluster_ips {
            out.element(Map::ClusterIps, ip.to_string(), String::new());
            for (slot, ep) in sp.cluster_endpoints.iter().enumerate() {
                out.element(
                    Map::Spread(n),
                    format!("{ip} . {proto} . {} . {slot}", sp.port),
                    format!("{} . {}", ep.ip, ep.port),
                );
            }
        }
        return;
    }
    for ip in &sp.cluster_ips {
        out.element(Map::ClusterIps, ip.to_string(), String::new());
        let key = format!("{ip} . {proto} . {}", sp.port);
        if !sp.cluster_endpoints.is_empty() {
            out.element(Map::ServiceIps, key, format!("goto {service_chain}"));
        } else if sp.internal_local && sp.has_any_endpoint {
            out.element(Map::NoEndpointServices, key, "drop".into());
        } else {
            out.element(Map::NoEndpointServices, key, reject.clone());
        }
    }
    if !sp.cluster_endpoints.is_empty() {
        let mut rules = vec![];
        if let Some(cidr) = &skeleton.cluster_cidr {
            // From outside the pod network: masquerade, so that replies
            // come back through this node.
            rules.push(format!("ip saddr != {cidr} jump mark-for-masquerade"));
        }
        rules.extend(spread(sp, &id, &sp.cluster_endpoints));
        out.chains.insert(service_chain.clone(), rules);
    }

    // External traffic: node ports, load balancer and external IPs.
    if !sp.has_external() {
        return;
    }
    if sp.all_endpoints.is_empty() {
        let verdict = if sp.external_local && sp.has_any_endpoint {
            "drop".to_string()
        } else {
            reject
        };
        if let Some(np) = sp.node_port {
            out.element(
                Map::NoEndpointNodeports,
                format!("{proto} . {np}"),
                verdict.clone(),
            );
        }
        for ip in &sp.external_ips {
            out.element(
                Map::NoEndpointServices,
                format!("{ip} . {proto} . {}", sp.port),
                verdict.clone(),
            );
        }
        return;
    }
    // Where external traffic goes under the Cluster policy: the service
    // chain, unless internalTrafficPolicy keeps that one to this node.
    let cluster_target = if sp.internal_local {
        let chain = format!("cluster-{h}-{id}");
        out.chains
            .insert(chain.clone(), spread(sp, &id, &sp.all_endpoints));
        chain
    } else {
        service_chain
    };
    let verdict = format!("goto {external_chain}");
    if let Some(np) = sp.node_port {
        out.element(
            Map::ServiceNodeports,
            format!("{proto} . {np}"),
            verdict.clone(),
        );
    }
    for ip in &sp.external_ips {
        out.element(
            Map::ServiceIps,
            format!("{ip} . {proto} . {}", sp.port),
            verdict.clone(),
        );
    }
    let mut rules = vec![];
    if sp.external_local {
        // Pods and the node itself go to any endpoint, as cluster traffic
        // (the node's own traffic masqueraded); others only to this
        // node's endpoints, with their source address kept, and are
        // dropped when it has none.
        if let Some(cidr) = &skeleton.cluster_cidr {
            rules.push(format!("ip saddr {cidr} goto {cluster_target}"));
        }
        rules.push("fib saddr type local jump mark-for-masquerade".into());
        rules.push(format!("fib saddr type local goto {cluster_target}"));
        if sp.local_endpoints.is_empty() {
            rules.push("drop".into());
        } else {
            rules.extend(spread(sp, &id, &sp.local_endpoints));
        }
    } else {
        rules.push("jump mark-for-masquerade".into());
        rules.push(format!("goto {cluster_target}"));
    }
    out.chains.insert(external_chain, rules);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Protocol, ServicePort};

    fn skeleton() -> Skeleton {
        Skeleton {
            table: "skiff-test".into(),
            node_ips: vec!["192.0.2.1".parse().unwrap()],
            cluster_cidr: Some("10.42.0.0/16".into()),
            service_cidr: Some("10.43.0.0/16".into()),
        }
    }

    fn ep(ip: &str, local: bool) -> Endpoint {
        Endpoint {
            ip: ip.parse().unwrap(),
            port: 8080,
            local,
        }
    }

    fn port() -> ServicePort {
        ServicePort {
            namespace: "shop".into(),
            name: "web".into(),
            port_name: "http".into(),
            protocol: Protocol::Tcp,
            port: 80,
            cluster_ips: vec!["10.43.0.5".parse().unwrap()],
            node_port: None,
            external_ips: vec![],
            affinity_seconds: None,
            external_local: false,
            internal_local: false,
            cluster_endpoints: vec![ep("10.42.0.5", true), ep("10.42.1.6", false)],
            all_endpoints: vec![ep("10.42.0.5", true), ep("10.42.1.6", false)],
            local_endpoints: vec![],
            has_any_endpoint: true,
        }
    }

    #[test]
    fn cluster_ip_spreads_over_endpoints_from_the_map() {
        // A plain ClusterIP port: slots in the map of its endpoint count,
        // no chain at all.
        let r = render(&[port()], &skeleton());
        assert!(r.chains.is_empty(), "{:?}", r.chains);
        assert_eq!(
            r.elements[&(Map::Spread(2), "10.43.0.5 . tcp . 80 . 0".into())],
            "10.42.0.5 . 8080"
        );
        assert_eq!(
            r.elements[&(Map::Spread(2), "10.43.0.5 . tcp . 80 . 1".into())],
            "10.42.1.6 . 8080"
        );
        assert!(r
            .elements
            .contains_key(&(Map::Hairpin, "10.42.1.6 . 10.42.1.6".into())));
        assert!(r
            .elements
            .contains_key(&(Map::ClusterIps, "10.43.0.5".into())));
        assert!(base(&skeleton())
            .contains("ip daddr @cluster-ips ip saddr != 10.42.0.0/16 jump mark-for-masquerade"));

        // With a node port: a service chain (the external chain goes
        // there), DNAT through a numgen map in it.
        let mut p = port();
        p.node_port = Some(30080);
        let r = render(&[p], &skeleton());
        let h = hash("shop/web/tcp/http");
        let svc = format!("service-{h}-shop/web/tcp/http");
        assert_eq!(
            r.elements[&(Map::ServiceIps, "10.43.0.5 . tcp . 80".into())],
            format!("goto {svc}")
        );
        assert_eq!(
            r.chains[&svc][1],
            "meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.42.0.5 . 8080, 1 : 10.42.1.6 . 8080 }"
        );
    }

    #[test]
    fn no_endpoints_reject_and_local_policy_without_local_ones_drops() {
        let mut p = port();
        p.cluster_endpoints.clear();
        p.all_endpoints.clear();
        p.has_any_endpoint = false;
        let r = render(&[p.clone()], &skeleton());
        assert_eq!(
            r.elements[&(Map::NoEndpointServices, "10.43.0.5 . tcp . 80".into())],
            "goto reject-chain"
        );
        assert!(r.chains.is_empty());
        p.internal_local = true;
        p.has_any_endpoint = true;
        let r = render(&[p.clone()], &skeleton());
        assert_eq!(
            r.elements[&(Map::NoEndpointServices, "10.43.0.5 . tcp . 80".into())],
            "drop"
        );

        // internalTrafficPolicy Local, externalTrafficPolicy Cluster, no
        // endpoint on this node: the node port still leads to the others.
        p.all_endpoints = vec![ep("10.42.1.6", false)];
        p.node_port = Some(30080);
        let r = render(&[p], &skeleton());
        let id = "shop/web/tcp/http";
        let h = hash(id);
        assert_eq!(
            r.elements[&(Map::ServiceNodeports, "tcp . 30080".into())],
            format!("goto external-{h}-{id}")
        );
        assert_eq!(
            r.chains[&format!("external-{h}-{id}")],
            [
                "jump mark-for-masquerade".to_string(),
                format!("goto cluster-{h}-{id}")
            ]
        );
        assert_eq!(
            r.chains[&format!("cluster-{h}-{id}")],
            ["meta l4proto tcp dnat ip to 10.42.1.6:8080"]
        );
    }

    #[test]
    fn local_policy_without_local_endpoints_drops_only_outsiders() {
        let mut p = port();
        p.node_port = Some(30080);
        p.external_local = true;
        let r = render(&[p], &skeleton());
        let id = "shop/web/tcp/http";
        let h = hash(id);
        let rules = &r.chains[&format!("external-{h}-{id}")];
        assert_eq!(
            rules[0],
            format!("ip saddr 10.42.0.0/16 goto service-{h}-{id}")
        );
        assert_eq!(rules.last().unwrap(), "drop");
        assert!(!r
            .elements
            .contains_key(&(Map::NoEndpointNodeports, "tcp . 30080".into())));
    }

    #[test]
    fn node_port_local_policy_and_affinity() {
        let mut p = port();
        p.node_port = Some(30080);
        p.external_local = true;
        p.local_endpoints = vec![ep("10.42.0.5", true)];
        p.affinity_seconds = Some(60);
        let r = render(&[p], &skeleton());
        let id = "shop/web/tcp/http";
        let h = hash(id);
        let ext = format!("external-{h}-{id}");
        assert_eq!(
            r.elements[&(Map::ServiceNodeports, "tcp . 30080".into())],
            format!("goto {ext}")
        );
        let e0 = endpoint_chain(id, &ep("10.42.0.5", true));
        let set = affinity_set(id, &ep("10.42.0.5", true), 60);
        assert_eq!(
            r.chains[&ext],
            [
                format!("ip saddr 10.42.0.0/16 goto service-{h}-{id}"),
                "fib saddr type local jump mark-for-masquerade".to_string(),
                format!("fib saddr type local goto service-{h}-{id}"),
                format!("ip saddr @{set} goto {e0}"),
                format!("goto {e0}"),
            ]
        );
        assert!(r.chains[&e0].contains(&format!("update @{set} {{ ip saddr }}")));
        assert_eq!(
            r.sets[&set],
            "{ type ipv4_addr; flags dynamic,timeout; timeout 60s; }"
        );
    }

    #[test]
    fn base_has_the_maps_and_hooks() {
        let b = base(&skeleton());
        assert!(b.starts_with("table ip skiff-test {\n"));
        assert!(b.contains("set nodeport-ips { type ipv4_addr; elements = { 192.0.2.1 }; }"));
        assert!(b.contains("type nat hook prerouting priority -100; policy accept;"));
        assert!(b.contains("ip daddr 10.43.0.0/16 drop"));
    }
}

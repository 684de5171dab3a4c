//! The names and records one Service gives rise to (the Kubernetes DNS
//! specification's records for ClusterIP, headless and ExternalName
//! Services, with CoreDNS's choices where it leaves room), before they
//! are encoded. Pure functions of a Service's and its slices' specs; must
//! not touch the index itself.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::rr::Name;

use super::spec::{EndpointSpec, Kind, PortSpec, ServiceSpec, SliceSpec};
use super::{key_of, suffix_at_label, Key, ObjKey};

/// A record before encoding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Rec {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    /// Priority 0, weight shared out among the set at compile time.
    Srv {
        port: u16,
        target: Name,
        /// For the additional section.
        target_ips: Vec<IpAddr>,
    },
    Ptr(Name),
    Cname(Name),
    Txt(String),
    Soa,
}

/// Every name one Service gives rise to, with its records (empty for
/// the non-terminals between them and the zone).
pub(super) fn derive(
    zone: &Name,
    zone_key: &[u8],
    svc: &ObjKey,
    spec: Option<&ServiceSpec>,
    slices: Option<&BTreeMap<String, SliceSpec>>,
) -> BTreeMap<Key, Vec<Rec>> {
    let mut out: BTreeMap<Key, Vec<Rec>> = BTreeMap::new();
    let Some(spec) = spec else {
        return out;
    };
    let (ns, name) = svc;
    let names = zone
        .prepend_label("svc")
        .and_then(|z| z.prepend_label(ns.as_bytes()))
        .and_then(|ns_name| Ok((ns_name.prepend_label(name.as_bytes())?, ns_name)));
    let (base, ns_name) = match names {
        Ok(names) => names,
        Err(e) => {
            tracing::debug!(namespace = %ns, service = %name, error = %e, "service name not a DNS name");
            return out;
        }
    };
    out.entry(key_of(&ns_name)).or_default();
    let base_key = key_of(&base);
    let add = |out: &mut BTreeMap<Key, Vec<Rec>>, key: Key, rec: Rec| {
        out.entry(key).or_default().push(rec);
    };
    match &spec.kind {
        Kind::Nothing => {}
        Kind::ExternalName(target) => add(&mut out, base_key, Rec::Cname(target.clone())),
        Kind::ClusterIp(ips) => {
            for ip in ips {
                add(&mut out, base_key.clone(), address(*ip));
                add(&mut out, reverse_key(*ip), Rec::Ptr(base.clone()));
            }
            for port in &spec.ports {
                let Some(srv_key) = srv_name(&base, port) else {
                    continue;
                };
                let rec = Rec::Srv {
                    port: port.port,
                    target: base.clone(),
                    target_ips: ips.clone(),
                };
                add(&mut out, srv_key, rec.clone());
                add(&mut out, base_key.clone(), rec);
            }
        }
        Kind::Headless => {
            let slices = slices.iter().flat_map(|s| s.values());
            let serves = |e: &EndpointSpec| e.ready || spec.publish_not_ready;
            // Each address's name: its endpoint's hostname, else the
            // address with dashes (CoreDNS's endpoint names).
            let mut named: BTreeMap<IpAddr, Option<&str>> = BTreeMap::new();
            for ep in slices
                .clone()
                .flat_map(|s| &s.endpoints)
                .filter(|e| serves(e))
            {
                for ip in &ep.addrs {
                    let hostname = named.entry(*ip).or_default();
                    if hostname.is_none() {
                        *hostname = ep.hostname.as_deref();
                    }
                }
            }
            let mut targets: BTreeMap<IpAddr, Name> = BTreeMap::new();
            for (ip, hostname) in named {
                let label = hostname.map_or_else(|| dashed(ip), str::to_ascii_lowercase);
                let Ok(target) = base.prepend_label(label.as_bytes()) else {
                    continue;
                };
                add(&mut out, base_key.clone(), address(ip));
                add(&mut out, key_of(&target), address(ip));
                add(&mut out, reverse_key(ip), Rec::Ptr(target.clone()));
                targets.insert(ip, target);
            }
            for slice in slices {
                for port in &slice.ports {
                    let Some(srv_key) = srv_name(&base, port) else {
                        continue;
                    };
                    for ep in slice.endpoints.iter().filter(|e| serves(e)) {
                        for ip in &ep.addrs {
                            let Some(target) = targets.get(ip) else {
                                continue;
                            };
                            let rec = Rec::Srv {
                                port: port.port,
                                target: target.clone(),
                                target_ips: vec![*ip],
                            };
                            add(&mut out, srv_key.clone(), rec.clone());
                            add(&mut out, base_key.clone(), rec);
                        }
                    }
                }
            }
        }
    }
    // The names between each name and the zone exist too.
    let inside: Vec<Key> = out
        .keys()
        .filter(|k| suffix_at_label(k, zone_key).is_some())
        .cloned()
        .collect();
    for key in inside {
        let mut rest: &[u8] = &key;
        loop {
            rest = &rest[1 + usize::from(rest[0])..];
            if rest.len() <= zone_key.len() {
                break;
            }
            out.entry(rest.into()).or_default();
        }
    }
    out
}

/// The key of an address's reverse name (in-addr.arpa or ip6.arpa).
pub(super) fn reverse_key(ip: IpAddr) -> Key {
    let mut key = Vec::with_capacity(74);
    match ip {
        IpAddr::V4(v4) => {
            for octet in v4.octets().iter().rev() {
                let text = octet.to_string();
                key.push(text.len() as u8);
                key.extend_from_slice(text.as_bytes());
            }
            key.extend_from_slice(b"\x07in-addr\x04arpa\x00");
        }
        IpAddr::V6(v6) => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            for byte in v6.octets().iter().rev() {
                key.extend_from_slice(&[
                    1,
                    HEX[usize::from(byte & 0xF)],
                    1,
                    HEX[usize::from(byte >> 4)],
                ]);
            }
            key.extend_from_slice(b"\x03ip6\x04arpa\x00");
        }
    }
    key.into()
}

/// An address as a label: dots (or colons) as dashes.
fn dashed(ip: IpAddr) -> String {
    ip.to_string().replace(['.', ':'], "-")
}

fn address(ip: IpAddr) -> Rec {
    match ip {
        IpAddr::V4(v4) => Rec::A(v4),
        IpAddr::V6(v6) => Rec::Aaaa(v6),
    }
}

/// `_port._proto.<base>`.
fn srv_name(base: &Name, port: &PortSpec) -> Option<Key> {
    let name = base
        .prepend_label(format!("_{}", port.proto).as_bytes())
        .and_then(|n| n.prepend_label(format!("_{}", port.name).as_bytes()))
        .ok()?;
    Some(key_of(&name))
}

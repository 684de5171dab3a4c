//! discovery.k8s.io/v1 EndpointSlices, as upstream's
//! pkg/apis/discovery/validation checks them (1.33): the address type,
//! each endpoint's addresses (by type), topology and hostname, and the
//! ports (names, protocols, appProtocol), with upstream's limits, field
//! paths and wording. Stored-form JSON after defaulting.

use std::net::IpAddr;

use serde_json::Value;

use super::common::{duplicate, immutable, invalid_str, items, parse_ip, too_many};
use super::{meta, names, not_supported, required, FieldError};

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
/// On update the deprecated `IP` type is still accepted.
const ADDRESS_TYPES_UPDATE: &[&str] = &["FQDN", "IP", "IPv4", "IPv6"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const MAX_TOPOLOGY_LABELS: usize = 16;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 100;
const MAX_ENDPOINTS: usize = 1000;

/// An EndpointSlice on create.
pub fn endpoint_slice(obj: &Value) -> Vec<FieldError> {
    slice(obj, ADDRESS_TYPES)
}

/// An EndpointSlice update: the address type is immutable.
pub fn endpoint_slice_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = slice(new, ADDRESS_TYPES_UPDATE);
    if old.get("addressType") != new.get("addressType") {
        errors.push(immutable("addressType", new.get("addressType")));
    }
    errors
}

fn slice(obj: &Value, types: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ty = obj
        .get("addressType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if ty.is_empty() {
        errors.push(required("addressType".into()));
    } else if !types.contains(&ty) {
        errors.push(not_supported("addressType".into(), ty, types));
    }
    errors.extend(endpoints(items(obj, "endpoints"), ty));
    errors.extend(ports(items(obj, "ports")));
    errors
}

/// `ValidateNonSpecialIP`.
fn non_special(errors: &mut Vec<FieldError>, at: &str, address: &str, ip: IpAddr) {
    let (unspecified, loopback, link_local, link_local_multicast) = match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            (
                v4.is_unspecified(),
                v4.is_loopback(),
                v4.is_link_local(),
                o[0] == 224 && o[1] == 0 && o[2] == 0,
            )
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            (
                v6.is_unspecified(),
                v6.is_loopback(),
                s[0] & 0xffc0 == 0xfe80,
                s[0] & 0xff0f == 0xff02,
            )
        }
    };
    if unspecified {
        errors.push(invalid_str(
            at,
            address,
            &format!("may not be unspecified ({address})"),
        ));
    }
    if loopback {
        errors.push(invalid_str(
            at,
            address,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    if link_local {
        errors.push(invalid_str(
            at,
            address,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if link_local_multicast {
        errors.push(invalid_str(
            at,
            address,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
}

/// `IsFullyQualifiedDomainName`.
fn fqdn(at: &str, name: &str) -> Option<FieldError> {
    if name.is_empty() {
        return Some(required(at.to_string()));
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let errs = names::dns1123_subdomain(name);
    if !errs.is_empty() {
        return Some(invalid_str(at, name, &errs.join(",")));
    }
    if name.split('.').count() < 2 {
        return Some(invalid_str(
            at,
            name,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    None
}

fn endpoints(list: &[Value], ty: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if list.len() > MAX_ENDPOINTS {
        errors.push(too_many("endpoints", list.len(), MAX_ENDPOINTS));
        return errors;
    }
    for (i, ep) in list.iter().enumerate() {
        let at = format!("endpoints[{i}]");
        let addresses = items(ep, "addresses");
        if addresses.is_empty() {
            errors.push(super::common::required_because(
                format!("{at}.addresses"),
                "must contain at least 1 address",
            ));
        } else if addresses.len() > MAX_ADDRESSES {
            errors.push(too_many(
                format!("{at}.addresses"),
                addresses.len(),
                MAX_ADDRESSES,
            ));
        }
        for (j, a) in addresses.iter().enumerate() {
            let address = a.as_str().unwrap_or_default();
            let field = format!("{at}.addresses[{j}]");
            match ty {
                "IP" | "IPv4" | "IPv6" => match parse_ip(address) {
                    None => errors.push(invalid_str(&field, address, super::common::IP_MESSAGE)),
                    Some(ip) => {
                        if ty == "IPv4" && !ip.is_ipv4() {
                            errors.push(invalid_str(&field, address, "must be an IPv4 address"));
                        }
                        if ty == "IPv6" && !ip.is_ipv6() {
                            errors.push(invalid_str(&field, address, "must be an IPv6 address"));
                        }
                        if ty != "IP" {
                            non_special(&mut errors, &field, address, ip);
                        }
                    }
                },
                "FQDN" => errors.extend(fqdn(&field, address)),
                _ => {}
            }
        }
        if let Some(topology) = ep.get("deprecatedTopology").and_then(Value::as_object) {
            let field = format!("{at}.deprecatedTopology");
            if topology.len() > MAX_TOPOLOGY_LABELS {
                errors.push(too_many(&field, topology.len(), MAX_TOPOLOGY_LABELS));
            }
            errors.extend(meta::label_map(topology, &field));
        }
        if let Some(h) = ep.get("hostname").and_then(Value::as_str) {
            for m in names::dns1123_label(h) {
                errors.push(invalid_str(format!("{at}.hostname"), h, &m));
            }
        }
    }
    errors
}

fn ports(list: &[Value]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if list.len() > MAX_PORTS {
        errors.push(too_many("ports", list.len(), MAX_PORTS));
        return errors;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let at = format!("ports[{i}]");
        let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
        if !name.is_empty() {
            for m in names::dns1123_label(name) {
                errors.push(invalid_str(format!("{at}.name"), name, &m));
            }
        }
        if seen.contains(&name) {
            errors.push(duplicate(format!("{at}.name"), name));
        } else {
            seen.push(name);
        }
        match p.get("protocol").and_then(Value::as_str) {
            None => errors.push(required(format!("{at}.protocol"))),
            Some(proto) if !PROTOCOLS.contains(&proto) => {
                errors.push(not_supported(format!("{at}.protocol"), proto, PROTOCOLS));
            }
            Some(_) => {}
        }
        if let Some(app) = p.get("appProtocol").and_then(Value::as_str) {
            for m in names::qualified_name(app) {
                errors.push(invalid_str(format!("{at}.appProtocol"), app, &m));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slice_findings() {
        let ok = json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]});
        assert!(endpoint_slice(&ok).is_empty());
        let bad = json!({"addressType": "IPv5", "endpoints": [{"addresses": []}],
            "ports": [{"name": "", "protocol": "TCP"}, {"name": "", "protocol": "HTTP"}]});
        let found: Vec<(String, String)> = endpoint_slice(&bad)
            .into_iter()
            .map(|e| (e.field, e.message))
            .collect();
        assert_eq!(
            found,
            vec![
                (
                    "addressType".into(),
                    "Unsupported value: \"IPv5\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""
                        .into()
                ),
                (
                    "endpoints[0].addresses".into(),
                    "Required value: must contain at least 1 address".into()
                ),
                ("ports[1].name".into(), "Duplicate value: \"\"".into()),
                (
                    "ports[1].protocol".into(),
                    "Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
                        .into()
                ),
            ]
        );
        let lo = json!({"addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1", "::1"]}]});
        let msgs: Vec<String> = endpoint_slice(&lo).into_iter().map(|e| e.message).collect();
        assert_eq!(
            msgs,
            vec![
                "Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "Invalid value: \"::1\": must be an IPv4 address",
                "Invalid value: \"::1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            ]
        );
    }
}

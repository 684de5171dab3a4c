//! core/v1 Endpoints (upstream `ValidateEndpoints`, 1.33): each subset
//! has addresses, each address an IP (and a DNS-label hostname and a
//! node name that is a subdomain), each port a number, a name (required
//! when there are several) and a protocol. Upstream's `ValidateNonSpecialIP`
//! (no loopback or link-local addresses) is left out: Skiff's own
//! `kubernetes` Endpoints may carry a loopback address in tests.

use serde_json::Value;

use super::common::{invalid_str, items, parse_ip, str_at, IP_MESSAGE};
use super::{invalid, names, not_supported, required, FieldError};

/// An Endpoints object.
pub fn endpoints(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, ss) in items(obj, "subsets").iter().enumerate() {
        let at = format!("subsets[{i}]");
        let addresses = items(ss, "addresses");
        let not_ready = items(ss, "notReadyAddresses");
        if addresses.is_empty() && not_ready.is_empty() {
            errors.push(FieldError {
                reason: "FieldValueRequired",
                field: at.clone(),
                message: "Required value: must specify `addresses` or `notReadyAddresses`".into(),
            });
        }
        for (list, all) in [("addresses", addresses), ("notReadyAddresses", not_ready)] {
            for (j, a) in all.iter().enumerate() {
                let ap = format!("{at}.{list}[{j}]");
                let ip = str_at(a, "ip").unwrap_or_default();
                if parse_ip(ip).is_none() {
                    errors.push(invalid_str(format!("{ap}.ip"), ip, IP_MESSAGE));
                }
                if let Some(h) = str_at(a, "hostname").filter(|h| !h.is_empty()) {
                    for m in names::dns1123_label(h) {
                        errors.push(invalid_str(format!("{ap}.hostname"), h, &m));
                    }
                }
                if let Some(n) = str_at(a, "nodeName") {
                    for m in names::dns1123_subdomain(n) {
                        errors.push(invalid_str(format!("{ap}.nodeName"), n, &m));
                    }
                }
            }
        }
        let ports = items(ss, "ports");
        for (j, p) in ports.iter().enumerate() {
            let pp = format!("{at}.ports[{j}]");
            let name = str_at(p, "name").unwrap_or_default();
            if ports.len() > 1 && name.is_empty() {
                errors.push(required(format!("{pp}.name")));
            } else if !name.is_empty() {
                for m in names::dns1123_label(name) {
                    errors.push(invalid_str(format!("{pp}.name"), name, &m));
                }
            }
            let port = p.get("port").cloned().unwrap_or(Value::from(0));
            if port.as_i64().is_none_or(|n| !(1..=65535).contains(&n)) {
                errors.push(invalid(
                    format!("{pp}.port"),
                    &port,
                    "must be between 1 and 65535, inclusive",
                ));
            }
            if let Some(proto) = str_at(p, "protocol").filter(|p| !p.is_empty()) {
                if !["SCTP", "TCP", "UDP"].contains(&proto) {
                    errors.push(not_supported(
                        format!("{pp}.protocol"),
                        proto,
                        &["SCTP", "TCP", "UDP"],
                    ));
                }
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn validate_endpoints() {
        let shown = |v| {
            super::endpoints(&v)
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
        };
        assert!(shown(json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}],
            "ports": [{"port": 80, "protocol": "TCP"}]}]}))
        .is_empty());
        assert_eq!(
            shown(json!({"subsets": [{"addresses": [{"ip": "x"}],
                "ports": [{"port": 0, "protocol": "HTTP", "name": "a"}, {"port": 80}]},
                {"ports": [{"port": 80}]}]})),
            vec![
                "subsets[0].addresses[0].ip: Invalid value: \"x\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "subsets[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "subsets[0].ports[1].name: Required value",
                "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
            ]
        );
    }
}

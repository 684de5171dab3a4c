//! Services: the parts of upstream `ValidateService` and
//! `ValidateServiceUpdate` (pkg/apis/core/validation) that allocation
//! depends on: type, ports, ExternalName, nodePorts only where a type has
//! them, and the ClusterIP that may not change once set. Stored form,
//! after defaulting; the API server's allocators assign the values.

use serde_json::Value;

use super::{invalid, not_supported, required, FieldError};

const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const AFFINITIES: &[&str] = &["ClientIP", "None"];

fn forbidden(field: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field,
        message: format!("Forbidden: {detail}"),
    }
}

fn first_ip(svc: &Value) -> Option<&str> {
    svc.pointer("/spec/clusterIPs/0")
        .and_then(Value::as_str)
        .or_else(|| svc.pointer("/spec/clusterIP").and_then(Value::as_str))
        .filter(|s| !s.is_empty())
}

/// A Service.
pub fn service(svc: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(spec) = svc.get("spec") else {
        return errors;
    };
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !TYPES.contains(&ty) {
        errors.push(not_supported("spec.type".into(), ty, TYPES));
    }
    if let Some(a) = spec.get("sessionAffinity").and_then(Value::as_str) {
        if !AFFINITIES.contains(&a) {
            errors.push(not_supported("spec.sessionAffinity".into(), a, AFFINITIES));
        }
    }
    let headless = first_ip(svc) == Some("None");
    let ports = spec
        .get("ports")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if ty == "ExternalName" {
        if first_ip(svc).is_some() {
            errors.push(forbidden(
                "spec.clusterIPs".into(),
                "may not be set for ExternalName services",
            ));
        }
        let name = spec
            .get("externalName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim_end_matches('.');
        if name.is_empty() {
            errors.push(required("spec.externalName".into()));
        } else {
            for m in super::names::dns1123_subdomain(name) {
                errors.push(invalid("spec.externalName".into(), &Value::from(name), &m));
            }
        }
    } else if ports.is_empty() && !headless {
        errors.push(required("spec.ports".into()));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let at = format!("spec.ports[{i}]");
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if ports.len() > 1 && name.is_empty() {
            errors.push(required(format!("{at}.name")));
        } else if !name.is_empty() {
            if names.contains(&name) {
                errors.push(FieldError {
                    reason: "FieldValueDuplicate",
                    field: format!("{at}.name"),
                    message: format!("Duplicate value: \"{name}\""),
                });
            }
            names.push(name);
        }
        match port.get("port") {
            None => errors.push(required(format!("{at}.port"))),
            Some(p) => {
                if !p.as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
                    errors.push(invalid(
                        format!("{at}.port"),
                        p,
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
        if let Some(proto) = port.get("protocol").and_then(Value::as_str) {
            if !PROTOCOLS.contains(&proto) {
                errors.push(not_supported(format!("{at}.protocol"), proto, PROTOCOLS));
            }
        }
        if !name.is_empty() {
            if let Some(m) = super::dns1123_label(name) {
                errors.push(invalid(format!("{at}.name"), &Value::from(name), &m));
            }
        }
        match port.get("targetPort") {
            Some(Value::String(t)) => {
                for m in super::common::port_name(t) {
                    errors.push(invalid(
                        format!("{at}.targetPort"),
                        &Value::from(t.as_str()),
                        &m,
                    ));
                }
            }
            Some(t @ Value::Number(_)) => {
                // 0 is what an unset targetPort defaults from.
                let n = t.as_i64().unwrap_or(-1);
                if n != 0 && !(1..=65535).contains(&n) {
                    errors.push(invalid(
                        format!("{at}.targetPort"),
                        t,
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
            _ => {}
        }
        let node_port = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if node_port != 0 {
            if ty == "ClusterIP" {
                errors.push(forbidden(
                    format!("{at}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if ty == "ExternalName" {
                errors.push(forbidden(
                    format!("{at}.nodePort"),
                    "may not be used when `type` is 'ExternalName'",
                ));
            } else if !(1..=65535).contains(&node_port) {
                errors.push(invalid(
                    format!("{at}.nodePort"),
                    &Value::from(node_port),
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
    errors.extend(policies(spec, ty));
    errors
}

/// The traffic and IP family policies, session affinity timeouts and
/// external IPs (upstream `validateServiceExternalTrafficPolicy`,
/// `validateServiceInternalTrafficPolicy`, `validateIPFamilyPolicy`,
/// `validateClientIPAffinityConfig`), where set.
fn policies(spec: &Value, ty: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let externally = matches!(ty, "NodePort" | "LoadBalancer")
        || (ty == "ClusterIP" && !external_ips.is_empty());
    let traffic = ["Cluster", "Local"];
    if let Some(p) = spec
        .get("externalTrafficPolicy")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    {
        if !externally {
            errors.push(invalid(
                "spec.externalTrafficPolicy".into(),
                &Value::from(p),
                "may only be set for externally-accessible services",
            ));
        } else if !traffic.contains(&p) {
            errors.push(not_supported(
                "spec.externalTrafficPolicy".into(),
                p,
                &traffic,
            ));
        }
    }
    if ty != "ExternalName" {
        if let Some(p) = spec.get("internalTrafficPolicy").and_then(Value::as_str) {
            if !traffic.contains(&p) {
                errors.push(not_supported(
                    "spec.internalTrafficPolicy".into(),
                    p,
                    &traffic,
                ));
            }
        }
        let family_policies = ["PreferDualStack", "RequireDualStack", "SingleStack"];
        if let Some(p) = spec.get("ipFamilyPolicy").and_then(Value::as_str) {
            if !family_policies.contains(&p) {
                errors.push(not_supported(
                    "spec.ipFamilyPolicy".into(),
                    p,
                    &family_policies,
                ));
            }
        }
        let families = spec
            .get("ipFamilies")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for (i, f) in families.iter().enumerate() {
            let f = f.as_str().unwrap_or_default();
            let at = format!("spec.ipFamilies[{i}]");
            if f != "IPv4" && f != "IPv6" {
                errors.push(not_supported(at, f, &["IPv4", "IPv6"]));
            } else if families.iter().take(i).any(|g| g.as_str() == Some(f)) {
                errors.push(super::common::duplicate(at, f));
            }
        }
    }
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
        if let Some(t) = spec.pointer("/sessionAffinityConfig/clientIP/timeoutSeconds") {
            if t.as_i64().is_some_and(|t| t <= 0 || t > 86400) {
                errors.push(invalid(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds".into(),
                    t,
                    "must be greater than 0 and less than 86400",
                ));
            }
        }
    }
    let ranges = spec
        .get("loadBalancerSourceRanges")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if !ranges.is_empty() {
        if ty != "LoadBalancer" {
            errors.push(forbidden(
                "spec.loadBalancerSourceRanges".into(),
                "may only be used when `type` is 'LoadBalancer'",
            ));
        }
        for (i, r) in ranges.iter().enumerate() {
            // Upstream allows the values to be space-padded.
            let r = r.as_str().unwrap_or_default().trim();
            if super::common::parse_cidr(r).is_none() {
                errors.push(invalid(
                    format!("spec.loadBalancerSourceRanges[{i}]"),
                    &Value::from(r),
                    super::common::CIDR_MESSAGE,
                ));
            }
        }
    }
    for (i, ip) in external_ips.iter().enumerate() {
        let ip = ip.as_str().unwrap_or_default();
        if super::common::parse_ip(ip).is_none() {
            errors.push(invalid(
                format!("spec.externalIPs[{i}]"),
                &Value::from(ip),
                super::common::IP_MESSAGE,
            ));
        }
    }
    errors
}

/// An update: [`service`], and the primary ClusterIP may not change
/// unless the Service leaves or becomes ExternalName.
pub fn service_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = service(new);
    let external =
        |s: &Value| s.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
    if external(old) || external(new) {
        return errors;
    }
    if let (Some(was), Some(now)) = (first_ip(old), first_ip(new)) {
        if was != now {
            errors.push(invalid(
                "spec.clusterIPs[0]".into(),
                &Value::from(now),
                "may not change once set",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_ip_is_immutable() {
        let old = json!({"spec": {"clusterIP": "10.43.0.5", "clusterIPs": ["10.43.0.5"], "ports": [{"port": 80}]}});
        let new = json!({"spec": {"clusterIP": "10.43.0.6", "clusterIPs": ["10.43.0.6"], "ports": [{"port": 80}]}});
        let e = service_update(&old, &new);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].field, "spec.clusterIPs[0]");
        assert_eq!(
            e[0].message,
            "Invalid value: \"10.43.0.6\": may not change once set"
        );
        assert!(service_update(&old, &old).is_empty());
    }

    #[test]
    fn validate_service_invalid_cases() {
        let svc = |extra: serde_json::Value| {
            let mut v =
                json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}});
            for (k, x) in extra.as_object().unwrap() {
                v["spec"][k] = x.clone();
            }
            v
        };
        let cases = [
            (
                svc(json!({"externalTrafficPolicy": "Foo"})),
                "spec.externalTrafficPolicy",
                "Unsupported value: \"Foo\": supported values: \"Cluster\", \"Local\"",
            ),
            (
                svc(json!({"type": "ClusterIP", "externalTrafficPolicy": "Local"})),
                "spec.externalTrafficPolicy",
                "Invalid value: \"Local\": may only be set for externally-accessible services",
            ),
            (
                svc(json!({"internalTrafficPolicy": "Foo"})),
                "spec.internalTrafficPolicy",
                "Unsupported value: \"Foo\": supported values: \"Cluster\", \"Local\"",
            ),
            (
                svc(json!({"ipFamilyPolicy": "Foo"})),
                "spec.ipFamilyPolicy",
                "Unsupported value: \"Foo\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"",
            ),
            (
                svc(json!({"ipFamilies": ["IPv5"]})),
                "spec.ipFamilies[0]",
                "Unsupported value: \"IPv5\": supported values: \"IPv4\", \"IPv6\"",
            ),
            (
                svc(json!({"ipFamilies": ["IPv4", "IPv4"]})),
                "spec.ipFamilies[1]",
                "Duplicate value: \"IPv4\"",
            ),
            (
                svc(json!({"sessionAffinity": "ClientIP",
                    "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}})),
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                "Invalid value: 0: must be greater than 0 and less than 86400",
            ),
            (
                svc(json!({"sessionAffinity": "Sticky"})),
                "spec.sessionAffinity",
                "Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\"",
            ),
            (
                svc(json!({"type": "Special"})),
                "spec.type",
                "Unsupported value: \"Special\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            ),
            (
                svc(json!({"externalIPs": ["1.2.3"]})),
                "spec.externalIPs[0]",
                "Invalid value: \"1.2.3\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ),
            (
                svc(json!({"loadBalancerSourceRanges": ["10.0.0.0/8"]})),
                "spec.loadBalancerSourceRanges",
                "Forbidden: may only be used when `type` is 'LoadBalancer'",
            ),
            (
                svc(json!({"type": "LoadBalancer", "loadBalancerSourceRanges": ["10.0.0.0"]})),
                "spec.loadBalancerSourceRanges[0]",
                "Invalid value: \"10.0.0.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ),
            (
                svc(json!({"type": "ExternalName", "externalName": "Bad_Name", "ports": []})),
                "spec.externalName",
                "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (
                svc(json!({"ports": [{"port": 80, "targetPort": 70000}]})),
                "spec.ports[0].targetPort",
                "Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            (
                svc(json!({"ports": [{"port": 80, "targetPort": "-http"}]})),
                "spec.ports[0].targetPort",
                "Invalid value: \"-http\": must not begin or end with a hyphen",
            ),
            (
                svc(json!({"ports": [{"port": 80, "name": "Web"}]})),
                "spec.ports[0].name",
                "Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
        ];
        for (obj, field, message) in cases {
            let errors = service(&obj);
            assert!(
                errors
                    .iter()
                    .any(|e| e.field == field && e.message == message),
                "no `{field}: {message}` in {errors:#?}"
            );
        }
    }

    #[test]
    fn ports_and_types() {
        let e = service(
            &json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30080}]}}),
        );
        assert_eq!(
            e[0].message,
            "Forbidden: may not be used when `type` is 'ClusterIP'"
        );
        assert_eq!(
            service(&json!({"spec": {"type": "ClusterIP"}}))[0].field,
            "spec.ports"
        );
        assert!(service(&json!({"spec": {"clusterIP": "None"}})).is_empty());
        assert_eq!(
            service(&json!({"spec": {"type": "ExternalName"}}))[0].field,
            "spec.externalName"
        );
    }
}

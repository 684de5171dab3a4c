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

//! networking.k8s.io/v1 kinds: Ingress, IngressClass and NetworkPolicy, as
//! upstream's pkg/apis/networking/validation (1.33, default gates) checks
//! them, with its field paths and wording. Stored-form JSON after
//! defaulting; ObjectMeta is checked elsewhere.

use serde_json::Value;

use super::common::{
    cidr_contains, forbidden, immutable, invalid_shown, invalid_str, items, label_selector,
    parse_cidr, parse_ip, port_name, port_num, present, required_because, str_at, subdomain_at,
    wildcard_subdomain, CIDR_MESSAGE, IP_MESSAGE,
};
use super::{invalid, names, not_supported, required, FieldError};

/// The legacy annotation naming an Ingress's class.
pub const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];
const INVALID_PATH_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: &[&str] = &["/..", "/."];
const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
const PARAMETER_SCOPES: &[&str] = &["Cluster", "Namespace"];
const MAX_CONTROLLER_LEN: usize = 250;

/// An Ingress on create (`ValidateIngressCreate`).
pub fn ingress(obj: &Value) -> Vec<FieldError> {
    let mut errors = ingress_spec(obj.get("spec").unwrap_or(&Value::Null), "spec");
    errors.extend(ingress_status(obj, None));
    let annotated = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
        .and_then(Value::as_str);
    let class = obj
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str);
    if let (Some(a), Some(c)) = (annotated, class) {
        if a != c {
            errors.push(invalid_str(
                format!("annotations.{INGRESS_CLASS_ANNOTATION}"),
                a,
                "must match `ingressClassName` when both are specified",
            ));
        }
    }
    errors
}

/// An Ingress update (`ValidateIngressUpdate` and, for its status,
/// `ValidateIngressStatusUpdate`).
pub fn ingress_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = ingress_spec(new.get("spec").unwrap_or(&Value::Null), "spec");
    errors.extend(ingress_status(new, Some(old)));
    errors
}

fn ingress_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let rules = items(spec, "rules");
    if rules.is_empty() && !present(spec, "defaultBackend") {
        errors.push(invalid_shown(
            path,
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = spec.get("defaultBackend").filter(|b| !b.is_null()) {
        errors.extend(backend(b, &format!("{path}.defaultBackend")));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{path}.rules[{i}]");
        let host = str_at(rule, "host").unwrap_or_default();
        if !host.is_empty() {
            if parse_ip(host).is_some() {
                errors.push(invalid_str(
                    format!("{at}.host"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            let msgs = if host.contains('*') {
                wildcard_subdomain(host)
            } else {
                names::dns1123_subdomain(host)
            };
            for m in msgs {
                errors.push(invalid_str(format!("{at}.host"), host, &m));
            }
        }
        if let Some(http) = rule.get("http").filter(|h| !h.is_null()) {
            let paths = items(http, "paths");
            if paths.is_empty() {
                errors.push(required(format!("{at}.http.paths")));
            }
            for (j, p) in paths.iter().enumerate() {
                errors.extend(http_path(p, &format!("{at}.http.paths[{j}]")));
            }
        }
    }
    for (i, tls) in items(spec, "tls").iter().enumerate() {
        let at = format!("{path}.tls[{i}]");
        for (j, h) in items(tls, "hosts").iter().enumerate() {
            let h = h.as_str().unwrap_or_default();
            let msgs = if h.contains('*') {
                wildcard_subdomain(h)
            } else {
                names::dns1123_subdomain(h)
            };
            for m in msgs {
                errors.push(invalid_str(format!("{at}.hosts[{j}]"), h, &m));
            }
        }
        let secret = str_at(tls, "secretName").unwrap_or_default();
        if !secret.is_empty() {
            subdomain_at(&mut errors, &format!("{at}.secretName"), secret);
        }
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        subdomain_at(&mut errors, &format!("{path}.ingressClassName"), class);
    }
    errors
}

fn http_path(p: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    // The typed decoder writes an absent (required) pathType as "".
    let Some(ty) = str_at(p, "pathType").filter(|t| !t.is_empty()) else {
        return vec![required_because(
            format!("{at}.pathType"),
            "pathType must be specified",
        )];
    };
    let path = str_at(p, "path").unwrap_or_default();
    let field = format!("{at}.path");
    match ty {
        "Exact" | "Prefix" => {
            if !path.starts_with('/') {
                errors.push(invalid_str(&field, path, "must be an absolute path"));
            }
            for seq in INVALID_PATH_SEQUENCES {
                if path.contains(seq) {
                    errors.push(invalid_str(
                        &field,
                        path,
                        &format!("must not contain '{seq}'"),
                    ));
                }
            }
            for suffix in INVALID_PATH_SUFFIXES {
                if path.ends_with(suffix) {
                    errors.push(invalid_str(
                        &field,
                        path,
                        &format!("cannot end with '{suffix}'"),
                    ));
                }
            }
        }
        "ImplementationSpecific" => {
            if !path.is_empty() && !path.starts_with('/') {
                errors.push(invalid_str(&field, path, "must be an absolute path"));
            }
        }
        other => errors.push(not_supported(format!("{at}.pathType"), other, PATH_TYPES)),
    }
    errors.extend(backend(
        p.get("backend").unwrap_or(&Value::Null),
        &format!("{at}.backend"),
    ));
    errors
}

fn backend(b: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let resource = b.get("resource").filter(|r| !r.is_null());
    let service = b.get("service").filter(|s| !s.is_null());
    match (resource, service) {
        (Some(_), Some(_)) => {
            errors.push(invalid_str(
                at,
                "",
                "cannot set both resource and service backends",
            ));
        }
        (Some(r), None) => errors.extend(typed_reference(r, &format!("{at}.resource"))),
        (None, Some(s)) => {
            let name = str_at(s, "name").unwrap_or_default();
            if name.is_empty() {
                errors.push(required(format!("{at}.service.name")));
            } else {
                for m in names::dns1035_label(name) {
                    errors.push(invalid_str(format!("{at}.service.name"), name, &m));
                }
            }
            let port = s.get("port").unwrap_or(&Value::Null);
            let port_name_v = str_at(port, "name").unwrap_or_default();
            let number = port.get("number").and_then(Value::as_i64).unwrap_or(0);
            if !port_name_v.is_empty() && number != 0 {
                errors.push(invalid_str(
                    at,
                    "",
                    "cannot set both port name & port number",
                ));
            } else if !port_name_v.is_empty() {
                for m in port_name(port_name_v) {
                    errors.push(invalid_str(
                        format!("{at}.service.port.name"),
                        port_name_v,
                        &m,
                    ));
                }
            } else if number != 0 {
                if let Some(m) = port_num(number) {
                    errors.push(invalid(
                        format!("{at}.service.port.number"),
                        &Value::from(number),
                        m,
                    ));
                }
            } else {
                errors.push(required_because(at, "port name or number is required"));
            }
        }
        (None, None) => {
            errors.push(invalid_str(
                at,
                "",
                "resource or service backend is required",
            ));
        }
    }
    errors
}

/// `content.IsPathSegmentName`.
fn path_segment_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    match value {
        "." => errs.push("may not be '.'".to_string()),
        ".." => errs.push("may not be '..'".to_string()),
        _ => {}
    }
    for bad in ["/", "%"] {
        if value.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

fn typed_reference(r: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(g) = r.get("apiGroup").and_then(Value::as_str) {
        subdomain_at(&mut errors, &format!("{at}.apiGroup"), g);
    }
    for field in ["kind", "name"] {
        let v = str_at(r, field).unwrap_or_default();
        if v.is_empty() {
            errors.push(required(format!("{at}.{field}")));
        } else {
            for m in path_segment_name(v) {
                errors.push(invalid_str(format!("{at}.{field}"), v, &m));
            }
        }
    }
    errors
}

/// `ValidateIngressLoadBalancerStatus` (IPs already stored are accepted).
fn ingress_status(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let old_ips: Vec<&str> = old
        .and_then(|o| o.pointer("/status/loadBalancer/ingress"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|i| str_at(i, "ip")).collect())
        .unwrap_or_default();
    let list = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, ing) in list.iter().enumerate() {
        let at = format!("status.loadBalancer.ingress[{i}]");
        let ip = str_at(ing, "ip").unwrap_or_default();
        if !ip.is_empty() && parse_ip(ip).is_none() && !old_ips.contains(&ip) {
            errors.push(invalid_str(format!("{at}.ip"), ip, IP_MESSAGE));
        }
        let host = str_at(ing, "hostname").unwrap_or_default();
        if !host.is_empty() {
            subdomain_at(&mut errors, &format!("{at}.hostname"), host);
            if parse_ip(host).is_some() {
                errors.push(invalid_str(
                    format!("{at}.hostname"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
    errors
}

/// An IngressClass on create (`ValidateIngressClass`).
pub fn ingress_class(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let controller = str_at(spec, "controller").unwrap_or_default();
    if controller.is_empty() {
        errors.push(required("spec.controller".into()));
    } else {
        if controller.len() > MAX_CONTROLLER_LEN {
            errors.push(FieldError {
                reason: "FieldValueTooLong",
                field: "spec.controller".into(),
                message: format!("Too long: may not be more than {MAX_CONTROLLER_LEN} bytes"),
            });
        }
        errors.extend(domain_prefixed_path("spec.controller", controller));
    }
    if let Some(p) = spec.get("parameters").filter(|p| !p.is_null()) {
        errors.extend(class_parameters(p, "spec.parameters"));
    }
    errors
}

/// An IngressClass update: the controller is immutable.
pub fn ingress_class_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let (o, n) = (
        old.pointer("/spec/controller"),
        new.pointer("/spec/controller"),
    );
    if o.and_then(Value::as_str).unwrap_or_default()
        != n.and_then(Value::as_str).unwrap_or_default()
    {
        errors.push(immutable("spec.controller", n));
    }
    errors.extend(ingress_class(new));
    errors
}

/// `IsDomainPrefixedPath`.
fn domain_prefixed_path(field: &str, value: &str) -> Vec<FieldError> {
    let Some((host, path)) = value
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        return vec![invalid_str(
            field,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errors = Vec::new();
    subdomain_at(&mut errors, field, host);
    let ok = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b));
    if !ok {
        errors.push(invalid_str(
            field,
            path,
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ));
    }
    errors
}

fn class_parameters(p: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = typed_reference(p, at);
    let Some(scope) = str_at(p, "scope") else {
        errors.push(required(format!("{at}.scope")));
        return errors;
    };
    if !PARAMETER_SCOPES.contains(&scope) {
        errors.push(not_supported(
            format!("{at}.scope"),
            scope,
            PARAMETER_SCOPES,
        ));
        return errors;
    }
    let ns = p.get("namespace").filter(|n| !n.is_null());
    if scope == "Namespace" {
        match ns.and_then(Value::as_str) {
            None => errors.push(required_because(
                format!("{at}.namespace"),
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(n) => {
                for m in names::dns1123_label(n) {
                    errors.push(invalid_str(format!("{at}.namespace"), n, &m));
                }
            }
        }
    }
    if scope == "Cluster" && ns.is_some() {
        errors.push(forbidden(
            format!("{at}.namespace"),
            "`parameters.scope` is set to 'Cluster'",
        ));
    }
    errors
}

/// A NetworkPolicy (`ValidateNetworkPolicy`; an update allows the CIDRs
/// the stored policy already has).
pub fn network_policy(obj: &Value) -> Vec<FieldError> {
    network_policy_spec(obj, &[])
}

/// A NetworkPolicy update.
pub fn network_policy_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut existing = Vec::new();
    for (rules, peers) in [("ingress", "from"), ("egress", "to")] {
        let spec = old.get("spec").unwrap_or(&Value::Null);
        for rule in items(spec, rules) {
            for peer in items(rule, peers) {
                if let Some(b) = peer.get("ipBlock") {
                    existing.extend(str_at(b, "cidr").map(String::from));
                    existing.extend(
                        items(b, "except")
                            .iter()
                            .filter_map(|e| e.as_str().map(String::from)),
                    );
                }
            }
        }
    }
    network_policy_spec(new, &existing)
}

fn network_policy_spec(obj: &Value, allowed_cidrs: &[String]) -> Vec<FieldError> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut errors = label_selector(spec.get("podSelector"), "spec.podSelector");
    for (rules, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(spec, rules).iter().enumerate() {
            let at = format!("spec.{rules}[{i}]");
            for (j, port) in items(rule, "ports").iter().enumerate() {
                errors.extend(policy_port(port, &format!("{at}.ports[{j}]")));
            }
            for (j, peer) in items(rule, peers).iter().enumerate() {
                errors.extend(policy_peer(
                    peer,
                    &format!("{at}.{peers}[{j}]"),
                    allowed_cidrs,
                ));
            }
        }
    }
    let types = items(spec, "policyTypes");
    if types.len() > 2 {
        let shown = format!(
            "&[]networking.PolicyType{{{}}}",
            types
                .iter()
                .map(|t| format!("\"{}\"", t.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        errors.push(invalid_shown(
            "spec.policyTypes",
            &shown,
            "may not specify more than two policyTypes",
        ));
        return errors;
    }
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap_or_default();
        if t != "Ingress" && t != "Egress" {
            errors.push(not_supported(
                format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
    errors
}

fn policy_port(port: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(p) = str_at(port, "protocol") {
        if !PROTOCOLS.contains(&p) {
            errors.push(not_supported(format!("{at}.protocol"), p, PROTOCOLS));
        }
    }
    let end = port.get("endPort").and_then(Value::as_i64);
    match port.get("port").filter(|p| !p.is_null()) {
        Some(Value::String(name)) => {
            if let Some(e) = end {
                errors.push(invalid(
                    format!("{at}.endPort"),
                    &Value::from(e),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for m in port_name(name) {
                errors.push(invalid_str(format!("{at}.port"), name, &m));
            }
        }
        Some(p) => {
            let n = p.as_i64().unwrap_or(0);
            if let Some(m) = port_num(n) {
                errors.push(invalid(format!("{at}.port"), &Value::from(n), m));
            }
            if let Some(e) = end {
                if e < n {
                    errors.push(invalid(
                        format!("{at}.endPort"),
                        &Value::from(e),
                        "must be greater than or equal to `port`",
                    ));
                }
                if let Some(m) = port_num(e) {
                    errors.push(invalid(format!("{at}.endPort"), &Value::from(e), m));
                }
            }
        }
        None => {
            if let Some(e) = end {
                errors.push(invalid(
                    format!("{at}.endPort"),
                    &Value::from(e),
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
    errors
}

fn policy_peer(peer: &Value, at: &str, allowed_cidrs: &[String]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut count = 0;
    for sel in ["podSelector", "namespaceSelector"] {
        if present(peer, sel) {
            count += 1;
            errors.extend(label_selector(peer.get(sel), &format!("{at}.{sel}")));
        }
    }
    let block = peer.get("ipBlock").filter(|b| !b.is_null());
    if let Some(b) = block {
        count += 1;
        errors.extend(ip_block(b, &format!("{at}.ipBlock"), allowed_cidrs));
    }
    if count == 0 {
        errors.push(required_because(at, "must specify a peer"));
    } else if count > 1 && block.is_some() {
        errors.push(forbidden(
            at,
            "may not specify both ipBlock and another peer",
        ));
    }
    errors
}

fn ip_block(b: &Value, at: &str, allowed: &[String]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let cidr = str_at(b, "cidr").unwrap_or_default();
    if cidr.is_empty() {
        errors.push(required(format!("{at}.cidr")));
        return errors;
    }
    let parsed = parse_cidr(cidr);
    if parsed.is_none() && !allowed.iter().any(|a| a == cidr) {
        errors.push(invalid_str(format!("{at}.cidr"), cidr, CIDR_MESSAGE));
    }
    let Some(outer) = parsed else {
        return errors;
    };
    for (i, e) in items(b, "except").iter().enumerate() {
        let e = e.as_str().unwrap_or_default();
        let field = format!("{at}.except[{i}]");
        match parse_cidr(e) {
            None => {
                if !allowed.iter().any(|a| a == e) {
                    errors.push(invalid_str(&field, e, CIDR_MESSAGE));
                }
            }
            Some(inner) => {
                if !cidr_contains(outer, inner.0) || outer.1 >= inner.1 {
                    errors.push(invalid_str(&field, e, "must be a strict subset of `cidr`"));
                }
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect()
    }

    #[test]
    fn ingress_findings() {
        let ok = json!({"spec": {"rules": [{"host": "foo.com", "http": {"paths": [
            {"path": "/bar", "pathType": "Exact",
             "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}]}});
        assert!(ingress(&ok).is_empty(), "{:?}", ingress(&ok));
        assert_eq!(
            found(&ingress(&json!({"spec": {}}))),
            vec![(
                "spec",
                "Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"
            )]
        );
        let bad = json!({"spec": {"rules": [{"host": "1.2.3.4", "http": {"paths": [
            {"path": "bar", "pathType": "Prefix", "backend": {"service": {"name": "svc1", "port": {}}}},
            {"path": "/x", "backend": {}}]}}]}});
        assert_eq!(
            found(&ingress(&bad)),
            vec![
                (
                    "spec.rules[0].host",
                    "Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address"
                ),
                (
                    "spec.rules[0].http.paths[0].path",
                    "Invalid value: \"bar\": must be an absolute path"
                ),
                (
                    "spec.rules[0].http.paths[0].backend",
                    "Required value: port name or number is required"
                ),
                (
                    "spec.rules[0].http.paths[1].pathType",
                    "Required value: pathType must be specified"
                ),
            ]
        );
    }

    #[test]
    fn ingress_class_and_policy_findings() {
        assert_eq!(
            found(&ingress_class(&json!({"spec": {"controller": "nginx"}}))),
            vec![(
                "spec.controller",
                "Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")"
            )]
        );
        let old = json!({"spec": {"controller": "example.com/a"}});
        let new = json!({"spec": {"controller": "example.com/b"}});
        assert_eq!(
            found(&ingress_class_update(&old, &new)),
            vec![(
                "spec.controller",
                "Invalid value: \"example.com/b\": field is immutable"
            )]
        );
        let np = json!({"spec": {"podSelector": {}, "ingress": [{"from": [{}],
            "ports": [{"port": 80, "endPort": 70}]}],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}}]}],
            "policyTypes": ["Ingress", "Sideways"]}});
        assert_eq!(
            found(&network_policy(&np)),
            vec![
                (
                    "spec.ingress[0].ports[0].endPort",
                    "Invalid value: 70: must be greater than or equal to `port`"
                ),
                (
                    "spec.ingress[0].from[0]",
                    "Required value: must specify a peer"
                ),
                (
                    "spec.egress[0].to[0].ipBlock.except[0]",
                    "Invalid value: \"11.0.0.0/16\": must be a strict subset of `cidr`"
                ),
                (
                    "spec.policyTypes[1]",
                    "Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\""
                ),
            ]
        );
    }
}

//! Row cells of the cluster-level kinds, following upstream
//! `pkg/printers/internalversion` (1.33): printIngress, printIngressClass,
//! printNetworkPolicy, printEndpointSlice, printCSIDriver, printCSINode,
//! printVolumeAttachment, printCSIStorageCapacity, printRuntimeClass,
//! printCertificateSigningRequest, printFlowSchema,
//! printPriorityLevelConfiguration, printMutatingWebhook,
//! printValidatingWebhook, printValidatingAdmissionPolicy and
//! printValidatingAdmissionPolicyBinding, with the helpers they use
//! (formatHosts, formatPorts, the load-balancer stringer, formatDiscovery*).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::util::{age, arr_at, bool_at, format_label_selector, get, human_duration, name, str_at};

type Now = DateTime<Utc>;

/// `loadBalancerWidth`: the ADDRESS column is cut here unless wide.
const LOAD_BALANCER_WIDTH: usize = 16;

/// `formatHosts`: up to three rule hosts, `*` when none names one.
fn format_hosts(rules: &[Value]) -> String {
    let max = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == max {
            more = true;
        }
        let host = str_at(rule, &["host"]);
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".into();
    }
    let ret = list.join(",");
    if more {
        return format!("{ret} + {} more...", rules.len() - max);
    }
    ret
}

/// `ingressLoadBalancerStatusStringer`; the apiserver's table convertor
/// always asks for the wide form, so nothing is cut there.
fn load_balancer(obj: &Value, wide: bool) -> String {
    let list: Vec<&str> = arr_at(obj, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            let ip = str_at(i, &["ip"]);
            let host = str_at(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !host.is_empty() {
                Some(host)
            } else {
                None
            }
        })
        .collect();
    let r = list.join(",");
    if !wide && r.len() > LOAD_BALANCER_WIDTH {
        let cut: String = r.chars().take(LOAD_BALANCER_WIDTH - 3).collect();
        return format!("{cut}...");
    }
    r
}

pub(super) fn ingress(obj: &Value, now: Now) -> Vec<Value> {
    let class = get(obj, &["spec", "ingressClassName"])
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let ports = if arr_at(obj, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        json!(name(obj)),
        json!(class),
        json!(format_hosts(arr_at(obj, &["spec", "rules"]))),
        json!(load_balancer(obj, true)),
        json!(ports),
        json!(age(obj, now)),
    ]
}

pub(super) fn ingress_class(obj: &Value, now: Now) -> Vec<Value> {
    let parameters = match get(obj, &["spec", "parameters"]) {
        None => "<none>".to_string(),
        Some(p) => {
            let mut s = str_at(p, &["kind"]).to_string();
            if let Some(g) = get(p, &["apiGroup"]).and_then(Value::as_str) {
                s = format!("{s}.{g}");
            }
            format!("{s}/{}", str_at(p, &["name"]))
        }
    };
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "controller"])),
        json!(parameters),
        json!(age(obj, now)),
    ]
}

pub(super) fn network_policy(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(format_label_selector(
            get(obj, &["spec", "podSelector"]).or(Some(&json!({})))
        )),
        json!(age(obj, now)),
    ]
}

/// `listWithMoreString`.
fn list_with_more(list: &[String], more: bool, count: usize, max: usize) -> String {
    let ret = list.join(",");
    if more {
        return format!("{ret} + {} more...", count - max);
    }
    if ret.is_empty() {
        return "<unset>".into();
    }
    ret
}

pub(super) fn endpoint_slice(obj: &Value, now: Now) -> Vec<Value> {
    let max = 3;
    let (mut ports, mut more, mut count) = (Vec::new(), false, 0);
    for p in arr_at(obj, &["ports"]) {
        if ports.len() < max {
            let shown = match get(p, &["port"]).and_then(Value::as_i64) {
                Some(n) => n.to_string(),
                None => match get(p, &["name"]).and_then(Value::as_str) {
                    Some(n) => n.to_string(),
                    None => "*".to_string(),
                },
            };
            ports.push(shown);
        } else if ports.len() == max {
            more = true;
        }
        count += 1;
    }
    let ports = list_with_more(&ports, more, count, max);
    let (mut addrs, mut more, mut count) = (Vec::new(), false, 0);
    for ep in arr_at(obj, &["endpoints"]) {
        for a in arr_at(ep, &["addresses"]) {
            if addrs.len() < max {
                addrs.push(a.as_str().unwrap_or_default().to_string());
            } else if addrs.len() == max {
                more = true;
            }
            count += 1;
        }
    }
    let endpoints = list_with_more(&addrs, more, count, max);
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["addressType"])),
        json!(ports),
        json!(endpoints),
        json!(age(obj, now)),
    ]
}

pub(super) fn csi_driver(obj: &Value, now: Now) -> Vec<Value> {
    let attach = get(obj, &["spec", "attachRequired"])
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let modes: Vec<&str> = arr_at(obj, &["spec", "volumeLifecycleModes"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let modes = if modes.is_empty() {
        "<none>".to_string()
    } else {
        modes.join(",")
    };
    let tokens = match get(obj, &["spec", "tokenRequests"]).and_then(Value::as_array) {
        None => "<unset>".to_string(),
        Some(t) => t
            .iter()
            .map(|t| str_at(t, &["audience"]))
            .collect::<Vec<_>>()
            .join(","),
    };
    vec![
        json!(name(obj)),
        json!(attach),
        json!(bool_at(obj, &["spec", "podInfoOnMount"])),
        json!(bool_at(obj, &["spec", "storageCapacity"])),
        json!(tokens),
        json!(bool_at(obj, &["spec", "requiresRepublish"])),
        json!(modes),
        json!(age(obj, now)),
    ]
}

pub(super) fn csi_node(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(arr_at(obj, &["spec", "drivers"]).len()),
        json!(age(obj, now)),
    ]
}

pub(super) fn volume_attachment(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "attacher"])),
        json!(str_at(obj, &["spec", "source", "persistentVolumeName"])),
        json!(str_at(obj, &["spec", "nodeName"])),
        json!(bool_at(obj, &["status", "attached"])),
        json!(age(obj, now)),
    ]
}

pub(super) fn csi_storage_capacity(obj: &Value, _now: Now) -> Vec<Value> {
    let capacity = get(obj, &["capacity"])
        .and_then(Value::as_str)
        .unwrap_or("<unset>");
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["storageClassName"])),
        json!(capacity),
    ]
}

pub(super) fn runtime_class(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["handler"])),
        json!(age(obj, now)),
    ]
}

/// `extractCSRStatus`.
fn csr_status(obj: &Value) -> String {
    let (mut approved, mut denied, mut failed) = (false, false, false);
    for c in arr_at(obj, &["status", "conditions"]) {
        match str_at(c, &["type"]) {
            "Approved" => approved = true,
            "Denied" => denied = true,
            "Failed" => failed = true,
            _ => {}
        }
    }
    let mut status = if denied {
        "Denied".to_string()
    } else if approved {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if failed {
        status.push_str(",Failed");
    }
    if !str_at(obj, &["status", "certificate"]).is_empty() {
        status.push_str(",Issued");
    }
    status
}

pub(super) fn certificate_signing_request(obj: &Value, now: Now) -> Vec<Value> {
    let signer = match str_at(obj, &["spec", "signerName"]) {
        "" => "<none>",
        s => s,
    };
    let duration = match get(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
        Some(s) => human_duration(chrono::Duration::seconds(s)),
        None => "<none>".to_string(),
    };
    vec![
        json!(name(obj)),
        json!(age(obj, now)),
        json!(signer),
        json!(str_at(obj, &["spec", "username"])),
        json!(duration),
        json!(csr_status(obj)),
    ]
}

pub(super) fn flow_schema(obj: &Value, now: Now) -> Vec<Value> {
    let distinguisher =
        get(obj, &["spec", "distinguisherMethod"]).map_or("<none>", |d| str_at(d, &["type"]));
    let missing = arr_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Dangling")
        .map_or("?", |c| str_at(c, &["status"]));
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "priorityLevelConfiguration", "name"])),
        json!(get(obj, &["spec", "matchingPrecedence"])
            .and_then(Value::as_i64)
            .unwrap_or(0)),
        json!(distinguisher),
        json!(age(obj, now)),
        json!(missing),
    ]
}

pub(super) fn priority_level_configuration(obj: &Value, now: Now) -> Vec<Value> {
    let none = || json!("<none>");
    let (mut shares, mut queues, mut hand, mut limit) = (none(), none(), none(), none());
    if let Some(l) = get(obj, &["spec", "limited"]) {
        shares = json!(get(l, &["nominalConcurrencyShares"])
            .and_then(Value::as_i64)
            .unwrap_or(0));
        if let Some(q) = get(l, &["limitResponse", "queuing"]) {
            let n = |f: &str| json!(get(q, &[f]).and_then(Value::as_i64).unwrap_or(0));
            queues = n("queues");
            hand = n("handSize");
            limit = n("queueLengthLimit");
        }
    }
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "type"])),
        shares,
        queues,
        hand,
        limit,
        json!(age(obj, now)),
    ]
}

pub(super) fn webhook_configuration(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(arr_at(obj, &["webhooks"]).len()),
        json!(age(obj, now)),
    ]
}

pub(super) fn validating_admission_policy(obj: &Value, now: Now) -> Vec<Value> {
    let param_kind = match get(obj, &["spec", "paramKind"]) {
        Some(p) => format!("{}/{}", str_at(p, &["apiVersion"]), str_at(p, &["kind"])),
        None => "<unset>".into(),
    };
    vec![
        json!(name(obj)),
        json!(arr_at(obj, &["spec", "validations"]).len()),
        json!(param_kind),
        json!(age(obj, now)),
    ]
}

pub(super) fn validating_admission_policy_binding(obj: &Value, now: Now) -> Vec<Value> {
    let param = match get(obj, &["spec", "paramRef"]) {
        None => "<unset>".to_string(),
        Some(pr) => {
            let n = str_at(pr, &["name"]);
            if !n.is_empty() {
                match str_at(pr, &["namespace"]) {
                    "" => format!("*/{n}"),
                    ns => format!("{ns}/{n}"),
                }
            } else if let Some(sel) = get(pr, &["selector"]) {
                format_label_selector(Some(sel))
            } else {
                "<unset>".to_string()
            }
        }
    };
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "policyName"])),
        json!(param),
        json!(age(obj, now)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Now {
        "2026-01-01T00:10:00Z".parse().unwrap()
    }

    #[test]
    fn ingress_and_csr_cells() {
        let ing = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"rules": [{"host": "foo.com"}, {}, {"host": "a"}, {"host": "b"}, {"host": "c"}], "tls": [{}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.100"}, {"hostname": "lb.example.com"}]}}});
        assert_eq!(
            ingress(&ing, now()),
            vec![
                json!("x"),
                json!("<none>"),
                json!("foo.com,a,b + 2 more..."),
                json!("10.0.0.100,lb.example.com"),
                json!("80, 443"),
                json!("10m")
            ]
        );
        let csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "example.com/s",
            "username": "admin", "expirationSeconds": 3600},
            "status": {"conditions": [{"type": "Approved"}], "certificate": "eA=="}});
        let cells = certificate_signing_request(&csr, now());
        assert_eq!(
            cells[2..],
            [
                json!("example.com/s"),
                json!("admin"),
                json!("60m"),
                json!("Approved,Issued")
            ]
        );
    }

    #[test]
    fn slice_and_levels() {
        let es = json!({"metadata": {"name": "s"}, "addressType": "IPv4",
            "ports": [{"port": 80}, {"name": "x"}, {}, {"port": 1}],
            "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"]}]});
        let cells = endpoint_slice(&es, now());
        assert_eq!(cells[2], json!("80,x,* + 1 more..."));
        assert_eq!(cells[3], json!("10.0.0.1,10.0.0.2"));
        let empty = json!({"metadata": {"name": "s"}, "addressType": "IPv4"});
        assert_eq!(endpoint_slice(&empty, now())[2], json!("<unset>"));
        let pl = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}});
        assert_eq!(priority_level_configuration(&pl, now())[2], json!("<none>"));
    }
}

//! Row cells for the non-Pod kinds, following upstream `printNode`,
//! `printEvent`, `printService`, `printDeployment`, `printJob`, … in
//! `pkg/printers/internalversion`. Cells are always the wide set, as the
//! apiserver generates them; kubectl hides priority-1 columns itself.
//!
//! Where the internal API type relies on v1 defaulting (service type,
//! port protocol, replicas, namespace phase) the default is applied here so
//! un-defaulted input prints as a defaulted object would.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::util::{
    age, arr_at, condition_status, container_cells, deleting, format_label_selector, format_labels,
    get, human_duration, int_at, int_opt, join_host_port, len_at, name, selector_string, since,
    str_any, str_at, time_at,
};

type Now = DateTime<Utc>;

pub(super) fn node(obj: &Value, now: Now) -> Vec<Value> {
    // Upstream keys conditions by type, so the last Ready condition wins.
    let ready = arr_at(obj, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == "Ready");
    let mut status = vec![match ready.map(|c| str_at(c, &["status"])) {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if get(obj, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = get(obj, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
                    Some(role) => Some(role),
                    None if k == "kubernetes.io/role" => v.as_str(),
                    None => None,
                })
                .filter(|role| !role.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    roles.dedup();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let address = |ty: &str| {
        arr_at(obj, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == ty)
            .map_or("<none>", |a| str_at(a, &["address"]))
            .to_string()
    };
    let info = |field: &str| match str_at(obj, &["status", "nodeInfo", field]) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    vec![
        json!(name(obj)),
        json!(status.join(",")),
        json!(roles),
        json!(age(obj, now)),
        json!(str_at(obj, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

pub(super) fn namespace(obj: &Value, now: Now) -> Vec<Value> {
    let phase = match str_at(obj, &["status", "phase"]) {
        "" => "Active",
        p => p,
    };
    vec![json!(name(obj)), json!(phase), json!(age(obj, now))]
}

/// Core `v1` Events and `events.k8s.io/v1` Events (whose renamed fields are
/// read as fallbacks) print the same way.
pub(super) fn event(obj: &Value, now: Now) -> Vec<Value> {
    let first_seen = match time_at(obj, &["firstTimestamp"])
        .or_else(|| time_at(obj, &["deprecatedFirstTimestamp"]))
    {
        Some(t) => since(Some(t), now),
        None => since(time_at(obj, &["eventTime"]), now),
    };
    let mut last_seen = match time_at(obj, &["lastTimestamp"])
        .or_else(|| time_at(obj, &["deprecatedLastTimestamp"]))
    {
        Some(t) => since(Some(t), now),
        None => first_seen.clone(),
    };
    let mut count = int_opt(obj, &["count"])
        .or_else(|| int_opt(obj, &["deprecatedCount"]))
        .unwrap_or(0);
    if let Some(series) = get(obj, &["series"]) {
        last_seen = since(time_at(series, &["lastObservedTime"]), now);
        count = int_at(series, &["count"]);
    } else if count == 0 {
        // Singleton events don't have a count set in the new API.
        count = 1;
    }
    let regarding = get(obj, &["involvedObject"]).or_else(|| get(obj, &["regarding"]));
    let field = |f: &str| regarding.map_or("", |r| str_at(r, &[f]));
    let kind = field("kind").to_lowercase();
    let target = match field("name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = str_any(
        obj,
        &[
            &["source", "component"],
            &["deprecatedSource", "component"],
            &["reportingComponent"],
            &["reportingController"],
        ],
    );
    let host = str_any(
        obj,
        &[
            &["source", "host"],
            &["deprecatedSource", "host"],
            &["reportingInstance"],
        ],
    );
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    let message = str_any(obj, &[&["message"], &["note"]]).trim();
    vec![
        json!(last_seen),
        json!(str_at(obj, &["type"])),
        json!(str_at(obj, &["reason"])),
        json!(target),
        json!(field("fieldPath")),
        json!(source),
        json!(message),
        json!(first_seen),
        json!(count),
        json!(name(obj)),
    ]
}

pub(super) fn config_map(obj: &Value, now: Now) -> Vec<Value> {
    let data = len_at(obj, &["data"]) + len_at(obj, &["binaryData"]);
    vec![json!(name(obj)), json!(data), json!(age(obj, now))]
}

pub(super) fn secret(obj: &Value, now: Now) -> Vec<Value> {
    // v1 -> internal conversion merges stringData into data.
    let mut keys: Vec<&String> = ["data", "stringData"]
        .iter()
        .filter_map(|f| get(obj, &[f]).and_then(Value::as_object))
        .flat_map(|m| m.keys())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let ty = match str_at(obj, &["type"]) {
        "" => "Opaque",
        t => t,
    };
    vec![
        json!(name(obj)),
        json!(ty),
        json!(keys.len()),
        json!(age(obj, now)),
    ]
}

fn service_external_ip(obj: &Value, ty: &str) -> String {
    let external: Vec<&str> = arr_at(obj, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match ty {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let mut lb: Vec<&str> = arr_at(obj, &["status", "loadBalancer", "ingress"])
                .iter()
                .map(|i| match str_at(i, &["ip"]) {
                    "" => str_at(i, &["hostname"]),
                    ip => ip,
                })
                .filter(|s| !s.is_empty())
                .collect();
            lb.sort_unstable();
            lb.dedup();
            lb.extend(external);
            if lb.is_empty() {
                "<pending>".to_string()
            } else {
                lb.join(",")
            }
        }
        "ExternalName" => str_at(obj, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

pub(super) fn service(obj: &Value, now: Now) -> Vec<Value> {
    let ty = match str_at(obj, &["spec", "type"]) {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ip = arr_at(obj, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| str_at(obj, &["spec", "clusterIP"]));
    let cluster_ip = if cluster_ip.is_empty() {
        "<none>"
    } else {
        cluster_ip
    };
    let ports: Vec<String> = arr_at(obj, &["spec", "ports"])
        .iter()
        .map(|p| {
            let protocol = match str_at(p, &["protocol"]) {
                "" => "TCP",
                proto => proto,
            };
            match int_at(p, &["nodePort"]) {
                n if n > 0 => format!("{}:{n}/{protocol}", int_at(p, &["port"])),
                _ => format!("{}/{protocol}", int_at(p, &["port"])),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        json!(name(obj)),
        json!(ty),
        json!(cluster_ip),
        json!(service_external_ip(obj, ty)),
        json!(ports),
        json!(age(obj, now)),
        json!(format_labels(get(obj, &["spec", "selector"]))),
    ]
}

/// Upstream `formatEndpoints`: up to three `ip:port` entries, then
/// `+ N more...`.
fn format_endpoints(obj: &Value) -> String {
    const MAX: usize = 3;
    let subsets = arr_at(obj, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    let mut more = false;
    for ss in subsets {
        let addresses = arr_at(ss, &["addresses"]);
        let ports = arr_at(ss, &["ports"]);
        let port_numbers: Vec<Option<i64>> = if ports.is_empty() {
            vec![None] // headless services may have no ports
        } else {
            ports.iter().map(|p| Some(int_at(p, &["port"]))).collect()
        };
        for port in port_numbers {
            count += addresses.len();
            for addr in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = str_at(addr, &["ip"]);
                list.push(port.map_or_else(|| ip.to_string(), |p| join_host_port(ip, p)));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

pub(super) fn endpoints(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(format_endpoints(obj)),
        json!(age(obj, now)),
    ]
}

pub(super) fn service_account(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(len_at(obj, &["secrets"])),
        json!(age(obj, now)),
    ]
}

pub(super) fn lease(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "holderIdentity"])),
        json!(age(obj, now)),
    ]
}

/// `spec.replicas`, defaulted to 1 as the v1 API does.
fn desired(obj: &Value) -> i64 {
    int_opt(obj, &["spec", "replicas"]).unwrap_or(1)
}

fn template_spec(obj: &Value) -> Option<&Value> {
    get(obj, &["spec", "template", "spec"])
}

pub(super) fn deployment(obj: &Value, now: Now) -> Vec<Value> {
    let (names, images) = container_cells(template_spec(obj));
    let selector = selector_string(get(obj, &["spec", "selector"]))
        .unwrap_or_else(|()| "<invalid>".to_string());
    vec![
        json!(name(obj)),
        json!(format!(
            "{}/{}",
            int_at(obj, &["status", "readyReplicas"]),
            desired(obj)
        )),
        json!(int_at(obj, &["status", "updatedReplicas"])),
        json!(int_at(obj, &["status", "availableReplicas"])),
        json!(age(obj, now)),
        json!(names),
        json!(images),
        json!(selector),
    ]
}

pub(super) fn replica_set(obj: &Value, now: Now) -> Vec<Value> {
    let (names, images) = container_cells(template_spec(obj));
    vec![
        json!(name(obj)),
        json!(desired(obj)),
        json!(int_at(obj, &["status", "replicas"])),
        json!(int_at(obj, &["status", "readyReplicas"])),
        json!(age(obj, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ]
}

pub(super) fn job(obj: &Value, now: Now) -> Vec<Value> {
    let succeeded = int_at(obj, &["status", "succeeded"]);
    let completions = match int_opt(obj, &["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int_at(obj, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time_at(obj, &["status", "startTime"]),
        time_at(obj, &["status", "completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    let conditions = arr_at(obj, &["status", "conditions"]);
    let has = |ty: &str| condition_status(conditions, ty) == Some("True");
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if deleting(obj) {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = container_cells(template_spec(obj));
    vec![
        json!(name(obj)),
        json!(status),
        json!(completions),
        json!(duration),
        json!(age(obj, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ]
}

pub(super) fn stateful_set(obj: &Value, now: Now) -> Vec<Value> {
    let (names, images) = container_cells(template_spec(obj));
    vec![
        json!(name(obj)),
        json!(format!(
            "{}/{}",
            int_at(obj, &["status", "readyReplicas"]),
            desired(obj)
        )),
        json!(age(obj, now)),
        json!(names),
        json!(images),
    ]
}

pub(super) fn daemon_set(obj: &Value, now: Now) -> Vec<Value> {
    let (names, images) = container_cells(template_spec(obj));
    let status = |f: &str| json!(int_at(obj, &["status", f]));
    vec![
        json!(name(obj)),
        status("desiredNumberScheduled"),
        status("currentNumberScheduled"),
        status("numberReady"),
        status("updatedNumberScheduled"),
        status("numberAvailable"),
        json!(format_labels(get(
            obj,
            &["spec", "template", "spec", "nodeSelector"]
        ))),
        json!(age(obj, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ]
}

pub(super) fn cron_job(obj: &Value, now: Now) -> Vec<Value> {
    let job_spec = get(obj, &["spec", "jobTemplate", "spec"]);
    let (names, images) = container_cells(job_spec.and_then(|s| get(s, &["template", "spec"])));
    let suspend = match get(obj, &["spec", "suspend"]).and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let last_schedule = match time_at(obj, &["status", "lastScheduleTime"]) {
        Some(t) => since(Some(t), now),
        None if get(obj, &["status", "lastScheduleTime"]).is_some() => "<unknown>".to_string(),
        None => "<none>".to_string(),
    };
    let time_zone = get(obj, &["spec", "timeZone"])
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "schedule"])),
        json!(time_zone),
        json!(suspend),
        json!(len_at(obj, &["status", "active"])),
        json!(last_schedule),
        json!(age(obj, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(
            job_spec.and_then(|s| get(s, &["selector"]))
        )),
    ]
}

//! The Pod printer: kubectl's READY, STATUS and RESTARTS summaries and the
//! wide columns, following upstream `printPod` (init containers, restartable
//! "sidecar" init containers, scheduling gates, terminating pods).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::util::{
    age, arr_at, bool_at, condition_status, deleting, get, int_at, name, since, str_at, time_at,
};

/// `node.NodeUnreachablePodReason`: the node controller's reason for pods
/// on a node that stopped reporting.
const NODE_LOST: &str = "NodeLost";

/// Everything `printPod` derives from the container statuses.
#[derive(Debug)]
struct Summary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

fn later(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// When the container last terminated before its current run.
fn last_finished(status: &Value) -> Option<DateTime<Utc>> {
    time_at(status, &["lastState", "terminated", "finishedAt"])
}

fn condition_true(pod: &Value, ty: &str) -> bool {
    condition_status(arr_at(pod, &["status", "conditions"]), ty) == Some("True")
}

fn any_condition_true(pod: &Value, ty: &str) -> bool {
    arr_at(pod, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == ty && str_at(c, &["status"]) == "True")
}

/// The reason of a terminated state without one: `Signal:N` or `ExitCode:N`.
fn terminated_code(terminated: &Value) -> String {
    let signal = int_at(terminated, &["signal"]);
    if signal != 0 {
        format!("Signal:{signal}")
    } else {
        format!("ExitCode:{}", int_at(terminated, &["exitCode"]))
    }
}

fn summarize(pod: &Value) -> Summary {
    let init_specs = arr_at(pod, &["spec", "initContainers"]);
    let restartable: HashSet<&str> = init_specs
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
        .map(|c| str_at(c, &["name"]))
        .collect();
    let mut s = Summary {
        ready: 0,
        total: arr_at(pod, &["spec", "containers"]).len() + restartable.len(),
        reason: str_at(pod, &["status", "phase"]).to_string(),
        restarts: 0,
        last_restart: None,
    };
    let status_reason = str_at(pod, &["status", "reason"]);
    if !status_reason.is_empty() {
        s.reason = status_reason.to_string();
    }
    for c in arr_at(pod, &["status", "conditions"]) {
        if str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated" {
            s.reason = "SchedulingGated".to_string();
        }
    }

    let mut sidecar_restarts = 0;
    let mut sidecar_last_restart = None;
    let mut initializing = false;
    for (i, c) in arr_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_at(c, &["restartCount"]);
        s.restarts += count;
        s.last_restart = later(s.last_restart, last_finished(c));
        let is_sidecar = restartable.contains(str_at(c, &["name"]));
        if is_sidecar {
            sidecar_restarts += count;
            sidecar_last_restart = later(sidecar_last_restart, last_finished(c));
        }
        let terminated = get(c, &["state", "terminated"]);
        let waiting_reason = str_at(c, &["state", "waiting", "reason"]);
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_sidecar && bool_at(c, &["started"]) {
            if bool_at(c, &["ready"]) {
                s.ready += 1;
            }
            continue;
        }
        s.reason = if let Some(t) = terminated {
            match str_at(t, &["reason"]) {
                "" => format!("Init:{}", terminated_code(t)),
                r => format!("Init:{r}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    if !initializing || condition_true(pod, "Initialized") {
        s.restarts = sidecar_restarts;
        s.last_restart = sidecar_last_restart;
        let mut has_running = false;
        for c in arr_at(pod, &["status", "containerStatuses"]).iter().rev() {
            s.restarts += int_at(c, &["restartCount"]);
            s.last_restart = later(s.last_restart, last_finished(c));
            let waiting_reason = str_at(c, &["state", "waiting", "reason"]);
            let terminated = get(c, &["state", "terminated"]);
            if !waiting_reason.is_empty() {
                s.reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                s.reason = match str_at(t, &["reason"]) {
                    "" => terminated_code(t),
                    r => r.to_string(),
                };
            } else if bool_at(c, &["ready"]) && get(c, &["state", "running"]).is_some() {
                has_running = true;
                s.ready += 1;
            }
        }
        // A pod whose last-listed finished container completed but which
        // still has running containers is reported as running.
        if s.reason == "Completed" && has_running {
            s.reason = if any_condition_true(pod, "Ready") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }

    if deleting(pod) {
        let phase = str_at(pod, &["status", "phase"]);
        if status_reason == NODE_LOST {
            s.reason = "Unknown".to_string();
        } else if phase != "Failed" && phase != "Succeeded" {
            s.reason = "Terminating".to_string();
        }
    }
    s
}

/// The STATUS column of `kubectl get pods`: `Running`, `Pending`,
/// `ContainerCreating`, `Init:1/2`, `Init:CrashLoopBackOff`,
/// `PodInitializing`, `CrashLoopBackOff`, `Completed`, `Error`,
/// `Terminating`, `NotReady`, … exactly as upstream `printPod` derives it.
pub fn pod_status(pod: &Value) -> String {
    summarize(pod).reason
}

/// The READY column: ready containers over containers, counting
/// restartable init containers (sidecars), e.g. `1/2`.
pub fn pod_ready(pod: &Value) -> String {
    let s = summarize(pod);
    format!("{}/{}", s.ready, s.total)
}

/// The RESTARTS column: the restart count, with the time since the most
/// recent container termination when there is one, e.g. `3 (5m ago)`.
pub fn pod_restarts(pod: &Value, now: DateTime<Utc>) -> String {
    restarts_cell(&summarize(pod), now)
}

fn restarts_cell(s: &Summary, now: DateTime<Utc>) -> String {
    match s.last_restart {
        Some(t) if s.restarts != 0 => format!("{} ({} ago)", s.restarts, since(Some(t), now)),
        _ => s.restarts.to_string(),
    }
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s.to_string()
    }
}

/// READINESS GATES: gates whose condition is `True` over gates.
fn readiness_gates(pod: &Value) -> String {
    let gates = arr_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let conditions = arr_at(pod, &["status", "conditions"]);
    let passing = gates
        .iter()
        .filter(|g| condition_status(conditions, str_at(g, &["conditionType"])) == Some("True"))
        .count();
    format!("{passing}/{}", gates.len())
}

/// NAME READY STATUS RESTARTS AGE IP NODE NOMINATED-NODE READINESS-GATES.
pub(super) fn cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let s = summarize(pod);
    // The internal form fills podIPs from the legacy podIP field.
    let ip = arr_at(pod, &["status", "podIPs"])
        .first()
        .map(|p| str_at(p, &["ip"]))
        .unwrap_or_else(|| str_at(pod, &["status", "podIP"]));
    vec![
        json!(name(pod)),
        json!(format!("{}/{}", s.ready, s.total)),
        json!(s.reason),
        json!(restarts_cell(&s, now)),
        json!(age(pod, now)),
        json!(or_none(ip)),
        json!(or_none(str_at(pod, &["spec", "nodeName"]))),
        json!(or_none(str_at(pod, &["status", "nominatedNodeName"]))),
        json!(readiness_gates(pod)),
    ]
}

/// Row conditions: a finished pod's row is marked `Completed`.
pub(super) fn row_conditions(pod: &Value) -> Vec<Value> {
    let (reason, message) = match str_at(pod, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return Vec::new(),
    };
    vec![json!({"type": "Completed", "status": "True", "reason": reason, "message": message})]
}

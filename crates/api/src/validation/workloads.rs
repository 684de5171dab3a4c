//! Per-kind validation beyond the pod spec, one function per kind (the
//! API server's strategies call them): resource quantities (decode errors
//! and bounds), tolerations and taints, pod templates and selectors of
//! workloads (required, matching the template, immutable), ConfigMap and
//! Secret size and events.k8s.io Event creation, in upstream's wording.

use serde_json::{Map, Value};

use super::meta::too_long;
use super::{invalid, names, not_supported, required, FieldError};
use crate::quantity::ParsedQuantity;

/// The decoder's message for a quantity that does not parse.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Most bytes a ConfigMap's or Secret's data may hold.
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The pod specs of an object of `kind`, with their paths.
fn pod_specs<'a>(kind: &str, obj: &'a Value) -> Vec<(&'a Value, &'static str)> {
    let spec = match kind {
        "Pod" => obj.get("spec").map(|s| (s, "spec")),
        "Deployment"
        | "ReplicaSet"
        | "Job"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicationController" => obj
            .pointer("/spec/template/spec")
            .map(|s| (s, "spec.template.spec")),
        "PodTemplate" => obj.pointer("/template/spec").map(|s| (s, "template.spec")),
        "CronJob" => obj
            .pointer("/spec/jobTemplate/spec/template/spec")
            .map(|s| (s, "spec.jobTemplate.spec.template.spec")),
        _ => None,
    };
    spec.into_iter().collect()
}

fn containers(spec: &Value) -> impl Iterator<Item = (&'static str, usize, &Value)> {
    ["initContainers", "containers"]
        .into_iter()
        .flat_map(move |list| {
            spec.get(list)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .map(move |(i, c)| (list, i, c))
        })
}

fn quantities(m: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> {
    m.and_then(Value::as_object).into_iter().flatten()
}

/// Every quantity in an object of `kind`, as strings with where they are.
fn each_quantity<'a>(kind: &str, obj: &'a Value) -> Vec<&'a Value> {
    let mut out = Vec::new();
    for (spec, _) in pod_specs(kind, obj) {
        for (_, _, c) in containers(spec) {
            for part in ["requests", "limits"] {
                out.extend(quantities(c.pointer(&format!("/resources/{part}"))).map(|(_, v)| v));
            }
        }
        out.extend(quantities(spec.get("overhead")).map(|(_, v)| v));
    }
    let maps: &[&str] = match kind {
        "Node" => &["/status/capacity", "/status/allocatable"],
        "PersistentVolume" => &["/spec/capacity"],
        "PersistentVolumeClaim" => &[
            "/spec/resources/requests",
            "/spec/resources/limits",
            "/status/capacity",
            "/status/allocatedResources",
        ],
        _ => &[],
    };
    for at in maps {
        out.extend(quantities(obj.pointer(at)).map(|(_, v)| v));
    }
    out
}

/// The decode error upstream gives for the first quantity of `obj` that
/// does not parse (a 400, before validation), if any.
pub fn bad_quantity(kind: &str, obj: &Value) -> Option<String> {
    each_quantity(kind, obj)
        .into_iter()
        .any(|q| q.as_str().is_none_or(|s| ParsedQuantity::parse(s).is_err()))
        .then(|| QUANTITY_FORMAT.to_string())
}

/// What every pod spec gets beyond `pod_spec`: resource quantities and
/// tolerations.
pub(crate) fn pod_spec_extras(spec: Option<&Value>, path: &str) -> Vec<FieldError> {
    let Some(spec) = spec else {
        return Vec::new();
    };
    let mut errors = resources(spec, path);
    errors.extend(tolerations(spec, path));
    errors.extend(super::pod::pod_spec_more(spec, path));
    errors
}

/// A Deployment (upstream `ValidateDeploymentSpec`): its template, a
/// selector that selects it, the strategy, and the counters' ranges.
pub fn deployment(obj: &Value) -> Vec<FieldError> {
    let mut errors = replica_set_spec(obj);
    errors.extend(deployment_strategy(obj.pointer("/spec/strategy")));
    for f in ["revisionHistoryLimit", "progressDeadlineSeconds"] {
        nonnegative_at(&mut errors, obj, "spec", f);
    }
    if let Some(deadline) = obj.pointer("/spec/progressDeadlineSeconds") {
        let min_ready = obj
            .pointer("/spec/minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if deadline.as_i64().is_some_and(|d| d <= min_ready) {
            errors.push(invalid(
                "spec.progressDeadlineSeconds".into(),
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errors
}

/// A ReplicaSet (upstream `ValidateReplicaSetSpec`).
pub fn replica_set(obj: &Value) -> Vec<FieldError> {
    replica_set_spec(obj)
}

/// What Deployments and ReplicaSets share: replicas and minReadySeconds
/// not negative, the selector, and a template that restarts Always with
/// no deadline (`ValidatePodTemplateSpecForReplicaSet`).
fn replica_set_spec(obj: &Value) -> Vec<FieldError> {
    let mut errors = super::workload_template(obj);
    errors.extend(selector_matches(obj));
    nonnegative_at(&mut errors, obj, "spec", "minReadySeconds");
    errors.extend(restarts_always(obj, "ReplicaSet"));
    errors
}

/// `ValidateNonnegativeField` of `spec.<field>` when it is set.
pub(crate) fn nonnegative_at(errors: &mut Vec<FieldError>, obj: &Value, path: &str, field: &str) {
    let pointer = format!("/{}/{field}", path.replace('.', "/"));
    if let Some(v) = obj.pointer(&pointer) {
        if v.as_i64().is_some_and(|n| n < 0) {
            errors.push(invalid(
                format!("{path}.{field}"),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// The template rules of long-running controllers: restartPolicy Always
/// and no activeDeadlineSeconds (`activeDeadlineSeconds in <kind> is not
/// Supported`).
pub(crate) fn restarts_always(obj: &Value, kind: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.pointer("/spec/template/spec");
    if let Some(policy) = spec
        .and_then(|s| s.get("restartPolicy"))
        .and_then(Value::as_str)
    {
        if policy != "Always" {
            errors.push(not_supported(
                "spec.template.spec.restartPolicy".into(),
                policy,
                &["Always"],
            ));
        }
    }
    if spec
        .and_then(|s| s.get("activeDeadlineSeconds"))
        .is_some_and(|d| !d.is_null())
    {
        errors.push(FieldError {
            reason: "FieldValueForbidden",
            field: "spec.template.spec.activeDeadlineSeconds".into(),
            message: format!("Forbidden: activeDeadlineSeconds in {kind} is not Supported"),
        });
    }
    errors
}

/// An IntOrString as Go's `%#v` shows it in a field error.
pub(crate) fn go_int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

const PERCENT_MESSAGE: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// `IsValidPercent`: digits then `%`; the number when it is one.
fn percent(s: &str) -> Option<i64> {
    let digits = s.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().unwrap_or(i64::MAX))
}

/// `ValidatePositiveIntOrPercent` of the int-or-percent at `path`.
pub(crate) fn positive_int_or_percent(v: &Value, path: &str) -> Vec<FieldError> {
    match v {
        Value::String(s) if percent(s).is_none() => vec![FieldError {
            reason: "FieldValueInvalid",
            field: path.into(),
            message: format!("Invalid value: {}: {PERCENT_MESSAGE}", go_int_or_string(v)),
        }],
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => vec![invalid(
            path.into(),
            v,
            "must be greater than or equal to 0",
        )],
        _ => Vec::new(),
    }
}

/// `getIntOrPercentValue`: a percent's number, an int, or a string's
/// integer value (0 when it is none).
pub(crate) fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::String(s)) => percent(s).unwrap_or_else(|| s.parse().unwrap_or(0)),
        Some(other) => other.as_i64().unwrap_or(0),
        None => 0,
    }
}

/// `IsNotMoreThan100Percent`.
pub(crate) fn not_more_than_100_percent(v: Option<&Value>, path: &str) -> Option<FieldError> {
    let v = v?;
    let p = v.as_str().and_then(percent)?;
    (p > 100).then(|| FieldError {
        reason: "FieldValueInvalid",
        field: path.into(),
        message: format!(
            "Invalid value: {}: must not be greater than 100%",
            go_int_or_string(v)
        ),
    })
}

/// `ValidateDeploymentStrategy`.
fn deployment_strategy(strategy: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let path = "spec.strategy";
    let rolling = strategy
        .and_then(|s| s.get("rollingUpdate"))
        .filter(|r| !r.is_null());
    let ty = strategy
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    match ty {
        "Recreate" => {
            if rolling.is_some() {
                errors.push(FieldError {
                    reason: "FieldValueForbidden",
                    field: format!("{path}.rollingUpdate"),
                    message: "Forbidden: may not be specified when strategy `type` is 'Recreate'"
                        .into(),
                });
            }
        }
        "RollingUpdate" => match rolling {
            None => errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{path}.rollingUpdate"),
                message: "Required value: this should be defaulted and never be nil".into(),
            }),
            Some(r) => {
                let at = format!("{path}.rollingUpdate");
                let unavailable = r.get("maxUnavailable").filter(|v| !v.is_null());
                let surge = r.get("maxSurge").filter(|v| !v.is_null());
                for (f, v) in [("maxUnavailable", unavailable), ("maxSurge", surge)] {
                    if let Some(v) = v {
                        errors.extend(positive_int_or_percent(v, &format!("{at}.{f}")));
                    }
                }
                if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
                    errors.push(FieldError {
                        reason: "FieldValueInvalid",
                        field: format!("{at}.maxUnavailable"),
                        message: format!(
                            "Invalid value: {}: may not be 0 when `maxSurge` is 0",
                            go_int_or_string(unavailable.unwrap_or(&Value::from(0)))
                        ),
                    });
                }
                errors.extend(not_more_than_100_percent(
                    unavailable,
                    &format!("{at}.maxUnavailable"),
                ));
            }
        },
        other => {
            let rolling = if rolling.is_some() {
                "(*apps.RollingUpdateDeployment)(0xc000a1b2c0)"
            } else {
                "(*apps.RollingUpdateDeployment)(nil)"
            };
            errors.push(FieldError {
                reason: "FieldValueNotSupported",
                field: path.into(),
                message: format!(
                    "Unsupported value: apps.DeploymentStrategy{{Type:{other:?}, RollingUpdate:{rolling}}}: supported values: \"Recreate\", \"RollingUpdate\""
                ),
            });
        }
    }
    errors
}

/// A Job: its template (the selector is generated) and its spec's rules.
pub fn job(obj: &Value) -> Vec<FieldError> {
    let mut errors = super::workload_template(obj);
    errors.extend(job_spec(obj.get("spec").unwrap_or(&Value::Null), "spec"));
    errors
}

const MAX_PARALLELISM_FOR_INDEXED_JOB: i64 = 100_000;
const MAX_FAILED_INDEXES_FOR_INDEXED_JOB: i64 = 100_000;
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;

/// upstream `validateJobSpec` (batch), for a Job's spec and a CronJob's
/// job template: counters not negative, completion modes and their
/// limits, the pod replacement policy, and a pod template that restarts
/// OnFailure or Never.
pub(crate) fn job_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let int = |f: &str| spec.get(f).and_then(Value::as_i64);
    let set = |f: &str| spec.get(f).is_some_and(|v| !v.is_null());
    let shown = |n: i64| Value::from(n);
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        if let Some(n) = int(f).filter(|n| *n < 0) {
            errors.push(invalid(
                format!("{path}.{f}"),
                &shown(n),
                "must be greater than or equal to 0",
            ));
        }
        if f == "maxFailedIndexes" && set(f) && !set("backoffLimitPerIndex") {
            errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{path}.backoffLimitPerIndex"),
                message: "Required value: when maxFailedIndexes is specified".into(),
            });
        }
    }
    let mode = spec.get("completionMode").and_then(Value::as_str);
    if let Some(m) = mode {
        if m != "NonIndexed" && m != "Indexed" {
            errors.push(not_supported(
                format!("{path}.completionMode"),
                m,
                &["NonIndexed", "Indexed"],
            ));
        }
    }
    if mode == Some("Indexed") {
        let completions = int("completions");
        if !set("completions") {
            errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{path}.completions"),
                message: "Required value: when completion mode is Indexed".into(),
            });
        }
        if let Some(p) = int("parallelism").filter(|p| *p > MAX_PARALLELISM_FOR_INDEXED_JOB) {
            errors.push(invalid(
                format!("{path}.parallelism"),
                &shown(p),
                &format!(
                    "must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is Indexed"
                ),
            ));
        }
        if let (Some(c), Some(m)) = (completions, int("maxFailedIndexes")) {
            if m > c {
                errors.push(invalid(
                    format!("{path}.maxFailedIndexes"),
                    &shown(m),
                    "must be less than or equal to completions",
                ));
            }
        }
        if let Some(m) = int("maxFailedIndexes").filter(|m| *m > MAX_FAILED_INDEXES_FOR_INDEXED_JOB)
        {
            errors.push(invalid(
                format!("{path}.maxFailedIndexes"),
                &shown(m),
                &format!("must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}"),
            ));
        }
        if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && set("backoffLimitPerIndex") {
            if !set("maxFailedIndexes") {
                errors.push(FieldError {
                    reason: "FieldValueRequired",
                    field: format!("{path}.maxFailedIndexes"),
                    message: format!(
                        "Required value: must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"
                    ),
                });
            }
            let high = format!(
                "when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
            );
            if let Some(p) =
                int("parallelism").filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS)
            {
                errors.push(invalid(
                    format!("{path}.parallelism"),
                    &shown(p),
                    &format!(
                        "must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} {high}"
                    ),
                ));
            }
            if let Some(m) = int("maxFailedIndexes")
                .filter(|m| *m > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS)
            {
                errors.push(invalid(
                    format!("{path}.maxFailedIndexes"),
                    &shown(m),
                    &format!(
                        "must be less than or equal to {MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} {high}"
                    ),
                ));
            }
        }
    }
    if mode.is_none_or(|m| m == "NonIndexed") {
        for f in ["backoffLimitPerIndex", "maxFailedIndexes"] {
            if let Some(v) = spec.get(f).filter(|v| !v.is_null()) {
                errors.push(invalid(
                    format!("{path}.{f}"),
                    v,
                    "requires indexed completion mode",
                ));
            }
        }
    }
    let failure_policy = set("podFailurePolicy");
    if let Some(p) = spec.get("podReplacementPolicy").and_then(Value::as_str) {
        if failure_policy {
            if p != "Failed" {
                errors.push(not_supported(
                    format!("{path}.podReplacementPolicy"),
                    p,
                    &["Failed"],
                ));
            }
        } else if p != "Failed" && p != "TerminatingOrFailed" {
            errors.push(not_supported(
                format!("{path}.podReplacementPolicy"),
                p,
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    let rp_path = format!("{path}.template.spec.restartPolicy");
    let policy = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match policy {
        "" | "Always" => errors.push(FieldError {
            reason: "FieldValueRequired",
            field: rp_path,
            message: "Required value: valid values: \"OnFailure\", \"Never\"".into(),
        }),
        "OnFailure" | "Never" => {
            if failure_policy && policy != "Never" {
                errors.push(invalid(
                    rp_path,
                    &Value::from(policy),
                    "only \"Never\" is supported when podFailurePolicy is specified",
                ));
            }
        }
        other => errors.push(not_supported(rp_path, other, &["OnFailure", "Never"])),
    }
    errors
}

/// A Deployment's status (upstream `ValidateDeploymentStatus`) and that
/// its collisionCount does not go down.
pub fn deployment_status(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = status_counters(
        new,
        &[
            "observedGeneration",
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "collisionCount",
        ],
        &["updatedReplicas", "readyReplicas", "availableReplicas"],
    );
    let before = old
        .pointer("/status/collisionCount")
        .and_then(Value::as_i64);
    let after = new
        .pointer("/status/collisionCount")
        .and_then(Value::as_i64);
    if let Some(b) = before {
        if after.is_none_or(|a| a < b) {
            errors.push(invalid(
                "status.collisionCount".into(),
                &Value::from(after.unwrap_or(0)),
                "cannot be decremented",
            ));
        }
    }
    errors
}

/// A ReplicaSet's status (upstream `ValidateReplicaSetStatus`).
pub fn replica_set_status(new: &Value) -> Vec<FieldError> {
    status_counters(
        new,
        &[
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ],
        &["fullyLabeledReplicas", "readyReplicas", "availableReplicas"],
    )
}

/// Status counters not negative, some not above `status.replicas`, and
/// availableReplicas not above readyReplicas.
fn status_counters(obj: &Value, counters: &[&str], at_most_replicas: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for f in counters {
        nonnegative_at(&mut errors, obj, "status", f);
    }
    let int = |f: &str| obj.pointer(&format!("/status/{f}")).and_then(Value::as_i64);
    let replicas = int("replicas").unwrap_or(0);
    for f in at_most_replicas {
        if let Some(n) = int(f).filter(|n| *n > replicas) {
            errors.push(invalid(
                format!("status.{f}"),
                &Value::from(n),
                "cannot be greater than status.replicas",
            ));
        }
    }
    if let Some(a) = int("availableReplicas").filter(|a| *a > int("readyReplicas").unwrap_or(0)) {
        errors.push(invalid(
            "status.availableReplicas".into(),
            &Value::from(a),
            "cannot be greater than readyReplicas",
        ));
    }
    errors
}

/// A Deployment or ReplicaSet update: the selector is immutable.
pub fn workload_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if old.pointer("/spec/selector").is_some()
        && old.pointer("/spec/selector") != new.pointer("/spec/selector")
    {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "spec.selector".into(),
            message: format!(
                "Invalid value: {}: field is immutable",
                go_label_selector(new.pointer("/spec/selector"))
            ),
        });
    }
    errors
}

/// A Job update: selector and template are immutable.
pub fn job_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = workload_update(old, new);
    // `validateCompletions`: immutable, but for an Indexed Job changing it
    // in tandem with parallelism (elastic Indexed Jobs).
    let completions = new.pointer("/spec/completions").filter(|c| !c.is_null());
    if !super::common::same(old.pointer("/spec/completions"), completions) {
        let indexed =
            new.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed");
        if !indexed {
            errors.push(super::common::immutable("spec.completions", completions));
        } else if let Some(c) = completions {
            if new.pointer("/spec/parallelism") != Some(c) {
                errors.push(invalid(
                    "spec.completions".into(),
                    c,
                    "can only be modified in tandem with spec.parallelism",
                ));
            }
        }
    }
    if old.pointer("/spec/template") != new.pointer("/spec/template") {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "spec.template".into(),
            message: "Invalid value: field is immutable".into(),
        });
    }
    errors
}

/// A Node (upstream `ValidateNode`): its taints and pod CIDRs.
pub fn node(obj: &Value) -> Vec<FieldError> {
    let mut errors = taints(obj);
    errors.extend(pod_cidrs(obj));
    errors
}

/// The pod CIDRs a v1 Node means: `spec.podCIDR` is authoritative when
/// it is set and differs from `spec.podCIDRs[0]`, and stands alone when
/// `podCIDRs` is empty (upstream `Convert_v1_NodeSpec_To_core_NodeSpec`).
pub fn node_pod_cidrs(obj: &Value) -> Vec<String> {
    let single = obj
        .pointer("/spec/podCIDR")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let list: Vec<String> = obj
        .pointer("/spec/podCIDRs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| c.as_str().unwrap_or_default().to_string())
        .collect();
    if !single.is_empty() && list.first().is_none_or(|first| first != single) {
        return vec![single.to_string()];
    }
    list
}

/// `[]string{"a", "b"}`, as Go's `%#v` shows one.
fn go_string_slice(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// `spec.podCIDRs`: each a CIDR, at most one per IP family, no repeats.
fn pod_cidrs(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let cidrs = node_pod_cidrs(obj);
    let path = "spec.podCIDRs";
    let mut families = Vec::new();
    for (i, c) in cidrs.iter().enumerate() {
        match super::common::parse_cidr(c) {
            Some((ip, _)) => families.push(Some(ip.is_ipv6())),
            None => {
                families.push(None);
                errors.push(invalid(
                    format!("{path}[{i}]"),
                    &Value::from(c.as_str()),
                    super::common::CIDR_MESSAGE,
                ));
            }
        }
    }
    if cidrs.len() > 1 {
        let dual_stack = families.iter().all(Option::is_some)
            && families.contains(&Some(true))
            && families.contains(&Some(false));
        if !dual_stack || cidrs.len() > 2 {
            errors.push(FieldError {
                reason: "FieldValueInvalid",
                field: path.into(),
                message: format!(
                    "Invalid value: {}: may specify no more than one CIDR for each IP family",
                    go_string_slice(&cidrs)
                ),
            });
        }
        for (i, c) in cidrs.iter().enumerate() {
            if cidrs.iter().take(i).any(|d| d == c) {
                errors.push(super::common::duplicate(format!("{path}[{i}]"), c));
            }
        }
    }
    errors
}

/// A Node update (upstream `ValidateNodeUpdate`, which the strategy runs
/// after `ValidateNode`; status writes run it alone): pod CIDRs and the
/// provider ID may only be set once, and addresses not repeat.
pub fn node_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let addresses = new.pointer("/status/addresses").and_then(Value::as_array);
    for (i, a) in addresses.into_iter().flatten().enumerate() {
        let key = |a: &Value| {
            (
                a.get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                a.get("address")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        };
        let (ty, address) = key(a);
        let seen = addresses
            .into_iter()
            .flatten()
            .take(i)
            .any(|b| key(b) == (ty.clone(), address.clone()));
        if seen {
            errors.push(FieldError {
                reason: "FieldValueDuplicate",
                field: format!("status.addresses[{i}]"),
                message: format!(
                    "Duplicate value: core.NodeAddress{{Type:{ty:?}, Address:{address:?}}}"
                ),
            });
        }
    }
    let before = node_pod_cidrs(old);
    let after = node_pod_cidrs(new);
    if !before.is_empty() {
        let changed = "node updates may not change podCIDR except from \"\" to valid";
        if before.len() != after.len() {
            errors.push(super::common::forbidden("spec.podCIDRs", changed));
        } else {
            for (b, a) in before.iter().zip(&after) {
                if b != a {
                    errors.push(super::common::forbidden("spec.podCIDRs", changed));
                }
            }
        }
    }
    let provider = |o: &Value| {
        o.pointer("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if !provider(old).is_empty() && provider(old) != provider(new) {
        errors.push(super::common::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    if old.pointer("/spec/externalID") != new.pointer("/spec/externalID") {
        errors.push(super::common::forbidden(
            "spec.externalID",
            "may not be updated",
        ));
    }
    errors
}

/// A ConfigMap: at most 1 MiB of data.
pub fn config_map(obj: &Value) -> Vec<FieldError> {
    if data_size(obj, &["data", "binaryData"]) > MAX_DATA_SIZE {
        return vec![too_long(String::new(), MAX_DATA_SIZE)];
    }
    Vec::new()
}

/// A Secret: at most 1 MiB of data.
pub fn secret(obj: &Value) -> Vec<FieldError> {
    if data_size(obj, &["data", "stringData"]) > MAX_DATA_SIZE {
        return vec![too_long("data".into(), MAX_DATA_SIZE)];
    }
    Vec::new()
}

fn data_size(obj: &Value, fields: &[&str]) -> usize {
    fields
        .iter()
        .filter_map(|f| obj.get(*f).and_then(Value::as_object))
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum()
}

fn resources(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (list, i, c) in containers(spec) {
        let at = format!("{path}.{list}[{i}].resources");
        let limits = c.pointer("/resources/limits");
        let requests = c.pointer("/resources/requests");
        for (part, m) in [("limits", limits), ("requests", requests)] {
            for (name, q) in quantities(m) {
                let parsed = q.as_str().and_then(|s| ParsedQuantity::parse(s).ok());
                if parsed.is_some_and(|p| p.is_negative()) {
                    errors.push(invalid(
                        format!("{at}.{part}[{name}]"),
                        q,
                        "must be greater than or equal to 0",
                    ));
                }
            }
        }
        for (name, req) in quantities(requests) {
            let Some(limit) = limits.and_then(|l| l.get(name)) else {
                continue;
            };
            let parse = |v: &Value| v.as_str().and_then(|s| ParsedQuantity::parse(s).ok());
            if let (Some(r), Some(l)) = (parse(req), parse(limit)) {
                if r.cmp_value(&l).is_gt() {
                    errors.push(invalid(
                        format!("{at}.requests"),
                        req,
                        &format!(
                            "must be less than or equal to {name} limit of {}",
                            limit.as_str().unwrap_or_default()
                        ),
                    ));
                }
            }
        }
    }
    errors
}

fn tolerations(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = spec.get("tolerations").and_then(Value::as_array);
    for (i, t) in list.into_iter().flatten().enumerate() {
        if let Some(effect) = t.get("effect").and_then(Value::as_str) {
            if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
                errors.push(not_supported(
                    format!("{path}.tolerations[{i}].effect"),
                    effect,
                    TAINT_EFFECTS,
                ));
            }
        }
        if let Some(op) = t.get("operator").and_then(Value::as_str) {
            if !op.is_empty() && op != "Equal" && op != "Exists" {
                errors.push(not_supported(
                    format!("{path}.tolerations[{i}].operator"),
                    op,
                    &["Equal", "Exists"],
                ));
            }
        }
    }
    errors
}

fn taints(node: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = node.pointer("/spec/taints").and_then(Value::as_array);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in list.into_iter().flatten().enumerate() {
        // Upstream's ValidateNode hands validateNodeTaints the metadata
        // path, so its findings read `metadata.taints[i]`.
        let at = format!("metadata.taints[{i}]");
        let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
        for m in names::qualified_name(key) {
            errors.push(invalid(format!("{at}.key"), &Value::from(key), &m));
        }
        let value = t.get("value").and_then(Value::as_str).unwrap_or_default();
        let msgs = names::label_value(value);
        if !msgs.is_empty() {
            errors.push(invalid(
                format!("{at}.value"),
                &Value::from(value),
                &msgs.join(";"),
            ));
        }
        let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
        match effect {
            "" => errors.push(required(format!("{at}.effect"))),
            e if !TAINT_EFFECTS.contains(&e) => {
                errors.push(not_supported(format!("{at}.effect"), e, TAINT_EFFECTS))
            }
            _ => {}
        }
        if seen.contains(&(key, effect)) {
            let added = match t.get("timeAdded").and_then(Value::as_str) {
                Some(_) => "(*v1.Time)(0xc000a1b2c0)",
                None => "(*v1.Time)(nil)",
            };
            errors.push(FieldError {
                reason: "FieldValueDuplicate",
                field: at,
                message: format!(
                    "Duplicate value: core.Taint{{Key:{key:?}, Value:{value:?}, Effect:{effect:?}, TimeAdded:{added}}}: taints must be unique by key and effect pair"
                ),
            });
            continue;
        }
        seen.push((key, effect));
    }
    errors
}

/// A workload's selector is required, non-empty and selects its template.
pub(crate) fn selector_matches(obj: &Value) -> Vec<FieldError> {
    let Some(selector) = obj.pointer("/spec/selector") else {
        return vec![required("spec.selector".into())];
    };
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(Map::is_empty) && exprs.is_none_or(Vec::is_empty) {
        let what = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        return vec![FieldError {
            reason: "FieldValueInvalid",
            field: "spec.selector".into(),
            message: format!(
                "Invalid value: {}: empty selector is invalid for {}",
                go_label_selector(Some(selector)),
                // upstream's ReplicaSet validation reuses the Deployment words.
                if what == "ReplicaSet" {
                    "deployment".to_string()
                } else {
                    what.to_ascii_lowercase()
                }
            ),
        }];
    }
    let mut errors = super::common::label_selector(Some(selector), "spec.selector");
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let empty = Map::new();
    let selects = crate::selectors::LabelSelector::from_json(selector)
        .map(|s| s.matches(labels.unwrap_or(&empty)))
        .unwrap_or(true);
    if !selects {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "spec.template.metadata.labels".into(),
            message: format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                go_string_map(labels)
            ),
        });
    }
    errors
}

/// `map[string]string{"a":"b"}`, as Go prints one.
pub(crate) fn go_string_map(m: Option<&Map<String, Value>>) -> String {
    let body: Vec<String> = m
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
        .collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

/// A LabelSelector as Go's `%#v`-like printing in field errors shows it.
pub(crate) fn go_label_selector(s: Option<&Value>) -> String {
    let Some(s) = s else {
        return "(*v1.LabelSelector)(nil)".into();
    };
    let labels = match s.get("matchLabels").and_then(Value::as_object) {
        Some(m) => go_string_map(Some(m)),
        None => "map[string]string(nil)".into(),
    };
    let exprs = match s.get("matchExpressions").and_then(Value::as_array) {
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values: Vec<String> = e
                        .get("values")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|v| format!("{:?}", v.as_str().unwrap_or_default()))
                        .collect();
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:[]string{{{}}}}}",
                        e.get("key").and_then(Value::as_str).unwrap_or_default(),
                        e.get("operator").and_then(Value::as_str).unwrap_or_default(),
                        values.join(", ")
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        None => "[]v1.LabelSelectorRequirement(nil)".into(),
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

/// A core/v1 Event on create (upstream `legacyValidateEvent` for the v1
/// request version): the involved object's namespace agrees with the
/// event's, and an event with an eventTime names its reporter, action
/// and reason within their lengths.
pub fn core_event(ev: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let s = |p: &str| ev.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let ns = s("/metadata/namespace");
    let involved = s("/involvedObject/namespace");
    let mismatch = || {
        invalid(
            "involvedObject.namespace".into(),
            &Value::from(involved),
            "does not match event.namespace",
        )
    };
    if s("/eventTime").is_empty() {
        if involved.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errors.push(mismatch());
            }
        } else if ns != involved {
            errors.push(mismatch());
        }
        return errors;
    }
    if involved.is_empty() && ns != "default" && ns != "kube-system" {
        errors.push(mismatch());
    }
    let controller = s("/reportingComponent");
    if controller.is_empty() {
        errors.push(required("reportingComponent".into()));
    }
    for m in names::qualified_name(controller) {
        errors.push(invalid(
            "reportingComponent".into(),
            &Value::from(controller),
            &m,
        ));
    }
    for (field, limit) in [
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
        ("message", 1024),
    ] {
        let v = s(&format!("/{field}"));
        if v.is_empty() && field != "message" {
            errors.push(required(field.into()));
        }
        if v.len() > limit {
            errors.push(invalid(
                field.into(),
                &Value::from(""),
                &format!("can have at most {limit} characters"),
            ));
        }
    }
    errors
}

/// events.k8s.io/v1 Event creation (upstream's strict validation for
/// events made through the new API), on the served form.
pub fn events_v1_create(ev: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let s = |f: &str| ev.get(f).and_then(Value::as_str).unwrap_or_default();
    if s("eventTime").is_empty() {
        errors.push(required("eventTime".into()));
    }
    let ty = s("type");
    if ty != "Normal" && ty != "Warning" {
        errors.push(invalid(
            "type".into(),
            &Value::from(""),
            &format!("has invalid value: {ty}"),
        ));
    }
    for (field, limit) in [
        ("reportingController", 128),
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
    ] {
        let v = s(field);
        if v.is_empty() {
            errors.push(required(field.into()));
        }
        if field == "reportingController" {
            errors.extend(
                names::qualified_name(v)
                    .iter()
                    .map(|m| invalid(field.into(), &Value::from(v), m)),
            );
        }
        if v.len() > limit {
            errors.push(too_long(field.into(), limit));
        }
    }
    if s("note").len() > 1024 {
        errors.push(too_long("note".into(), 1024));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_and_bounds() {
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "i",
            "resources": {"requests": {"cpu": "lots"}}}]}});
        assert_eq!(bad_quantity("Pod", &pod).as_deref(), Some(QUANTITY_FORMAT));
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "i",
            "resources": {"requests": {"cpu": "2", "memory": "-1"}, "limits": {"cpu": "1"}}}]}});
        assert_eq!(bad_quantity("Pod", &pod), None);
        let e = super::super::pod(&pod);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].field, "spec.containers[0].resources.requests[memory]");
        assert_eq!(
            e[1].message,
            "Invalid value: \"2\": must be less than or equal to cpu limit of 1"
        );
    }

    #[test]
    fn taints_selectors_and_sizes() {
        let node = json!({"spec": {"taints": [{"key": "k", "effect": "Bogus"}]}});
        assert_eq!(
            super::node(&node)[0].message,
            "Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
        );
        let d = json!({"kind": "Deployment", "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "c"}}}}});
        assert_eq!(
            deployment(&d)
                .iter()
                .find(|e| e.field == "spec.template.metadata.labels")
                .unwrap()
                .message,
            "Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`"
        );
        let moved = json!({"spec": {"selector": {"matchLabels": {"a": "x"}}}});
        assert_eq!(
            workload_update(&d, &moved)[0].message,
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        );
        let cm = json!({"data": {"a": "x".repeat(MAX_DATA_SIZE)}});
        assert_eq!(
            config_map(&cm)[0].message,
            "Too long: must have at most 1048576 bytes"
        );
        assert_eq!(names::dns1123_label("a.b").len(), 1);
        assert!(names::dns1123_subdomain("a.b").is_empty());
    }

    #[test]
    fn validate_core_event() {
        let ev = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "b"}});
        assert_eq!(
            core_event(&ev)[0].message,
            "Invalid value: \"b\": does not match event.namespace"
        );
        let node =
            json!({"metadata": {"namespace": "default"}, "involvedObject": {"kind": "Node"}});
        assert!(core_event(&node).is_empty());
        let new = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "a"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "c",
            "reportingInstance": "i", "action": "A", "reason": "R", "message": "x".repeat(1025)});
        let fields: Vec<String> = core_event(&new)
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(
            fields,
            vec!["message: Invalid value: \"\": can have at most 1024 characters"]
        );
    }

    #[test]
    fn events_v1_need_their_fields() {
        let fields: Vec<String> = events_v1_create(&json!({"metadata": {"name": "e"}}))
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            vec![
                "eventTime",
                "type",
                "reportingController",
                "reportingController",
                "reportingController",
                "reportingInstance",
                "action",
                "reason"
            ]
        );
    }
}

//! Validation of StatefulSets, DaemonSets, ReplicationControllers,
//! PodTemplates, ControllerRevisions, CronJobs and (autoscaling/v2)
//! HorizontalPodAutoscalers, on create, update and status writes, with
//! kube-apiserver 1.33's field paths and wording (`pkg/apis/apps`,
//! `core`, `batch` and `autoscaling` validation). Pod templates go
//! through the same checks as Deployments' (`workload_template`).

use serde_json::{Map, Value};

use super::workloads::{go_label_selector, go_string_map, selector_matches, workload_update};
use super::{cron, invalid, meta, not_supported, pod_spec, required, FieldError};
use crate::quantity::ParsedQuantity;

fn required_detail(field: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueRequired",
        field,
        message: format!("Required value: {detail}"),
    }
}

fn forbidden(field: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field,
        message: format!("Forbidden: {detail}"),
    }
}

fn int(obj: &Value, pointer: &str) -> Option<i64> {
    obj.pointer(pointer).and_then(Value::as_i64)
}

/// `ValidateNonnegativeField` for each present field of `obj` under
/// `pointer` (`/spec`), reported at `path.field`.
fn nonnegative(
    errors: &mut Vec<FieldError>,
    obj: &Value,
    pointer: &str,
    path: &str,
    fields: &[&str],
) {
    for f in fields {
        if let Some(v) = obj.pointer(&format!("{pointer}/{f}")) {
            if v.as_i64().is_some_and(|n| n < 0) {
                errors.push(invalid(
                    format!("{path}.{f}"),
                    v,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

/// Pod template restart policy and deadline rules of long-running
/// controllers (StatefulSet, DaemonSet, ReplicationController).
fn always_restart(errors: &mut Vec<FieldError>, obj: &Value, kind: &str) {
    errors.extend(super::workloads::restarts_always(obj, kind));
}

/// A StatefulSet (upstream `ValidateStatefulSetSpec`).
pub fn stateful_set(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match obj
        .pointer("/spec/podManagementPolicy")
        .and_then(Value::as_str)
    {
        None | Some("") => errors.push(required("spec.podManagementPolicy".into())),
        Some("OrderedReady" | "Parallel") => {}
        Some(other) => errors.push(invalid(
            "spec.podManagementPolicy".into(),
            &Value::from(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let strategy = obj.pointer("/spec/updateStrategy");
    let rolling = strategy
        .and_then(|s| s.get("rollingUpdate"))
        .filter(|r| !r.is_null());
    match strategy.and_then(|s| s.get("type")).and_then(Value::as_str) {
        None | Some("") => errors.push(required("spec.updateStrategy".into())),
        Some("OnDelete") => {
            if rolling.is_some() {
                errors.push(FieldError {
                    reason: "FieldValueInvalid",
                    field: "spec.updateStrategy.rollingUpdate".into(),
                    message: format!(
                        "Invalid value: {}: only allowed for updateStrategy 'RollingUpdate'",
                        go_rolling_update(rolling)
                    ),
                });
            }
        }
        Some("RollingUpdate") => {
            if let Some(r) = rolling {
                nonnegative(
                    &mut errors,
                    r,
                    "",
                    "spec.updateStrategy.rollingUpdate",
                    &["partition"],
                );
            }
        }
        Some(other) => errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "spec.updateStrategy".into(),
            message: format!(
                "Invalid value: apps.StatefulSetUpdateStrategy{{Type:{other:?}, RollingUpdate:{}}}: must be 'RollingUpdate' or 'OnDelete'",
                go_rolling_update(rolling)
            ),
        }),
    }
    if let Some(policy) = obj.pointer("/spec/persistentVolumeClaimRetentionPolicy") {
        for f in ["whenDeleted", "whenScaled"] {
            if let Some(v) = policy.get(f).and_then(Value::as_str) {
                if v != "Retain" && v != "Delete" {
                    errors.push(not_supported(
                        format!("spec.persistentVolumeClaimRetentionPolicy.{f}"),
                        v,
                        &["Retain", "Delete"],
                    ));
                }
            }
        }
    }
    nonnegative(
        &mut errors,
        obj,
        "/spec/ordinals",
        "spec.ordinals",
        &["start"],
    );
    nonnegative(
        &mut errors,
        obj,
        "/spec",
        "spec",
        &["minReadySeconds", "revisionHistoryLimit"],
    );
    errors.extend(super::workload_template(obj));
    errors.extend(selector_matches(obj));
    always_restart(&mut errors, obj, "StatefulSet");
    errors
}

/// `&apps.RollingUpdateStatefulSetStrategy{...}` as Go's `%#v` shows one.
fn go_rolling_update(r: Option<&Value>) -> String {
    match r {
        None => "(*apps.RollingUpdateStatefulSetStrategy)(nil)".into(),
        Some(r) => format!(
            "apps.RollingUpdateStatefulSetStrategy{{Partition:{}, MaxUnavailable:(*intstr.IntOrString)(nil)}}",
            r.get("partition").and_then(Value::as_i64).unwrap_or(0)
        ),
    }
}

/// A StatefulSet update: only replicas, ordinals, template, updateStrategy,
/// revisionHistoryLimit, persistentVolumeClaimRetentionPolicy and
/// minReadySeconds may change; the status is checked too.
pub fn stateful_set_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = stateful_set(new);
    let strip = |o: &Value| {
        let mut spec = o.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(m) = spec.as_object_mut() {
            for f in [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "revisionHistoryLimit",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ] {
                m.remove(f);
            }
        }
        spec
    };
    if strip(old) != strip(new) {
        errors.push(forbidden(
            "spec".into(),
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ));
    }
    errors.extend(replica_status(
        new,
        &[
            "replicas",
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
            "availableReplicas",
        ],
        &[
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
            "availableReplicas",
        ],
    ));
    errors.extend(collision_count(old, new));
    errors
}

/// Status counters that may not be negative, and those that may not
/// exceed `status.replicas`.
fn replica_status(obj: &Value, counters: &[&str], at_most_replicas: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut fields: Vec<&str> = counters.to_vec();
    fields.extend(["observedGeneration", "collisionCount"]);
    nonnegative(&mut errors, obj, "/status", "status", &fields);
    let replicas = int(obj, "/status/replicas").unwrap_or(0);
    for f in at_most_replicas {
        if let Some(v) = obj.pointer(&format!("/status/{f}")) {
            if v.as_i64().is_some_and(|n| n > replicas) {
                errors.push(invalid(
                    format!("status.{f}"),
                    v,
                    "cannot be greater than status.replicas",
                ));
            }
        }
    }
    errors
}

fn collision_count(old: &Value, new: &Value) -> Vec<FieldError> {
    let before = int(old, "/status/collisionCount");
    let after = int(new, "/status/collisionCount");
    match (before, after) {
        (Some(b), a) if a.is_none_or(|a| a < b) => vec![invalid(
            "status.collisionCount".into(),
            &Value::from(a.unwrap_or(0)),
            "cannot be decremented",
        )],
        _ => Vec::new(),
    }
}

/// A DaemonSet (upstream `ValidateDaemonSetSpec`).
pub fn daemon_set(obj: &Value) -> Vec<FieldError> {
    let mut errors = super::workload_template(obj);
    errors.extend(selector_matches(obj));
    always_restart(&mut errors, obj, "DaemonSet");
    nonnegative(
        &mut errors,
        obj,
        "/spec",
        "spec",
        &[
            "minReadySeconds",
            "templateGeneration",
            "revisionHistoryLimit",
        ],
    );
    let strategy = obj.pointer("/spec/updateStrategy");
    match strategy.and_then(|s| s.get("type")).and_then(Value::as_str) {
        Some("OnDelete") => {}
        Some("RollingUpdate") => {
            match strategy
                .and_then(|s| s.get("rollingUpdate"))
                .filter(|r| !r.is_null())
            {
                None => errors.push(required("spec.updateStrategy.rollingUpdate".into())),
                Some(r) => errors.extend(rolling_update_daemon_set(r)),
            }
        }
        other => {
            let rolling = if strategy
                .and_then(|s| s.get("rollingUpdate"))
                .is_some_and(|r| !r.is_null())
            {
                "(*apps.RollingUpdateDaemonSet)(0xc000a1b2c0)"
            } else {
                "(*apps.RollingUpdateDaemonSet)(nil)"
            };
            errors.push(FieldError {
                reason: "FieldValueNotSupported",
                field: "spec.updateStrategy".into(),
                message: format!(
                    "Unsupported value: apps.DaemonSetUpdateStrategy{{Type:{:?}, RollingUpdate:{rolling}}}: supported values: \"RollingUpdate\", \"OnDelete\"",
                    other.unwrap_or_default()
                ),
            });
        }
    }
    errors
}

/// upstream `ValidateRollingUpdateDaemonSet`: both int-or-percents valid
/// and at most 100%, exactly one of them non-zero.
fn rolling_update_daemon_set(r: &Value) -> Vec<FieldError> {
    use super::workloads::{
        int_or_percent_value, not_more_than_100_percent, positive_int_or_percent,
    };
    let path = "spec.updateStrategy.rollingUpdate";
    let mut errors = Vec::new();
    let unavailable = r.get("maxUnavailable").filter(|v| !v.is_null());
    let surge = r.get("maxSurge").filter(|v| !v.is_null());
    let fields = [("maxUnavailable", unavailable), ("maxSurge", surge)];
    for (f, v) in fields {
        if let Some(v) = v {
            errors.extend(positive_int_or_percent(v, &format!("{path}.{f}")));
        }
    }
    for (f, v) in fields {
        errors.extend(not_more_than_100_percent(v, &format!("{path}.{f}")));
    }
    let has_unavailable = int_or_percent_value(unavailable) != 0;
    let has_surge = int_or_percent_value(surge) != 0;
    if has_unavailable && has_surge {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: format!("{path}.maxSurge"),
            message: format!(
                "Invalid value: {}: may not be set when maxUnavailable is non-zero",
                super::workloads::go_int_or_string(surge.unwrap_or(&Value::from(0)))
            ),
        });
    } else if !has_unavailable && !has_surge {
        errors.push(required_detail(
            format!("{path}.maxUnavailable"),
            "cannot be 0 when maxSurge is 0",
        ));
    }
    errors
}

/// A DaemonSet update: the selector is immutable; the status is checked.
pub fn daemon_set_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = daemon_set(new);
    errors.extend(workload_update(old, new));
    let mut status = Vec::new();
    nonnegative(
        &mut status,
        new,
        "/status",
        "status",
        &[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
            "observedGeneration",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberUnavailable",
            "collisionCount",
        ],
    );
    errors.extend(status);
    errors.extend(collision_count(old, new));
    errors
}

/// A ReplicationController (upstream `ValidateReplicationControllerSpec`),
/// on create and update (its selector may change).
pub fn replication_controller(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    nonnegative(&mut errors, obj, "/spec", "spec", &["minReadySeconds"]);
    let selector = obj.pointer("/spec/selector").and_then(Value::as_object);
    match selector {
        None => errors.push(required("spec.selector".into())),
        Some(s) if s.is_empty() => errors.push(required("spec.selector".into())),
        Some(s) => errors.extend(meta::label_map(s, "spec.selector")),
    }
    if obj.pointer("/spec/template").is_none_or(Value::is_null) {
        errors.push(required("spec.template".into()));
        if let Some(r) = obj.pointer("/spec/replicas") {
            if r.as_i64().is_none_or(|n| n < 0) {
                errors.push(invalid(
                    "spec.replicas".into(),
                    r,
                    "must be greater than or equal to 0",
                ));
            }
        }
        return errors;
    }
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    if let Some(sel) = selector.filter(|s| !s.is_empty()) {
        let empty = Map::new();
        let have = labels.unwrap_or(&empty);
        if !sel.iter().all(|(k, v)| have.get(k) == Some(v)) {
            errors.push(FieldError {
                reason: "FieldValueInvalid",
                field: "spec.template.metadata.labels".into(),
                message: format!(
                    "Invalid value: {}: `selector` does not match template `labels`",
                    go_string_map(labels)
                ),
            });
        }
    }
    errors.extend(super::workload_template(obj));
    always_restart(&mut errors, obj, "ReplicationController");
    errors.extend(replica_status(
        obj,
        &[
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
        ],
        &["fullyLabeledReplicas", "readyReplicas", "availableReplicas"],
    ));
    if let (Some(ready), Some(available)) = (
        int(obj, "/status/readyReplicas"),
        obj.pointer("/status/availableReplicas"),
    ) {
        if available.as_i64().is_some_and(|a| a > ready) {
            errors.push(invalid(
                "status.availableReplicas".into(),
                available,
                "cannot be greater than readyReplicas",
            ));
        }
    }
    errors
}

/// A PodTemplate: its template's metadata and pod spec.
pub fn pod_template(obj: &Value) -> Vec<FieldError> {
    let mut errors = match obj.pointer("/template/spec") {
        Some(spec) => pod_spec(spec, "template.spec"),
        None => vec![required("template.spec.containers".into())],
    };
    errors.extend(super::workloads::pod_spec_extras(
        obj.pointer("/template/spec"),
        "template.spec",
    ));
    errors.extend(super::pod::template_only(
        obj.pointer("/template/spec"),
        "template.spec",
    ));
    errors.extend(meta::object_meta(
        obj.pointer("/template/metadata"),
        "template.metadata",
    ));
    errors
}

/// A ControllerRevision: data is mandatory, revision not negative.
pub fn controller_revision(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if obj.get("data").is_none_or(Value::is_null) {
        errors.push(required_detail("data".into(), "data is mandatory"));
    }
    nonnegative(&mut errors, obj, "", "", &["revision"]);
    for e in &mut errors {
        if let Some(f) = e.field.strip_prefix('.') {
            e.field = f.to_string();
        }
    }
    errors
}

/// A ControllerRevision update: its data may not change.
pub fn controller_revision_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = controller_revision(new);
    if old.get("data") != new.get("data") {
        let shown = new
            .get("data")
            .map(|d| d.to_string())
            .unwrap_or_else(|| "null".into());
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "data".into(),
            message: format!(
                "Invalid value: runtime.RawExtension{{Raw:{shown:?}}}: field is immutable"
            ),
        });
    }
    errors
}

/// A new CronJob: its name leaves room for the jobs' suffix.
pub fn cron_job(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) {
        if name.len() > 52 {
            errors.push(invalid(
                "metadata.name".into(),
                &Value::from(name),
                "must be no more than 52 characters",
            ));
        }
    }
    errors.extend(cron_job_spec(obj, false));
    errors
}

/// A CronJob update: a schedule that had a TZ prefix may keep one.
pub fn cron_job_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let had_tz = old
        .pointer("/spec/schedule")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("TZ"));
    cron_job_spec(new, had_tz)
}

fn cron_job_spec(obj: &Value, allow_tz_in_schedule: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let time_zone = obj.pointer("/spec/timeZone").filter(|t| !t.is_null());
    match obj.pointer("/spec/schedule").and_then(Value::as_str) {
        None | Some("") => errors.push(required("spec.schedule".into())),
        Some(schedule) => {
            let at = "spec.schedule".to_string();
            let shown = Value::from(schedule);
            if let Err(e) = cron::parse_standard(schedule) {
                errors.push(invalid(at.clone(), &shown, &e));
            }
            if schedule.contains("TZ") {
                if !allow_tz_in_schedule {
                    errors.push(invalid(
                        at,
                        &shown,
                        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                    ));
                } else if time_zone.is_some() {
                    errors.push(invalid(
                        at,
                        &shown,
                        "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                    ));
                }
            }
        }
    }
    if let Some(tz) = time_zone {
        errors.extend(time_zone_errors(tz));
    }
    match obj
        .pointer("/spec/concurrencyPolicy")
        .and_then(Value::as_str)
    {
        None | Some("") => errors.push(required("spec.concurrencyPolicy".into())),
        Some("Allow" | "Forbid" | "Replace") => {}
        Some(other) => errors.push(not_supported(
            "spec.concurrencyPolicy".into(),
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    nonnegative(
        &mut errors,
        obj,
        "/spec",
        "spec",
        &[
            "startingDeadlineSeconds",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        ],
    );
    errors.extend(job_template(obj));
    errors
}

fn time_zone_errors(tz: &Value) -> Vec<FieldError> {
    let at = "spec.timeZone".to_string();
    let Some(name) = tz.as_str() else {
        return vec![invalid(at, tz, "must be a string")];
    };
    if name.is_empty() {
        return vec![invalid(at, tz, "timeZone must be nil or non-empty string")];
    }
    if name
        .split('/')
        .any(|p| p == "." || p == ".." || p.starts_with('-') || !cron::valid_time_zone_part(p))
    {
        return vec![invalid(at, tz, &format!("unknown time zone {name}"))];
    }
    let mut errors = Vec::new();
    if name.eq_ignore_ascii_case("Local") {
        errors.push(invalid(
            at.clone(),
            tz,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if let Err(e) = cron::load_location(name) {
        errors.push(invalid(at, tz, &e));
    }
    errors
}

/// `ValidateJobTemplateSpec`: the job spec's counters, a generated
/// selector, and a pod template that restarts OnFailure or Never.
fn job_template(obj: &Value) -> Vec<FieldError> {
    let base = "spec.jobTemplate.spec";
    let mut errors = Vec::new();
    errors.extend(meta::object_meta(
        obj.pointer("/spec/jobTemplate/metadata"),
        "spec.jobTemplate.metadata",
    ));
    let spec = obj.pointer("/spec/jobTemplate/spec");
    errors.extend(super::workloads::job_spec(
        spec.unwrap_or(&Value::Null),
        base,
    ));
    if let Some(sel) = obj
        .pointer("/spec/jobTemplate/spec/selector")
        .filter(|s| !s.is_null())
    {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: format!("{base}.selector"),
            message: format!(
                "Invalid value: {}: `selector` will be auto-generated",
                go_label_selector(Some(sel))
            ),
        });
    }
    if obj.pointer("/spec/jobTemplate/spec/manualSelector") == Some(&Value::Bool(true)) {
        errors.push(not_supported(
            format!("{base}.manualSelector"),
            "true",
            &["nil", "false"],
        ));
    }
    let pod = obj.pointer("/spec/jobTemplate/spec/template/spec");
    let spec_path = format!("{base}.template.spec");
    match pod {
        Some(spec) => errors.extend(pod_spec(spec, &spec_path)),
        None => errors.push(required(format!("{spec_path}.containers"))),
    }
    errors.extend(super::workloads::pod_spec_extras(pod, &spec_path));
    errors.extend(super::pod::template_only(pod, &spec_path));
    errors.extend(meta::object_meta(
        obj.pointer("/spec/jobTemplate/spec/template/metadata"),
        &format!("{base}.template.metadata"),
    ));
    errors
}

/// An autoscaling/v2 HorizontalPodAutoscaler (upstream
/// `ValidateHorizontalPodAutoscaler`), also for a v1 one once converted,
/// as upstream validates the internal form. Status counters on writes.
pub fn horizontal_pod_autoscaler(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let min = spec.get("minReplicas").filter(|m| !m.is_null());
    if let Some(m) = min {
        if m.as_i64().is_some_and(|n| n < 1) {
            errors.push(invalid(
                "spec.minReplicas".into(),
                m,
                "must be greater than or equal to 1",
            ));
        }
    }
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if max < 1 {
        errors.push(invalid(
            "spec.maxReplicas".into(),
            &Value::from(max),
            "must be greater than 0",
        ));
    }
    if min.and_then(Value::as_i64).is_some_and(|m| max < m) {
        errors.push(invalid(
            "spec.maxReplicas".into(),
            &Value::from(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let reference = object_reference(spec.get("scaleTargetRef"), "spec.scaleTargetRef");
    if !reference.is_empty() {
        errors.extend(reference);
    } else {
        let metrics = metrics(spec.get("metrics"));
        if !metrics.is_empty() {
            errors.extend(metrics);
        } else {
            errors.extend(behavior(spec.get("behavior")));
        }
    }
    nonnegative(
        &mut errors,
        obj,
        "/status",
        "status",
        &["currentReplicas", "desiredReplicas"],
    );
    errors
}

fn path_segment(errors: &mut Vec<FieldError>, v: Option<&Value>, at: String) {
    let s = v.and_then(Value::as_str).unwrap_or_default();
    if s.is_empty() {
        errors.push(required(at));
        return;
    }
    let msg = if s == "." {
        Some("may not be '.'")
    } else if s == ".." {
        Some("may not be '..'")
    } else if s.contains('/') {
        Some("may not contain '/'")
    } else if s.contains('%') {
        Some("may not contain '%'")
    } else {
        None
    };
    if let Some(m) = msg {
        errors.push(invalid(at, &Value::from(s), m));
    }
}

fn object_reference(r: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    path_segment(
        &mut errors,
        r.and_then(|r| r.get("kind")),
        format!("{path}.kind"),
    );
    path_segment(
        &mut errors,
        r.and_then(|r| r.get("name")),
        format!("{path}.name"),
    );
    errors
}

const METRIC_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

fn metrics(list: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let items = list.and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, m) in items.iter().enumerate() {
        let at = format!("spec.metrics[{i}]");
        let ty = m.get("type").and_then(Value::as_str).unwrap_or_default();
        if ty.is_empty() {
            errors.push(required_detail(
                format!("{at}.type"),
                "must specify a metric source type",
            ));
        }
        let sources = [
            ("object", "Object"),
            ("pods", "Pods"),
            ("resource", "Resource"),
            ("external", "External"),
            ("containerResource", "ContainerResource"),
        ];
        let present: Vec<&str> = sources
            .iter()
            .filter(|(f, _)| m.get(*f).is_some_and(|v| !v.is_null()))
            .map(|(f, _)| *f)
            .collect();
        if present.len() == 1 {
            if let Some(f) = present.first() {
                let src = m.get(*f).unwrap_or(&Value::Null);
                errors.extend(metric_source(f, src, &format!("{at}.{f}")));
            }
        }
        match sources.iter().find(|(_, t)| *t == ty) {
            Some((field, _)) => {
                if m.get(*field).is_none_or(Value::is_null) {
                    errors.push(required_detail(
                        format!("{at}.{field}"),
                        "must populate information for the given metric source",
                    ));
                }
                if present.len() != 1 {
                    for p in present.iter().filter(|p| *p != field) {
                        errors.push(forbidden(
                            format!("{at}.{p}"),
                            "must populate the given metric source only",
                        ));
                    }
                }
            }
            None => {
                errors.push(not_supported(format!("{at}.type"), ty, METRIC_TYPES));
                if present.len() > 1 {
                    for p in &present {
                        errors.push(forbidden(
                            format!("{at}.{p}"),
                            "must populate the given metric source only",
                        ));
                    }
                }
            }
        }
    }
    errors
}

fn positive_quantity(v: &Value) -> bool {
    let zero = ParsedQuantity::parse("0").ok();
    match (v.as_str().and_then(|s| ParsedQuantity::parse(s).ok()), zero) {
        (Some(q), Some(z)) => q.cmp_value(&z).is_gt(),
        _ => v.as_f64().is_some_and(|f| f > 0.0),
    }
}

fn metric_target(t: Option<&Value>, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let t = t.cloned().unwrap_or(Value::Null);
    let ty = t.get("type").and_then(Value::as_str).unwrap_or_default();
    if ty.is_empty() {
        errors.push(required_detail(
            format!("{at}.type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&ty) {
        errors.push(invalid(
            format!("{at}.type"),
            &Value::from(ty),
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for f in ["value", "averageValue"] {
        if let Some(v) = t.get(f).filter(|v| !v.is_null()) {
            if !positive_quantity(v) {
                errors.push(invalid(format!("{at}.{f}"), v, "must be positive"));
            }
        }
    }
    if let Some(u) = t.get("averageUtilization").filter(|v| !v.is_null()) {
        if u.as_i64().is_some_and(|n| n < 1) {
            errors.push(invalid(
                format!("{at}.averageUtilization"),
                u,
                "must be greater than 0",
            ));
        }
    }
    errors
}

fn metric_source(field: &str, src: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let target = src.get("target");
    let has = |f: &str| target.and_then(|t| t.get(f)).is_some_and(|v| !v.is_null());
    let metric_name = |errors: &mut Vec<FieldError>| {
        if src
            .pointer("/metric/name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errors.push(required_detail(
                format!("{at}.metric.name"),
                "must specify a metric name",
            ));
        }
    };
    match field {
        "resource" | "containerResource" => {
            if src
                .get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errors.push(required_detail(
                    format!("{at}.name"),
                    "must specify a resource name",
                ));
            }
            if field == "containerResource"
                && src
                    .get("container")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                errors.push(required_detail(
                    format!("{at}.container"),
                    "must specify a container",
                ));
            }
            errors.extend(metric_target(target, &format!("{at}.target")));
            if !has("averageUtilization") && !has("averageValue") {
                errors.push(required_detail(
                    format!("{at}.target.averageUtilization"),
                    "must set either a target raw value or a target utilization",
                ));
            }
            if has("averageUtilization") && has("averageValue") {
                errors.push(forbidden(
                    format!("{at}.target.averageValue"),
                    "may not set both a target raw value and a target utilization",
                ));
            }
        }
        "pods" => {
            metric_name(&mut errors);
            errors.extend(metric_target(target, &format!("{at}.target")));
            if !has("averageValue") {
                errors.push(required_detail(
                    format!("{at}.target.averageValue"),
                    "must specify a positive target averageValue",
                ));
            }
        }
        "object" => {
            errors.extend(object_reference(
                src.get("describedObject"),
                &format!("{at}.describedObject"),
            ));
            metric_name(&mut errors);
            errors.extend(metric_target(target, &format!("{at}.target")));
            if !has("value") && !has("averageValue") {
                errors.push(required_detail(
                    format!("{at}.target.value"),
                    "must set either a target value or averageValue",
                ));
            }
        }
        _ => {
            metric_name(&mut errors);
            errors.extend(metric_target(target, &format!("{at}.target")));
            if !has("value") && !has("averageValue") {
                errors.push(required_detail(
                    format!("{at}.target.averageValue"),
                    "must set either a target value for metric or a per-pod target",
                ));
            }
            if has("value") && has("averageValue") {
                errors.push(forbidden(
                    format!("{at}.target.value"),
                    "may not set both a target value for metric and a per-pod target",
                ));
            }
        }
    }
    errors
}

fn behavior(b: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(b) = b.filter(|b| !b.is_null()) else {
        return errors;
    };
    for dir in ["scaleUp", "scaleDown"] {
        let Some(rules) = b.get(dir).filter(|r| !r.is_null()) else {
            continue;
        };
        let at = format!("spec.behavior.{dir}");
        if let Some(w) = rules
            .get("stabilizationWindowSeconds")
            .filter(|w| !w.is_null())
        {
            let n = w.as_i64().unwrap_or(0);
            if n < 0 {
                errors.push(invalid(
                    format!("{at}.stabilizationWindowSeconds"),
                    w,
                    "must be greater than or equal to zero",
                ));
            }
            if n > 3600 {
                errors.push(invalid(
                    format!("{at}.stabilizationWindowSeconds"),
                    w,
                    "must be less than or equal to 3600",
                ));
            }
        }
        if let Some(p) = rules.get("selectPolicy").and_then(Value::as_str) {
            if !["Disabled", "Max", "Min"].contains(&p) {
                errors.push(not_supported(
                    format!("{at}.selectPolicy"),
                    p,
                    &["Disabled", "Max", "Min"],
                ));
            }
        }
        let policies = rules.get("policies").and_then(Value::as_array);
        if policies.is_none_or(Vec::is_empty) {
            errors.push(required_detail(
                format!("{at}.policies"),
                "must specify at least one Policy",
            ));
        }
        for (i, p) in policies.into_iter().flatten().enumerate() {
            let pat = format!("{at}.policies[{i}]");
            let ty = p.get("type").and_then(Value::as_str).unwrap_or_default();
            if ty != "Pods" && ty != "Percent" {
                errors.push(not_supported(
                    format!("{pat}.type"),
                    ty,
                    &["Percent", "Pods"],
                ));
            }
            let value = p.get("value").cloned().unwrap_or(Value::from(0));
            if value.as_i64().unwrap_or(0) <= 0 {
                errors.push(invalid(
                    format!("{pat}.value"),
                    &value,
                    "must be greater than zero",
                ));
            }
            let period = p.get("periodSeconds").cloned().unwrap_or(Value::from(0));
            let n = period.as_i64().unwrap_or(0);
            if n <= 0 {
                errors.push(invalid(
                    format!("{pat}.periodSeconds"),
                    &period,
                    "must be greater than zero",
                ));
            }
            if n > 1800 {
                errors.push(invalid(
                    format!("{pat}.periodSeconds"),
                    &period,
                    "must be less than or equal to 1800",
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect()
    }

    fn sts() -> Value {
        json!({"kind": "StatefulSet", "metadata": {"name": "web"}, "spec": {
            "podManagementPolicy": "OrderedReady", "replicas": 1,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "nginx"}]}}}})
    }

    #[test]
    fn stateful_sets() {
        assert_eq!(fields(&stateful_set(&sts())), vec![]);
        let mut bad = sts();
        bad["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
        bad["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        bad["spec"]["podManagementPolicy"] = json!("Sometimes");
        assert_eq!(
            fields(&stateful_set(&bad)),
            vec![
                ("spec.podManagementPolicy", "Invalid value: \"Sometimes\": must be 'OrderedReady' or 'Parallel'"),
                ("spec.template.metadata.labels", "Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"),
                ("spec.template.spec.restartPolicy", "Unsupported value: \"Never\": supported values: \"Always\""),
            ]
        );
        let mut moved = sts();
        moved["spec"]["serviceName"] = json!("other");
        assert_eq!(stateful_set_update(&sts(), &moved)[0].field, "spec");
        let mut scaled = sts();
        scaled["spec"]["replicas"] = json!(5);
        assert!(stateful_set_update(&sts(), &scaled).is_empty());
    }

    #[test]
    fn controllers_and_templates() {
        let rc = json!({"spec": {"selector": {"app": "a"}, "replicas": 1,
            "template": {"metadata": {"labels": {"app": "b"}},
                "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}}});
        assert_eq!(
            fields(&replication_controller(&rc)),
            vec![("spec.template.metadata.labels", "Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`")]
        );
        assert_eq!(
            fields(&pod_template(&json!({"template": {"spec": {}}}))),
            vec![("template.spec.containers", "Required value")]
        );
        assert_eq!(
            fields(&controller_revision(&json!({"revision": -1}))),
            vec![
                ("data", "Required value: data is mandatory"),
                (
                    "revision",
                    "Invalid value: -1: must be greater than or equal to 0"
                )
            ]
        );
        let ds = json!({"kind": "DaemonSet", "spec": {"selector": {"matchLabels": {"a": "b"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}}});
        assert_eq!(
            fields(&daemon_set(&ds)),
            vec![(
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
                "Required value: cannot be 0 when maxSurge is 0"
            )]
        );
    }

    #[test]
    fn cron_jobs() {
        let cj = json!({"metadata": {"name": "c"}, "spec": {"schedule": "bogus", "concurrencyPolicy": "Allow",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Always",
                "containers": [{"name": "c", "image": "i"}]}}}}}});
        assert_eq!(
            fields(&cron_job(&cj)),
            vec![
                (
                    "spec.schedule",
                    "Invalid value: \"bogus\": expected exactly 5 fields, found 1: [bogus]"
                ),
                (
                    "spec.jobTemplate.spec.template.spec.restartPolicy",
                    "Required value: valid values: \"OnFailure\", \"Never\""
                ),
            ]
        );
        let tz = json!({"metadata": {"name": "c"}, "spec": {"schedule": "* * * * *", "timeZone": "Mars/Olympus",
            "concurrencyPolicy": "Allow",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "i"}]}}}}}});
        assert_eq!(
            fields(&cron_job(&tz)),
            vec![(
                "spec.timeZone",
                "Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"
            )]
        );
    }

    #[test]
    fn autoscalers() {
        let hpa = json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 3, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 0}}}]}});
        assert_eq!(
            fields(&horizontal_pod_autoscaler(&hpa)),
            vec![
                (
                    "spec.maxReplicas",
                    "Invalid value: 2: must be greater than or equal to `minReplicas`"
                ),
                (
                    "spec.metrics[0].resource.target.averageUtilization",
                    "Invalid value: 0: must be greater than 0"
                ),
            ]
        );
        let no_ref = json!({"spec": {"scaleTargetRef": {}, "maxReplicas": 1}});
        assert_eq!(
            fields(&horizontal_pod_autoscaler(&no_ref)),
            vec![
                ("spec.scaleTargetRef.kind", "Required value"),
                ("spec.scaleTargetRef.name", "Required value")
            ]
        );
    }
}

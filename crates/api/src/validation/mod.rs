//! Validation with upstream field paths and wording. Each finding is a
//! [`FieldError`]; the API server turns them into a 422 Invalid Status
//! whose causes kubectl prints as `* field: message`.

use serde_json::Value;

pub mod admissionregistration;
pub mod certificates;
mod common;
pub mod configs;
pub mod coordination;
pub mod csi;
pub mod discovery;
pub mod endpoints;
mod ephemeral;
pub mod flowcontrol;
pub mod meta;
pub mod names;
pub mod networking;
pub mod node;
mod pod;
mod policy;
pub mod rbac;
mod scheduling;
mod service;
mod storage;
pub use policy::{limit_range, pod_disruption_budget, resource_quota};
pub use scheduling::{
    priority_class, priority_class_update, HIGHEST_USER_DEFINABLE_PRIORITY, SYSTEM_PRIORITY_CLASSES,
};
pub use service::{service, service_update};
mod cron;
#[cfg(test)]
mod parity_tests;
mod workloads;
mod workloads_more;

pub use workloads_more::{
    controller_revision, controller_revision_update, cron_job, cron_job_update, daemon_set,
    daemon_set_update, horizontal_pod_autoscaler, pod_template, replication_controller,
    stateful_set, stateful_set_update,
};

pub use storage::{
    persistent_volume, persistent_volume_claim, persistent_volume_claim_update,
    persistent_volume_update, storage_class, storage_class_update, BETA_STORAGE_CLASS_ANNOTATION,
};

pub use workloads::{
    bad_quantity, config_map, core_event, deployment, deployment_status, events_v1_create, job,
    job_update, node, node_pod_cidrs, node_update, replica_set, replica_set_status, secret,
    workload_update,
};

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueDuplicate`,
    /// `FieldValueNotSupported`, `FieldValueForbidden`.
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

pub(crate) fn required(field: String) -> FieldError {
    FieldError {
        reason: "FieldValueRequired",
        field,
        message: "Required value".into(),
    }
}

pub(crate) fn invalid(field: String, value: &Value, detail: &str) -> FieldError {
    let shown = match value {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    };
    FieldError {
        reason: "FieldValueInvalid",
        field,
        message: format!("Invalid value: {shown}: {detail}"),
    }
}

pub(crate) fn not_supported(field: String, value: &str, supported: &[&str]) -> FieldError {
    let list = supported
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    FieldError {
        reason: "FieldValueNotSupported",
        field,
        message: format!("Unsupported value: \"{value}\": supported values: {list}"),
    }
}

/// DNS-1123 label check with upstream's message (the first, if any).
pub fn dns1123_label(value: &str) -> Option<String> {
    names::dns1123_label(value).into_iter().next()
}

fn check_enum(
    errors: &mut Vec<FieldError>,
    obj: &Value,
    field: &str,
    path: String,
    allowed: &[&str],
) {
    if let Some(v) = obj.get(field).and_then(Value::as_str) {
        if !allowed.contains(&v) {
            errors.push(not_supported(path, v, allowed));
        }
    }
}

fn check_port(
    errors: &mut Vec<FieldError>,
    port: &Value,
    field: &str,
    path: String,
    allow_zero: bool,
) {
    let Some(v) = port.get(field) else { return };
    let n = v.as_i64().unwrap_or(-1);
    let low = if allow_zero { 0 } else { 1 };
    if n < low || n > 65535 {
        errors.push(invalid(path, v, "must be between 1 and 65535, inclusive"));
    }
}

fn containers(
    errors: &mut Vec<FieldError>,
    spec: &Value,
    list: &str,
    path: &str,
    names: &mut Vec<String>,
) {
    let Some(cs) = spec.get(list).and_then(Value::as_array) else {
        return;
    };
    for (i, c) in cs.iter().enumerate() {
        let at = format!("{path}.{list}[{i}]");
        match c.get("name").and_then(Value::as_str) {
            None | Some("") => errors.push(required(format!("{at}.name"))),
            Some(name) => {
                if let Some(msg) = dns1123_label(name) {
                    errors.push(invalid(format!("{at}.name"), &Value::from(name), &msg));
                }
                if names.iter().any(|n| n == name) {
                    errors.push(FieldError {
                        reason: "FieldValueDuplicate",
                        field: format!("{at}.name"),
                        message: format!("Duplicate value: \"{name}\""),
                    });
                }
                names.push(name.to_string());
            }
        }
        if c.get("image")
            .and_then(Value::as_str)
            .is_none_or(|i| i.trim().is_empty())
        {
            errors.push(required(format!("{at}.image")));
        }
        check_enum(
            errors,
            c,
            "imagePullPolicy",
            format!("{at}.imagePullPolicy"),
            &["Always", "IfNotPresent", "Never"],
        );
        check_enum(
            errors,
            c,
            "terminationMessagePolicy",
            format!("{at}.terminationMessagePolicy"),
            &["FallbackToLogsOnError", "File"],
        );
        if let Some(ports) = c.get("ports").and_then(Value::as_array) {
            for (j, p) in ports.iter().enumerate() {
                let pp = format!("{at}.ports[{j}]");
                if p.get("containerPort").is_none() {
                    errors.push(required(format!("{pp}.containerPort")));
                }
                check_port(
                    errors,
                    p,
                    "containerPort",
                    format!("{pp}.containerPort"),
                    false,
                );
                check_port(errors, p, "hostPort", format!("{pp}.hostPort"), true);
                check_enum(
                    errors,
                    p,
                    "protocol",
                    format!("{pp}.protocol"),
                    &["SCTP", "TCP", "UDP"],
                );
            }
        }
    }
}

/// Validates a pod spec at `path` (`spec`, or `spec.template.spec`).
pub fn pod_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if spec
        .get("containers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        errors.push(required(format!("{path}.containers")));
    }
    let mut names = Vec::new();
    containers(&mut errors, spec, "initContainers", path, &mut names);
    containers(&mut errors, spec, "containers", path, &mut names);
    check_enum(
        &mut errors,
        spec,
        "restartPolicy",
        format!("{path}.restartPolicy"),
        &["Always", "Never", "OnFailure"],
    );
    check_enum(
        &mut errors,
        spec,
        "dnsPolicy",
        format!("{path}.dnsPolicy"),
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    );
    if let Some(g) = spec.get("terminationGracePeriodSeconds") {
        if g.as_i64().is_none() {
            errors.push(invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                g,
                "must be an integer",
            ));
        }
    }
    errors
}

/// Pod fields an update may change (upstream ValidatePodUpdate): images,
/// activeDeadlineSeconds, added tolerations, terminationGracePeriodSeconds.
pub fn pod_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let strip = |spec: Option<&Value>| {
        let mut spec = spec.cloned().unwrap_or(Value::Null);
        for list in ["containers", "initContainers"] {
            if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("image");
                }
            }
        }
        if let Some(o) = spec.as_object_mut() {
            o.remove("activeDeadlineSeconds");
            o.remove("tolerations");
            o.remove("terminationGracePeriodSeconds");
        }
        spec
    };
    if strip(old.get("spec")) == strip(new.get("spec")) {
        return Vec::new();
    }
    vec![FieldError {
        reason: "FieldValueForbidden",
        field: "spec".into(),
        message:
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,\
                  `spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` \
                  (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` \
                  (allow it to be set to 1 if it was previously negative)"
                .into(),
    }]
}

/// ObjectMeta of any object (every kind's validation starts here).
pub fn object_meta(obj: &Value) -> Vec<FieldError> {
    meta::object_meta(obj.get("metadata"), "metadata")
}

/// A Pod on create (upstream ValidatePodCreate, the parts we check).
pub fn pod(obj: &Value) -> Vec<FieldError> {
    let mut errors = match obj.get("spec") {
        Some(spec) => pod_spec(spec, "spec"),
        None => vec![required("spec.containers".into())],
    };
    errors.extend(workloads::pod_spec_extras(obj.get("spec"), "spec"));
    if let Some(spec) = obj.get("spec") {
        errors.extend(ephemeral::containers(spec, "spec"));
    }
    errors
}

/// A Pod on create (upstream ValidatePodCreate): as any pod, and without
/// ephemeral containers (they come through `pods/ephemeralcontainers`).
pub fn pod_create(obj: &Value) -> Vec<FieldError> {
    let mut errors = pod(obj);
    errors.extend(ephemeral::on_create(obj));
    errors
}

/// An update through `pods/ephemeralcontainers` (upstream
/// ValidatePodEphemeralContainersUpdate): ephemeral containers may only
/// be added.
pub fn pod_ephemeral_containers_update(old: &Value, new: &Value) -> Vec<FieldError> {
    ephemeral::update(old, new)
}

/// A Pod update: the new object, then what may change.
pub fn pod_update_all(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = pod(new);
    if errors.is_empty() {
        errors.extend(pod_update(old, new));
    }
    errors
}

/// A StatefulSet's pod spec with a volume for each volumeClaimTemplate
/// (as the pods will have), `None` without claim templates.
fn claim_volumes(obj: &Value) -> Option<Value> {
    let claims = obj.pointer("/spec/volumeClaimTemplates")?.as_array()?;
    let mut spec = obj.pointer("/spec/template/spec")?.clone();
    let volumes = spec
        .as_object_mut()?
        .entry("volumes")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = volumes.as_array_mut() {
        for c in claims {
            if let Some(name) = c.pointer("/metadata/name").and_then(Value::as_str) {
                list.push(
                    serde_json::json!({"name": name, "persistentVolumeClaim": {"claimName": name}}),
                );
            }
        }
    }
    Some(spec)
}

/// The pod template and replicas of a Deployment, ReplicaSet or Job.
pub(crate) fn workload_template(obj: &Value) -> Vec<FieldError> {
    let mut errors = match obj.pointer("/spec/template/spec") {
        Some(spec) => pod_spec(spec, "spec.template.spec"),
        None => vec![required("spec.template.spec.containers".into())],
    };
    if let Some(r) = obj.pointer("/spec/replicas") {
        if r.as_i64().is_none_or(|n| n < 0) {
            errors.push(invalid(
                "spec.replicas".into(),
                r,
                "must be greater than or equal to 0",
            ));
        }
    }
    // A StatefulSet's containers may mount its volumeClaimTemplates too
    // (upstream checks the union of both).
    let with_claims = claim_volumes(obj);
    errors.extend(workloads::pod_spec_extras(
        with_claims.as_ref().or(obj.pointer("/spec/template/spec")),
        "spec.template.spec",
    ));
    errors.extend(pod::template_only(
        obj.pointer("/spec/template/spec"),
        "spec.template.spec",
    ));
    errors.extend(meta::object_meta(
        obj.pointer("/spec/template/metadata"),
        "spec.template.metadata",
    ));
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

    #[test]
    fn statefulset_containers_may_mount_their_claim_templates() {
        let set = |mount: &str| {
            json!({"spec": {
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox",
                    "volumeMounts": [{"name": mount, "mountPath": "/data"}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
            }})
        };
        assert!(workload_template(&set("data")).is_empty());
        assert_eq!(
            fields(&workload_template(&set("other"))),
            vec![(
                "spec.template.spec.containers[0].volumeMounts[0].name",
                "Not found: \"other\""
            )]
        );
    }

    #[test]
    fn pod_errors_have_upstream_paths_and_wording() {
        let pod = json!({"spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "web", "image": "nginx", "ports": [{"containerPort": 70000}]},
            {"name": "web", "image": ""},
        ]}});
        let errors = super::pod(&pod);
        assert_eq!(
            fields(&errors),
            vec![
                ("spec.containers[0].ports[0].containerPort", "Invalid value: 70000: must be between 1 and 65535, inclusive"),
                ("spec.containers[1].name", "Duplicate value: \"web\""),
                ("spec.containers[1].image", "Required value"),
                ("spec.restartPolicy", "Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", \"OnFailure\""),
            ]
        );
        assert_eq!(
            fields(&super::pod(&json!({"spec": {}}))),
            vec![("spec.containers", "Required value")]
        );
    }

    #[test]
    fn pod_update_rules() {
        let old = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}], "nodeName": ""}});
        let image =
            json!({"spec": {"containers": [{"name": "a", "image": "x:2"}], "nodeName": ""}});
        assert!(pod_update_all(&old, &image).is_empty());
        let port = json!({"spec": {"containers": [{"name": "a", "image": "x:1", "ports": [{"containerPort": 1}]}], "nodeName": ""}});
        assert_eq!(pod_update_all(&old, &port)[0].reason, "FieldValueForbidden");
    }
}

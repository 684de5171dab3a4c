//! Pod spec fields beyond containers' names, images and ports (upstream
//! `ValidatePodSpec` and `validateContainerCommon`, 1.33): deadlines,
//! DNS names of the pod and its references, volumes and their mounts,
//! probes, container restart policies, host ports under hostNetwork,
//! security contexts' IDs and tolerations. Every pod spec (a Pod's, and
//! each template's) goes through it, at its path.

use serde_json::Value;

use super::common::{duplicate, forbidden, invalid_str, items, port_name, str_at};
use super::{invalid, names, not_supported, required, FieldError};

const MAX_INT32: i64 = 2_147_483_647;

/// `field.NotFound(path, value)` for a string.
fn not_found(field: String, value: &str) -> FieldError {
    FieldError {
        reason: "FieldValueNotFound",
        field,
        message: format!("Not found: \"{value}\""),
    }
}

fn label_at(errors: &mut Vec<FieldError>, path: String, value: &str) {
    for m in names::dns1123_label(value) {
        errors.push(invalid_str(path.clone(), value, &m));
    }
}

fn subdomain_at(errors: &mut Vec<FieldError>, path: String, value: &str) {
    for m in names::dns1123_subdomain(value) {
        errors.push(invalid_str(path.clone(), value, &m));
    }
}

/// The checks of a pod spec at `path`.
pub(crate) fn pod_spec_more(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(d) = spec.get("activeDeadlineSeconds").filter(|d| !d.is_null()) {
        if d.as_i64().is_none_or(|n| !(1..=MAX_INT32).contains(&n)) {
            errors.push(invalid(
                format!("{path}.activeDeadlineSeconds"),
                d,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    for f in ["hostname", "subdomain"] {
        if let Some(v) = str_at(spec, f).filter(|v| !v.is_empty()) {
            label_at(&mut errors, format!("{path}.{f}"), v);
        }
    }
    for f in ["nodeName", "serviceAccountName", "priorityClassName"] {
        if let Some(v) = str_at(spec, f).filter(|v| !v.is_empty()) {
            subdomain_at(&mut errors, format!("{path}.{f}"), v);
        }
    }
    let mut volumes: Vec<&str> = Vec::new();
    for (i, v) in items(spec, "volumes").iter().enumerate() {
        let at = format!("{path}.volumes[{i}].name");
        match str_at(v, "name").unwrap_or_default() {
            "" => errors.push(required(at)),
            name => {
                label_at(&mut errors, at.clone(), name);
                if volumes.contains(&name) {
                    errors.push(duplicate(at, name));
                }
                volumes.push(name);
            }
        }
        volume_source(&mut errors, v, &format!("{path}.volumes[{i}]"));
    }
    let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
    for list in ["initContainers", "containers"] {
        for (i, c) in items(spec, list).iter().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            container(&mut errors, c, &at, list == "initContainers", &volumes);
            if host_network {
                for (j, p) in items(c, "ports").iter().enumerate() {
                    let host = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
                    let port = p.get("containerPort").and_then(Value::as_i64).unwrap_or(0);
                    if host != 0 && host != port {
                        errors.push(invalid(
                            format!("{at}.ports[{j}].hostPort"),
                            &Value::from(host),
                            "must match `containerPort` when `hostNetwork` is true",
                        ));
                    }
                }
            }
        }
    }
    if str_at(spec, "dnsPolicy") == Some("None") {
        match spec.get("dnsConfig").filter(|c| !c.is_null()) {
            None => errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{path}.dnsConfig"),
                message: "Required value: must provide `dnsConfig` when `dnsPolicy` is None".into(),
            }),
            Some(c) if items(c, "nameservers").is_empty() => errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{path}.dnsConfig.nameservers"),
                message:
                    "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"
                        .into(),
            }),
            Some(_) => {}
        }
    }
    if let Some(c) = spec.get("dnsConfig") {
        for (i, ns) in items(c, "nameservers").iter().enumerate() {
            let ns = ns.as_str().unwrap_or_default();
            if super::common::parse_ip(ns).is_none() {
                errors.push(invalid_str(
                    format!("{path}.dnsConfig.nameservers[{i}]"),
                    ns,
                    super::common::IP_MESSAGE,
                ));
            }
        }
    }
    spread_constraints(&mut errors, spec, path);
    affinity(&mut errors, spec, path);
    if let Some(sc) = spec.get("securityContext") {
        let at = format!("{path}.securityContext");
        seccomp(&mut errors, sc, &at);
        ids(
            &mut errors,
            sc,
            &at,
            &["runAsUser", "runAsGroup", "fsGroup"],
        );
        for (i, g) in items(sc, "supplementalGroups").iter().enumerate() {
            if g.as_i64().is_some_and(|n| !(0..=MAX_INT32).contains(&n)) {
                errors.push(invalid(
                    format!("{at}.supplementalGroups[{i}]"),
                    g,
                    "must be between 0 and 2147483647, inclusive",
                ));
            }
        }
    }
    errors.extend(tolerations(spec, path));
    errors
}

/// The volume sources a pod volume may name, in the order upstream's
/// `validateVolumeSource` counts them (each past the first is Forbidden).
const VOLUME_SOURCES: &[&str] = &[
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
];

const FILE_MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// One source per volume, and the common sources' required names, host
/// path types and file modes.
fn volume_source(errors: &mut Vec<FieldError>, v: &Value, at: &str) {
    let set: Vec<&str> = VOLUME_SOURCES
        .iter()
        .copied()
        .filter(|s| v.get(*s).is_some_and(|x| !x.is_null()))
        .collect();
    if set.len() > 1 {
        for extra in set.iter().skip(1) {
            errors.push(forbidden(
                format!("{at}.{extra}"),
                "may not specify more than 1 volume type",
            ));
        }
        return;
    }
    let mode = |errors: &mut Vec<FieldError>, src: &Value, field: String| {
        if let Some(m) = src.get("defaultMode").filter(|m| !m.is_null()) {
            if m.as_i64().is_none_or(|n| !(0..=0o777).contains(&n)) {
                errors.push(invalid(field, m, FILE_MODE));
            }
        }
    };
    if let Some(src) = v.get("hostPath") {
        if str_at(src, "path").unwrap_or_default().is_empty() {
            errors.push(required(format!("{at}.hostPath.path")));
        }
        if let Some(t) = str_at(src, "type") {
            let types = super::storage::HOST_PATH_TYPES;
            if !types.contains(&t) {
                errors.push(not_supported(format!("{at}.hostPath.type"), t, types));
            }
        }
    }
    if let Some(src) = v.get("configMap") {
        if str_at(src, "name").unwrap_or_default().is_empty() {
            errors.push(required(format!("{at}.configMap.name")));
        }
        mode(errors, src, format!("{at}.configMap.defaultMode"));
    }
    if let Some(src) = v.get("secret") {
        if str_at(src, "secretName").unwrap_or_default().is_empty() {
            errors.push(required(format!("{at}.secret.secretName")));
        }
        mode(errors, src, format!("{at}.secret.defaultMode"));
    }
    if let Some(src) = v.get("persistentVolumeClaim") {
        if str_at(src, "claimName").unwrap_or_default().is_empty() {
            errors.push(required(format!("{at}.persistentVolumeClaim.claimName")));
        }
    }
    for kind in ["projected", "downwardAPI"] {
        if let Some(src) = v.get(kind) {
            mode(errors, src, format!("{at}.{kind}.defaultMode"));
        }
    }
}

/// `validateAffinity`: node selector terms and their requirements, pod
/// (anti-)affinity terms' topology keys and selectors, and the weights of
/// preferred terms; `spec.nodeSelector` as labels.
fn affinity(errors: &mut Vec<FieldError>, spec: &Value, path: &str) {
    if let Some(m) = spec.get("nodeSelector").and_then(Value::as_object) {
        errors.extend(super::meta::label_map(m, &format!("{path}.nodeSelector")));
    }
    let Some(a) = spec.get("affinity").filter(|a| !a.is_null()) else {
        return;
    };
    let at = format!("{path}.affinity");
    if let Some(na) = a.get("nodeAffinity") {
        let np = format!("{at}.nodeAffinity");
        if let Some(req) = na
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .filter(|r| !r.is_null())
        {
            let rp = format!("{np}.requiredDuringSchedulingIgnoredDuringExecution");
            let terms = items(req, "nodeSelectorTerms");
            if terms.is_empty() {
                errors.push(FieldError {
                    reason: "FieldValueRequired",
                    field: format!("{rp}.nodeSelectorTerms"),
                    message: "Required value: must have at least one node selector term".into(),
                });
            }
            for (i, t) in terms.iter().enumerate() {
                node_selector_term(errors, t, &format!("{rp}.nodeSelectorTerms[{i}]"));
            }
        }
        let preferred = items(na, "preferredDuringSchedulingIgnoredDuringExecution");
        for (i, p) in preferred.iter().enumerate() {
            let pp = format!("{np}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            weight(errors, p, &pp);
            if let Some(t) = p.get("preference") {
                node_selector_term(errors, t, &format!("{pp}.preference"));
            }
        }
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(pa) = a.get(kind) else { continue };
        let kp = format!("{at}.{kind}");
        let required_terms = items(pa, "requiredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in required_terms.iter().enumerate() {
            pod_affinity_term(
                errors,
                t,
                &format!("{kp}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
            );
        }
        let preferred = items(pa, "preferredDuringSchedulingIgnoredDuringExecution");
        for (i, p) in preferred.iter().enumerate() {
            let pp = format!("{kp}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            weight(errors, p, &pp);
            if let Some(t) = p.get("podAffinityTerm") {
                pod_affinity_term(errors, t, &format!("{pp}.podAffinityTerm"));
            }
        }
    }
}

fn weight(errors: &mut Vec<FieldError>, p: &Value, at: &str) {
    let w = p.get("weight").cloned().unwrap_or(Value::from(0));
    if w.as_i64().is_none_or(|n| !(1..=100).contains(&n)) {
        errors.push(invalid(
            format!("{at}.weight"),
            &w,
            "must be in the range 1-100",
        ));
    }
}

fn node_selector_term(errors: &mut Vec<FieldError>, t: &Value, at: &str) {
    // `ValidateNodeFieldSelectorRequirement`: metadata.name, In or NotIn,
    // one value.
    for (j, r) in items(t, "matchFields").iter().enumerate() {
        let rp = format!("{at}.matchFields[{j}]");
        let values = items(r, "values");
        match str_at(r, "operator").unwrap_or_default() {
            "In" | "NotIn" => {
                if values.len() != 1 {
                    errors.push(FieldError {
                        reason: "FieldValueRequired",
                        field: format!("{rp}.values"),
                        message: "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector".into(),
                    });
                }
            }
            other => errors.push(invalid_str(
                format!("{rp}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = str_at(r, "key").unwrap_or_default();
        if key != "metadata.name" {
            errors.push(invalid_str(
                format!("{rp}.key"),
                key,
                "not a valid field selector key",
            ));
        } else {
            for (i, v) in values.iter().enumerate() {
                let v = v.as_str().unwrap_or_default();
                for m in names::dns1123_subdomain(v) {
                    errors.push(invalid_str(format!("{rp}.values[{i}]"), v, &m));
                }
            }
        }
    }
    for (j, r) in items(t, "matchExpressions").iter().enumerate() {
        let rp = format!("{at}.matchExpressions[{j}]");
        let values = items(r, "values");
        let op = str_at(r, "operator").unwrap_or_default();
        match op {
            "In" | "NotIn" if values.is_empty() => errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{rp}.values"),
                message: "Required value: must be specified when `operator` is 'In' or 'NotIn'"
                    .into(),
            }),
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(forbidden(
                format!("{rp}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "Gt" | "Lt" if values.len() != 1 => errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{rp}.values"),
                message:
                    "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
                        .into(),
            }),
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
            other => errors.push(invalid_str(
                format!("{rp}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = str_at(r, "key").unwrap_or_default();
        for m in names::qualified_name(key) {
            errors.push(invalid_str(format!("{rp}.key"), key, &m));
        }
    }
}

fn pod_affinity_term(errors: &mut Vec<FieldError>, t: &Value, at: &str) {
    errors.extend(super::common::label_selector(
        t.get("labelSelector"),
        &format!("{at}.labelSelector"),
    ));
    errors.extend(super::common::label_selector(
        t.get("namespaceSelector"),
        &format!("{at}.namespaceSelector"),
    ));
    let key = str_at(t, "topologyKey").unwrap_or_default();
    if key.is_empty() {
        errors.push(FieldError {
            reason: "FieldValueRequired",
            field: format!("{at}.topologyKey"),
            message: "Required value: can not be empty".into(),
        });
    } else {
        for m in names::qualified_name(key) {
            errors.push(invalid_str(format!("{at}.topologyKey"), key, &m));
        }
    }
}

/// `validateTopologySpreadConstraints`.
fn spread_constraints(errors: &mut Vec<FieldError>, spec: &Value, path: &str) {
    let list = items(spec, "topologySpreadConstraints");
    for (i, c) in list.iter().enumerate() {
        let at = format!("{path}.topologySpreadConstraints[{i}]");
        if let Some(s) = c.get("maxSkew") {
            if s.as_i64().is_none_or(|n| n <= 0) {
                errors.push(invalid(
                    format!("{at}.maxSkew"),
                    s,
                    "must be greater than zero",
                ));
            }
        }
        let key = str_at(c, "topologyKey").unwrap_or_default();
        if key.is_empty() {
            errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{at}.topologyKey"),
                message: "Required value: can not be empty".into(),
            });
        }
        let action = str_at(c, "whenUnsatisfiable").unwrap_or_default();
        if action != "DoNotSchedule" && action != "ScheduleAnyway" {
            errors.push(not_supported(
                format!("{at}.whenUnsatisfiable"),
                action,
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        let repeated = list.iter().skip(i + 1).any(|o| {
            str_at(o, "topologyKey").unwrap_or_default() == key
                && str_at(o, "whenUnsatisfiable").unwrap_or_default() == action
        });
        if repeated {
            errors.push(FieldError {
                reason: "FieldValueDuplicate",
                field: format!("{at}.{{topologyKey, whenUnsatisfiable}}"),
                message: format!("Duplicate value: \"{{{key}, {action}}}\""),
            });
        }
        if let Some(m) = c.get("minDomains").filter(|m| !m.is_null()) {
            if m.as_i64().is_some_and(|n| n <= 0) {
                errors.push(invalid(
                    format!("{at}.minDomains"),
                    m,
                    "must be greater than zero",
                ));
            } else if action != "DoNotSchedule" {
                errors.push(invalid(
                    format!("{at}.minDomains"),
                    m,
                    &format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"
                    ),
                ));
            }
        }
    }
}

/// `validateSeccompProfileField` of the security context at `at`.
fn seccomp(errors: &mut Vec<FieldError>, sc: &Value, at: &str) {
    let Some(p) = sc.get("seccompProfile").filter(|p| !p.is_null()) else {
        return;
    };
    let at = format!("{at}.seccompProfile");
    let local = p.get("localhostProfile").filter(|l| !l.is_null());
    match str_at(p, "type").unwrap_or_default() {
        "Localhost" => {
            if local.is_none() {
                errors.push(FieldError {
                    reason: "FieldValueRequired",
                    field: format!("{at}.localhostProfile"),
                    message: "Required value: must be set when seccomp type is Localhost".into(),
                });
            }
        }
        "RuntimeDefault" | "Unconfined" => {
            if local.is_some() {
                errors.push(FieldError {
                    reason: "FieldValueInvalid",
                    field: format!("{at}.localhostProfile"),
                    message: format!(
                        "Invalid value: core.SeccompProfile{{Type:{:?}, LocalhostProfile:(*string)(0xc000a1b2c0)}}: can only be set when seccomp type is Localhost",
                        str_at(p, "type").unwrap_or_default()
                    ),
                });
            }
        }
        other => errors.push(not_supported(
            format!("{at}.type"),
            other,
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
}

/// User and group IDs in `0..=MaxInt32` (`IsValidUserID`, `IsValidGroupID`).
fn ids(errors: &mut Vec<FieldError>, sc: &Value, at: &str, fields: &[&str]) {
    for f in fields {
        if let Some(v) = sc.get(*f).filter(|v| !v.is_null()) {
            if v.as_i64().is_some_and(|n| !(0..=MAX_INT32).contains(&n)) {
                errors.push(invalid(
                    format!("{at}.{f}"),
                    v,
                    "must be between 0 and 2147483647, inclusive",
                ));
            }
        }
    }
}

pub(super) fn container(
    errors: &mut Vec<FieldError>,
    c: &Value,
    at: &str,
    init: bool,
    volumes: &[&str],
) {
    let restart = str_at(c, "restartPolicy");
    let sidecar = init && restart == Some("Always");
    if let Some(p) = restart {
        if init {
            if p != "Always" {
                errors.push(not_supported(format!("{at}.restartPolicy"), p, &["Always"]));
            }
        } else {
            errors.push(forbidden(
                format!("{at}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    let mut port_names: Vec<&str> = Vec::new();
    for (i, p) in items(c, "ports").iter().enumerate() {
        let name = str_at(p, "name").unwrap_or_default();
        if name.is_empty() {
            continue;
        }
        let msgs = port_name(name);
        if !msgs.is_empty() {
            for m in msgs {
                errors.push(invalid_str(format!("{at}.ports[{i}].name"), name, &m));
            }
        } else if port_names.contains(&name) {
            errors.push(duplicate(format!("{at}.ports[{i}].name"), name));
        } else {
            port_names.push(name);
        }
    }
    for (i, e) in items(c, "env").iter().enumerate() {
        if str_at(e, "name").unwrap_or_default().is_empty() {
            errors.push(required(format!("{at}.env[{i}].name")));
        }
    }
    let mut mount_paths: Vec<&str> = Vec::new();
    for (i, m) in items(c, "volumeMounts").iter().enumerate() {
        let mp = format!("{at}.volumeMounts[{i}]");
        let name = str_at(m, "name").unwrap_or_default();
        if name.is_empty() {
            errors.push(required(format!("{mp}.name")));
        }
        if !volumes.contains(&name) {
            errors.push(not_found(format!("{mp}.name"), name));
        }
        let mount_path = str_at(m, "mountPath").unwrap_or_default();
        if mount_path.is_empty() {
            errors.push(required(format!("{mp}.mountPath")));
        }
        if mount_paths.contains(&mount_path) {
            errors.push(invalid_str(
                format!("{mp}.mountPath"),
                mount_path,
                "must be unique",
            ));
        }
        mount_paths.push(mount_path);
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(p) = c.get(probe).filter(|p| !p.is_null()) else {
            continue;
        };
        let pp = format!("{at}.{probe}");
        if init && !sidecar {
            errors.push(forbidden(
                pp,
                "may not be set for init containers without restartPolicy=Always",
            ));
            continue;
        }
        probe_errors(errors, p, &pp);
        if probe != "readinessProbe" {
            if let Some(t) = p.get("successThreshold") {
                if t.as_i64().is_some_and(|n| n != 1) {
                    errors.push(invalid(format!("{pp}.successThreshold"), t, "must be 1"));
                }
            }
        }
    }
    for hook in ["postStart", "preStop"] {
        let Some(h) = c
            .pointer(&format!("/lifecycle/{hook}"))
            .filter(|h| !h.is_null())
        else {
            continue;
        };
        let hp = format!("{at}.lifecycle.{hook}");
        let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "sleep"]
            .into_iter()
            .filter(|k| h.get(*k).is_some_and(|v| !v.is_null()))
            .collect();
        match handlers.len() {
            0 => errors.push(FieldError {
                reason: "FieldValueRequired",
                field: hp,
                message: "Required value: must specify a handler type".into(),
            }),
            1 => {}
            _ => errors.push(forbidden(
                format!("{hp}.{}", handlers.get(1).copied().unwrap_or_default()),
                "may not specify more than 1 handler type",
            )),
        }
    }
    if let Some(sc) = c.get("securityContext") {
        seccomp(errors, sc, &format!("{at}.securityContext"));
        ids(
            errors,
            sc,
            &format!("{at}.securityContext"),
            &["runAsUser", "runAsGroup"],
        );
    }
}

/// `validateProbe`: one handler, its port, and counters not negative.
fn probe_errors(errors: &mut Vec<FieldError>, p: &Value, at: &str) {
    let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "grpc"]
        .into_iter()
        .filter(|h| p.get(*h).is_some_and(|v| !v.is_null()))
        .collect();
    match handlers.len() {
        0 => errors.push(FieldError {
            reason: "FieldValueRequired",
            field: at.into(),
            message: "Required value: must specify a handler type".into(),
        }),
        1 => {}
        _ => errors.push(forbidden(
            format!("{at}.{}", handlers.get(1).copied().unwrap_or_default()),
            "may not specify more than 1 handler type",
        )),
    }
    for h in ["httpGet", "tcpSocket"] {
        if let Some(port) = p.pointer(&format!("/{h}/port")) {
            let field = format!("{at}.{h}.port");
            match port {
                Value::String(s) => {
                    for m in port_name(s) {
                        errors.push(invalid_str(field.clone(), s, &m));
                    }
                }
                n => {
                    if n.as_i64().is_none_or(|n| !(1..=65535).contains(&n)) {
                        errors.push(invalid(field, n, "must be between 1 and 65535, inclusive"));
                    }
                }
            }
        }
    }
    for f in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if let Some(v) = p.get(f) {
            if v.as_i64().is_some_and(|n| n < 0) {
                errors.push(invalid(
                    format!("{at}.{f}"),
                    v,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    if let Some(g) = p
        .get("terminationGracePeriodSeconds")
        .filter(|g| !g.is_null())
    {
        if g.as_i64().is_some_and(|n| n <= 0) {
            errors.push(invalid(
                format!("{at}.terminationGracePeriodSeconds"),
                g,
                "must be greater than 0",
            ));
        }
    }
}

/// upstream `ValidateTolerations`, beyond the effect and operator values:
/// an empty key needs Exists, Exists takes no value, tolerationSeconds
/// only with NoExecute, the key a qualified name, the value a label value.
fn tolerations(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, t) in items(spec, "tolerations").iter().enumerate() {
        let at = format!("{path}.tolerations[{i}]");
        errors.extend(super::node::toleration_common(t, &at));
        let key = str_at(t, "key").unwrap_or_default();
        let op = str_at(t, "operator").unwrap_or_default();
        let value = str_at(t, "value").unwrap_or_default();
        let effect = str_at(t, "effect").unwrap_or_default();
        match op {
            // Upstream reports a bad value at `operator`.
            "" | "Equal" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errors.push(invalid_str(
                        format!("{at}.operator"),
                        value,
                        &msgs.join(";"),
                    ));
                }
            }
            "Exists" if !value.is_empty() => {
                let seconds = if t.get("tolerationSeconds").is_some_and(|s| !s.is_null()) {
                    "(*int64)(0xc000a1b2c0)"
                } else {
                    "(*int64)(nil)"
                };
                errors.push(FieldError {
                        reason: "FieldValueInvalid",
                        field: format!("{at}.operator"),
                        message: format!(
                            "Invalid value: core.Toleration{{Key:{key:?}, Operator:{op:?}, Value:{value:?}, Effect:{effect:?}, TolerationSeconds:{seconds}}}: value must be empty when `operator` is 'Exists'"
                        ),
                    });
            }
            _ => {}
        }
    }
    errors
}

/// What a pod template may not hold beyond a pod (upstream
/// `ValidatePodTemplateSpec`): ephemeral containers.
pub(crate) fn template_only(spec: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if spec.is_some_and(|s| !items(s, "ephemeralContainers").is_empty()) {
        errors.push(forbidden(
            format!("{path}.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errors
}

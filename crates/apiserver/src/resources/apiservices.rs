//! APIServices (apiregistration.k8s.io/v1): one per served group/version.
//! The Local ones (no `spec.service`) are kept in step with the served
//! resources by `crate::reviews::apiservices`; others may be created and
//! are stored, but nothing is aggregated. Validation and defaults as the
//! kube-aggregator's `apis/apiregistration/validation` (1.33).

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{json, Value};
use skiff_api::validation::{names, rbac, FieldError};

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "apiregistration.k8s.io",
    kind: "APIService",
    resource: Some(resource(
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "apiservice",
        "APIService",
        false,
        NONE,
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &APIServiceStrategy,
    typed: &Typed::<APIService>::NEW,
};

#[derive(Debug)]
struct APIServiceStrategy;

fn invalid(field: &str, shown: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {shown}: {detail}"),
    }
}

/// `ValidateAPIService` beyond the name's path-segment rule.
fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let s = |f: &str| {
        spec.get(f)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (group, version) = (s("group"), s("version"));
    let required_name = format!("{version}.{group}");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if rbac::path_segment_name(name).is_empty() && name != required_name {
        errors.push(invalid(
            "metadata.name",
            format!("{name:?}"),
            &format!("must be `spec.version+\".\"+spec.group`: {required_name:?}"),
        ));
    }
    if group.is_empty() && version != "v1" {
        errors.push(FieldError {
            reason: "FieldValueRequired",
            field: "spec.group".into(),
            message: "Required value: only v1 may have an empty group and it better be legacy kube"
                .into(),
        });
    }
    if !group.is_empty() {
        for m in names::dns1123_subdomain(&group) {
            errors.push(invalid("spec.group", format!("{group:?}"), &m));
        }
    }
    for m in names::dns1035_label(&version) {
        errors.push(invalid("spec.version", format!("{version:?}"), &m));
    }
    let int = |f: &str| spec.get(f).and_then(Value::as_i64).unwrap_or(0);
    let gpm = int("groupPriorityMinimum");
    if gpm <= 0 || gpm > 20000 {
        errors.push(invalid(
            "spec.groupPriorityMinimum",
            gpm.to_string(),
            "must be positive and less than 20000",
        ));
    }
    let vp = int("versionPriority");
    if vp <= 0 || vp > 1000 {
        errors.push(invalid(
            "spec.versionPriority",
            vp.to_string(),
            "must be positive and less than 1000",
        ));
    }
    let ca = s("caBundle");
    let insecure = spec
        .get("insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(service) = spec.get("service").filter(|v| !v.is_null()) else {
        if !ca.is_empty() {
            // base64 of the bytes: three bytes per four characters.
            let bytes = ca.trim_end_matches('=').len() * 3 / 4;
            errors.push(invalid(
                "spec.caBundle",
                format!("\"{bytes} bytes\""),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errors.push(invalid(
                "spec.insecureSkipTLSVerify",
                "true".into(),
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errors;
    };
    for f in ["namespace", "name"] {
        if service
            .get(f)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("spec.service.{f}"),
                message: "Required value".into(),
            });
        }
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=65535).contains(&port) {
        errors.push(invalid(
            "spec.service.port",
            port.to_string(),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    if insecure && !ca.is_empty() {
        errors.push(invalid(
            "spec.insecureSkipTLSVerify",
            "true".into(),
            "may not be true if caBundle is present",
        ));
    }
    errors
}

impl Strategy for APIServiceStrategy {
    fn defaults(&self, obj: &mut Value) {
        // SetDefaults_ServiceReference: port 443.
        if let Some(service) = obj
            .pointer_mut("/spec/service")
            .and_then(Value::as_object_mut)
        {
            if service.get("port").is_none_or(Value::is_null) {
                service.insert("port".into(), json!(443));
            }
        }
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj)
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        rbac::path_segment_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiservice_rules() {
        let ok = json!({"metadata": {"name": "v1.apps"},
            "spec": {"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}});
        assert!(validate(&ok).is_empty());
        let bad = json!({"metadata": {"name": "v1.x"},
            "spec": {"group": "apps", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 15,
                "service": {"namespace": "n", "name": "s", "port": 70000}}});
        let fields: Vec<_> = validate(&bad).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "spec.groupPriorityMinimum",
                "spec.service.port"
            ]
        );
    }
}

//! ServiceCIDRs (networking.k8s.io/v1, status subresource): the ranges
//! Service ClusterIPs come from. The default one, `kubernetes`, is the
//! server's `--service-cidr` and is written at start
//! (`allocators::bootstrap`); its cidrs may not change.

use k8s_openapi::api::networking::v1::ServiceCIDR;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "networking.k8s.io",
    kind: "ServiceCIDR",
    resource: Some(resource(
        "networking.k8s.io",
        "v1",
        "servicecidrs",
        "servicecidr",
        "ServiceCIDR",
        false,
        NONE,
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &ServiceCidrStrategy,
    typed: &Typed::<ServiceCIDR>::NEW,
};

#[derive(Debug)]
struct ServiceCidrStrategy;

fn cidrs(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = obj
        .pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if list.is_empty() {
        errors.push(FieldError {
            reason: "FieldValueRequired",
            field: "spec.cidrs".into(),
            message: "Required value".into(),
        });
    }
    if list.len() > 2 {
        errors.push(FieldError {
            reason: "FieldValueTooMany",
            field: "spec.cidrs".into(),
            message: format!("Too many: {}: must have at most 2 items", list.len()),
        });
    }
    for (i, c) in list.iter().enumerate() {
        let text = c.as_str().unwrap_or("");
        let ok = text.split_once('/').is_some_and(|(ip, p)| {
            ip.parse::<std::net::IpAddr>().is_ok() && p.parse::<u8>().is_ok()
        });
        if !ok {
            errors.push(FieldError {
                reason: "FieldValueInvalid",
                field: format!("spec.cidrs[{i}]"),
                message: format!("Invalid value: \"{text}\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
            });
        }
    }
    errors
}

impl Strategy for ServiceCidrStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        cidrs(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = cidrs(new);
        if old.pointer("/spec/cidrs") != new.pointer("/spec/cidrs") {
            errors.push(FieldError {
                reason: "FieldValueInvalid",
                field: "spec.cidrs".into(),
                message: "Invalid value: field is immutable".into(),
            });
        }
        errors
    }
}

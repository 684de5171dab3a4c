//! IPAddresses (networking.k8s.io/v1): one per allocated Service
//! ClusterIP, named by the address, its parentRef the Service; the
//! allocators write them (`allocators::bootstrap`). The name must be the
//! canonical form of an IP and the parentRef is fixed.

use k8s_openapi::api::networking::v1::IPAddress;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "networking.k8s.io",
    kind: "IPAddress",
    resource: Some(resource(
        "networking.k8s.io",
        "v1",
        "ipaddresses",
        "ipaddress",
        "IPAddress",
        false,
        &["ip"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &IpAddressStrategy,
    typed: &Typed::<IPAddress>::NEW,
};

#[derive(Debug)]
struct IpAddressStrategy;

fn parent(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match obj.pointer("/spec/parentRef") {
        None | Some(Value::Null) => errors.push(FieldError {
            reason: "FieldValueRequired",
            field: "spec.parentRef".into(),
            message: "Required value".into(),
        }),
        Some(p) => {
            for f in ["resource", "name"] {
                if p.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                    errors.push(FieldError {
                        reason: "FieldValueRequired",
                        field: format!("spec.parentRef.{f}"),
                        message: "Required value".into(),
                    });
                }
            }
        }
    }
    errors
}

impl Strategy for IpAddressStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        parent(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = parent(new);
        if old.pointer("/spec/parentRef") != new.pointer("/spec/parentRef") {
            errors.push(FieldError {
                reason: "FieldValueInvalid",
                field: "spec.parentRef".into(),
                message: "Invalid value: field is immutable".into(),
            });
        }
        errors
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        match name.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.to_string() == name => Vec::new(),
            Ok(ip) => vec![format!("must be in canonical form (\"{ip}\")")],
            Err(_) => vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into()],
        }
    }
}

//! ConfigMap and Secret keys, the keys each Secret type needs, and the
//! `immutable` flag on update (upstream `ValidateConfigMap`,
//! `ValidateSecret` and their update rules, 1.33). The size limits stay
//! in `workloads` beside them.

use serde_json::{Map, Value};

use super::common::{forbidden, immutable};
use super::{invalid, FieldError};

const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `IsConfigMapKey`.
pub(crate) fn config_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errs.push(CONFIG_KEY.to_string());
    }
    if key == "." {
        errs.push("must not be '.'".into());
    } else if key == ".." {
        errs.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

fn keys<'a>(obj: &'a Value, field: &str) -> impl Iterator<Item = &'a String> {
    obj.get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(Map::keys)
}

fn key_errors(errors: &mut Vec<FieldError>, path: &str, key: &str) {
    for m in config_key(key) {
        errors.push(invalid(format!("{path}[{key}]"), &Value::from(key), &m));
    }
}

/// A ConfigMap's keys (data and binaryData, none in both).
pub fn config_map_keys(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let binary = obj.get("binaryData").and_then(Value::as_object);
    for key in keys(obj, "data") {
        key_errors(&mut errors, "data", key);
        if binary.is_some_and(|b| b.contains_key(key)) {
            errors.push(invalid(
                format!("data[{key}]"),
                &Value::from(key.as_str()),
                "duplicate of key present in binaryData",
            ));
        }
    }
    for key in keys(obj, "binaryData") {
        key_errors(&mut errors, "binaryData", key);
    }
    errors
}

fn required_key(path: &str) -> FieldError {
    FieldError {
        reason: "FieldValueRequired",
        field: path.into(),
        message: "Required value".into(),
    }
}

/// A Secret's keys (stringData is data once decoded) and those its type
/// needs.
pub fn secret_keys(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut all: Vec<&String> = keys(obj, "data").collect();
    all.extend(keys(obj, "stringData").filter(|k| {
        !obj.get("data")
            .and_then(Value::as_object)
            .is_some_and(|d| d.contains_key(*k))
    }));
    for key in &all {
        key_errors(&mut errors, "data", key);
    }
    let has = |k: &str| all.iter().any(|a| a.as_str() == k);
    let non_empty = |k: &str| {
        ["data", "stringData"].iter().any(|f| {
            obj.pointer(&format!("/{f}/{}", k.replace('~', "~0").replace('/', "~1")))
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
        })
    };
    match obj.get("type").and_then(Value::as_str).unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let name = obj
                .pointer("/metadata/annotations/kubernetes.io~1service-account.name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if name.is_empty() {
                errors.push(required_key(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => {
            errors.push(required_key("data[.dockercfg]"));
        }
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            errors.push(required_key("data[.dockerconfigjson]"));
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errors.push(required_key("data[username]"));
            errors.push(required_key("data[password]"));
        }
        "kubernetes.io/ssh-auth" if !non_empty("ssh-privatekey") => {
            errors.push(required_key("data[ssh-privatekey]"));
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    errors.push(required_key(&format!("data[{k}]")));
                }
            }
        }
        _ => {}
    }
    errors
}

fn is_immutable(obj: &Value) -> bool {
    obj.get("immutable") == Some(&Value::Bool(true))
}

/// Once `immutable` is set, it stays, and so do the `fields`.
fn immutable_flag(old: &Value, new: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !is_immutable(old) {
        return errors;
    }
    const DETAIL: &str = "field is immutable when `immutable` is set";
    if !is_immutable(new) {
        errors.push(forbidden("immutable", DETAIL));
    }
    for f in fields {
        if !super::common::same(old.get(*f), new.get(*f)) {
            errors.push(forbidden(*f, DETAIL));
        }
    }
    errors
}

/// A ConfigMap update.
pub fn config_map_update(old: &Value, new: &Value) -> Vec<FieldError> {
    immutable_flag(old, new, &["data", "binaryData"])
}

/// A Secret update: the type is fixed, and so is an immutable Secret.
pub fn secret_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ty = |o: &Value| {
        o.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if ty(old) != ty(new) {
        errors.push(immutable("type", new.get("type")));
    }
    errors.extend(immutable_flag(old, new, &["data"]));
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn shown(errors: Vec<super::FieldError>) -> Vec<String> {
        errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn validate_config_map_keys() {
        assert_eq!(
            shown(super::config_map_keys(
                &json!({"data": {"a b": "x", "ok": "y"},
                "binaryData": {"ok": "eQ==", "..x": ""}})
            )),
            vec![
                format!("data[a b]: Invalid value: \"a b\": {}", super::CONFIG_KEY),
                "data[ok]: Invalid value: \"ok\": duplicate of key present in binaryData"
                    .to_string(),
                "binaryData[..x]: Invalid value: \"..x\": must not start with '..'".to_string(),
            ]
        );
    }

    #[test]
    fn validate_secret_types_and_updates() {
        assert_eq!(
            shown(super::secret_keys(
                &json!({"type": "kubernetes.io/tls", "data": {"tls.crt": ""}})
            )),
            vec!["data[tls.key]: Required value"]
        );
        assert_eq!(
            shown(super::secret_keys(
                &json!({"type": "kubernetes.io/service-account-token"})
            )),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        assert_eq!(
            shown(super::secret_keys(
                &json!({"type": "kubernetes.io/dockerconfigjson", "stringData": {}})
            )),
            vec!["data[.dockerconfigjson]: Required value"]
        );
        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
        let new = json!({"type": "kubernetes.io/tls", "data": {"a": "eQ=="}});
        assert_eq!(
            shown(super::secret_update(&old, &new)),
            vec![
                "type: Invalid value: \"kubernetes.io/tls\": field is immutable",
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );
        assert!(super::config_map_update(&old, &old).is_empty());
    }
}

//! Field validation (`fieldValidation=Strict|Warn|Ignore`): unknown and
//! duplicate fields in a request body, reported with upstream's wording
//! (`unknown field "spec.foo"`, `duplicate field "metadata.name"`).
//!
//! Unknown fields are found by decoding the body into the kind's typed
//! struct (k8s-openapi), encoding it again and listing what did not
//! survive. A body the typed decoder cannot read is left to validation.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

/// The `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// Upstream's default is Warn (kubectl sends Strict).
    pub fn parse(value: Option<&String>) -> Result<Self, String> {
        match value.map(String::as_str) {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(format!(
                "fieldValidation parameter unsupported: {other}; valid values are \"Ignore\", \"Warn\" and \"Strict\""
            )),
        }
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(obj: &Value) -> Option<Value> {
    let typed: T = serde_json::from_value(obj.clone()).ok()?;
    serde_json::to_value(typed).ok()
}

/// The object as its typed struct sees it, for kinds we know.
fn typed_view(group: &str, kind: &str, obj: &Value) -> Option<Value> {
    use k8s_openapi::api::{apps, batch, coordination, core, events};
    match (group, kind) {
        ("", "Pod") => roundtrip::<core::v1::Pod>(obj),
        ("", "Node") => roundtrip::<core::v1::Node>(obj),
        ("", "Namespace") => roundtrip::<core::v1::Namespace>(obj),
        ("", "Event") => roundtrip::<core::v1::Event>(obj),
        ("", "ConfigMap") => roundtrip::<core::v1::ConfigMap>(obj),
        ("", "Secret") => roundtrip::<core::v1::Secret>(obj),
        ("", "Service") => roundtrip::<core::v1::Service>(obj),
        ("", "Endpoints") => roundtrip::<core::v1::Endpoints>(obj),
        ("", "ServiceAccount") => roundtrip::<core::v1::ServiceAccount>(obj),
        ("coordination.k8s.io", "Lease") => roundtrip::<coordination::v1::Lease>(obj),
        ("apps", "Deployment") => roundtrip::<apps::v1::Deployment>(obj),
        ("apps", "ReplicaSet") => roundtrip::<apps::v1::ReplicaSet>(obj),
        ("batch", "Job") => roundtrip::<batch::v1::Job>(obj),
        ("events.k8s.io", "Event") => roundtrip::<events::v1::Event>(obj),
        ("autoscaling", "Scale") => roundtrip::<k8s_openapi::api::autoscaling::v1::Scale>(obj),
        _ => None,
    }
}

fn unknown(path: &str, given: &Value, known: &Value, out: &mut Vec<String>) {
    match (given, known) {
        (Value::Object(g), Value::Object(k)) => {
            for (key, value) in g {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match k.get(key) {
                    Some(known) => unknown(&here, value, known, out),
                    // A known field set to null or empty is dropped by the
                    // encoder without being unknown.
                    None if value.is_null() || is_empty(value) => {}
                    None => out.push(format!("unknown field \"{here}\"")),
                }
            }
        }
        (Value::Array(g), Value::Array(k)) => {
            for (i, (value, known)) in g.iter().zip(k).enumerate() {
                unknown(&format!("{path}[{i}]"), value, known, out);
            }
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Collects duplicate keys while walking raw JSON.
struct Duplicates<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Duplicates<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Duplicates<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let here = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(format!("duplicate field \"{here}\""));
            }
            map.next_value_seed(Duplicates {
                path: here,
                out: self.out,
            })?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Duplicates {
                path: format!("{}[{i}]", self.path),
                out: self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Unknown and duplicate fields of `raw` (already parsed as `obj`), in
/// upstream's wording.
pub fn findings(group: &str, kind: &str, raw: &[u8], obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(raw);
    let _ = Duplicates {
        path: String::new(),
        out: &mut out,
    }
    .deserialize(&mut de);
    if let Some(known) = typed_view(group, kind, obj) {
        unknown("", obj, &known, &mut out);
    }
    out
}

/// The 400 message for Strict: `Kind in version "v" cannot be handled as a
/// Kind: strict decoding error: ...`.
pub fn strict_message(kind: &str, version: &str, findings: &[String]) -> String {
    format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        findings.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_duplicate_fields() {
        let raw = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","name":"b"},
            "spec":{"foo":1,"containers":[{"name":"c","image":"i","bogus":true}]}}"#;
        let obj: Value = serde_json::from_slice(raw).unwrap();
        let found = findings("", "Pod", raw, &obj);
        assert_eq!(
            found,
            vec![
                "duplicate field \"metadata.name\"",
                "unknown field \"spec.containers[0].bogus\"",
                "unknown field \"spec.foo\"",
            ]
        );
        assert_eq!(
            strict_message("Pod", "v1", &found[2..]),
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.foo\""
        );
    }

    #[test]
    fn clean_objects_have_no_findings() {
        let raw = br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{}},
            "spec":{"replicas":1,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
            "spec":{"containers":[{"name":"c","image":"i","resources":{}}]}}}}"#;
        let obj: Value = serde_json::from_slice(raw).unwrap();
        assert!(findings("apps", "Deployment", raw, &obj).is_empty());
    }
}

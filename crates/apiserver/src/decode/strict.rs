//! Field validation (`fieldValidation=Strict|Warn|Ignore`): unknown and
//! duplicate fields in a request body, reported with upstream's wording
//! (`unknown field "spec.foo"`, `duplicate field "metadata.name"`).
//!
//! Unknown fields are found by decoding the body into the kind's typed
//! struct (k8s-openapi) and listing the keys its decoder skipped
//! (serde_ignored), in one pass over the bytes. A body the typed decoder
//! cannot read is left to validation.

use std::collections::HashSet;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
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

/// The fields of the body that the kind's typed struct ignores while
/// decoding it (serde_ignored reports them), decoded straight from the raw
/// bytes (k8s-openapi's decoders keep the last of duplicate keys, as
/// upstream does); a body the typed decoder refuses there is tried once
/// more from the parsed tree. `None` if neither decodes (validation
/// reports it).
pub(crate) fn ignored<T: DeserializeOwned>(raw: &[u8], obj: &Value) -> Option<Vec<Vec<Segment>>> {
    if let Some((_, found)) = decode_with_ignored::<T>(raw, true) {
        return Some(found);
    }
    let mut found = Vec::new();
    serde_ignored::deserialize::<_, _, T>(obj, |path| found.push(segments(&path))).ok()?;
    Some(found)
}

/// Decodes the body `raw` straight into `T` and returns it with the
/// fields its decoder skipped (listed only when `unknown` is asked for):
/// one pass that serves both field validation and typed decoding. `None`
/// if the bytes do not decode as `T` (a duplicate key whose first value is
/// of the wrong type, say); the callers then take the two-pass road, which
/// also words the error.
pub(crate) fn decode_with_ignored<T: DeserializeOwned>(
    raw: &[u8],
    unknown: bool,
) -> Option<(T, Vec<Vec<Segment>>)> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(raw);
    let typed = if unknown {
        serde_ignored::deserialize::<_, _, T>(&mut de, |path| found.push(segments(&path))).ok()?
    } else {
        <T as serde::Deserialize>::deserialize(&mut de).ok()?
    };
    de.end().ok()?;
    Some((typed, found))
}

/// One step of a reported path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Segment {
    Key(String),
    Index(usize),
}

fn segments(path: &serde_ignored::Path<'_>) -> Vec<Segment> {
    use serde_ignored::Path;
    let mut out = match path {
        Path::Root => return Vec::new(),
        Path::Seq { parent, .. }
        | Path::Map { parent, .. }
        | Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => segments(parent),
    };
    match path {
        Path::Seq { index, .. } => out.push(Segment::Index(*index)),
        Path::Map { key, .. } => out.push(Segment::Key(key.clone())),
        _ => {}
    }
    out
}

/// `unknown field "spec.containers[0].foo"` for each ignored field, whatever
/// its value (null included, as upstream's strict decoder reports a key
/// before reading its value), in path order, a duplicate key once.
fn unknown(ignored: Vec<Vec<Segment>>, out: &mut Vec<String>) {
    let mut paths = ignored;
    paths.sort();
    paths.dedup();
    for path in paths {
        let mut rendered = String::new();
        for seg in path {
            match seg {
                Segment::Key(k) if rendered.is_empty() => rendered.push_str(&k),
                Segment::Key(k) => {
                    rendered.push('.');
                    rendered.push_str(&k);
                }
                Segment::Index(i) => rendered.push_str(&format!("[{i}]")),
            }
        }
        out.push(format!("unknown field \"{rendered}\""));
    }
}

/// One step of a field path, linked to its parent; rendered as
/// `spec.containers[0].name` only when something is reported, so the walks
/// allocate nothing for clean bodies.
#[derive(Clone, Copy)]
enum Step<'a> {
    Root,
    Key(&'a Step<'a>, &'a str),
    Index(&'a Step<'a>, usize),
}

impl Step<'_> {
    fn render(&self) -> String {
        match self {
            Step::Root => String::new(),
            Step::Key(parent, key) => match parent.render() {
                p if p.is_empty() => key.to_string(),
                p => format!("{p}.{key}"),
            },
            Step::Index(parent, i) => format!("{}[{i}]", parent.render()),
        }
    }
}

/// A key of the raw body, borrowed unless it had escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Key<'de>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v))
    }
}

/// Collects duplicate keys while walking raw JSON.
struct Duplicates<'a, 'p> {
    path: &'p Step<'p>,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Duplicates<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// Objects with more keys than this are checked with a hash set.
const LINEAR_KEYS: usize = 16;

impl<'de> Visitor<'de> for Duplicates<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Few keys: a vector scanned in place; many: a set.
        let mut seen: Vec<Key<'de>> = Vec::new();
        let mut set: Option<HashSet<String>> = None;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let duplicate = match &mut set {
                Some(set) => !set.insert(key.as_str().to_string()),
                None => seen.iter().any(|k| k.as_str() == key.as_str()),
            };
            {
                let here = Step::Key(self.path, key.as_str());
                if duplicate {
                    self.out
                        .push(format!("duplicate field \"{}\"", here.render()));
                }
                map.next_value_seed(Duplicates {
                    path: &here,
                    out: self.out,
                })?;
            }
            if set.is_none() && !duplicate {
                seen.push(key);
                if seen.len() > LINEAR_KEYS {
                    set = Some(seen.drain(..).map(|k| k.as_str().to_string()).collect());
                }
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            let here = Step::Index(self.path, i);
            let next = seq.next_element_seed(Duplicates {
                path: &here,
                out: self.out,
            })?;
            if next.is_none() {
                return Ok(());
            }
            i += 1;
        }
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

/// Duplicate fields of `raw`, and the `ignored` fields its type's decoder
/// skipped (see [`ignored`]), in upstream's wording.
pub fn findings(raw: &[u8], ignored: Option<Vec<Vec<Segment>>>) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(raw);
    let _ = Duplicates {
        path: &Step::Root,
        out: &mut out,
    }
    .deserialize(&mut de);
    if let Some(ignored) = ignored {
        unknown(ignored, &mut out);
    }
    out
}

/// Whether the JSON text `raw` repeats a key in one of its objects.
pub fn has_duplicates(raw: &[u8]) -> bool {
    !findings(raw, None).is_empty()
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
        let found = crate::resources::builtin().field_findings("", "Pod", raw, &obj);
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
    fn unknown_fields_are_reported_whatever_their_value_and_once() {
        let raw = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","x":null},
            "spec":{"foo":null,"bar":{},"baz":[],"foo":1,
            "containers":[{"name":"c","image":"i"},{"name":"d","image":"i","q":[1]}]}}"#;
        let obj: Value = serde_json::from_slice(raw).unwrap();
        assert_eq!(
            crate::resources::builtin().field_findings("", "Pod", raw, &obj),
            vec![
                "duplicate field \"spec.foo\"",
                "unknown field \"metadata.x\"",
                "unknown field \"spec.bar\"",
                "unknown field \"spec.baz\"",
                "unknown field \"spec.containers[1].q\"",
                "unknown field \"spec.foo\"",
            ]
        );
    }

    #[test]
    fn clean_objects_have_no_findings() {
        let raw = br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{}},
            "spec":{"replicas":1,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
            "spec":{"containers":[{"name":"c","image":"i","resources":{}}]}}}}"#;
        let obj: Value = serde_json::from_slice(raw).unwrap();
        assert!(crate::resources::builtin()
            .field_findings("apps", "Deployment", raw, &obj)
            .is_empty());
    }

    #[test]
    fn duplicates_in_large_objects_and_escaped_keys() {
        let mut labels: Vec<String> = (0..20).map(|i| format!("\"k{i}\":\"v\"")).collect();
        labels.push("\"k3\":\"again\"".into());
        labels.push("\"a\\u0062\":\"1\"".into());
        labels.push("\"ab\":\"2\"".into());
        let raw = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","labels":{{{}}}}},"data":{{"x":"1"}}}}"#,
            labels.join(",")
        );
        let obj: Value = serde_json::from_slice(raw.as_bytes()).unwrap();
        assert_eq!(
            crate::resources::builtin().field_findings("", "ConfigMap", raw.as_bytes(), &obj),
            vec![
                "duplicate field \"metadata.labels.k3\"",
                "duplicate field \"metadata.labels.ab\"",
            ]
        );
    }
}

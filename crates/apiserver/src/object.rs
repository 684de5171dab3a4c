//! Object metadata handling shared by every resource: names, generated
//! names, uid, timestamps, resourceVersion and storage keys. Objects are
//! kept as JSON values; typed defaulting and validation come per kind.

use serde_json::{json, Value};

use crate::catalog::{Kind, Resource};
use crate::status::{ApiError, ApiResult, Cause};

/// The storage key of one object.
pub fn key(resource: &Resource, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if resource.namespaced => format!("/registry/{}/{ns}/{name}", resource.storage),
        _ => format!("/registry/{}/{name}", resource.storage),
    }
}

/// The storage prefix of a list (one namespace, or all).
pub fn prefix(resource: &Resource, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) if resource.namespaced => format!("/registry/{}/{ns}/", resource.storage),
        _ => format!("/registry/{}/", resource.storage),
    }
}

/// Now, as upstream formats metav1.Time.
pub fn now() -> String {
    // RFC 3339 at whole seconds, `Z` for UTC (`2026-12-02T02:30:00Z`),
    // without parsing a format string on every write.
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Parses a request body as a JSON object, with the decoder's message.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("json: cannot decode request body: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal non-object into Go value of type struct",
        ));
    }
    Ok(value)
}

/// The body's `apiVersion` and `kind` under every spelling of their keys
/// Go's case-insensitive decoder takes.
pub fn type_fields(obj: &Value) -> impl Iterator<Item = (&String, &Value)> {
    obj.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.eq_ignore_ascii_case("kind") || k.eq_ignore_ascii_case("apiVersion"))
}

/// Checks that the body's kind and apiVersion match the URL.
pub fn check_type(resource: &Resource, obj: &mut Value) -> ApiResult<()> {
    let gv = resource.group_version();
    // Go's decoder reads apiVersion and kind whatever their keys' case
    // (`Kind`, `APIVERSION`): each spelling must name this kind too.
    for (key, value) in type_fields(obj) {
        let field = if key.eq_ignore_ascii_case("kind") {
            "kind"
        } else {
            "apiVersion"
        };
        match value {
            Value::Null => {}
            Value::String(v) if v.is_empty() || key == field => {}
            Value::String(v) if field == "kind" && v == resource.kind => {}
            Value::String(v) if field == "apiVersion" && *v == gv => {}
            Value::String(v) if field == "kind" => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({v}) does not match the expected kind ({})",
                    resource.kind
                )))
            }
            Value::String(v) => {
                return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({gv})"
            )))
            }
            other => {
                let got = skiff_api::patch::go_type(other);
                return Err(ApiError::bad_request(format!(
                    "couldn't get version/kind; json parse error: json: cannot unmarshal {got} into Go struct field .{field} of type string"
                )));
            }
        }
    }
    match obj.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => obj["apiVersion"] = json!(gv),
        Some(v) if v == gv => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({gv})"
            )))
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        None | Some("") => obj["kind"] = json!(resource.kind),
        Some(k) if k == resource.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                resource.kind
            )))
        }
    }
    Ok(())
}

/// The metadata object, created if absent.
///
/// `obj` must be an object (every decoded body is); anything else is
/// replaced by one.
pub fn meta(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let map = match obj {
        Value::Object(map) => map,
        _ => unreachable_object(),
    };
    let entry = map
        .entry("metadata")
        .and_modify(|m| {
            if !m.is_object() {
                *m = json!({});
            }
        })
        .or_insert_with(|| json!({}));
    match entry {
        Value::Object(m) => m,
        _ => unreachable_object(),
    }
}

#[expect(clippy::panic, reason = "callers made the value an object just before")]
fn unreachable_object() -> ! {
    panic!("value was just made an object")
}

/// Sets `obj[key]` when `obj` is an object (a null becomes one); does
/// nothing to any other value, where `obj[key] = v` would panic.
pub fn set(obj: &mut Value, key: &str, value: Value) {
    if obj.is_null() {
        *obj = json!({});
    }
    if let Some(map) = obj.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

pub fn name_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/name").and_then(Value::as_str)
}

/// Sets resourceVersion on an object read from the store.
pub fn with_revision(mut obj: Value, revision: i64) -> Value {
    meta(&mut obj).insert("resourceVersion".into(), json!(revision.to_string()));
    obj
}

/// Where a stored object's resourceVersion goes when it is served: just
/// inside its top-level `metadata` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevisionSlot {
    /// Just after the `{` of `metadata`.
    pub(crate) at: usize,
    /// Other metadata fields follow (the inserted field needs a comma).
    pub(crate) more: bool,
}

/// `obj` serialized exactly as `serde_json::to_vec` writes it, with the
/// slot of its resourceVersion (none without a metadata object, or with a
/// resourceVersion already in it), so that answering a write splices the
/// bytes it stored instead of parsing them again to find the metadata.
pub fn encode_stored(obj: &Value) -> serde_json::Result<(Vec<u8>, Option<RevisionSlot>)> {
    let Some(map) = obj.as_object() else {
        return Ok((serde_json::to_vec(obj)?, None));
    };
    let mut out = Vec::with_capacity(512);
    let mut slot = None;
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, key)?;
        out.push(b':');
        if key == "metadata" {
            if let Some(meta) = value
                .as_object()
                .filter(|m| !m.contains_key("resourceVersion"))
            {
                slot = Some(RevisionSlot {
                    at: out.len() + 1,
                    more: !meta.is_empty(),
                });
            }
        }
        serde_json::to_writer(&mut out, value)?;
    }
    out.push(b'}');
    Ok((out, slot))
}

/// `stored` (as [`encode_stored`] wrote it) with `"resourceVersion":"R"`
/// at `slot`.
pub fn with_revision_at(stored: &[u8], slot: RevisionSlot, revision: i64) -> Option<Vec<u8>> {
    splice_revision(Vec::new(), stored, slot, revision, 0)
}

/// `out` followed by `stored` with `"resourceVersion":"R"` at `slot`,
/// with room for exactly `more_room` bytes after it (a buffer the watch
/// cache keeps whole is not over-allocated).
pub fn splice_revision(
    mut out: Vec<u8>,
    stored: &[u8],
    slot: RevisionSlot,
    revision: i64,
    more_room: usize,
) -> Option<Vec<u8>> {
    let (head, tail) = (stored.get(..slot.at)?, stored.get(slot.at..)?);
    if head.last() != Some(&b'{') {
        return None;
    }
    let insert = format!("\"resourceVersion\":\"{revision}\"");
    out.reserve_exact(stored.len() + insert.len() + usize::from(slot.more) + more_room);
    out.extend_from_slice(head);
    out.extend_from_slice(insert.as_bytes());
    if slot.more {
        out.push(b',');
    }
    out.extend_from_slice(tail);
    Some(out)
}

/// Is `name` a DNS-1123 subdomain (the rule most kinds use for names)?
pub fn dns1123_subdomain_errors(name: &str) -> Vec<String> {
    skiff_api::validation::names::dns1123_subdomain(name)
}

/// Fills in server-set metadata of a new object and validates its name.
pub fn prepare_create(kind: &Kind, namespace: Option<&str>, obj: &mut Value) -> ApiResult<String> {
    let resource = kind.resource;
    check_type(resource, obj)?;
    // Before any of its fields is read or filled in.
    crate::decode::typed::check_metadata(obj, (resource.kind, resource.version))?;
    let kind_name = resource.kind;
    let meta = meta(obj);
    if resource.namespaced {
        let ns = namespace.unwrap_or("default");
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), json!(ns));
            }
            Some(given) if given == ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
        }
    } else {
        meta.remove("namespace");
    }
    let name = match meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        Some(n) => n.to_string(),
        None => match meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(base) => format!("{base}{}", random_suffix()),
            None => {
                return Err(ApiError::invalid(
                    resource.group,
                    kind_name,
                    "",
                    vec![Cause {
                        reason: "FieldValueRequired",
                        field: "metadata.name".into(),
                        message: "Required value: name or generateName is required".into(),
                    }],
                ))
            }
        },
    };
    let errors = kind.strategy().name_errors(&name);
    if !errors.is_empty() {
        return Err(ApiError::invalid(
            resource.group,
            kind_name,
            &name,
            errors
                .into_iter()
                .map(|e| Cause {
                    reason: "FieldValueInvalid",
                    field: "metadata.name".into(),
                    message: format!("Invalid value: \"{name}\": {e}"),
                })
                .collect(),
        ));
    }
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now()));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    if obj.get("spec").is_some() {
        meta_generation(obj, 1);
    }
    Ok(name)
}

fn meta_generation(obj: &mut Value, generation: i64) {
    meta(obj).insert("generation".into(), json!(generation));
}

/// Carries server-owned metadata from the stored object into an update,
/// and bumps generation when the spec changed.
pub fn prepare_update(old: &Value, new: &mut Value) {
    let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
    let meta = meta(new);
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    meta.remove("resourceVersion");
    let generation = old_meta.get("generation").and_then(Value::as_i64);
    if let Some(generation) = generation {
        let changed = old.get("spec") != new.get("spec");
        meta_generation(new, if changed { generation + 1 } else { generation });
    }
}

/// Five characters from upstream's generateName alphabet.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes[..5]
        .iter()
        .filter_map(|b| ALPHABET.get(*b as usize % ALPHABET.len()))
        .map(|b| *b as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_bytes_are_serde_json_s_and_take_the_revision_in_place() {
        let cases = [
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "d"},
                   "message": "quote \" and \u{1F600}", "count": 1}),
            json!({"kind": "X", "metadata": {}}),
            json!({"metadata": {"name": "m", "labels": {"a\"b": "c"}}, "spec": {"metadata": {"x": 1}}}),
            json!({"kind": "NoMetadata"}),
            json!({"kind": "Pinned", "metadata": {"name": "p", "resourceVersion": "3"}}),
        ];
        for (i, obj) in cases.iter().enumerate() {
            let (bytes, slot) = encode_stored(obj).unwrap();
            assert_eq!(bytes, serde_json::to_vec(obj).unwrap(), "{obj}");
            assert_eq!(slot.is_some(), i < 3, "{obj}");
            if let Some(slot) = slot {
                let served = with_revision_at(&bytes, slot, 42).unwrap();
                let served: Value = serde_json::from_slice(&served).unwrap();
                assert_eq!(served, with_revision(obj.clone(), 42));
            }
        }
    }

    #[test]
    fn now_is_rfc3339_at_whole_seconds_in_utc() {
        let t = now();
        assert_eq!(t.len(), "2026-12-02T02:30:00Z".len(), "{t}");
        assert!(
            chrono::NaiveDateTime::parse_from_str(&t, "%Y-%m-%dT%H:%M:%SZ").is_ok(),
            "{t}"
        );
    }

    #[test]
    fn names() {
        assert!(dns1123_subdomain_errors("web-1.example").is_empty());
        assert!(!dns1123_subdomain_errors("Web").is_empty());
        assert!(!dns1123_subdomain_errors("-web").is_empty());
        assert!(!dns1123_subdomain_errors("").is_empty());
    }

    #[test]
    fn generate_name() {
        let r = crate::resources::find_builtin("", "v1", "configmaps").unwrap();
        let mut obj = json!({"metadata": {"generateName": "cfg-"}});
        let name = prepare_create(
            &crate::resources::builtin().resolve(r),
            Some("default"),
            &mut obj,
        )
        .unwrap();
        assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");
        assert_eq!(obj["kind"], "ConfigMap");
        assert_eq!(obj["metadata"]["namespace"], "default");
    }
}

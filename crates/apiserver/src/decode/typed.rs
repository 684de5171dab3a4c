//! Typed decoding: every object is decoded into its kind's k8s-openapi
//! struct before it is stored, and stored as that struct encodes, so
//! whatever is in the store decodes as its type for every typed client
//! (the scheduler, the node agent, kubectl describe, the Python client).
//! A value of the wrong JSON type is a 400 in upstream's words
//! (`Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal
//! number into Go struct field ObjectMeta.metadata.labels of type string`),
//! and nothing is written. Unknown fields and nulls go, as they do when
//! upstream decodes into its Go structs and encodes them again.
//!
//! It also bounds how deep an object may nest ([`MAX_DEPTH`]): a free-form
//! field (managedFields' fieldsV1) could otherwise hold a value deeper than
//! the JSON reader accepts, and the object could not be read back.
//!
//! This module knows the Go names of types only through k8s-openapi's
//! schemas (`io.k8s.api.core.v1.PodSpec` is `v1.PodSpec` in Go); it does no
//! I/O and owns no policy beyond "decodes as its type".

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::status::{ApiError, ApiResult};

/// Deepest nesting of objects and arrays a stored object may have. The
/// JSON reader refuses 128 levels; lists and watch events add three.
pub const MAX_DEPTH: usize = 100;

pub(crate) fn round_trip<T>(obj: Value, served: (&str, &str)) -> ApiResult<Value>
where
    T: DeserializeOwned + Serialize + schemars::JsonSchema,
{
    let typed: T = decode_as(&obj).map_err(|detail| cannot_handle(served, &detail))?;
    serde_json::to_value(&typed).map_err(|e| ApiError::internal(e.to_string()))
}

/// Decodes `obj` as `T`; the error is what Go's decoder would say.
pub fn decode_as<T>(obj: &Value) -> Result<T, String>
where
    T: DeserializeOwned + schemars::JsonSchema,
{
    // The plain decoder first: tracking the path costs on every value,
    // and only a failure needs it.
    if let Ok(typed) = T::deserialize(obj) {
        return Ok(typed);
    }
    serde_path_to_error::deserialize(obj).map_err(|e| {
        let path: Vec<Step> = e.path().iter().filter_map(Step::from_segment).collect();
        go_message::<T>(obj, &path, &e.inner().to_string())
    })
}

/// The first value of the wrong JSON type in the request body `raw`, read
/// as `T` straight from the bytes, in Go's words; `None` if there is none
/// (or the bytes fail for another reason, which the tree's decode words).
/// A body with duplicate keys needs it: the tree keeps the last of them,
/// while Go's decoder reads every one and reports the first that does not
/// fit (`"labels":{"a":5},"labels":{"a":"b"}` is a 400 upstream).
pub fn raw_type_error<T>(raw: &[u8]) -> Option<String>
where
    T: DeserializeOwned + schemars::JsonSchema,
{
    let mut de = serde_json::Deserializer::from_slice(raw);
    let e = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => return None,
        Err(e) => e,
    };
    let message = e.inner().to_string();
    let found = message.strip_prefix("invalid type: ")?;
    let kind = [
        ("integer", "number"),
        ("floating point", "number"),
        ("string", "string"),
        ("boolean", "bool"),
        ("map", "object"),
        ("sequence", "array"),
    ]
    .iter()
    .find(|(serde, _)| found.starts_with(serde))
    .map(|(_, go)| *go)?;
    let path: Vec<Step> = e.path().iter().filter_map(Step::from_segment).collect();
    Some(go_message_of::<T>(kind, None, &path, &message))
}

/// `Pod in version "v1" cannot be handled as a Pod: <detail>`.
pub fn cannot_handle((kind, version): (&str, &str), detail: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}"
    ))
}

/// The part of every object that is an ObjectMeta: decoding an object as
/// this checks its metadata's types whatever the rest of it is.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WithMetadata {
    // Not an Option: the schema the error's wording is worked out from
    // then names ObjectMeta directly.
    #[allow(dead_code)] // read only to check its types
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
}

/// Refuses an object whose `metadata` does not decode as ObjectMeta (a
/// number where `name` belongs, a list for `labels`), in Go's words
/// (`json: cannot unmarshal number into Go struct field
/// ObjectMeta.metadata.name of type string`), before anything reads or
/// fills in its fields: every kind's metadata is typed, custom resources'
/// and kinds decoded as trees included.
pub fn check_metadata(obj: &Value, served: (&str, &str)) -> ApiResult<()> {
    match obj.get("metadata") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(_)) => decode_as::<WithMetadata>(obj)
            .map(drop)
            .map_err(|detail| cannot_handle(served, &detail)),
        Some(other) => Err(cannot_handle(
            served,
            &format!(
                "json: cannot unmarshal {} into Go struct field {}.metadata of type v1.ObjectMeta",
                skiff_api::patch::go_type(other),
                served.0
            ),
        )),
    }
}

/// Decodes the body of a subresource request (a Binding, an Eviction, a
/// Scale) as its type `T`, metadata included, whatever apiVersion it
/// names (the caller checks that): the handler then reads fields of the
/// right types only, as upstream's, which decodes every body typed.
pub fn decode_body<T>(obj: &Value, served: (&str, &str)) -> ApiResult<T>
where
    T: DeserializeOwned + schemars::JsonSchema + k8s_openapi::Resource,
{
    check_metadata(obj, served)?;
    let mut typed = obj.clone();
    if let Some(fields) = typed.as_object_mut() {
        fields.insert("apiVersion".into(), Value::from(T::API_VERSION));
        fields.insert("kind".into(), Value::from(T::KIND));
    }
    decode_as::<T>(&typed).map_err(|detail| cannot_handle(served, &detail))
}

/// Refuses objects nested deeper than [`MAX_DEPTH`].
pub fn check_depth(obj: &Value, served: (&str, &str)) -> ApiResult<()> {
    if depth_exceeds(obj, MAX_DEPTH) {
        return Err(cannot_handle(
            served,
            &format!("json: exceeded max depth of {MAX_DEPTH} nested objects and arrays"),
        ));
    }
    Ok(())
}

/// Whether `v` nests more than `limit` levels (iteratively: the input may
/// be deep).
pub fn depth_exceeds(v: &Value, limit: usize) -> bool {
    // Only arrays and objects are stacked: scalars add no depth, and
    // every write passes through here.
    fn nested(v: &Value) -> bool {
        matches!(v, Value::Array(_) | Value::Object(_))
    }
    let mut stack: Vec<(&Value, usize)> = Vec::new();
    if nested(v) {
        stack.push((v, 1));
    }
    while let Some((v, d)) = stack.pop() {
        if d > limit {
            return true;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().filter(|c| nested(c)).map(|c| (c, d + 1))),
            Value::Object(o) => stack.extend(o.values().filter(|c| nested(c)).map(|c| (c, d + 1))),
            _ => {}
        }
    }
    false
}

/// One step of the path to the value that did not decode.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index,
}

impl Step {
    fn from_segment(s: &serde_path_to_error::Segment) -> Option<Step> {
        use serde_path_to_error::Segment;
        match s {
            Segment::Map { key } => Some(Step::Key(key.clone())),
            Segment::Seq { .. } => Some(Step::Index),
            _ => None,
        }
    }
}

/// What the Go decoder would say about the value at `path`, worked out
/// from `T`'s schema: `json: cannot unmarshal number into Go struct field
/// ObjectMeta.metadata.labels of type string`.
fn go_message<T: schemars::JsonSchema>(obj: &Value, path: &[Step], serde_msg: &str) -> String {
    let value = first_match(obj, path);
    let kind = value.map(skiff_api::patch::go_type).unwrap_or("value");
    go_message_of::<T>(kind, value, path, serde_msg)
}

/// [`go_message`] for a value of Go's JSON `kind` (`number`, `string`…),
/// `value` itself when it is at hand.
fn go_message_of<T: schemars::JsonSchema>(
    kind: &str,
    value: Option<&Value>,
    path: &[Step],
    serde_msg: &str,
) -> String {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let root = schema.as_value();
    let defs = root.get("$defs").and_then(Value::as_object);
    let found = Walk::new(root, defs).follow(&T::schema_name(), path);
    match found {
        Some(f) if f.go_type == "v1.Time" || f.go_type == "v1.MicroTime" => {
            let shown = value.and_then(Value::as_str).unwrap_or_default();
            let layout = if f.go_type == "v1.Time" {
                "2006-01-02T15:04:05Z07:00"
            } else {
                "2006-01-02T15:04:05.000000Z07:00"
            };
            if kind == "string" {
                format!("parsing time \"{shown}\" as \"{layout}\": cannot parse \"{shown}\" as \"2006\"")
            } else {
                format!(
                    "json: cannot unmarshal {kind} into Go struct field {}.{} of type string",
                    f.go_struct, f.go_field
                )
            }
        }
        Some(f) if f.go_field.is_empty() => {
            format!(
                "json: cannot unmarshal {kind} into Go value of type {}",
                f.go_type
            )
        }
        Some(f) => format!(
            "json: cannot unmarshal {kind} into Go struct field {}.{} of type {}",
            f.go_struct, f.go_field, f.go_type
        ),
        None => format!("json: {serde_msg}"),
    }
}

/// The first value reachable along `path`, trying every array element
/// (serde_path_to_error keeps no array indices).
fn first_match<'a>(obj: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let Some((step, rest)) = path.split_first() else {
        return Some(obj);
    };
    match step {
        Step::Key(k) => first_match(obj.get(k)?, rest),
        Step::Index => obj.as_array()?.iter().find_map(|e| first_match(e, rest)),
    }
}

/// Where a path ends in a schema, in Go's terms.
struct Found {
    /// The struct that holds the field (`ObjectMeta`).
    go_struct: String,
    /// Field names from the root, dotted, without map keys or indices
    /// (`metadata.labels`), as Go's decoder reports them.
    go_field: String,
    /// The Go type of the value (`string`, `v1.PodSpec`, `[]v1.Container`).
    go_type: String,
}

/// A walk through a schema and its definitions.
struct Walk<'a> {
    root: &'a Value,
    defs: Option<&'a Map<String, Value>>,
}

impl<'a> Walk<'a> {
    fn new(root: &'a Value, defs: Option<&'a Map<String, Value>>) -> Self {
        Walk { root, defs }
    }

    /// The schema a `$ref` names, with the definition's name.
    fn resolve(&self, s: &'a Value) -> (&'a Value, Option<&'a str>) {
        let mut cur = s;
        let mut name = None;
        for _ in 0..8 {
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let n = r.rsplit('/').next().unwrap_or(r);
            match self.defs.and_then(|d| d.get(n)) {
                Some(next) => {
                    name = Some(n);
                    cur = next;
                }
                None => break,
            }
        }
        (cur, name)
    }

    fn follow(&self, root_name: &'a str, path: &[Step]) -> Option<Found> {
        let (mut cur, name) = self.resolve(self.root);
        let mut name = name.or(Some(root_name));
        let mut go_struct = short_name(root_name);
        let mut fields: Vec<&str> = Vec::new();
        for step in path {
            let next = match step {
                Step::Key(k) => {
                    if let Some(p) = cur.get("properties").and_then(|p| p.get(k.as_str())) {
                        go_struct = short_name(name.unwrap_or(""));
                        fields.push(k);
                        p
                    } else {
                        cur.get("additionalProperties").filter(|a| a.is_object())?
                    }
                }
                Step::Index => cur.get("items")?,
            };
            (cur, name) = self.resolve(next);
        }
        Some(Found {
            go_struct,
            go_field: fields.join("."),
            go_type: self.go_type(cur, name),
        })
    }

    fn go_type(&self, schema: &Value, name: Option<&str>) -> String {
        if let Some(n) = name {
            return package_name(n);
        }
        let ty = schema.get("type").and_then(|t| match t {
            Value::String(s) => Some(s.as_str()),
            Value::Array(a) => a.iter().filter_map(Value::as_str).find(|s| *s != "null"),
            _ => None,
        });
        match ty {
            Some("string") if schema.get("format").and_then(Value::as_str) == Some("byte") => {
                "[]uint8".into()
            }
            Some("string") => "string".into(),
            Some("boolean") => "bool".into(),
            Some("integer") => match schema.get("format").and_then(Value::as_str) {
                Some("int32") => "int32".into(),
                _ => "int64".into(),
            },
            Some("number") => "float64".into(),
            Some("array") => match schema.get("items") {
                Some(items) => {
                    let (s, n) = self.resolve(items);
                    format!("[]{}", self.go_type(s, n))
                }
                None => "[]interface {}".into(),
            },
            Some("object") => match schema.get("additionalProperties").filter(|a| a.is_object()) {
                Some(ap) => {
                    let (s, n) = self.resolve(ap);
                    format!("map[string]{}", self.go_type(s, n))
                }
                None => "map[string]interface {}".into(),
            },
            _ => "interface {}".into(),
        }
    }
}

/// `io.k8s.api.core.v1.PodSpec` → `PodSpec`.
fn short_name(n: &str) -> String {
    n.rsplit('.').next().unwrap_or(n).to_string()
}

/// `io.k8s.api.core.v1.PodSpec` → `v1.PodSpec`,
/// `io.k8s.apimachinery.pkg.api.resource.Quantity` → `resource.Quantity`.
fn package_name(n: &str) -> String {
    let mut parts = n.rsplit('.');
    match (parts.next(), parts.next()) {
        (Some(ty), Some(pkg)) => format!("{pkg}.{ty}"),
        (Some(ty), None) => ty.to_string(),
        _ => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(group: &str, kind: &str, obj: Value) -> String {
        crate::resources::builtin()
            .normalize(group, kind, (kind, "v1"), obj)
            .expect_err("must not decode")
            .message
    }

    #[test]
    fn wrong_types_get_go_wording() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"v": 1}}, "spec": {"containers": []}});
        assert_eq!(
            err("", "Pod", pod),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
        );
        let pod = json!({"metadata": {"name": "p"}, "spec": "x"});
        assert_eq!(
            err("", "Pod", pod),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec"
        );
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "i"},
            {"name": "b", "image": "i", "ports": [{"containerPort": "80"}]}]}});
        assert_eq!(
            err("", "Pod", pod),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
        );
        let cm = json!({"metadata": {"name": "c"}, "data": []});
        assert_eq!(
            err("", "ConfigMap", cm),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string"
        );
        let ev = json!({"metadata": {"name": "e"}, "eventTime": "yesterday"});
        assert_eq!(
            err("events.k8s.io", "Event", ev),
            "Event in version \"v1\" cannot be handled as a Event: parsing time \"yesterday\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"yesterday\" as \"2006\""
        );
    }

    #[test]
    fn unknown_fields_and_nulls_go() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": null, "bogus": 1}, "data": {"a": "b"}, "x": null});
        let out = crate::resources::builtin()
            .normalize("", "ConfigMap", ("ConfigMap", "v1"), cm)
            .unwrap();
        assert_eq!(
            out,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn depth_is_bounded() {
        let mut deep = json!("leaf");
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        assert!(depth_exceeds(&json!({ "a": deep.clone() }), MAX_DEPTH));
        assert!(!depth_exceeds(&deep, MAX_DEPTH));
        let cm = json!({"metadata": {"name": "c", "managedFields": [{"fieldsV1": deep}]}});
        assert!(err("", "ConfigMap", cm).contains("exceeded max depth"));
    }
}

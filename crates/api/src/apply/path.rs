//! Path elements of field paths, after structured-merge-diff's
//! `fieldpath.PathElement`: a map field (`.name`), an element of a keyed
//! list (`[name="c"]`), an element of a set (`[=value]`) or a list index
//! (`[3]`). Elements order as upstream (fields, then keys, then values, then
//! indexes), which fixes the order of `FieldsV1` keys and of conflicts.
//!
//! Also the `FieldsV1` spelling of one element (`f:name`, `k:{"name":"c"}`,
//! `v:"x"`, `i:3`; upstream `serialize-pe.go`).

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathElement {
    /// A field of a map or struct: `.name`.
    Field(String),
    /// The element of an associative list with these key fields, sorted by
    /// name: `[containerPort=80,protocol="TCP"]`.
    Key(Vec<(String, Value)>),
    /// The element of a set (a list of primitives merged as a set):
    /// `[="example.com/finalizer"]`.
    Value(Value),
    /// A list index (never produced here; read from `FieldsV1` only).
    Index(usize),
}

/// A field path, from the object's root.
pub type Path = Vec<PathElement>;

/// The `.spec.containers[name="c"].image` form of a path (upstream
/// `fieldpath.Path.String`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={}", go_string(value)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(value) => write!(f, "[={}]", go_string(value)),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// Upstream `value.ToString`: strings quoted, maps as `k=v` pairs.
fn go_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", go_string(v)))
            .collect(),
        other => other.to_string(),
    }
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The `FieldsV1` key of this element.
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let map: Map<String, Value> = fields.iter().cloned().collect();
                format!("k:{}", Value::Object(map))
            }
            PathElement::Value(value) => format!("v:{value}"),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// Parses a `FieldsV1` key. `Ok(None)` for an unknown element type,
    /// which upstream skips.
    pub fn from_fields_v1_key(key: &str) -> Result<Option<PathElement>, String> {
        let mut chars = key.chars();
        let (Some(kind), Some(sep)) = (chars.next(), chars.next()) else {
            return Err("key must be 2 characters long:".to_owned());
        };
        if sep != ':' {
            return Err(format!("missing colon: {key}"));
        }
        let rest = chars.as_str();
        let element = match kind {
            'f' => PathElement::Field(rest.to_owned()),
            'v' => PathElement::Value(serde_json::from_str(rest).map_err(|e| e.to_string())?),
            'k' => match serde_json::from_str(rest).map_err(|e| e.to_string())? {
                Value::Object(map) => PathElement::Key(map.into_iter().collect()),
                _ => return Err(format!("key {key:?} is not a JSON object")),
            },
            'i' => PathElement::Index(rest.parse().map_err(|_| format!("invalid index: {key}"))?),
            _ => return Ok(None),
        };
        Ok(Some(element))
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b) {
                    let ord = an.cmp(bn).then_with(|| compare_values(av, bv));
                    if ord != Ordering::Equal {
                        return ord;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Upstream `value.Compare`: numbers, then strings, booleans, lists, maps
/// and null. Values upstream calls equal but JSON spells differently (`1`
/// and `1.0`) are told apart by their text, to stay consistent with `Eq`.
pub(crate) fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let numeric = match (x.as_i64(), y.as_i64()) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => {
                    let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                    x.partial_cmp(&y).unwrap_or(Ordering::Equal)
                }
            };
            numeric.then_with(|| x.to_string().cmp(&y.to_string()))
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(x, y)| compare_values(x, y))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .zip(y)
            .map(|((xk, xv), (yk, yv))| xk.cmp(yk).then_with(|| compare_values(xv, yv)))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => rank(a).cmp(&rank(b)),
    }
}

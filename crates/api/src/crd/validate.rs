//! Validation of custom objects against a CRD schema, as upstream's
//! apiextensions-apiserver does it with kube-openapi's SchemaValidator
//! (validators in its order: type, allOf/anyOf/oneOf/not, string, format,
//! number, array, enum, object) and turns the result into field errors
//! (`kubeOpenAPIResultToFieldErrors`); then the embedded resources'
//! apiVersion/kind/metadata and the x-kubernetes-list-type set/map
//! uniqueness checks.

use serde_json::{Map, Value};

use super::errors::{self as fe, go_float, quote};
use super::formats;
use super::listtype;
use super::structural::{Additional, Node};
use crate::validation::FieldError;

const IN: &str = "body";

/// One kube-openapi finding.
#[derive(Debug, Clone)]
enum Finding {
    /// An `errors.Validation`: its code, name (path), bad value and message.
    Validation {
        code: Code,
        name: String,
        value: Value,
        valid: i64,
        values: Vec<Value>,
        message: String,
        node: Option<Vec<Seg>>,
    },
    /// A plain `errors.New` (the anyOf/allOf/oneOf/not summaries).
    Composite(String, Option<Vec<Seg>>),
}

/// One step of the path to the schema node a finding came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

impl Finding {
    fn node_mut(&mut self) -> &mut Option<Vec<Seg>> {
        match self {
            Finding::Validation { node, .. } | Finding::Composite(_, node) => node,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    InvalidType,
    Required,
    TooLong,
    Enum,
    MaxItems,
    TooManyProperties,
    Other,
}

#[derive(Debug, Default)]
struct Res {
    errors: Vec<Finding>,
    matches: u32,
}

impl Res {
    fn merge(&mut self, other: Res) {
        self.errors.extend(other.errors);
        self.matches += other.matches;
    }
    fn add(&mut self, f: Finding) {
        self.errors.push(f);
    }
    fn valid(&self) -> bool {
        self.errors.is_empty()
    }
}

fn finding(code: Code, name: &str, value: Value, message: String) -> Finding {
    Finding::Validation {
        code,
        name: name.to_string(),
        value,
        valid: -1,
        values: Vec::new(),
        message,
        node: None,
    }
}

fn invalid_type(name: &str, type_name: &str, value: &str) -> Finding {
    finding(
        Code::InvalidType,
        name,
        Value::String(value.to_string()),
        format!(
            "{name} in {IN} must be of type {type_name}: {}",
            quote(value)
        ),
    )
}

/// Validates `obj` against the raw schema, then embedded resources and
/// list types against the skeleton.
pub(crate) fn validate(raw: &Value, root: &Node, obj: &Value) -> Vec<FieldError> {
    let mut out = validate_at(raw, obj, None);
    out.extend(listtype::embedded_resources(root, obj));
    out.extend(listtype::list_types(root, obj));
    out
}

/// Validation on update with upstream's ratcheting (CRDValidationRatcheting,
/// on by default in 1.33): schema findings at nodes whose value equals
/// the correlated old value are dropped; list-type findings count only
/// when the old object had none.
pub(crate) fn validate_update(
    raw: &Value,
    root: &Node,
    new: &Value,
    old: &Value,
) -> Vec<FieldError> {
    let mut out: Vec<FieldError> = schema(raw, new, "", &[])
        .errors
        .into_iter()
        .filter(|f| !ratchets(f, root, new, old))
        .map(|f| to_field_error(f, None))
        .collect();
    out.extend(listtype::embedded_resources(root, new));
    if listtype::list_types(root, old).is_empty() {
        out.extend(listtype::list_types(root, new));
    }
    out
}

/// Whether the finding's node, or a node above it, is unchanged from its
/// correlated old value (objects correlate by key, list-type map items by
/// their keys, set items by value; atomic lists do not correlate).
fn ratchets(f: &Finding, root: &Node, new: &Value, old: &Value) -> bool {
    let node = match f {
        Finding::Validation { node, .. } | Finding::Composite(_, node) => node,
    };
    let Some(segs) = node else { return false };
    let (mut n, mut o, mut s) = (new, old, Some(root));
    if n == o {
        return true;
    }
    for seg in segs {
        let next = match seg {
            Seg::Key(k) => {
                let sub = s.and_then(|s| {
                    s.properties.get(k).or(match &s.additional {
                        Some(Additional::Schema(a)) => Some(a.as_ref()),
                        _ => None,
                    })
                });
                n.get(k).zip(o.get(k)).map(|(a, b)| (a, b, sub))
            }
            Seg::Index(i) => {
                let Some(item) = n.get(*i) else { return false };
                let olds = o.as_array().map_or(&[][..], Vec::as_slice);
                let found = match s.and_then(|s| s.list_type.as_deref()) {
                    Some("map") => {
                        let keys = s.map_or(&[][..], |s| s.list_map_keys.as_slice());
                        olds.iter()
                            .find(|x| keys.iter().all(|k| x.get(k) == item.get(k)))
                    }
                    Some("set") => olds.iter().find(|x| *x == item),
                    _ => None,
                };
                found.map(|b| (item, b, s.and_then(|s| s.items.as_deref())))
            }
        };
        let Some((a, b, sub)) = next else {
            return false;
        };
        (n, o, s) = (a, b, sub);
        if n == o {
            return true;
        }
    }
    false
}

/// The schema validator alone on `value`, its findings as field errors
/// under `base` (None: upstream's nil path, printed `<nil>` when empty).
pub(crate) fn validate_at(raw: &Value, value: &Value, base: Option<&str>) -> Vec<FieldError> {
    schema(raw, value, "", &[])
        .errors
        .into_iter()
        .map(|f| to_field_error(f, base))
        .collect()
}

/// `kubeOpenAPIResultToFieldErrors`.
fn to_field_error(f: Finding, base: Option<&str>) -> FieldError {
    let root = base.unwrap_or("<nil>");
    match f {
        Finding::Composite(msg, _) => fe::invalid_str(root, "", &msg),
        Finding::Validation {
            code,
            name,
            value,
            valid,
            values,
            message,
            ..
        } => {
            let path = if name.is_empty() || name == "." {
                root.to_string()
            } else {
                let name = name.strip_prefix('.').unwrap_or(&name);
                match base {
                    Some(b) => fe::child(b, name),
                    None => name.to_string(),
                }
            };
            match code {
                Code::Required => fe::required(&path, ""),
                Code::Enum => {
                    let supported: Vec<String> = values
                        .iter()
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    fe::not_supported(&path, &value, &supported)
                }
                Code::TooLong => fe::too_long(&path, valid),
                Code::MaxItems | Code::TooManyProperties => {
                    fe::too_many(&path, value.as_i64().unwrap_or(-1), valid)
                }
                Code::InvalidType => fe::type_invalid(&path, &value, &message),
                Code::Other => {
                    let v = if value.is_null() {
                        Value::String(String::new())
                    } else {
                        value
                    };
                    fe::invalid(&path, &v, &message)
                }
            }
        }
    }
}

fn types_of(m: &Map<String, Value>) -> Vec<&str> {
    if m.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        return vec!["integer", "string"];
    }
    match m.get("type").and_then(Value::as_str) {
        Some(t) if !t.is_empty() => vec![t],
        _ => Vec::new(),
    }
}

/// kube-openapi's type name of a JSON value.
fn sch_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A SchemaValidator run of one schema node on one value.
fn schema(s: &Value, data: &Value, path: &str, segs: &[Seg]) -> Res {
    let mut res = schema_here(s, data, path, segs);
    for f in &mut res.errors {
        let node = f.node_mut();
        if node.is_none() {
            *node = Some(segs.to_vec());
        }
    }
    res
}

fn child_segs(segs: &[Seg], seg: Seg) -> Vec<Seg> {
    let mut v = segs.to_vec();
    v.push(seg);
    v
}

fn schema_here(s: &Value, data: &Value, path: &str, segs: &[Seg]) -> Res {
    let mut res = Res::default();
    let Some(m) = s.as_object() else {
        return res;
    };
    let types = types_of(m);
    let format = formats::supported(m.get("format").and_then(Value::as_str).unwrap_or(""));
    if data.is_null() {
        if !types.is_empty() {
            res.merge(type_check(m, &types, data, path));
        }
        res.merge(enum_check(m, data, path));
        return res;
    }
    if !types.is_empty() || !format.is_empty() {
        res.merge(type_check(m, &types, data, path));
        res.matches += 1;
    }
    let has_props = ["allOf", "anyOf", "oneOf", "not"]
        .iter()
        .any(|k| m.contains_key(*k));
    if has_props {
        res.merge(composition(m, data, path, segs));
        res.matches += 1;
    }
    if let Value::String(text) = data {
        res.merge(string_check(m, text, path));
        res.matches += 1;
        if !format.is_empty() {
            if !formats::valid(format, text) {
                res.add(finding(
                    Code::InvalidType,
                    path,
                    data.clone(),
                    format!("{path} in {IN} must be of type {format}: {}", quote(text)),
                ));
            }
            res.matches += 1;
        }
    }
    if let Value::Number(_) = data {
        res.merge(number_check(m, &types, data, path));
        res.matches += 1;
    }
    if let Value::Array(items) = data {
        res.merge(array_check(m, items, path, segs));
        res.matches += 1;
    }
    res.merge(enum_check(m, data, path));
    res.matches += 1;
    if let Value::Object(obj) = data {
        res.merge(object_check(m, obj, path, segs));
        res.matches += 1;
    }
    res.matches += 1;
    res
}

fn type_check(m: &Map<String, Value>, types: &[&str], data: &Value, path: &str) -> Res {
    let mut res = Res::default();
    let nullable = m.get("nullable").and_then(Value::as_bool) == Some(true);
    if data.is_null() {
        if !types.is_empty() && !types.contains(&"null") && !nullable {
            res.add(invalid_type(path, &types.join(","), "null"));
        } else {
            res.matches += 1;
        }
        return res;
    }
    let t = sch_type(data);
    let is_float_int = t == "number"
        && data
            .as_f64()
            .is_some_and(|f| f == f.trunc() && f.abs() < 9.007_199_254_740_992e15)
        && types.contains(&"integer");
    let is_int_float = t == "integer" && types.contains(&"number");
    let format = formats::supported(m.get("format").and_then(Value::as_str).unwrap_or(""));
    // kube-openapi's format of the value's Go type
    let value_format = match t {
        "integer" => "int64",
        "number" => "float64",
        _ => "",
    };
    if t != "string"
        && t != "array"
        && !format.is_empty()
        && !(types.contains(&t) || value_format == format || is_float_int || is_int_float)
    {
        res.add(invalid_type(path, format, value_format));
        return res;
    }
    let numeric = types.contains(&"number") || types.contains(&"integer");
    if !numeric && !format.is_empty() && (t == "string" || t == "array") {
        res.matches += 1;
        return res;
    }
    if types.contains(&t) || is_float_int || is_int_float {
        res.matches += 1;
        return res;
    }
    res.add(invalid_type(path, &types.join(","), t));
    res
}

fn int_of(m: &Map<String, Value>, k: &str) -> Option<i64> {
    m.get(k)
        .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

fn string_check(m: &Map<String, Value>, text: &str, path: &str) -> Res {
    let mut res = Res::default();
    let len = i64::try_from(text.chars().count()).unwrap_or(i64::MAX);
    let data = Value::String(text.to_string());
    if let Some(max) = int_of(m, "maxLength") {
        if len > max {
            res.add(Finding::Validation {
                code: Code::TooLong,
                name: path.to_string(),
                value: data,
                valid: max,
                values: Vec::new(),
                message: format!("{path} in {IN} should be at most {max} chars long"),
                node: None,
            });
            return res;
        }
    }
    if let Some(min) = int_of(m, "minLength") {
        if len < min {
            res.add(finding(
                Code::Other,
                path,
                data,
                format!("{path} in {IN} should be at least {min} chars long"),
            ));
            return res;
        }
    }
    if let Some(pattern) = m.get("pattern").and_then(Value::as_str) {
        if !pattern.is_empty() {
            let message = match super::regex::cached(pattern) {
                Ok(re) if re.is_match(text) => None,
                Ok(_) => Some(format!("{path} in {IN} should match '{pattern}'")),
                Err(e) => Some(format!(
                    "{path} in {IN} should match '{pattern}, but pattern is invalid: {e}'"
                )),
            };
            if let Some(message) = message {
                res.add(finding(Code::Other, path, data, message));
            }
        }
    }
    res
}

/// A JSON integer as kube-openapi holds it (int64, or uint64 above).
fn int_data(data: &Value) -> Option<i128> {
    data.as_i64()
        .map(i128::from)
        .or_else(|| data.as_u64().map(i128::from))
}

fn number_check(m: &Map<String, Value>, types: &[&str], data: &Value, path: &str) -> Res {
    let mut res = Res::default();
    let Some(x) = data.as_f64() else { return res };
    let excl = |k: &str| m.get(k).and_then(Value::as_bool) == Some(true);
    // kube-openapi compares integers natively, with the bound cut to an
    // int64 (IsValueValidAgainstRange sends an integer schema's
    // fractional bound the float way); the message prints the bound so.
    let integer_type = types.len() == 1 && types.first() == Some(&"integer");
    let native = |b: f64| -> Option<(i128, i128)> {
        let d = int_data(data)?;
        if integer_type && (b.fract() != 0.0 || b.abs() >= 9.2e18) {
            return None;
        }
        Some((d, b.trunc() as i128))
    };
    if let Some(factor) = m.get("multipleOf").and_then(Value::as_f64) {
        let failed = match native(factor).filter(|(_, f)| *f != 0) {
            Some((d, f)) => (d % f != 0).then(|| f.to_string()),
            None if factor <= 0.0 => {
                res.add(finding(
                    Code::Other,
                    path,
                    Value::from(factor),
                    format!(
                        "factor MultipleOf declared for {path} must be positive: {}",
                        go_float(factor)
                    ),
                ));
                None
            }
            None => {
                let q = if factor < 1.0 {
                    1.0 / factor * x
                } else {
                    x / factor
                };
                ((q - q.round()).abs() > 1e-9 * q.abs().max(1.0)).then(|| go_float(factor))
            }
        };
        if let Some(shown) = failed {
            res.add(finding(
                Code::Other,
                path,
                data.clone(),
                format!("{path} in {IN} should be a multiple of {shown}"),
            ));
        }
    }
    for (key, excl_key, plain, strict, below) in [
        (
            "minimum",
            "exclusiveMinimum",
            "greater than or equal to",
            "greater than",
            true,
        ),
        (
            "maximum",
            "exclusiveMaximum",
            "less than or equal to",
            "less than",
            false,
        ),
    ] {
        let Some(bound) = m.get(key).and_then(Value::as_f64) else {
            continue;
        };
        let exclusive = excl(excl_key);
        let (out_of_range, shown) = match native(bound) {
            Some((d, b)) => {
                let bad = if below {
                    d < b || (exclusive && d == b)
                } else {
                    d > b || (exclusive && d == b)
                };
                (bad, b.to_string())
            }
            None => {
                let bad = if below {
                    x < bound || (exclusive && x == bound)
                } else {
                    x > bound || (exclusive && x == bound)
                };
                (bad, go_float(bound))
            }
        };
        if out_of_range {
            let word = if exclusive { strict } else { plain };
            res.add(finding(
                Code::Other,
                path,
                data.clone(),
                format!("{path} in {IN} should be {word} {shown}"),
            ));
        }
    }
    res
}

fn array_check(m: &Map<String, Value>, items: &[Value], path: &str, segs: &[Seg]) -> Res {
    let mut res = Res::default();
    if let Some(item) = m.get("items").filter(|i| i.is_object()) {
        for (i, v) in items.iter().enumerate() {
            res.merge(schema(
                item,
                v,
                &format!("{path}[{i}]"),
                &child_segs(segs, Seg::Index(i)),
            ));
        }
    }
    let size = i64::try_from(items.len()).unwrap_or(i64::MAX);
    if let Some(min) = int_of(m, "minItems") {
        if size < min {
            res.add(finding(
                Code::Other,
                path,
                Value::from(size),
                format!("{path} in {IN} should have at least {min} items"),
            ));
        }
    }
    if let Some(max) = int_of(m, "maxItems") {
        if size > max {
            res.add(Finding::Validation {
                code: Code::MaxItems,
                name: path.to_string(),
                value: Value::from(size),
                valid: max,
                values: Vec::new(),
                message: format!("{path} in {IN} should have at most {max} items"),
                node: None,
            });
        }
    }
    if m.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        let dup = items
            .iter()
            .enumerate()
            .any(|(i, a)| items.iter().take(i).any(|b| json_equal(a, b)));
        if dup {
            res.add(finding(
                Code::Other,
                path,
                Value::Null,
                format!("{path} in {IN} shouldn't contain duplicates"),
            ));
        }
    }
    res.matches += 1;
    res
}

/// Deep equality with numbers compared by value (Go's int64 vs float64
/// distinction aside).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64() && x.is_f64() == y.is_f64())
        }
        _ => a == b,
    }
}

fn enum_check(m: &Map<String, Value>, data: &Value, path: &str) -> Res {
    let mut res = Res::default();
    let Some(values) = m.get("enum").and_then(Value::as_array) else {
        return res;
    };
    if values.is_empty() {
        return res;
    }
    // Upstream never matches a null value (reflect.ValueOf(nil) is invalid).
    if !data.is_null() && values.iter().any(|e| enum_equal(data, e)) {
        return res;
    }
    res.add(Finding::Validation {
        code: Code::Enum,
        name: path.to_string(),
        value: data.clone(),
        valid: -1,
        values: values.clone(),
        message: format!("{path} in {IN} should be one of {values:?}"),
        node: None,
    });
    res
}

/// reflect's ConvertibleTo + DeepEqual: numbers compare by value, other
/// kinds by equality.
fn enum_equal(data: &Value, e: &Value) -> bool {
    match (data, e) {
        (Value::Number(a), Value::Number(b)) => {
            if b.is_f64() {
                a.as_f64() == b.as_f64()
            } else {
                // An int64 enum value: the float converts by truncation.
                match (a.as_i64(), b.as_i64()) {
                    (Some(x), Some(y)) => x == y,
                    _ => a.as_f64().map(|f| f.trunc()) == b.as_f64(),
                }
            }
        }
        _ => data == e,
    }
}

fn object_check(m: &Map<String, Value>, obj: &Map<String, Value>, path: &str, segs: &[Seg]) -> Res {
    let mut res = Res::default();
    let n = i64::try_from(obj.len()).unwrap_or(i64::MAX);
    if let Some(min) = int_of(m, "minProperties") {
        if n < min {
            res.add(finding(
                Code::Other,
                path,
                Value::from(n),
                format!("{path} in {IN} should have at least {min} properties"),
            ));
        }
    }
    if let Some(max) = int_of(m, "maxProperties") {
        if n > max {
            res.add(Finding::Validation {
                code: Code::TooManyProperties,
                name: path.to_string(),
                value: Value::from(n),
                valid: max,
                values: Vec::new(),
                message: format!("{path} in {IN} should have at most {max} properties"),
                node: None,
            });
        }
    }
    let props = m.get("properties").and_then(Value::as_object);
    let declared = |k: &str| props.is_some_and(|p| p.contains_key(k));
    match m.get("additionalProperties") {
        Some(Value::Bool(false)) => {
            for k in obj.keys() {
                if !declared(k) {
                    res.add(finding(
                        Code::Other,
                        path,
                        Value::String(k.clone()),
                        format!("{path}.{k} in {IN} is a forbidden property"),
                    ));
                }
            }
        }
        Some(ap @ Value::Object(_)) => {
            for (k, v) in obj {
                if !declared(k) {
                    res.merge(schema(
                        ap,
                        v,
                        &format!("{path}.{k}"),
                        &child_segs(segs, Seg::Key(k.clone())),
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(props) = props {
        for (k, ps) in props {
            if let Some(v) = obj.get(k) {
                let name = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                res.merge(schema(ps, v, &name, &child_segs(segs, Seg::Key(k.clone()))));
            }
        }
    }
    if let Some(required) = m.get("required").and_then(Value::as_array) {
        for k in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(k) {
                let name = format!("{path}.{k}");
                res.add(finding(
                    Code::Required,
                    &name,
                    Value::Null,
                    format!("{name} in {IN} is required"),
                ));
            }
        }
    }
    res
}

fn composition(m: &Map<String, Value>, data: &Value, path: &str, segs: &[Seg]) -> Res {
    let mut main = Res::default();
    let list = |k: &str| -> Vec<&Value> {
        m.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    let any_of = list("anyOf");
    if !any_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        for s in any_of {
            let r = schema(s, data, path, segs);
            if r.valid() {
                best = None;
                first_success = Some(r);
                break;
            }
            if best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if first_success.is_none() {
            main.add(Finding::Composite(
                format!("{} must validate at least one schema (anyOf)", quote(path)),
                None,
            ));
        }
        if let Some(b) = best {
            main.merge(b);
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    let one_of = list("oneOf");
    if !one_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        let mut validated = 0;
        for s in one_of {
            let r = schema(s, data, path, segs);
            if r.valid() {
                validated += 1;
                best = None;
                if first_success.is_none() {
                    first_success = Some(r);
                }
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let extra = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.add(Finding::Composite(
                format!(
                    "{} must validate one and only one schema (oneOf). {extra}",
                    quote(path)
                ),
                None,
            ));
            if let Some(b) = best {
                main.merge(b);
            }
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    let all_of = list("allOf");
    if !all_of.is_empty() {
        let mut validated = 0;
        for s in &all_of {
            let r = schema(s, data, path, segs);
            if r.valid() {
                validated += 1;
            }
            main.merge(r);
        }
        if validated != all_of.len() {
            let extra = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            main.add(Finding::Composite(
                format!(
                    "{} must validate all the schemas (allOf){extra}",
                    quote(path)
                ),
                None,
            ));
        }
    }
    if let Some(not) = m.get("not").filter(|n| n.is_object()) {
        if schema(not, data, path, segs).valid() {
            main.add(Finding::Composite(
                format!("{} must not validate the schema (not)", quote(path)),
                None,
            ));
        }
    }
    main.matches += 1;
    main
}

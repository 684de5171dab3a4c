//! Request bodies in Kubernetes' protobuf encoding
//! (`application/vnd.kubernetes.protobuf`), turned into the JSON the rest
//! of the server works on.
//!
//! client-go's typed clients send protobuf for built-in kinds: kubectl
//! 1.32 and 1.33 `create namespace|configmap|secret|deployment|…` do, and
//! so do controllers written with client-go. A body is the magic `k8s\0`
//! followed by a `runtime.Unknown` envelope whose `typeMeta` names the
//! kind and whose `raw` holds the object. The object is decoded with the
//! descriptors of the vendored schemas (`proto/`, compiled by `build.rs`)
//! and converted field by field, with the special cases of the JSON
//! encoding: `Time`/`MicroTime` as RFC 3339 strings, `Quantity` as its
//! string, `IntOrString` as a number or a string, `bytes` in base64, raw
//! extensions and `FieldsV1` as embedded JSON.
//!
//! Go writes every non-pointer field, zero or not, and a pointer field
//! whenever it is set; Go's JSON leaves out the zero ones tagged
//! `omitempty`. So a zero scalar is kept only for pointer fields and
//! fields without `omitempty` (`replicas: 0`, `restartCount: 0`,
//! `ready: false`), and empty lists, maps and zero times are left out;
//! those fields, and the embedded structs that JSON inlines, come from
//! `protobuf_fields.rs` (generated from the Go types by
//! scripts/gen-protobuf-fields.py).

use std::sync::OnceLock;

use base64::Engine;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value as Field,
};
use serde_json::{Map, Value};

mod fields;

use fields::{INLINE_FIELDS, KEEP_ZERO_FIELDS};

/// The media type of protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Every body starts with these four bytes.
const MAGIC: &[u8; 4] = b"k8s\0";

const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
const META_PACKAGE: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

/// Why a protobuf body could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    NoMagic,
    /// The envelope or the object is not valid protobuf.
    #[error("unable to decode protobuf {what}: {reason}")]
    Malformed {
        /// The envelope or the kind.
        what: String,
        /// The decoder's words.
        reason: String,
    },
    /// The envelope wraps another encoding.
    #[error("unsupported content encoding {0:?} in a protobuf body")]
    Encoding(String),
    /// No schema for the kind.
    #[error("no kind {kind:?} is registered for version {api_version:?}")]
    UnknownKind {
        /// `typeMeta.kind`.
        kind: String,
        /// `typeMeta.apiVersion`.
        api_version: String,
    },
}

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    #[expect(
        clippy::expect_used,
        reason = "build.rs made the descriptor set; a build that cannot decode it fails every protobuf test"
    )]
    POOL.get_or_init(|| {
        DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/k8s-descriptors.pb"))[..])
            .expect("the descriptor set built by build.rs decodes")
    })
}

/// Whether `media` (a Content-Type without parameters) is protobuf.
pub fn is_protobuf(media: &str) -> bool {
    media.eq_ignore_ascii_case(MEDIA_TYPE)
}

/// The message for `kind` in `api_version`: the group's package
/// (`apps/v1` → `k8s.io.api.apps.v1`, `coordination.k8s.io/v1` →
/// `k8s.io.api.coordination.v1`, `rbac.authorization.k8s.io/v1` →
/// `k8s.io.api.rbac.v1`, `v1` → `k8s.io.api.core.v1`), then the meta
/// package (`DeleteOptions` and the other options kinds).
fn message_for(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let group = group.split('.').next().unwrap_or(group);
    let group = if group.is_empty() { "core" } else { group };
    let pool = pool();
    if group != "meta" {
        if let Some(m) = pool.get_message_by_name(&format!("k8s.io.api.{group}.{version}.{kind}")) {
            return Some(m);
        }
    }
    pool.get_message_by_name(&format!("{META_PACKAGE}.{kind}"))
}

/// Whether bodies of `kind` at `api_version` can come as protobuf (a
/// message of the vendored schemas describes them).
pub fn has_message(api_version: &str, kind: &str) -> bool {
    message_for(api_version, kind).is_some()
}

/// Decodes a protobuf request body into the JSON object it encodes, with
/// `apiVersion` and `kind` from the envelope.
pub fn to_json(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let unknown_desc = pool()
        .get_message_by_name(UNKNOWN)
        .ok_or(ProtobufError::NoMagic)?;
    let envelope =
        DynamicMessage::decode(unknown_desc, rest).map_err(|e| ProtobufError::Malformed {
            what: "envelope".into(),
            reason: e.to_string(),
        })?;
    let encoding = string(&envelope, "contentEncoding");
    if !encoding.is_empty() {
        return Err(ProtobufError::Encoding(encoding));
    }
    let type_meta = envelope
        .get_field_by_name("typeMeta")
        .and_then(|v| v.as_message().cloned());
    let (api_version, kind) = type_meta
        .map(|t| (string(&t, "apiVersion"), string(&t, "kind")))
        .unwrap_or_default();
    // `/v1` is the core group, as upstream reads it.
    let api_version = api_version.trim_start_matches('/').to_string();
    let raw = bytes(&envelope, "raw");
    let desc = message_for(&api_version, &kind).ok_or_else(|| ProtobufError::UnknownKind {
        kind: kind.clone(),
        api_version: api_version.clone(),
    })?;
    let object = DynamicMessage::decode(desc, raw).map_err(|e| ProtobufError::Malformed {
        what: kind.clone(),
        reason: e.to_string(),
    })?;
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(kind));
    out.insert("apiVersion".into(), Value::String(api_version));
    if let Value::Object(fields) = message(&object) {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

/// One message as JSON; `Value::Null` for a zero time or unreadable raw
/// JSON, which the caller leaves out.
fn message(m: &DynamicMessage) -> Value {
    let descriptor = m.descriptor();
    match descriptor.full_name() {
        TIME => time(m, false),
        MICRO_TIME => time(m, true),
        DURATION => Value::String(go_duration(int(m, "duration"))),
        QUANTITY => Value::String(string(m, "string")),
        INT_OR_STRING => {
            if int(m, "type") == 1 {
                Value::String(string(m, "strVal"))
            } else {
                Value::from(int(m, "intVal"))
            }
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let key = if descriptor.full_name() == FIELDS_V1 {
                "Raw"
            } else {
                "raw"
            };
            serde_json::from_slice(&bytes(m, key)).unwrap_or(Value::Null)
        }
        name => {
            let mut out = Map::new();
            for (field, value) in m.fields() {
                if is_zero(value) && !keeps_zero(name, field.name()) {
                    continue;
                }
                match field_value(value) {
                    Some(Value::Object(inner)) if is_inline(name, field.name()) => {
                        out.extend(inner)
                    }
                    Some(v) => {
                        out.insert(field.name().to_string(), v);
                    }
                    None => {}
                }
            }
            Value::Object(out)
        }
    }
}

/// Whether `field` of `message` is a Go struct embedded with
/// `json:",inline"`: protobuf nests it as a field, JSON has its members in
/// the parent (`secretKeyRef: {name, key}`, `volumes: [{name, emptyDir}]`,
/// `readinessProbe: {httpGet, periodSeconds}`).
fn is_inline(message: &str, field: &str) -> bool {
    INLINE_FIELDS.binary_search(&(message, field)).is_ok()
}

/// Whether JSON keeps `field` of `message` when it is zero: a Go pointer
/// (present means set: `replicas: 0`, `automountServiceAccountToken:
/// false`, `storageClassName: ""`) or a field without `omitempty`
/// (`restartCount: 0`, `ready: false`).
fn keeps_zero(message: &str, field: &str) -> bool {
    KEEP_ZERO_FIELDS.binary_search(&(message, field)).is_ok()
}

/// Whether `v` is the zero value of a scalar (what Go's `omitempty`
/// leaves out).
fn is_zero(v: &Field) -> bool {
    match v {
        Field::Bool(b) => !b,
        Field::I32(n) => *n == 0,
        Field::I64(n) => *n == 0,
        Field::U32(n) => *n == 0,
        Field::U64(n) => *n == 0,
        Field::F32(n) => *n == 0.0,
        Field::F64(n) => *n == 0.0,
        Field::EnumNumber(n) => *n == 0,
        Field::String(s) => s.is_empty(),
        Field::Bytes(b) => b.is_empty(),
        Field::Message(_) | Field::List(_) | Field::Map(_) => false,
    }
}

/// A field's JSON, or `None` to leave it out (empty string, list or map,
/// zero time).
fn field_value(v: &Field) -> Option<Value> {
    let out = match v {
        Field::Bool(b) => Value::Bool(*b),
        Field::I32(n) => Value::from(*n),
        Field::I64(n) => Value::from(*n),
        Field::U32(n) => Value::from(*n),
        Field::U64(n) => Value::from(*n),
        Field::F32(n) => Value::from(f64::from(*n)),
        Field::F64(n) => Value::from(*n),
        Field::EnumNumber(n) => Value::from(*n),
        Field::String(s) => Value::String(s.clone()),
        Field::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Field::Message(m) => match message(m) {
            Value::Null => return None,
            v => v,
        },
        Field::List(items) if items.is_empty() => return None,
        Field::List(items) => Value::Array(
            items
                .iter()
                .map(|i| field_value(i).unwrap_or(Value::Null))
                .collect(),
        ),
        Field::Map(entries) if entries.is_empty() => return None,
        Field::Map(entries) => {
            let mut keys: Vec<_> = entries.iter().collect();
            keys.sort_by_key(|(k, _)| map_key(k));
            Value::Object(
                keys.into_iter()
                    .map(|(k, v)| {
                        (
                            map_key(k),
                            field_value(v).unwrap_or(Value::String(String::new())),
                        )
                    })
                    .collect(),
            )
        }
    };
    Some(out)
}

fn map_key(k: &MapKey) -> String {
    match k {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

fn int(m: &DynamicMessage, name: &str) -> i64 {
    match m.get_field_by_name(name).as_deref() {
        Some(Field::I64(n)) => *n,
        Some(Field::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

fn bytes(m: &DynamicMessage, name: &str) -> bytes::Bytes {
    m.get_field_by_name(name)
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default()
}

fn string(m: &DynamicMessage, name: &str) -> String {
    m.get_field_by_name(name)
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `metav1.Time` (whole seconds, as upstream reads it) or `MicroTime`; a
/// time without `seconds` is Go's zero time, written as an empty message.
fn time(m: &DynamicMessage, micro: bool) -> Value {
    if !m.has_field_by_name("seconds") {
        return Value::Null;
    }
    let nanos = if micro { int(m, "nanos") } else { 0 };
    let Some(t) =
        chrono::DateTime::from_timestamp(int(m, "seconds"), nanos.clamp(0, 999_999_999) as u32)
    else {
        return Value::Null;
    };
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Value::String(t.format(format).to_string())
}

/// Go's `time.Duration.String()` for whole and fractional seconds, e.g.
/// `1h0m0s`, `1m30s`, `1.5s`, `0s` (sub-second values as `ms`/`µs`/`ns`).
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", trim_fraction(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", trim_fraction(n, 1_000_000));
    }
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (min, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let secs = trim_fraction(rest, 1_000_000_000);
    match (h, min) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

/// `n / unit` with its fraction, trailing zeros dropped (`1500, 1000` → `1.5`).
fn trim_fraction(n: u64, unit: u64) -> String {
    let (whole, frac) = (n / unit, n % unit);
    if frac == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

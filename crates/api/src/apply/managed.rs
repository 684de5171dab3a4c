//! `metadata.managedFields` entries, after k8s.io/apimachinery
//! `util/managedfields/internal/managedfields.go`.
//!
//! A manager is identified by its name, operation, subresource and, for
//! `Update` only, the apiVersion it wrote with (`BuildManagerIdentifier`):
//! an applier keeps one entry whatever version it applies with, while
//! `kubectl-edit` updating with apps/v1 and with apps/v1beta1 are two
//! managers. Entries are written sorted as upstream: `Apply` before
//! `Update`, then by time (seconds), manager, apiVersion and subresource.

use serde_json::{Map, Value};

use super::fieldset::FieldSet;

/// The operation of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    pub(crate) api_version: String,
    pub(crate) subresource: String,
    pub(crate) time: Option<String>,
    pub(crate) fields: FieldSet,
}

impl Entry {
    pub(crate) fn new(manager: &str, operation: Operation, api_version: &str) -> Entry {
        Entry {
            manager: manager.to_owned(),
            operation,
            api_version: api_version.to_owned(),
            subresource: String::new(),
            time: None,
            fields: FieldSet::new(),
        }
    }

    /// Whether `other` is the same manager (upstream's identifier).
    pub(crate) fn same_manager(&self, other: &Entry) -> bool {
        self.identifier() == other.identifier()
    }

    /// Upstream's manager identifier: the entry's JSON without time and
    /// fields (and without apiVersion for `Apply`), in Go's field order.
    /// Conflicts are grouped and sorted by it.
    pub(crate) fn identifier(&self) -> String {
        let mut parts = Vec::new();
        if !self.manager.is_empty() {
            parts.push(format!(
                "\"manager\":{}",
                Value::from(self.manager.as_str())
            ));
        }
        parts.push(format!("\"operation\":\"{}\"", self.operation.as_str()));
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            parts.push(format!(
                "\"apiVersion\":{}",
                Value::from(self.api_version.as_str())
            ));
        }
        if !self.subresource.is_empty() {
            parts.push(format!(
                "\"subresource\":{}",
                Value::from(self.subresource.as_str())
            ));
        }
        format!("{{{}}}", parts.join(","))
    }

    /// Upstream `printManager`: `"m"`, `"m" using apps/v1` for an `Update`,
    /// `"m" with subresource "status" using v1`.
    pub(crate) fn describe(&self) -> String {
        let mut text = Value::from(self.manager.as_str()).to_string();
        if !self.subresource.is_empty() {
            text = format!(
                "{text} with subresource {}",
                Value::from(self.subresource.as_str())
            );
        }
        if self.operation == Operation::Update {
            text = format!("{text} using {}", self.api_version);
        }
        text
    }

    fn decode(index: usize, value: &Value) -> Result<Entry, String> {
        let text = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default();
        let operation = match text("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err("operation must be `Apply` or `Update`".to_owned()),
        };
        if text("apiVersion").is_empty() {
            return Err("apiVersion must not be empty".to_owned());
        }
        match text("fieldsType") {
            "FieldsV1" => {}
            "" => {
                return Err(format!(
                    "missing fieldsType in managed fields entry {index}"
                ))
            }
            other => {
                return Err(format!(
                    "invalid fieldsType {} in managed fields entry {index}",
                    Value::from(other)
                ))
            }
        }
        let fields = match value.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(fields) => FieldSet::from_fields_v1(fields)
                .map_err(|e| format!("error decoding versioned set from {value}: {e}"))?,
        };
        Ok(Entry {
            manager: text("manager").to_owned(),
            operation,
            api_version: text("apiVersion").to_owned(),
            subresource: text("subresource").to_owned(),
            time: value.get("time").and_then(Value::as_str).map(str::to_owned),
            fields,
        })
    }

    fn encode(&self) -> Value {
        let mut map = Map::new();
        if !self.manager.is_empty() {
            map.insert("manager".into(), self.manager.clone().into());
        }
        map.insert("operation".into(), self.operation.as_str().into());
        map.insert("apiVersion".into(), self.api_version.clone().into());
        if let Some(time) = &self.time {
            map.insert("time".into(), time.clone().into());
        }
        map.insert("fieldsType".into(), "FieldsV1".into());
        map.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            map.insert("subresource".into(), self.subresource.clone().into());
        }
        Value::Object(map)
    }

    fn seconds(&self) -> i64 {
        self.time
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or(0, |t| t.timestamp())
    }
}

/// The managedFields list of `object`, if it has one.
pub(crate) fn raw(object: &Value) -> Option<&Value> {
    object.get("metadata")?.get("managedFields")
}

/// Upstream `DecodeManagedFields` of a managedFields list (absent or null:
/// none). A later entry of the same manager replaces an earlier one.
pub(crate) fn decode(list: Option<&Value>) -> Result<Vec<Entry>, String> {
    let items = match list {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("managedFields is not a list: {other}")),
    };
    let mut entries: Vec<Entry> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let entry = Entry::decode(index, item)?;
        entries.retain(|e| !e.same_manager(&entry));
        entries.push(entry);
    }
    Ok(entries)
}

/// Upstream `isResetManagedFields`: `[]` or `[{}]` asks to clear them.
pub(crate) fn is_reset(list: Option<&Value>) -> bool {
    match list {
        Some(Value::Array(items)) => match items.as_slice() {
            [] => true,
            [only] => only.as_object().is_some_and(Map::is_empty),
            _ => false,
        },
        _ => false,
    }
}

/// `object` without `metadata.managedFields`.
pub(crate) fn without(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

/// `object` with `entries` (empty ones dropped, sorted) as its
/// managedFields; with none the field is left out.
pub(crate) fn with(mut object: Value, mut entries: Vec<Entry>) -> Value {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| a.seconds().cmp(&b.seconds()))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    let Some(root) = object.as_object_mut() else {
        return object;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            let list = entries.iter().map(Entry::encode).collect();
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
    object
}

//! Errors of server-side apply with upstream's wording: conflicts
//! (k8s.io/apimachinery `util/managedfields/internal/conflict.go`) and the
//! checks made of an applied configuration before it is merged
//! (`structuredMergeManager.Apply`).

use serde_json::{Map, Value};

use super::managed::{Entry, Operation};

/// A field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager's name.
    pub manager: String,
    /// Its operation: `Apply` or `Update`.
    pub operation: String,
    /// The apiVersion of an `Update` manager ("" for an applier).
    pub api_version: String,
    /// Its subresource ("" for the main resource).
    pub subresource: String,
    /// The field, as `.spec.containers[name="c"].image`.
    pub field_path: String,
}

impl Conflict {
    fn entry(&self) -> Entry {
        let operation = match self.operation.as_str() {
            "Apply" => Operation::Apply,
            _ => Operation::Update,
        };
        let mut entry = Entry::new(&self.manager, operation, &self.api_version);
        entry.subresource.clone_from(&self.subresource);
        entry
    }

    /// The manager as upstream prints it: `"m"` for an applier,
    /// `"m" using apps/v1` for an updater.
    pub fn manager_description(&self) -> String {
        self.entry().describe()
    }
}

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// 409 Conflict: fields owned by other managers would change.
    #[error("{}", conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// 400 Bad Request: the configuration is not an object, has the wrong
    /// apiVersion, no kind, managedFields, or lists it can't merge.
    #[error("{0}")]
    Invalid(String),
}

impl ApplyError {
    /// The HTTP status upstream answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            ApplyError::Conflicts(_) => 409,
            ApplyError::Invalid(_) => 400,
        }
    }

    /// The `reason` of upstream's Status.
    pub fn reason(&self) -> &'static str {
        match self {
            ApplyError::Conflicts(_) => "Conflict",
            ApplyError::Invalid(_) => "BadRequest",
        }
    }

    /// The `details.causes` of the 409 Status, as (field, message) pairs:
    /// (`.spec.replicas`, `conflict with "m" using apps/v1`); each cause's
    /// reason is `FieldManagerConflict`. Empty for other errors.
    pub fn conflict_causes(&self) -> Vec<(String, String)> {
        match self {
            ApplyError::Conflicts(conflicts) => conflicts
                .iter()
                .map(|c| {
                    let message = format!("conflict with {}", c.manager_description());
                    (c.field_path.clone(), message)
                })
                .collect(),
            ApplyError::Invalid(_) => Vec::new(),
        }
    }
}

/// Upstream `getConflictMessage`.
fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager_description(),
            only.field_path
        );
    }
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for conflict in conflicts {
        let id = conflict.entry().identifier();
        match groups.iter_mut().find(|(key, ..)| *key == id) {
            Some((.., paths)) => paths.push(&conflict.field_path),
            None => groups.push((
                id,
                conflict.manager_description(),
                vec![&conflict.field_path],
            )),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut lines = Vec::new();
    for (_, manager, paths) in groups {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(paths.into_iter().map(|p| format!("- {p}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Upstream's `ValidationErrors` text after `what: `.
pub(crate) fn invalid(what: &str, errors: Vec<String>) -> ApplyError {
    let detail = match errors.as_slice() {
        [only] => only.clone(),
        _ => std::iter::once("errors:".to_owned())
            .chain(errors.iter().map(|e| format!("  {e}")))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    ApplyError::Invalid(format!("{what}: {detail}"))
}

/// The checks upstream makes of a configuration before merging it.
pub(crate) fn check_config(applied: &Value, api_version: &str) -> Result<(), ApplyError> {
    let empty = Map::new();
    let config = match applied {
        Value::Object(map) => map,
        Value::Null => &empty,
        other => {
            let go_type = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(ApplyError::Invalid(format!(
                "error decoding YAML: json: cannot unmarshal {go_type} into Go value of type \
                 map[string]interface {{}}"
            )));
        }
    };
    let text = |name: &str| config.get(name).and_then(Value::as_str).unwrap_or_default();
    if text("apiVersion") != api_version {
        return Err(ApplyError::Invalid(format!(
            "Incorrect version specified in apply patch. Specified patch version: {}, \
             expected: {api_version}",
            text("apiVersion")
        )));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::Invalid(
            "metadata.managedFields must be nil".to_owned(),
        ));
    }
    if text("kind").is_empty() {
        return Err(ApplyError::Invalid(format!(
            "Object 'Kind' is missing in '{applied}'"
        )));
    }
    Ok(())
}

//! `labelSelector` and `fieldSelector` of list and watch requests: which
//! fields each resource can be selected by (upstream's field label
//! conversion functions), and matching an object against both.

use std::collections::HashMap;

use serde_json::Value;
use skiff_api::selectors::{field_value, FieldSelector, LabelSelector};

use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};

/// Fields a resource can be selected by, besides metadata.name and
/// metadata.namespace.
fn selectable_fields(r: &Resource) -> &'static [&'static str] {
    match (r.group, r.plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "namespaces") => &["status.phase"],
        ("", "secrets") => &["type"],
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    }
}

/// What selectors can read of an object of storage resource `storage`:
/// name, namespace, labels and the resource's selectable fields, copied
/// into a small tree of the same shape. The watch cache keeps this view,
/// not the whole parsed object, for every item.
pub fn selectable_view(storage: &str, obj: &Value) -> Value {
    let mut view = Value::Object(serde_json::Map::new());
    for path in view_paths(storage) {
        copy_path(obj, &mut view, path);
    }
    view
}

/// The paths [`selectable_view`] keeps for `storage`.
fn view_paths(storage: &str) -> impl Iterator<Item = &'static str> {
    let fields = crate::resources::RESOURCES
        .iter()
        .find(|r| r.storage == storage && r.group != "events.k8s.io")
        .map(selectable_fields)
        .unwrap_or_default();
    let extra: &[&str] = if storage == "events" {
        &["source.component"]
    } else {
        &[]
    };
    ["metadata.name", "metadata.namespace", "metadata.labels"]
        .into_iter()
        .chain(fields.iter().copied())
        .chain(extra.iter().copied())
}

/// [`selectable_view`] read straight from the stored bytes: only the
/// parts on the way to a kept path are looked at as maps, only the kept
/// values are built (a pod's spec and status are skipped over, not
/// parsed into a tree). `None` for bodies this cannot read without
/// allocating (escaped keys); the caller then parses the whole object.
pub fn selectable_view_raw(storage: &str, raw: &[u8]) -> Option<Value> {
    let top: &serde_json::value::RawValue = serde_json::from_slice(raw).ok()?;
    let paths: Vec<Vec<&str>> = view_paths(storage)
        .map(|p| p.split('.').collect())
        .collect();
    let refs: Vec<&[&str]> = paths.iter().map(Vec::as_slice).collect();
    extract(top, &refs)
}

/// The values at `paths` (segments, relative to `raw`) as a tree.
fn extract(raw: &serde_json::value::RawValue, paths: &[&[&str]]) -> Option<Value> {
    let text = raw.get().trim_start();
    if !text.starts_with('{') {
        return Some(Value::Object(serde_json::Map::new()));
    }
    let fields: HashMap<&str, &serde_json::value::RawValue> =
        serde_json::from_str(raw.get()).ok()?;
    let mut out = serde_json::Map::new();
    let mut done: Vec<&str> = Vec::new();
    for path in paths {
        let Some((first, rest)) = path.split_first() else {
            continue;
        };
        if done.contains(first) {
            continue;
        }
        done.push(first);
        let Some(value) = fields.get(first) else {
            continue;
        };
        let group: Vec<&[&str]> = paths
            .iter()
            .filter(|p| p.first() == Some(first))
            .map(|p| &p[1..])
            .collect();
        let value = if rest.is_empty() || group.iter().any(|p| p.is_empty()) {
            serde_json::from_str(value.get()).ok()?
        } else {
            match extract(value, &group)? {
                // Nothing kept below: leave the branch out, as the tree
                // version does.
                Value::Object(m) if m.is_empty() => continue,
                v => v,
            }
        };
        out.insert((*first).to_string(), value);
    }
    Some(Value::Object(out))
}

/// Copies the value at dotted `path` of `from` into `to`, creating the
/// objects on the way.
fn copy_path(from: &Value, to: &mut Value, path: &str) {
    let mut src = from;
    for segment in path.split('.') {
        match src.as_object().and_then(|o| o.get(segment)) {
            Some(v) => src = v,
            None => return,
        }
    }
    let mut dst = to;
    let mut segments = path.split('.').peekable();
    while let Some(segment) = segments.next() {
        let Some(map) = dst.as_object_mut() else {
            return;
        };
        if segments.peek().is_none() {
            map.insert(segment.to_string(), src.clone());
            return;
        }
        dst = map
            .entry(segment.to_string())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
}

/// events.k8s.io selects by its own field names; objects are stored as core
/// Events, so the selector is rewritten to the stored names.
fn stored_event_fields(
    selector: &FieldSelector,
) -> Result<FieldSelector, skiff_api::selectors::SelectorError> {
    let terms: Vec<String> = selector
        .fields()
        .map(|(field, op, value)| {
            let field = match field {
                "reportingController" => "reportingComponent".to_string(),
                f => match f.strip_prefix("regarding.") {
                    Some(rest) => format!("involvedObject.{rest}"),
                    None => f.to_string(),
                },
            };
            let op = match op {
                skiff_api::selectors::FieldOp::NotEquals => "!=",
                _ => "=",
            };
            format!(
                "{field}{op}{}",
                skiff_api::selectors::escape_field_value(value)
            )
        })
        .collect();
    FieldSelector::parse(&terms.join(","))
}

/// The selectors of one request.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Filter {
    pub fn parse(r: &Resource, q: &HashMap<String, String>) -> ApiResult<Filter> {
        let labels = match q.get("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => {
                Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?)
            }
            None => None,
        };
        let fields = match q.get("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => {
                let selector =
                    FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                let allowed = selectable_fields(r);
                for (field, _, _) in selector.fields() {
                    if field != "metadata.name"
                        && field != "metadata.namespace"
                        && !allowed.contains(&field)
                    {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {field}"
                        )));
                    }
                }
                Some(if r.group == "events.k8s.io" {
                    stored_event_fields(&selector)
                        .map_err(|e| ApiError::bad_request(e.to_string()))?
                } else {
                    selector
                })
            }
            None => None,
        };
        Ok(Filter { labels, fields })
    }

    pub fn is_everything(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    /// The one object name the field selector pins, if any.
    pub fn exact_name(&self) -> Option<&str> {
        self.fields.as_ref().and_then(|f| f.exact_name())
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(labels) = &self.labels {
            if !labels.matches_object(obj) {
                return false;
            }
        }
        if let Some(fields) = &self.fields {
            let get = |path: &str| match path {
                // Events select by `source` = source.component.
                "source" => field_value(obj, "source.component"),
                // Unset booleans select as "false", as upstream converts them.
                "spec.hostNetwork" | "spec.unschedulable" => {
                    Some(field_value(obj, path).unwrap_or_else(|| "false".into()))
                }
                _ => field_value(obj, path),
            };
            if !fields.matches(get) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_selectable_view_keeps_what_selectors_read() {
        let pod = json!({
            "metadata": {"name": "web", "namespace": "d", "labels": {"app": "web"}, "uid": "u"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": []},
        });
        assert_eq!(
            selectable_view("pods", &pod),
            json!({
                "metadata": {"name": "web", "namespace": "d", "labels": {"app": "web"}},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Running"},
            })
        );
        let event = json!({
            "metadata": {"name": "e", "namespace": "d"},
            "involvedObject": {"kind": "Pod", "name": "web"},
            "source": {"component": "default-scheduler", "host": "h"},
            "reason": "Scheduled", "message": "m",
        });
        let view = selectable_view("events", &event);
        assert_eq!(view["source"]["component"], json!("default-scheduler"));
        assert_eq!(
            view["involvedObject"],
            json!({"kind": "Pod", "name": "web"})
        );
        assert!(view.get("message").is_none());

        // Read from the bytes, the view is the same.
        for (storage, obj) in [("pods", &pod), ("events", &event)] {
            let raw = serde_json::to_vec(obj).unwrap();
            assert_eq!(
                selectable_view_raw(storage, &raw),
                Some(selectable_view(storage, obj)),
                "{storage}"
            );
        }

        // Filters give the same answer on the view as on the object.
        let q = |s: &str| HashMap::from([("fieldSelector".to_string(), s.to_string())]);
        let pods = crate::resources::find("", "v1", "pods").unwrap();
        for selector in [
            "spec.nodeName=n1",
            "status.phase!=Running",
            "spec.hostNetwork=false",
        ] {
            let f = Filter::parse(pods, &q(selector)).unwrap();
            assert_eq!(
                f.matches(&selectable_view("pods", &pod)),
                f.matches(&pod),
                "{selector}"
            );
        }
    }
}

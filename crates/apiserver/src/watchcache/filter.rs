//! `labelSelector` and `fieldSelector` of list and watch requests: which
//! fields each resource can be selected by (upstream's field label
//! conversion functions), and matching an object against both.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;
use skiff_api::selectors::{FieldSelector, LabelSelector};

use crate::catalog::Resource;
use crate::status::{ApiError, ApiResult};
pub use crate::watchcache::selectable::Selectable;

/// The text a field selector compares a value as; `None` for null,
/// objects and arrays (as [`skiff_api::selectors::field_value`]).
fn scalar_text(v: &Value) -> Option<Box<str>> {
    match v {
        Value::String(s) => Some(s.as_str().into()),
        Value::Number(n) => Some(n.to_string().into()),
        Value::Bool(b) => Some(if *b { "true" } else { "false" }.into()),
        Value::Null | Value::Object(_) | Value::Array(_) => None,
    }
}

/// Label values as label selectors read them (non-strings as their JSON).
fn label_pairs(labels: &serde_json::Map<String, Value>) -> Vec<(Box<str>, Box<str>)> {
    labels
        .iter()
        .map(|(k, v)| {
            let v: Box<str> = match v {
                Value::String(s) => s.as_str().into(),
                other => other.to_string().into(),
            };
            (k.as_str().into(), v)
        })
        .collect()
}

const LABELS: &str = "metadata.labels";

/// [`Selectable`] of a parsed object of storage resource `storage`, whose
/// resources select by `kept`.
pub fn selectable_view(storage: &str, kept: &[&'static str], obj: &Value) -> Selectable {
    let mut fields = Vec::new();
    let mut labels = Vec::new();
    for path in view_paths(storage, kept) {
        let mut at = Some(obj);
        for segment in path.split('.') {
            at = at.and_then(|v| v.as_object()).and_then(|o| o.get(segment));
        }
        let Some(value) = at else { continue };
        if path == LABELS {
            if let Some(map) = value.as_object() {
                labels = label_pairs(map);
            }
        } else if let Some(text) = scalar_text(value) {
            fields.push((path, text));
        }
    }
    Selectable::new(fields, labels)
}

/// The paths [`selectable_view`] keeps for `storage`, whose resources
/// select by `fields`; none of a built-in resource is more than two
/// segments deep (a custom resource's may be).
fn view_paths<'a>(
    storage: &str,
    fields: &'a [&'static str],
) -> impl Iterator<Item = &'static str> + 'a {
    let extra: &[&str] = if storage == "events" {
        &["source.component"]
    } else {
        &[]
    };
    ["metadata.name", "metadata.namespace", LABELS]
        .into_iter()
        .chain(fields.iter().copied())
        .chain(extra.iter().copied())
}

/// An object's top-level (or a nested object's) keys and their raw values,
/// borrowed from the bytes: parsing one skips over the values.
pub type RawFields<'a> = HashMap<&'a str, &'a serde_json::value::RawValue>;

/// [`selectable_view`] read straight from the stored bytes, given the
/// object's top-level fields and its `metadata` fields (`None` when
/// metadata is not an object): only the objects on the way to a kept path
/// are looked at as maps and only the kept values are parsed (a pod's spec
/// and status are skipped over, not built into a tree). `None` for bodies
/// this cannot read without allocating (escaped keys); the caller then
/// parses the whole object.
pub fn selectable_view_fields(
    storage: &str,
    kept: &[&'static str],
    top: &RawFields,
    metadata: Option<&RawFields>,
) -> Option<Selectable> {
    // The second-level objects read so far (metadata, spec, status…).
    let mut nested: Vec<(&str, Option<RawFields>)> = Vec::new();
    let mut fields = Vec::new();
    let mut labels = Vec::new();
    for path in view_paths(storage, kept) {
        if path.matches('.').count() > 1 {
            // Deeper than this reads: the caller walks the whole tree.
            return None;
        }
        let value = match path.split_once('.') {
            None => top.get(path).copied(),
            Some(("metadata", second)) => metadata.and_then(|m| m.get(second)).copied(),
            Some((first, second)) => {
                let i = match nested.iter().position(|(k, _)| *k == first) {
                    Some(i) => i,
                    None => {
                        let map = match top.get(first) {
                            Some(v) if v.get().trim_start().starts_with('{') => {
                                Some(serde_json::from_str::<RawFields>(v.get()).ok()?)
                            }
                            _ => None,
                        };
                        nested.push((first, map));
                        nested.len() - 1
                    }
                };
                nested
                    .get(i)
                    .and_then(|(_, m)| m.as_ref())
                    .and_then(|m| m.get(second))
                    .copied()
            }
        };
        let Some(value) = value else { continue };
        let value: Value = serde_json::from_str(value.get()).ok()?;
        if path == LABELS {
            if let Value::Object(map) = &value {
                labels = label_pairs(map);
            }
        } else if let Some(text) = scalar_text(&value) {
            fields.push((path, text));
        }
    }
    Some(Selectable::new(fields, labels))
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
    /// `r`'s selectors in `q`; `fields` are those `r` may be selected by
    /// besides metadata.name and metadata.namespace
    /// (`Catalog::selectable_fields`).
    pub fn parse(r: &Resource, fields: &[&str], q: &HashMap<String, String>) -> ApiResult<Filter> {
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
                let allowed = fields;
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

    /// The indexed field (see `watchers::INDEXED_FIELDS`) the field
    /// selector pins to one non-empty value, if any.
    pub fn index_key(&self) -> Option<crate::watchcache::watchers::IndexKey> {
        let fields = self.fields.as_ref()?;
        crate::watchcache::watchers::INDEXED_FIELDS
            .iter()
            .find_map(|f| {
                fields
                    .requires_exact_match(f)
                    .filter(|v| !v.is_empty())
                    .map(|v| (*f, v.into()))
            })
    }

    /// The one object name the field selector pins, if any.
    pub fn exact_name(&self) -> Option<&str> {
        self.fields.as_ref().and_then(|f| f.exact_name())
    }

    pub fn matches(&self, view: &Selectable) -> bool {
        if let Some(labels) = &self.labels {
            if !labels.matches_by(|key| view.label(key).map(Cow::Borrowed)) {
                return false;
            }
        }
        if let Some(fields) = &self.fields {
            let get = |path: &str| {
                let value = match path {
                    // Events select by `source` = source.component.
                    "source" => view.field("source.component"),
                    // Unset booleans select as "false", as upstream
                    // converts them.
                    "spec.hostNetwork" | "spec.unschedulable" => {
                        Some(view.field(path).unwrap_or("false"))
                    }
                    _ => view.field(path),
                };
                value.map(Cow::Borrowed)
            };
            if !fields.matches(get) {
                return false;
            }
        }
        true
    }

    /// [`Filter::matches`] for a whole object of `r` (lists and deletes
    /// that read the store rather than the watch cache).
    /// `view` are the fields kept for `r`'s storage
    /// (`Catalog::selectable_for_storage`).
    pub fn matches_object(&self, r: &Resource, view: &[&'static str], obj: &Value) -> bool {
        self.is_everything() || self.matches(&selectable_view(r.storage, view, obj))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// [`selectable_view_fields`] reading the bytes' top level and
    /// metadata itself.
    fn selectable_view_raw(storage: &str, raw: &[u8]) -> Option<Selectable> {
        let top: RawFields = serde_json::from_slice(raw).ok()?;
        let meta = match top.get("metadata") {
            Some(m) if m.get().trim_start().starts_with('{') => {
                Some(serde_json::from_str::<RawFields>(m.get()).ok()?)
            }
            _ => None,
        };
        selectable_view_fields(
            storage,
            crate::resources::builtin().selectable_for_storage(storage),
            &top,
            meta.as_ref(),
        )
    }

    fn q(key: &str, s: &str) -> HashMap<String, String> {
        HashMap::from([(key.to_string(), s.to_string())])
    }

    #[test]
    fn the_selectable_view_keeps_what_selectors_read() {
        let pod = json!({
            "metadata": {"name": "web", "namespace": "d", "labels": {"tier": "front", "app": "web"}, "uid": "u"},
            "spec": {"nodeName": "n1", "hostNetwork": true, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": []},
        });
        let view = selectable_view(
            "pods",
            crate::resources::builtin().selectable_for_storage("pods"),
            &pod,
        );
        assert_eq!(view.field("metadata.name"), Some("web"));
        assert_eq!(view.field("metadata.namespace"), Some("d"));
        assert_eq!(view.field("spec.nodeName"), Some("n1"));
        assert_eq!(view.field("spec.hostNetwork"), Some("true"));
        assert_eq!(view.field("status.phase"), Some("Running"));
        assert_eq!(view.field("metadata.uid"), None);
        assert_eq!(view.field("spec.restartPolicy"), None);
        assert_eq!(view.label("app"), Some("web"));
        assert_eq!(view.label("tier"), Some("front"));
        assert_eq!(view.label("uid"), None);

        let event = json!({
            "metadata": {"name": "e", "namespace": "d"},
            "involvedObject": {"kind": "Pod", "name": "web"},
            "source": {"component": "default-scheduler", "host": "h"},
            "reason": "Scheduled", "message": "m", "count": 3,
        });
        let view = selectable_view(
            "events",
            crate::resources::builtin().selectable_for_storage("events"),
            &event,
        );
        assert_eq!(view.field("source.component"), Some("default-scheduler"));
        assert_eq!(view.field("involvedObject.kind"), Some("Pod"));
        assert_eq!(view.field("reason"), Some("Scheduled"));
        assert_eq!(view.field("message"), None);

        // Read from the bytes, the view is the same; odd shapes included.
        let odd = json!({"metadata": "not an object", "spec": {"nodeName": null}, "status": []});
        let numbers =
            json!({"metadata": {"name": 7, "labels": {"n": 1}}, "status": {"phase": 2.5}});
        for (storage, obj) in [
            ("pods", &pod),
            ("events", &event),
            ("pods", &odd),
            ("pods", &numbers),
            ("nodes", &json!({"spec": {"unschedulable": false}})),
        ] {
            let raw = serde_json::to_vec(obj).unwrap();
            assert_eq!(
                selectable_view_raw(storage, &raw),
                Some(selectable_view(
                    storage,
                    crate::resources::builtin().selectable_for_storage(storage),
                    obj
                )),
                "{storage} {obj}"
            );
        }
        assert_eq!(
            selectable_view(
                "pods",
                crate::resources::builtin().selectable_for_storage("pods"),
                &numbers
            )
            .label("n"),
            Some("1")
        );
        assert_eq!(
            selectable_view(
                "pods",
                crate::resources::builtin().selectable_for_storage("pods"),
                &numbers
            )
            .field("status.phase"),
            Some("2.5")
        );
        // An escaped key is left to the tree.
        assert_eq!(
            selectable_view_raw("pods", br#"{"meta\u0064ata":{}}"#),
            None
        );
    }

    #[test]
    fn view_paths_are_at_most_two_segments_deep() {
        let catalog = crate::resources::builtin();
        for r in catalog.builtin() {
            for path in view_paths(r.storage, catalog.selectable_for_storage(r.storage)) {
                assert!(path.split('.').count() <= 2, "{path}");
            }
        }
    }

    #[test]
    fn filters_answer_the_same_on_the_view_as_on_the_object() {
        let pod = json!({
            "metadata": {"name": "web", "namespace": "d", "labels": {"app": "web", "v": "3"}},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running"},
        });
        let pods = crate::resources::find_builtin("", "v1", "pods").unwrap();
        let cases = [
            ("fieldSelector", "spec.nodeName=n1", true),
            ("fieldSelector", "spec.nodeName!=n1", false),
            ("fieldSelector", "spec.nodeName=", false),
            ("fieldSelector", "status.phase!=Running", false),
            (
                "fieldSelector",
                "status.phase!=Succeeded,status.phase!=Failed",
                true,
            ),
            ("fieldSelector", "spec.hostNetwork=false", true),
            ("fieldSelector", "spec.schedulerName=", true),
            (
                "fieldSelector",
                "metadata.name=web,metadata.namespace=d",
                true,
            ),
            ("labelSelector", "app=web", true),
            ("labelSelector", "app in (db,cache)", false),
            ("labelSelector", "!missing,app", true),
            ("labelSelector", "v>2", true),
            ("labelSelector", "v<2", false),
        ];
        let view = selectable_view(
            "pods",
            crate::resources::builtin().selectable_for_storage("pods"),
            &pod,
        );
        for (key, selector, want) in cases {
            let f = Filter::parse(
                pods,
                crate::resources::builtin().selectable_fields(pods),
                &q(key, selector),
            )
            .unwrap();
            assert_eq!(f.matches(&view), want, "{selector}");
            assert_eq!(
                f.matches_object(
                    pods,
                    crate::resources::builtin().selectable_for_storage(pods.storage),
                    &pod
                ),
                want,
                "{selector}"
            );
            let labels = pod["metadata"]["labels"].as_object().unwrap();
            if let Some(l) = &f.labels {
                assert_eq!(l.matches(labels), want, "{selector}");
            }
        }
        // Events select by `source` (source.component); events.k8s.io by
        // its own names, rewritten to the stored core fields.
        let events = crate::resources::find_builtin("", "v1", "events").unwrap();
        let event = json!({"metadata": {"name": "e"}, "source": {"component": "kubelet"},
            "involvedObject": {"kind": "Pod", "name": "web"}, "reportingComponent": "kubelet"});
        let view = selectable_view(
            "events",
            crate::resources::builtin().selectable_for_storage("events"),
            &event,
        );
        let f = Filter::parse(
            events,
            crate::resources::builtin().selectable_fields(events),
            &q("fieldSelector", "source=kubelet"),
        )
        .unwrap();
        assert!(f.matches(&view));
        let new_events = crate::resources::find_builtin("events.k8s.io", "v1", "events").unwrap();
        for (selector, want) in [
            ("regarding.name=web,reportingController=kubelet", true),
            ("regarding.kind=Node", false),
        ] {
            let f = Filter::parse(
                new_events,
                crate::resources::builtin().selectable_fields(new_events),
                &q("fieldSelector", selector),
            )
            .unwrap();
            assert_eq!(f.matches(&view), want, "{selector}");
        }
        // Numbers select as their text (jobs' status.successful).
        let jobs = crate::resources::find_builtin("batch", "v1", "jobs").unwrap();
        let job = json!({"metadata": {"name": "j"}, "status": {"successful": 2}});
        let f = Filter::parse(
            jobs,
            crate::resources::builtin().selectable_fields(jobs),
            &q("fieldSelector", "status.successful=2"),
        )
        .unwrap();
        assert!(f.matches(&selectable_view(
            "jobs",
            crate::resources::builtin().selectable_for_storage("jobs"),
            &job
        )));
        assert!(f.matches_object(
            jobs,
            crate::resources::builtin().selectable_for_storage(jobs.storage),
            &job
        ));
    }
}

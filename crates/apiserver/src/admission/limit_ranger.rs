//! LimitRanger: the LimitRanges of a namespace applied to new pods and
//! claims (upstream plugin/pkg/admission/limitranger). The mutating step
//! gives each container the Container items' default requests and limits
//! it lacks (recorded in the `kubernetes.io/limit-ranger` annotation);
//! the validating step refuses (403) a container, pod or claim outside an
//! item's min, max or maxLimitRequestRatio, in upstream's words.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use skiff_api::quota::{parse_list, Amount, Usage};

use super::objects::{forbidden, list_of};
use super::{Attributes, Operation, Plugin};
use crate::status::ApiResult;

#[derive(Debug)]
pub struct LimitRanger;

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Which kind a write is, if LimitRanger looks at it (creates only).
fn target(attrs: &Attributes<'_>) -> Option<&'static str> {
    if attrs.operation != Operation::Create
        || attrs.subresource.is_some()
        || !attrs.resource.group.is_empty()
    {
        return None;
    }
    match attrs.resource.plural {
        "pods" => Some("pods"),
        "persistentvolumeclaims" => Some("persistentvolumeclaims"),
        _ => None,
    }
}

/// The items of every LimitRange in the namespace.
async fn items(attrs: &Attributes<'_>) -> ApiResult<Vec<Value>> {
    let ranges = list_of(attrs.state, "", "v1", "limitranges", attrs.namespace).await?;
    Ok(ranges
        .iter()
        .filter_map(|lr| lr.pointer("/spec/limits").and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect())
}

fn of_type<'a>(items: &'a [Value], ty: &'a str) -> impl Iterator<Item = &'a Value> {
    items
        .iter()
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(ty))
}

/// Sets the defaults a container lacks; returns the annotation parts.
fn merge(container: &mut Map<String, Value>, item: &Value, prefix: &str) -> Vec<String> {
    let name = container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let resources = container.entry("resources").or_insert_with(|| json!({}));
    let Some(resources) = resources.as_object_mut() else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for (field, from, what) in [
        ("requests", "defaultRequest", "request"),
        ("limits", "default", "limit"),
    ] {
        let Some(defaults) = item.get(from).and_then(Value::as_object) else {
            continue;
        };
        let list = resources.entry(field).or_insert_with(|| json!({}));
        let Some(list) = list.as_object_mut() else {
            continue;
        };
        let mut set: Vec<&str> = Vec::new();
        for (k, v) in defaults {
            if !list.contains_key(k) {
                list.insert(k.clone(), v.clone());
                set.push(k);
            }
        }
        if !set.is_empty() {
            set.sort_unstable();
            notes.push(format!("{} {what} for {prefix} {name}", set.join(", ")));
        }
        if list.is_empty() {
            resources.remove(field);
        }
    }
    notes
}

fn container_lists(pod: &mut Value) -> Vec<(&'static str, &mut Vec<Value>)> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, v) in spec.iter_mut() {
        let prefix = match key.as_str() {
            "initContainers" => "init container",
            "containers" => "container",
            _ => continue,
        };
        if let Some(list) = v.as_array_mut() {
            out.push((prefix, list));
        }
    }
    out.sort_by_key(|(p, _)| *p != "init container");
    out
}

/// One constraint of `enforced` on `resource` over `request`/`limit`.
fn check(
    errors: &mut Vec<String>,
    kind: &str,
    what: &str,
    resource: &str,
    enforced: Amount,
    request: &Usage,
    limit: &Usage,
) {
    let req = request.get(resource);
    let lim = limit.get(resource);
    let e = enforced.format();
    match what {
        "min" => match req {
            None => errors.push(format!(
                "minimum {resource} usage per {kind} is {e}.  No request is specified"
            )),
            Some(r) if r.milli < enforced.milli => errors.push(format!(
                "minimum {resource} usage per {kind} is {e}, but request is {}",
                r.format()
            )),
            Some(_) => {
                if let Some(l) = lim.filter(|l| l.milli < enforced.milli) {
                    errors.push(format!(
                        "minimum {resource} usage per {kind} is {e}, but limit is {}",
                        l.format()
                    ));
                }
            }
        },
        "max" => match lim {
            None => errors.push(format!(
                "maximum {resource} usage per {kind} is {e}.  No limit is specified"
            )),
            Some(l) if l.milli > enforced.milli => errors.push(format!(
                "maximum {resource} usage per {kind} is {e}, but limit is {}",
                l.format()
            )),
            Some(_) => {
                if let Some(r) = req.filter(|r| r.milli > enforced.milli) {
                    errors.push(format!(
                        "maximum {resource} usage per {kind} is {e}, but request is {}",
                        r.format()
                    ));
                }
            }
        },
        _ => {
            let Some(r) = req.filter(|r| r.milli != 0) else {
                errors.push(format!("{resource} max limit to request ratio per {kind} is {e}, but no request is specified or request is 0"));
                return;
            };
            let Some(l) = lim.filter(|l| l.milli != 0) else {
                errors.push(format!("{resource} max limit to request ratio per {kind} is {e}, but no limit is specified or limit is 0"));
                return;
            };
            let ratio = l.milli as f64 / r.milli as f64;
            if ratio * 1000.0 > enforced.milli as f64 {
                errors.push(format!(
                    "{resource} max limit to request ratio per {kind} is {e}, but provided ratio is {ratio:.6}"
                ));
            }
        }
    }
}

/// Every constraint of one item over one `request`/`limit` pair.
fn check_item(errors: &mut Vec<String>, item: &Value, kind: &str, request: &Usage, limit: &Usage) {
    for what in ["min", "max", "maxLimitRequestRatio"] {
        for (resource, enforced) in parse_list(item.get(what)) {
            check(errors, kind, what, &resource, enforced, request, limit);
        }
    }
}

fn sum_into(total: &mut Usage, list: &Usage) {
    for (k, v) in list {
        let s = total.get(k).map_or(*v, |t| t.plus(*v));
        total.insert(k.clone(), s);
    }
}

/// A pod's requests and limits: its containers' sums, or an init
/// container's when larger.
fn pod_totals(pod: &Value) -> (Usage, Usage) {
    let mut req = Usage::new();
    let mut lim = Usage::new();
    let list = |key: &str| {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for c in list("containers") {
        sum_into(&mut req, &parse_list(c.pointer("/resources/requests")));
        sum_into(&mut lim, &parse_list(c.pointer("/resources/limits")));
    }
    for c in list("initContainers") {
        for (total, field) in [(&mut req, "requests"), (&mut lim, "limits")] {
            for (k, v) in parse_list(c.pointer(&format!("/resources/{field}"))) {
                if total.get(&k).is_none_or(|t| t.milli < v.milli) {
                    total.insert(k, v);
                }
            }
        }
    }
    (req, lim)
}

#[async_trait]
impl Plugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if target(attrs) != Some("pods") {
            return Ok(());
        }
        let items = items(attrs).await?;
        let containers: Vec<&Value> = of_type(&items, "Container").collect();
        if containers.is_empty() {
            return Ok(());
        }
        let mut notes = Vec::new();
        for (prefix, list) in container_lists(obj) {
            for c in list.iter_mut().filter_map(Value::as_object_mut) {
                for item in &containers {
                    notes.extend(merge(c, item, prefix));
                }
            }
        }
        if !notes.is_empty() {
            let meta = crate::object::meta(obj);
            let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(
                    ANNOTATION.into(),
                    json!(format!("LimitRanger plugin set: {}", notes.join("; "))),
                );
            }
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
        let Some(target) = target(attrs) else {
            return Ok(());
        };
        let items = items(attrs).await?;
        let mut errors = Vec::new();
        if target == "pods" {
            for item in of_type(&items, "Container") {
                for key in ["initContainers", "containers"] {
                    for c in obj
                        .pointer(&format!("/spec/{key}"))
                        .and_then(Value::as_array)
                        .map_or(&[][..], Vec::as_slice)
                    {
                        let req = parse_list(c.pointer("/resources/requests"));
                        let lim = parse_list(c.pointer("/resources/limits"));
                        check_item(&mut errors, item, "Container", &req, &lim);
                    }
                }
            }
            for item in of_type(&items, "Pod") {
                let (req, lim) = pod_totals(obj);
                check_item(&mut errors, item, "Pod", &req, &lim);
            }
        } else {
            for item in of_type(&items, "PersistentVolumeClaim") {
                let req = parse_list(obj.pointer("/spec/resources/requests"));
                for (what, list) in [("min", &req), ("max", &req)] {
                    for (resource, enforced) in parse_list(item.get(what)) {
                        let Some(have) = list.get(&resource) else {
                            let word = if what == "min" { "minimum" } else { "maximum" };
                            errors.push(format!(
                                "{word} {resource} usage per PersistentVolumeClaim is {}.  No request is specified",
                                enforced.format()
                            ));
                            continue;
                        };
                        let bad = if what == "min" {
                            have.milli < enforced.milli
                        } else {
                            have.milli > enforced.milli
                        };
                        if bad {
                            let word = if what == "min" { "minimum" } else { "maximum" };
                            errors.push(format!(
                                "{word} {resource} usage per PersistentVolumeClaim is {}, but request is {}",
                                enforced.format(),
                                have.format()
                            ));
                        }
                    }
                }
            }
        }
        let mut seen = BTreeSet::new();
        errors.retain(|e| seen.insert(e.clone()));
        let detail = match errors.as_slice() {
            [] => return Ok(()),
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Err(forbidden(attrs.resource, attrs.name, &detail))
    }
}

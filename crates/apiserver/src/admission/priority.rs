//! Priority: a new pod gets spec.priority (and preemptionPolicy) from
//! its priorityClassName, else from the global default class, else 0;
//! an unknown class, or a priority or policy the pod sets that
//! disagrees, is refused (403). An update keeps what create set. Only
//! one PriorityClass may be the global default. Upstream's
//! plugin/pkg/admission/priority.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::objects::{forbidden, versions_of};
use super::{Attributes, Operation, Plugin};
use crate::status::{ApiError, ApiResult};

#[derive(Debug)]
pub struct Priority;

fn is_pods(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group.is_empty()
        && attrs.resource.plural == "pods"
        && attrs.subresource.is_none()
}

fn is_classes(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group == "scheduling.k8s.io"
        && attrs.resource.plural == "priorityclasses"
        && attrs.subresource.is_none()
}

/// What this plugin reads of a PriorityClass.
#[derive(Debug)]
pub(super) struct Class {
    name: String,
    value: i64,
    global_default: bool,
    preemption_policy: Option<String>,
}

impl Class {
    fn of(json: &[u8]) -> ApiResult<Self> {
        let pc: Value = serde_json::from_slice(json)
            .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
        Ok(Class {
            name: pc
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            value: pc.get("value").and_then(Value::as_i64).unwrap_or(0),
            global_default: pc.get("globalDefault").and_then(Value::as_bool) == Some(true),
            preemption_policy: pc
                .get("preemptionPolicy")
                .and_then(Value::as_str)
                .map(String::from),
        })
    }
}

fn global_default(classes: &[Arc<Class>]) -> Option<&Class> {
    // Upstream takes the lowest value when several are marked.
    classes
        .iter()
        .filter(|c| c.global_default)
        .min_by_key(|c| c.value)
        .map(|c| &**c)
}

/// Every PriorityClass, each decoded once per version (one whose bytes
/// do not parse is left out, as lists leave it out).
async fn classes(attrs: &Attributes<'_>) -> ApiResult<Vec<Arc<Class>>> {
    let memo = &attrs.state.admission.priority_classes;
    Ok(versions_of(
        attrs.state,
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        None,
    )
    .await?
    .iter()
    .filter_map(|v| {
        memo.get_or_decode(&v.key, v.revision, || Class::of(&v.json))
            .ok()
    })
    .collect())
}

#[async_trait]
impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, pod: &mut Value) -> ApiResult<()> {
        if !is_pods(attrs) {
            return Ok(());
        }
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if attrs.operation == Operation::Update {
            for field in ["priority", "preemptionPolicy"] {
                if spec.get(field).is_none_or(Value::is_null) {
                    if let Some(v) = attrs.old.and_then(|o| o.pointer(&format!("/spec/{field}"))) {
                        spec.insert(field.into(), v.clone());
                    }
                }
            }
            return Ok(());
        }
        let class_name = spec
            .get("priorityClassName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let all = classes(attrs).await?;
        let (priority, policy) = if class_name.is_empty() {
            match global_default(&all) {
                Some(pc) => {
                    spec.insert("priorityClassName".into(), json!(pc.name));
                    (pc.value, pc.preemption_policy.clone())
                }
                None => (0, Some("PreemptLowerPriority".to_string())),
            }
        } else {
            match all.iter().find(|c| c.name == class_name) {
                Some(pc) => (pc.value, pc.preemption_policy.clone()),
                None => {
                    return Err(forbidden(
                        attrs.resource,
                        attrs.name,
                        &format!("no PriorityClass with name {class_name} was found"),
                    ))
                }
            }
        };
        if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
            if given != priority {
                return Err(forbidden(
                    attrs.resource,
                    attrs.name,
                    &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"),
                ));
            }
        }
        spec.insert("priority".into(), json!(priority));
        if let Some(policy) = policy {
            if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str) {
                if given != policy {
                    return Err(forbidden(
                        attrs.resource,
                        attrs.name,
                        &format!("the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"),
                    ));
                }
            }
            spec.insert("preemptionPolicy".into(), json!(policy));
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, pc: &Value) -> ApiResult<()> {
        if !is_classes(attrs) || pc.get("globalDefault").and_then(Value::as_bool) != Some(true) {
            return Ok(());
        }
        let all = classes(attrs).await?;
        let other = all.iter().find(|c| {
            c.global_default && (attrs.operation == Operation::Create || c.name != attrs.name)
        });
        if let Some(other) = other {
            return Err(forbidden(
                attrs.resource,
                attrs.name,
                &format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    other.name
                ),
            ));
        }
        Ok(())
    }
}

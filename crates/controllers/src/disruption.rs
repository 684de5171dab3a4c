//! The disruption controller (kube-controller-manager's disruption):
//! computes every PodDisruptionBudget's status from the pods its
//! selector matches: expectedPods (the pods, or the scale of their
//! controllers when a percentage or maxUnavailable needs it),
//! desiredHealthy, currentHealthy (Ready pods not being deleted nor
//! recently evicted), disruptionsAllowed, observedGeneration, the
//! disruptedPods the eviction subresource recorded (dropped once the pod
//! is gone or two minutes passed) and the DisruptionAllowed condition.
//! Pods without a controller where one is needed make the budget fail
//! safe (no disruptions, `SyncFailed`). It writes only budget status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{json, Value};
use skiff_api::selectors::LabelSelector;
use tokio_util::sync::CancellationToken;

use crate::nswatch::{forward_owned, run_namespaces, track, Owners};
use kube::core::PartialObjectMeta;

/// How long an eviction's record keeps a pod out of currentHealthy
/// (upstream `DeletionTimeout`).
const DELETION_TIMEOUT: jiff::SignedDuration = jiff::SignedDuration::from_secs(120);

/// Errors of the controller (logged; namespaces are retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing {what} in {namespace}")]
    List {
        what: &'static str,
        namespace: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("updating the status of budget {namespace}/{name}")]
    Status {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("budget {0} does not convert")]
    Convert(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The controller.
#[derive(Debug, Clone)]
pub struct DisruptionController {
    resync: Duration,
}

impl Default for DisruptionController {
    fn default() -> Self {
        Self::new()
    }
}

impl DisruptionController {
    /// Full recompute every 30 s besides the watches.
    pub fn new() -> Self {
        DisruptionController {
            resync: Duration::from_secs(30),
        }
    }

    /// Another full resync period (tests).
    pub fn with_resync(mut self, resync: Duration) -> Self {
        self.resync = resync;
        self
    }

    /// Runs until `shutdown`.
    pub async fn run(self, client: Client, shutdown: CancellationToken) -> Result<()> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        // Pod changes matter only where a budget is.
        let owners = Owners::default();
        track(
            Api::<PartialObjectMeta<PodDisruptionBudget>>::all(client.clone()),
            tx.clone(),
            shutdown.clone(),
            owners.clone(),
        );
        forward_owned::<Pod>(client.clone(), tx, shutdown.clone(), owners.clone());
        tracing::info!("starting the disruption controller");
        run_namespaces(
            rx,
            owners,
            self.resync,
            shutdown,
            "disruption budgets",
            |ns| {
                let client = client.clone();
                async move { sync(&client, &ns).await }
            },
        )
        .await;
        tracing::info!("shutting down the disruption controller");
        Ok(())
    }
}

fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// `GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let p: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((p * total + 99) / 100)
        }
        _ => None,
    }
}

/// The scale of the controllers of `pods` (upstream `getExpectedScale`):
/// ReplicaSets (their Deployment's when they have one), StatefulSets and
/// ReplicationControllers; an error names a pod without one.
async fn expected_scale(client: &Client, ns: &str, pods: &[Value]) -> Result<i64, String> {
    let mut seen: BTreeMap<String, i64> = BTreeMap::new();
    for pod in pods {
        let owner = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r["controller"] == true));
        let Some(owner) = owner else {
            return Err(format!(
                "found no controllers for pod \"{}\"",
                pod.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ));
        };
        let kind = owner["kind"].as_str().unwrap_or("");
        let name = owner["name"].as_str().unwrap_or("");
        let (mut group, mut plural) = match kind {
            "ReplicaSet" => ("apps", "replicasets"),
            "StatefulSet" => ("apps", "statefulsets"),
            "ReplicationController" => ("", "replicationcontrollers"),
            "Deployment" => ("apps", "deployments"),
            _ => {
                return Err(format!(
                    "found no controllers for pod \"{}\"",
                    pod.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                ))
            }
        };
        let mut target = name.to_string();
        let get = |group: &str, plural: &str, name: String| {
            let gvk = GroupVersionKind::gvk(group, "v1", "Object");
            let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            async move {
                api.get(&name)
                    .await
                    .map(|o| serde_json::to_value(o).unwrap_or_default())
            }
        };
        let mut obj = get(group, plural, target.clone())
            .await
            .map_err(|e| format!("getting {kind} {name}: {e}"))?;
        if kind == "ReplicaSet" {
            let deployment = obj
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| {
                    refs.iter()
                        .find(|r| r["controller"] == true && r["kind"] == "Deployment")
                })
                .and_then(|r| r["name"].as_str())
                .map(String::from);
            if let Some(d) = deployment {
                group = "apps";
                plural = "deployments";
                target = d;
                obj = get(group, plural, target.clone())
                    .await
                    .map_err(|e| format!("getting Deployment {target}: {e}"))?;
            }
        }
        let replicas = obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        seen.insert(format!("{plural}/{target}"), replicas);
    }
    Ok(seen.values().sum())
}

fn set_condition(status: &mut Value, allowed: bool, reason: &str, message: &str, observed: i64) {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let st = if allowed { "True" } else { "False" };
    let list = status
        .as_object_mut()
        .map(|o| o.entry("conditions").or_insert_with(|| json!([])));
    let Some(list) = list.and_then(Value::as_array_mut) else {
        return;
    };
    let transition = list
        .iter()
        .find(|c| c["type"] == "DisruptionAllowed")
        .filter(|c| c["status"] == st)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    list.retain(|c| c["type"] != "DisruptionAllowed");
    list.push(json!({
        "type": "DisruptionAllowed",
        "status": st,
        "reason": reason,
        "message": message,
        "observedGeneration": observed,
        "lastTransitionTime": transition,
    }));
}

/// The status a budget should have, given the namespace's pods.
async fn compute(client: &Client, ns: &str, pdb: &Value, pods: &[Value]) -> Value {
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut status = pdb.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let selector = match pdb.pointer("/spec/selector") {
        None | Some(Value::Null) => Some(LabelSelector::nothing()),
        Some(s) => LabelSelector::from_json(s).ok(),
    };
    let matched: Vec<Value> = match &selector {
        Some(sel) => pods
            .iter()
            .filter(|p| sel.matches_object(p))
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    let min = pdb.pointer("/spec/minAvailable").filter(|v| !v.is_null());
    let max = pdb.pointer("/spec/maxUnavailable").filter(|v| !v.is_null());
    let needs_scale = max.is_some() || min.is_some_and(Value::is_string);
    let (expected, desired) = if needs_scale {
        match expected_scale(client, ns, &matched).await {
            Ok(scale) => match (max, min) {
                (Some(m), _) => (scale, (scale - scaled(m, scale).unwrap_or(0)).max(0)),
                (None, Some(m)) => (scale, scaled(m, scale).unwrap_or(0)),
                _ => (scale, 0),
            },
            Err(message) => {
                // Fail safe: nothing may be disrupted.
                status["disruptionsAllowed"] = json!(0);
                status["observedGeneration"] = json!(generation);
                set_condition(&mut status, false, "SyncFailed", &message, generation);
                return status;
            }
        }
    } else {
        (
            matched.len() as i64,
            min.and_then(|m| scaled(m, 0)).unwrap_or(0),
        )
    };
    let now = jiff::Timestamp::now();
    let mut disrupted = serde_json::Map::new();
    if let Some(map) = status.get("disruptedPods").and_then(Value::as_object) {
        for (name, when) in map {
            let live = matched.iter().any(|p| {
                p.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                    && p.pointer("/metadata/deletionTimestamp").is_none()
            });
            let fresh = when
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .and_then(|t| t.checked_add(DELETION_TIMEOUT).ok())
                .is_some_and(|t| t > now);
            if live && fresh {
                disrupted.insert(name.clone(), when.clone());
            }
        }
    }
    let healthy = matched
        .iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|p| {
            let name = p
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            !disrupted.contains_key(name)
        })
        .filter(|p| ready(p))
        .count() as i64;
    let allowed = (healthy - desired).max(0);
    status["currentHealthy"] = json!(healthy);
    status["desiredHealthy"] = json!(desired);
    status["expectedPods"] = json!(expected);
    status["disruptionsAllowed"] = json!(allowed);
    status["observedGeneration"] = json!(generation);
    if disrupted.is_empty() {
        if let Some(o) = status.as_object_mut() {
            o.remove("disruptedPods");
        }
    } else {
        status["disruptedPods"] = Value::Object(disrupted);
    }
    let reason = if allowed > 0 {
        "SufficientPods"
    } else {
        "InsufficientPods"
    };
    set_condition(&mut status, allowed > 0, reason, "", generation);
    status
}

/// Recomputes every budget of `ns`.
pub async fn sync(client: &Client, ns: &str) -> Result<()> {
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let list_err = |what: &'static str| {
        move |e| Error::List {
            what,
            namespace: ns.to_string(),
            source: Box::new(e),
        }
    };
    let pdbs = api
        .list(&ListParams::default())
        .await
        .map_err(list_err("poddisruptionbudgets"))?;
    if pdbs.items.is_empty() {
        return Ok(());
    }
    let pods: Vec<Value> = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(list_err("pods"))?
        .items
        .iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    for pdb in pdbs.items {
        let name = pdb.name_any();
        let mut v = serde_json::to_value(&pdb).map_err(|_| Error::Convert(name.clone()))?;
        let status = compute(client, ns, &v, &pods).await;
        if v.get("status") == Some(&status) {
            continue;
        }
        v["status"] = status;
        let updated: PodDisruptionBudget =
            serde_json::from_value(v).map_err(|_| Error::Convert(name.clone()))?;
        match api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {}
            // Another writer (an eviction) won; the watch brings it back.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => {
                return Err(Error::Status {
                    namespace: ns.into(),
                    name,
                    source: Box::new(e),
                })
            }
        }
    }
    Ok(())
}

/// Starts the disruption controller in a controller manager.
pub(crate) fn start(
    ctx: crate::context::Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let controller = DisruptionController::new().with_resync(ctx.config.resync);
        if let Err(e) = controller.run(ctx.client, shutdown).await {
            tracing::warn!(error = %e, "the disruption controller stopped with an error");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up() {
        assert_eq!(scaled(&json!("50%"), 3), Some(2));
        assert_eq!(scaled(&json!(2), 3), Some(2));
        assert_eq!(scaled(&json!("x"), 3), None);
    }
}

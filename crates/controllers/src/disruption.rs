//! The disruption controller (kube-controller-manager's disruption):
//! computes every PodDisruptionBudget's status from the pods its
//! selector matches: expectedPods (the pods, or the scale of their
//! controllers when a percentage or maxUnavailable needs it),
//! desiredHealthy, currentHealthy (Ready pods not being deleted nor
//! recently evicted), disruptionsAllowed, observedGeneration, the
//! disruptedPods the eviction subresource recorded (dropped once the pod
//! is gone or two minutes passed) and the DisruptionAllowed condition.
//! Pods without a controller where one is needed are left out of the
//! expected pods with an `UnmanagedPods` warning, and a controller that
//! is not found makes the budget fail safe (no disruptions,
//! `SyncFailed`), as upstream. One budget is reconciled at a
//! time, from the manager's shared informers only: on its own changes,
//! on changes of the pods its selector matches, when its oldest eviction
//! record expires, and every resync period. The scale of the pods'
//! controllers is read from the informers of their kinds, started the
//! first time a budget needs one. It writes only budget status.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use serde_json::{json, Value};
use skiff_api::selectors::LabelSelector;
use skiff_client::informer::Watched;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::manager::Config;
use crate::runner::{self, Failures};

/// How long a reconcile waits for the first list of a pod controller's
/// kind before calling the pod's controller missing.
const SCALE_WAIT: Duration = Duration::from_secs(10);

/// How long an eviction's record keeps a pod out of currentHealthy
/// (upstream `DeletionTimeout`).
const DELETION_TIMEOUT: jiff::SignedDuration = jiff::SignedDuration::from_secs(120);

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
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

/// The controller, on informers of its own (the manager's [`start`]
/// shares the manager's).
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
        let config = Config {
            resync: self.resync,
            ..Config::default()
        };
        let ctx = Context::new(client, Arc::new(config), shutdown.child_token());
        start(ctx, shutdown).await;
        Ok(())
    }
}

struct State {
    context: Context,
    recorder: Recorder,
    pods: Store<Pod>,
    failures: Failures,
}

/// Starts the disruption controller in a controller manager.
pub(crate) fn start(
    ctx: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let budgets = ctx.informers.get::<PodDisruptionBudget>();
        let pods = ctx.informers.get::<Pod>();
        let matched = Matched {
            budgets: budgets.store(),
            pods: pods.store(),
            last: Arc::default(),
        };
        let controller = Controller::for_stream(budgets.objects(), budgets.store())
            // A pod's change reaches the budgets that select it, and those
            // that selected it before (upstream `updatePod` enqueues both).
            .watches_stream(pods.objects(), move |pod: Pod| matched.budgets_of(&pod));
        let state = Arc::new(State {
            recorder: ctx.recorder("disruption-controller"),
            pods: pods.store(),
            context: ctx,
            failures: Failures::default(),
        });
        pods.ready().await;
        runner::run(
            "disruption",
            &budgets,
            controller,
            2,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
    })
}

/// Budgets by reference.
type Budgets = Vec<ObjectRef<PodDisruptionBudget>>;

/// Which budgets a pod's change reaches.
struct Matched {
    budgets: Store<PodDisruptionBudget>,
    pods: Store<Pod>,
    /// The budgets each pod matched at its last change (only pods some
    /// budget matched; a pod leaves once it is gone from the store).
    last: Arc<Mutex<HashMap<ObjectRef<Pod>, Budgets>>>,
}

impl Matched {
    fn budgets_of(&self, pod: &Pod) -> Budgets {
        let labels = pod.labels();
        let ns = pod.namespace();
        let now: Vec<_> = self
            .budgets
            .state()
            .into_iter()
            .filter(|b| b.namespace() == ns && selects(b, labels))
            .map(|b| ObjectRef::from_obj(&*b))
            .collect();
        let key = ObjectRef::from_obj(pod);
        let present = self.pods.get(&key).is_some();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let before = if present && !now.is_empty() {
            last.insert(key, now.clone())
        } else {
            last.remove(&key)
        };
        let mut all = now;
        for b in before.unwrap_or_default() {
            if !all.contains(&b) {
                all.push(b);
            }
        }
        all
    }
}

/// The budget's selector (none selects nothing, as upstream's policy/v1).
fn selector(pdb: &PodDisruptionBudget) -> Option<LabelSelector> {
    match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        None => Some(LabelSelector::nothing()),
        Some(s) => LabelSelector::from_json(&serde_json::to_value(s).ok()?).ok(),
    }
}

/// Whether `pdb` selects a pod labelled `labels`.
fn selects(pdb: &PodDisruptionBudget, labels: &BTreeMap<String, String>) -> bool {
    selector(pdb)
        .is_some_and(|s| s.matches_by(|k| labels.get(k).map(|v| Cow::Borrowed(v.as_str()))))
}

fn key(pdb: &PodDisruptionBudget) -> String {
    format!("{}/{}", pdb.namespace().unwrap_or_default(), pdb.name_any())
}

fn error_policy(pdb: Arc<PodDisruptionBudget>, _: &Error, state: Arc<State>) -> Action {
    Action::requeue(state.failures.next_delay(&key(&pdb)))
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

/// The `spec.replicas` of `kind` `name` in `ns` with uid `uid` from its
/// informer (started now if no other controller follows the kind), and
/// its controller's owner reference: `None` when it is not there.
async fn scale_of<K>(ctx: &Context, ns: &str, name: &str, uid: &str) -> Option<(i64, Option<Value>)>
where
    K: Watched + serde::Serialize,
{
    let informer = ctx.informers.get::<K>();
    tokio::time::timeout(SCALE_WAIT, informer.ready())
        .await
        .ok()?;
    let obj = informer.store().get(&ObjectRef::new(name).within(ns))?;
    if obj.meta().uid.as_deref() != Some(uid) {
        return None;
    }
    let v = serde_json::to_value(&*obj).ok()?;
    let replicas = v
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let owner = v
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
        .cloned();
    Some((replicas, owner))
}

/// The scale of the controllers of `pods` (upstream `getExpectedScale`):
/// ReplicaSets (their Deployment's when they have one), StatefulSets and
/// ReplicationControllers, read from informers, and whether some pod has
/// no controller (left out, as upstream); an error names a pod whose
/// controller is not found.
async fn expected_scale(ctx: &Context, ns: &str, pods: &[Value]) -> Result<(i64, bool), String> {
    let mut seen: BTreeMap<String, i64> = BTreeMap::new();
    let mut unmanaged = false;
    for pod in pods {
        let none = || {
            format!(
                "found no controllers for pod \"{}\"",
                pod.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        };
        let owner = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r["controller"] == true));
        let Some(owner) = owner else {
            unmanaged = true;
            continue;
        };
        let kind = owner["kind"].as_str().unwrap_or("");
        let name = owner["name"].as_str().unwrap_or("");
        let uid = owner["uid"].as_str().unwrap_or("");
        let found = match kind {
            "ReplicaSet" => match scale_of::<ReplicaSet>(ctx, ns, name, uid).await {
                Some((replicas, Some(d))) if d["kind"] == "Deployment" => {
                    let d_name = d["name"].as_str().unwrap_or("");
                    let d_uid = d["uid"].as_str().unwrap_or("");
                    scale_of::<Deployment>(ctx, ns, d_name, d_uid)
                        .await
                        .map(|(r, _)| (format!("deployments/{d_name}"), r))
                        .or(Some((format!("replicasets/{name}"), replicas)))
                }
                Some((replicas, _)) => Some((format!("replicasets/{name}"), replicas)),
                None => None,
            },
            "StatefulSet" => scale_of::<StatefulSet>(ctx, ns, name, uid)
                .await
                .map(|(r, _)| (format!("statefulsets/{name}"), r)),
            "ReplicationController" => scale_of::<ReplicationController>(ctx, ns, name, uid)
                .await
                .map(|(r, _)| (format!("replicationcontrollers/{name}"), r)),
            _ => None,
        };
        let (target, replicas) = found.ok_or_else(none)?;
        seen.insert(target, replicas);
    }
    Ok((seen.values().sum(), unmanaged))
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

/// The status a budget should have, given the namespace's pods, and
/// whether it selects pods without a controller that its expected pods
/// leave out.
async fn compute(ctx: &Context, ns: &str, pdb: &Value, pods: &[Value]) -> (Value, bool) {
    let mut unmanaged = false;
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
        match expected_scale(ctx, ns, &matched).await {
            Ok((scale, without)) => {
                unmanaged = without;
                match (max, min) {
                    (Some(m), _) => (scale, (scale - scaled(m, scale).unwrap_or(0)).max(0)),
                    (None, Some(m)) => (scale, scaled(m, scale).unwrap_or(0)),
                    _ => (scale, 0),
                }
            }
            Err(message) => {
                // Fail safe: nothing may be disrupted.
                status["disruptionsAllowed"] = json!(0);
                status["observedGeneration"] = json!(generation);
                set_condition(&mut status, false, "SyncFailed", &message, generation);
                return (status, false);
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
    (status, unmanaged)
}

/// Recomputes the status of one budget from the pods it selects.
async fn reconcile(pdb: Arc<PodDisruptionBudget>, state: Arc<State>) -> Result<Action> {
    let ns = pdb.namespace().unwrap_or_default();
    let name = pdb.name_any();
    let pods: Vec<Value> = state
        .pods
        .state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(ns.as_str()))
        // Only the pods it selects (compute selects them again).
        .filter(|p| selects(&pdb, p.labels()))
        .filter_map(|p| serde_json::to_value(&**p).ok())
        .collect();
    let mut v = serde_json::to_value(&*pdb).map_err(|_| Error::Convert(name.clone()))?;
    let (status, unmanaged) = compute(&state.context, &ns, &v, &pods).await;
    if unmanaged {
        state.recorder.record_for(
            &reference_to(&*pdb),
            EventType::Warning,
            "UnmanagedPods",
            "",
            &unmanaged_message(&pdb),
        );
    }
    let recheck = recheck_after(&status, jiff::Timestamp::now());
    if v.get("status") != Some(&status) {
        v["status"] = status;
        let updated: PodDisruptionBudget =
            serde_json::from_value(v).map_err(|_| Error::Convert(name.clone()))?;
        let api: Api<PodDisruptionBudget> = Api::namespaced(state.context.client.clone(), &ns);
        match api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {}
            // Another writer (an eviction) won; its change brings the
            // budget back here.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => {
                return Err(Error::Status {
                    namespace: ns,
                    name,
                    source: Box::new(e),
                })
            }
        }
    }
    state.failures.forget(&key(&pdb));
    let resync = state.context.config.resync;
    Ok(Action::requeue(recheck.map_or(resync, |r| r.min(resync))))
}

/// Upstream's UnmanagedPods warning, with the selector as Go prints it.
fn unmanaged_message(pdb: &PodDisruptionBudget) -> String {
    let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    let labels: String = selector
        .and_then(|s| s.match_labels.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {v},"))
        .collect();
    let expressions: String = selector
        .and_then(|s| s.match_expressions.as_ref())
        .into_iter()
        .flatten()
        .map(|e| {
            let values = e.values.as_deref().unwrap_or_default().join(" ");
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{values}],}},",
                e.key, e.operator
            )
        })
        .collect();
    let printed = if selector.is_some() {
        format!(
            "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
        )
    } else {
        "nil".to_string()
    };
    format!(
        "Pods selected by this PodDisruptionBudget (selector: {printed}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
    )
}

/// When the oldest eviction record of `status` expires (upstream requeues
/// the budget for then: `enqueuePdbForRecheck`).
fn recheck_after(status: &Value, now: jiff::Timestamp) -> Option<Duration> {
    status
        .get("disruptedPods")
        .and_then(Value::as_object)?
        .values()
        .filter_map(|t| t.as_str()?.parse::<jiff::Timestamp>().ok())
        .filter_map(|t| t.checked_add(DELETION_TIMEOUT).ok())
        .map(|expiry| {
            let left = expiry.duration_since(now);
            Duration::try_from(left).unwrap_or_default() + Duration::from_millis(100)
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_rechecked_when_its_oldest_eviction_record_expires() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let status = json!({"disruptedPods": {
            "a": "2026-01-01T00:00:30Z",
            "b": "2026-01-01T00:00:00Z",
        }});
        assert_eq!(
            recheck_after(&status, now),
            Some(Duration::from_millis(60_100))
        );
        assert_eq!(recheck_after(&json!({}), now), None);
    }

    #[test]
    fn a_pod_reaches_the_budgets_that_select_it() {
        let pdb = |sel: Value| -> PodDisruptionBudget {
            serde_json::from_value(json!({"metadata": {"name": "b"}, "spec": {"selector": sel}}))
                .unwrap()
        };
        let labels = BTreeMap::from([("app".to_string(), "a".to_string())]);
        assert!(selects(&pdb(json!({"matchLabels": {"app": "a"}})), &labels));
        assert!(!selects(
            &pdb(json!({"matchLabels": {"app": "b"}})),
            &labels
        ));
        assert!(!selects(&pdb(Value::Null), &labels));
    }

    #[test]
    fn the_unmanaged_pods_warning_prints_the_selector_as_go() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "b"},
            "spec": {"selector": {
                "matchLabels": {"app": "a", "tier": "web"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["x", "y"]}],
            }},
        }))
        .unwrap();
        assert_eq!(
            unmanaged_message(&pdb),
            "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: a,tier: web,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:env,Operator:In,Values:[x y],},},}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
    }

    #[test]
    fn percentages_round_up() {
        assert_eq!(scaled(&json!("50%"), 3), Some(2));
        assert_eq!(scaled(&json!(2), 3), Some(2));
        assert_eq!(scaled(&json!("x"), 3), None);
    }
}

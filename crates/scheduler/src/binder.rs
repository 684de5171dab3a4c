//! Binding: POST pods/NAME/binding from a pool of bind tasks, so the loop
//! schedules the next pod while the API calls are in flight.
//!
//! This module owns [`Binder`] (the queue of pods to bind and up to
//! [`MAX_BINDS_IN_FLIGHT`] tasks working it), the binding request, the
//! PreBind work plugins asked for (for VolumeBinding: pre-bind volumes,
//! annotate claims with the selected node, then watch until they are bound
//! or provisioning failed, bounded by the plugin's timeout) and
//! [`BindOutcome`], the message a bind task sends back to the scheduling
//! loop (which then confirms or forgets the assumed pod and requeues on
//! failure). After reporting, the task records the `Scheduled` event, or a
//! `FailedScheduling` one for failed PreBind work or a rejected binding.
//! A pod that waited carries its wait record ([`SchedulingWait`], stamped
//! with the binding's time) as an annotation of its Binding (the API
//! server merges it onto the pod in the same write).
//! It does not touch the queue or the cache itself.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{
    Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinSet;

use crate::framework::{pod_key, ClaimRef, PreBind, VolumeBindings};
use skiff_api::scheduling_wait::{SchedulingWait, ANNOTATION as WAIT_ANNOTATION};
use skiff_client::recorder::{EventType, Recorder};

/// Errors binding a pod.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The API server refused or the request failed.
    #[error("binding pod {pod} to node {node}")]
    Post {
        /// `namespace/name`.
        pod: String,
        /// The chosen node.
        node: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A plugin's PreBind work failed; the pod was not bound.
    #[error("running PreBind plugin {plugin:?} for pod {pod} on node {node}: {message}")]
    PreBind {
        /// `namespace/name`.
        pod: String,
        /// The chosen node.
        node: String,
        /// The plugin.
        plugin: &'static str,
        /// What failed, in upstream's words.
        message: String,
    },
}

impl BindError {
    /// What the FailedScheduling event says.
    pub fn event_message(&self) -> String {
        match self {
            Self::Post { source, .. } => match source {
                kube::Error::Api(s) => format!("Binding rejected: {}", s.message),
                other => format!("Binding rejected: {other}"),
            },
            Self::PreBind {
                plugin, message, ..
            } => format!("running PreBind plugin {plugin:?}: {message}"),
        }
    }
}

/// `Result` with [`BindError`].
pub type Result<T, E = BindError> = std::result::Result<T, E>;

/// What a bind task reports to the loop.
#[derive(Debug)]
pub struct BindOutcome {
    /// `namespace/name`.
    pub key: String,
    /// The chosen node.
    pub node: String,
    /// Whether the binding was accepted.
    pub result: Result<()>,
}

/// Most bindings in flight at once. A binding in flight is a task holding
/// its request's state (kilobytes); a pod waiting for one of the tasks is
/// only its queue entry. This many lets the store commit many bindings
/// together, and kept a burst of 10,000 pods from holding ~90 MB of
/// request state in a separate scheduler process.
pub const MAX_BINDS_IN_FLIGHT: usize = 128;

/// One pod to bind, the PreBind work before it (by plugin), and the
/// [`SchedulingWait`] of a pod that waited.
type Job = (
    Arc<Pod>,
    String,
    Vec<(&'static str, PreBind)>,
    Option<SchedulingWait>,
);

/// The pods waiting to be bound, worked by a pool of bind tasks.
#[derive(Debug)]
pub struct Binder {
    queue: mpsc::UnboundedSender<Job>,
}

impl Binder {
    /// Starts the bind tasks in `tasks` (aborted with them); each outcome
    /// goes to `outcomes`, then the task records the event.
    pub fn start(
        tasks: &mut JoinSet<()>,
        client: &Client,
        recorder: &Recorder,
        outcomes: &mpsc::UnboundedSender<BindOutcome>,
    ) -> Self {
        let (queue, rx) = mpsc::unbounded_channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..MAX_BINDS_IN_FLIGHT {
            let (rx, client, recorder, outcomes) = (
                rx.clone(),
                client.clone(),
                recorder.clone(),
                outcomes.clone(),
            );
            tasks.spawn(async move {
                loop {
                    let next = rx.lock().await.recv().await;
                    let Some((pod, node, pre_bind, wait)) = next else {
                        return;
                    };
                    let key = pod_key(&pod);
                    let job =
                        bind_and_report(&client, &recorder, (pod, node, pre_bind, wait), &outcomes);
                    // A panic loses this binding (as a task per pod did),
                    // not the worker.
                    if std::panic::AssertUnwindSafe(job)
                        .catch_unwind()
                        .await
                        .is_err()
                    {
                        tracing::error!(pod = %key, "binding panicked");
                    }
                }
            });
        }
        Self { queue }
    }

    /// Queues the binding of `pod` to `node`.
    pub fn bind(&self, pod: Arc<Pod>, node: String) {
        self.bind_after(pod, node, Vec::new(), None);
    }

    /// Queues the binding of `pod` to `node`, after the plugins' PreBind
    /// work (in order, stopping at the first failure); `wait` is the
    /// wait record of a pod that waited.
    pub fn bind_after(
        &self,
        pod: Arc<Pod>,
        node: String,
        pre_bind: Vec<(&'static str, PreBind)>,
        wait: Option<SchedulingWait>,
    ) {
        // Closed only when the term's tasks are gone: nothing left to do.
        let _ = self.queue.send((pod, node, pre_bind, wait));
    }
}

const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Where a claim PreBind waits for stands (upstream `checkBindings`).
#[derive(Debug, PartialEq, Eq)]
enum ClaimProgress {
    /// Not yet.
    Waiting,
    /// Bound: a volume, the binding completed, phase Bound (what the node
    /// agent needs to mount it).
    Bound,
    /// It will not be: the reason.
    Failed(String),
}

fn claim_progress(
    claim: Option<&PersistentVolumeClaim>,
    wanted: &ClaimRef,
    provisioning_on: Option<&str>,
) -> ClaimProgress {
    let gone =
        || ClaimProgress::Failed(format!("persistentvolumeclaim {:?} not found", wanted.name));
    let Some(claim) = claim else {
        return gone();
    };
    if wanted.uid.is_some() && claim.metadata.uid != wanted.uid {
        return gone();
    }
    let annotations = claim.metadata.annotations.as_ref();
    if let Some(node) = provisioning_on {
        // The provisioner hands a failed claim back by removing it.
        if annotations
            .and_then(|a| a.get(ANN_SELECTED_NODE))
            .map(String::as_str)
            != Some(node)
        {
            return ClaimProgress::Failed(format!("provisioning failed for PVC {:?}", wanted.name));
        }
    }
    let bound = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty())
        && annotations.is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED))
        && claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if bound {
        ClaimProgress::Bound
    } else {
        ClaimProgress::Waiting
    }
}

/// VolumeBinding's PreBind (upstream `BindPodVolumes`): the writes, then
/// a watch of each claim until it is bound, it fails, or `timeout`.
async fn bind_volumes(client: &Client, node: &str, work: &VolumeBindings) -> Result<(), String> {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    for volume in &work.volumes {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        volumes
            .replace(name, &PostParams::default(), volume)
            .await
            .map_err(|e| api_message(&e))?;
    }
    for claim in &work.provision {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &claim.namespace);
        // The UID in the body is a precondition: not a claim recreated since.
        let patch = serde_json::json!({
            "metadata": {"uid": claim.uid, "annotations": {ANN_SELECTED_NODE: node}}
        });
        api.patch(&claim.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| api_message(&e))?;
    }
    let deadline = tokio::time::Instant::now() + work.timeout;
    for wanted in &work.wait_for {
        let provisioning_on = work.provision.contains(wanted).then_some(node);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &wanted.namespace);
        let settled = |c: Option<&PersistentVolumeClaim>| {
            claim_progress(c, wanted, provisioning_on) != ClaimProgress::Waiting
        };
        let claim =
            match tokio::time::timeout_at(deadline, await_condition(api, &wanted.name, settled))
                .await
            {
                Err(_) => return Err("binding volumes: timed out waiting for the condition".into()),
                Ok(Err(e)) => return Err(format!("binding volumes: failed to check binding: {e}")),
                Ok(Ok(claim)) => claim,
            };
        match claim_progress(claim.as_ref(), wanted, provisioning_on) {
            ClaimProgress::Bound => {}
            ClaimProgress::Failed(why) => return Err(format!("binding volumes: {why}")),
            ClaimProgress::Waiting => {
                return Err("binding volumes: timed out waiting for the condition".into())
            }
        }
    }
    Ok(())
}

/// Runs the PreBind work of each plugin in order.
async fn pre_bind(
    client: &Client,
    pod: &Pod,
    node: &str,
    work: &[(&'static str, PreBind)],
) -> Result<()> {
    for (plugin, work) in work {
        let done = match work {
            PreBind::Volumes(volumes) => bind_volumes(client, node, volumes).await,
        };
        done.map_err(|message| BindError::PreBind {
            pod: pod_key(pod),
            node: node.to_string(),
            plugin,
            message,
        })?;
    }
    Ok(())
}

/// POSTs the binding of `pod` to `node`, with `wait` (the wait record of
/// a pod that waited, stamped with the binding's time) as an annotation.
pub async fn bind(
    client: Client,
    pod: &Pod,
    node: &str,
    wait: Option<&SchedulingWait>,
) -> Result<()> {
    let wait = wait.map(|w| {
        let mut w = w.clone();
        w.binding_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        w.to_json()
    });
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: pod.metadata.uid.clone(),
            annotations: wait.map(|w| [(WAIT_ANNOTATION.to_string(), w)].into()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    let api: Api<Pod> = Api::namespaced(client, namespace);
    api.create_subresource::<_, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await
    .map(|_| ())
    .map_err(|source| BindError::Post {
        pod: pod_key(pod),
        node: node.to_string(),
        source,
    })
}

/// Runs the PreBind work, binds, reports the outcome on `outcomes`, then
/// records the event.
async fn bind_and_report(
    client: &Client,
    recorder: &Recorder,
    (pod, node, work, wait): Job,
    outcomes: &mpsc::UnboundedSender<BindOutcome>,
) {
    let key = pod_key(&pod);
    let result = match pre_bind(client, &pod, &node, &work).await {
        Ok(()) => bind(client.clone(), &pod, &node, wait.as_ref()).await,
        Err(e) => Err(e),
    };
    let event = match &result {
        Ok(()) => (
            EventType::Normal,
            "Scheduled",
            "Binding",
            format!("Successfully assigned {key} to {node}"),
        ),
        Err(e) => {
            tracing::info!(pod = %key, %node, error = %e, message = %e.event_message(), "binding failed");
            (
                EventType::Warning,
                "FailedScheduling",
                "Scheduling",
                e.event_message(),
            )
        }
    };
    // The loop may be gone (lost leadership): nothing left to tell.
    let _ = outcomes.send(BindOutcome {
        key: key.clone(),
        node,
        result,
    });
    let (type_, reason, action, message) = event;
    recorder.record(&pod, type_, reason, action, &message);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PersistentVolumeClaimStatus};
    use std::collections::BTreeMap;

    fn claim(
        annotations: &[(&str, &str)],
        volume: Option<&str>,
        phase: &str,
    ) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                volume_name: volume.map(String::from),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_claim_is_waited_for_until_bound_or_handed_back() {
        let wanted = ClaimRef {
            namespace: "default".into(),
            name: "data".into(),
            uid: Some("u1".into()),
        };
        let on_n1 = Some("n1");
        let selected = (ANN_SELECTED_NODE, "n1");
        let completed = (ANN_BIND_COMPLETED, "yes");
        let progress = |c: &PersistentVolumeClaim, node| claim_progress(Some(c), &wanted, node);
        assert_eq!(
            progress(&claim(&[selected], None, "Pending"), on_n1),
            ClaimProgress::Waiting
        );
        // Named but not completed, or completed but not yet Bound: not yet.
        assert_eq!(
            progress(&claim(&[selected], Some("pv"), "Pending"), on_n1),
            ClaimProgress::Waiting
        );
        assert_eq!(
            progress(&claim(&[selected, completed], Some("pv"), "Pending"), on_n1),
            ClaimProgress::Waiting
        );
        assert_eq!(
            progress(&claim(&[selected, completed], Some("pv"), "Bound"), on_n1),
            ClaimProgress::Bound
        );
        // The provisioner removed the selected node: provisioning failed.
        assert_eq!(
            progress(&claim(&[], None, "Pending"), on_n1),
            ClaimProgress::Failed("provisioning failed for PVC \"data\"".into())
        );
        // A static binding has no selected node to lose.
        assert_eq!(
            progress(&claim(&[completed], Some("pv"), "Bound"), None),
            ClaimProgress::Bound
        );
        let gone = ClaimProgress::Failed("persistentvolumeclaim \"data\" not found".into());
        assert_eq!(claim_progress(None, &wanted, on_n1), gone);
        let mut recreated = claim(&[selected], None, "Pending");
        recreated.metadata.uid = Some("u2".into());
        assert_eq!(progress(&recreated, on_n1), gone);
    }
}

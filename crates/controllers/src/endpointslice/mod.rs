//! The EndpointSlice controller (upstream's `endpoint-slice-controller`):
//! every Service with a selector has EndpointSlices listing its pods, at
//! most `--max-endpoints-per-slice` endpoints each, labelled with
//! `kubernetes.io/service-name` and managed by
//! `endpointslice-controller.k8s.io`, owned by the Service (so the
//! garbage collector deletes them with it, as upstream: this controller
//! does not). What to write is [`reconciler`]'s; this module reads the
//! informers, writes, and waits for its own writes to reach the informer
//! before computing again (upstream's `EndpointSliceTracker`), so a slow
//! watch never makes it create a slice twice.
//!
//! Services without a selector and `ExternalName` Services are left
//! alone, and so are slices it does not manage (the API server's
//! `kubernetes` slice, mirrored or hand-made ones). Pods and Nodes come
//! from the shared informers, never from a LIST.

pub mod reconciler;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use skiff_client::recorder::{EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::endpointutil::{self, Memberships, TriggerTimes};
use crate::runner::{self, Failures};
use reconciler::{Plan, CONTROLLER_NAME, MANAGED_BY_LABEL, SERVICE_NAME_LABEL};

const COMPONENT: &str = "endpoint-slice-controller";
/// How long a write may take to show in the informer before it is no
/// longer waited for.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors of one sync (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This controller's last writes are not in the informer yet.
    #[error("EndpointSlice informer cache is out of date")]
    StaleCache,
    /// A write failed.
    #[error("{what} EndpointSlice for Service {namespace}/{name}")]
    Write {
        /// Which write.
        what: &'static str,
        /// Where.
        namespace: String,
        /// Which Service.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Some pods were left out: their Nodes are unknown.
    #[error("skipping pods of Service {namespace}/{name}: Node(s) {nodes} not found")]
    NodesNotFound {
        /// Where.
        namespace: String,
        /// Which Service.
        name: String,
        /// The missing Nodes.
        nodes: String,
    },
}

/// What the controller expects the informer to show of a slice it wrote.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// At least this resourceVersion.
    Written(u64),
    /// Gone.
    Deleted,
}

/// The writes of this controller not yet seen in the informer, per
/// Service (upstream's `EndpointSliceTracker`).
#[derive(Debug, Default)]
struct Tracker(Mutex<HashMap<String, Expected>>);

/// Per slice name: what is expected and since when.
type Expected = HashMap<String, (Expect, Instant)>;

fn version(slice: &EndpointSlice) -> Option<u64> {
    slice.metadata.resource_version.as_deref()?.parse().ok()
}

impl Tracker {
    fn expect(&self, service: &str, slice: &str, what: Expect) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(service.to_string())
            .or_default()
            .insert(slice.to_string(), (what, Instant::now()));
    }

    /// Whether the informer shows every write for `service` (those it
    /// shows, or that timed out, are forgotten).
    fn caught_up(&self, service: &str, namespace: &str, slices: &Store<EndpointSlice>) -> bool {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(expected) = all.get_mut(service) else {
            return true;
        };
        expected.retain(|name, (what, since)| {
            if since.elapsed() > EXPECTATION_TIMEOUT {
                return false;
            }
            let seen = slices.get(&ObjectRef::new(name).within(namespace));
            let done = match (what, seen) {
                (Expect::Deleted, seen) => seen.is_none(),
                (Expect::Written(_), None) => false,
                (Expect::Written(v), Some(s)) => version(&s).is_none_or(|seen| seen >= *v),
            };
            !done
        });
        let caught_up = expected.is_empty();
        if caught_up {
            all.remove(service);
        }
        caught_up
    }

    fn forget(&self, service: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(service);
    }
}

struct State {
    context: Context,
    pods: Store<Pod>,
    nodes: Store<Node>,
    slices: Store<EndpointSlice>,
    triggers: TriggerTimes,
    tracker: Tracker,
    recorder: Recorder,
    failures: Failures,
    max_per_slice: usize,
}

/// The Service a managed slice belongs to.
fn service_of(slice: &EndpointSlice) -> Option<ObjectRef<Service>> {
    let labels = slice.metadata.labels.as_ref()?;
    if labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(CONTROLLER_NAME) {
        return None;
    }
    let name = labels.get(SERVICE_NAME_LABEL)?;
    Some(ObjectRef::new(name).within(slice.metadata.namespace.as_deref().unwrap_or_default()))
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let services = context.informers.get::<Service>();
        let pods = context.informers.get::<Pod>();
        let nodes = context.informers.get::<Node>();
        let slices = context.informers.get::<EndpointSlice>();
        let memberships = Arc::new(Memberships::default());
        let (service_store, pod_store) = (services.store(), pods.store());
        let controller = Controller::for_stream(services.objects(), services.store())
            .watches_stream(pods.objects(), move |pod: Pod| {
                memberships.services_for(&pod, &service_store, &pod_store)
            })
            .watches_stream(slices.objects(), |slice: EndpointSlice| service_of(&slice));
        let state = Arc::new(State {
            pods: pods.store(),
            nodes: nodes.store(),
            slices: slices.store(),
            recorder: context.recorder(COMPONENT),
            max_per_slice: context.config.max_endpoints_per_slice.max(1),
            context,
            triggers: TriggerTimes::default(),
            tracker: Tracker::default(),
            failures: Failures::default(),
        });
        tokio::join!(
            services.ready(),
            pods.ready(),
            nodes.ready(),
            slices.ready()
        );
        let forget = {
            let state = state.clone();
            runner::on_deleted(services.changes(), shutdown.clone(), move |svc| {
                forget_deleted(&state, svc)
            })
        };
        tokio::join!(
            runner::run(
                "endpointslice",
                &services,
                controller,
                5,
                reconcile,
                error_policy,
                state,
                shutdown,
            ),
            forget
        );
    })
}

/// Drops what is kept about a deleted Service (its slices go with the
/// garbage collector).
fn forget_deleted(state: &State, svc: &Service) {
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    state.triggers.forget(&ns, &name);
    state.tracker.forget(&format!("{ns}/{name}"));
}

async fn reconcile(svc: Arc<Service>, state: Arc<State>) -> Result<Action, Error> {
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let key = format!("{ns}/{name}");
    if endpointutil::selector(&svc).is_none() {
        return Ok(Action::await_change());
    }
    if !state.tracker.caught_up(&key, &ns, &state.slices) {
        return Err(Error::StaleCache);
    }
    let pods = endpointutil::pods_of(&svc, &state.pods);
    let existing: Vec<Arc<EndpointSlice>> = state
        .slices
        .state()
        .into_iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|s| service_of(s).is_some_and(|r| r.name == name))
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .collect();
    // Computed on every sync so the tracker sees every state.
    let trigger = state.triggers.compute(&svc, &pods);
    let nodes = state.nodes.clone();
    let zone = move |node: &str| {
        nodes.get(&ObjectRef::new(node)).map(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(reconciler::ZONE_LABEL).cloned())
                .filter(|z| !z.is_empty())
        })
    };
    let plan = reconciler::plan(&svc, &pods, &zone, &existing, state.max_per_slice);
    let missing = plan.missing_nodes.clone();
    if let Err(e) = write(&svc, plan, trigger, &state).await {
        let msg = format!(
            "Error updating Endpoint Slices for Service {key}: {}",
            runner::Chain(&e)
        );
        let reference = skiff_client::recorder::reference_to(&*svc);
        state.recorder.record_for(
            &reference,
            EventType::Warning,
            "FailedToUpdateEndpointSlices",
            "Update",
            &msg,
        );
        return Err(e);
    }
    if !missing.is_empty() {
        return Err(Error::NodesNotFound {
            namespace: ns,
            name,
            nodes: missing.join(", "),
        });
    }
    state.failures.forget(&key);
    Ok(Action::await_change())
}

fn with_trigger(
    mut slice: EndpointSlice,
    trigger: Option<k8s_openapi::jiff::Timestamp>,
) -> EndpointSlice {
    let annotations = slice
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    match trigger {
        Some(t) => {
            annotations.insert(endpointutil::LAST_CHANGE_TRIGGER_TIME.into(), t.to_string());
        }
        None => {
            annotations.remove(endpointutil::LAST_CHANGE_TRIGGER_TIME);
        }
    }
    if annotations.is_empty() {
        slice.metadata.annotations = None;
    }
    slice
}

/// Creates, updates, then deletes as planned.
async fn write(
    svc: &Service,
    plan: Plan,
    trigger: Option<k8s_openapi::jiff::Timestamp>,
    state: &State,
) -> Result<(), Error> {
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let key = format!("{ns}/{name}");
    let api: Api<EndpointSlice> = Api::namespaced(state.context.client.clone(), &ns);
    let failed = |what: &'static str| {
        let (ns, name) = (ns.clone(), name.clone());
        move |source| Error::Write {
            what,
            namespace: ns,
            name,
            source,
        }
    };
    // Not while the Service is being deleted: the garbage collector would
    // race the new slices.
    if svc.metadata.deletion_timestamp.is_none() {
        for slice in plan.create {
            match api
                .create(&PostParams::default(), &with_trigger(slice, trigger))
                .await
            {
                Ok(created) => {
                    if let (Some(n), Some(v)) =
                        (created.metadata.name.as_deref(), version(&created))
                    {
                        state.tracker.expect(&key, n, Expect::Written(v));
                    }
                }
                Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains("terminat") => {
                    return Ok(());
                }
                Err(e) => return Err(failed("failed to create")(e)),
            }
        }
    }
    for slice in plan.update {
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        let updated = api
            .replace(
                &slice_name,
                &PostParams::default(),
                &with_trigger(slice, trigger),
            )
            .await
            .map_err(failed("failed to update"))?;
        if let Some(v) = version(&updated) {
            state.tracker.expect(&key, &slice_name, Expect::Written(v));
        }
    }
    for slice in plan.delete {
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        match api.delete(&slice_name, &DeleteParams::default()).await {
            Ok(_) => state.tracker.expect(&key, &slice_name, Expect::Deleted),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(failed("failed to delete")(e)),
        }
    }
    Ok(())
}

fn error_policy(svc: Arc<Service>, _: &Error, state: Arc<State>) -> Action {
    let key = format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    );
    Action::requeue(state.failures.next_delay(&key))
}

//! The Endpoints controller (upstream's `endpoint-controller`): every
//! Service with a selector has an Endpoints object of the same name
//! listing its pods ([`subsets`] computes what), labelled as the Service
//! (plus `service.kubernetes.io/headless` for headless ones), with the
//! `endpoints.kubernetes.io/last-change-trigger-time` and, when cut,
//! `endpoints.kubernetes.io/over-capacity: truncated` annotations. It is
//! deleted with its Service, and at start Endpoints left without a
//! Service are deleted (upstream's `checkLeftoverEndpoints`).
//!
//! Services without a selector (the API server's `kubernetes` Service
//! among them) and `ExternalName` Services are left alone: their
//! Endpoints are someone else's. Pods come from the shared informer,
//! never from a LIST.

pub mod subsets;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use skiff_client::informer::Change;
use skiff_client::recorder::{EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::endpointutil::{self, Memberships, TriggerTimes, HEADLESS_LABEL};
use crate::runner::{self, Failures};

/// Marks Endpoints whose addresses were cut to [`subsets::MAX_CAPACITY`].
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// Leader-election records kept in Endpoints (never cleaned up).
const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";
const COMPONENT: &str = "endpoint-controller";

/// Errors of one sync (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This controller's last write is not in the informer yet.
    #[error("endpoints informer cache is out of date for {namespace}/{name}")]
    StaleCache {
        /// Where.
        namespace: String,
        /// Which.
        name: String,
    },
    /// Creating the Endpoints failed.
    #[error("creating endpoints {namespace}/{name}")]
    Create {
        /// Where.
        namespace: String,
        /// Which.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Updating the Endpoints failed.
    #[error("updating endpoints {namespace}/{name}")]
    Update {
        /// Where.
        namespace: String,
        /// Which.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// How long a write may take to show in the informer before it is no
/// longer waited for.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The Endpoints this controller wrote and the informer does not show
/// yet (upstream's `staleEndpointsTracker`): computing from an older
/// copy would only end in a conflict.
#[derive(Debug, Default)]
struct Written(std::sync::Mutex<std::collections::HashMap<String, (u64, std::time::Instant)>>);

fn version(ep: &Endpoints) -> Option<u64> {
    ep.metadata.resource_version.as_deref()?.parse().ok()
}

impl Written {
    fn wrote(&self, key: &str, ep: &Endpoints) {
        if let Some(v) = version(ep) {
            let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
            all.insert(key.to_string(), (v, std::time::Instant::now()));
        }
    }

    /// Whether `seen` (the informer's copy) is at least what was written.
    fn caught_up(&self, key: &str, seen: Option<&Endpoints>) -> bool {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some((v, at)) = all.get(key).copied() else {
            return true;
        };
        let done = at.elapsed() > WRITE_TIMEOUT
            || seen.is_some_and(|s| version(s).is_none_or(|seen| seen >= v));
        if done {
            all.remove(key);
        }
        done
    }

    fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

struct State {
    context: Context,
    written: Written,
    pods: Store<Pod>,
    endpoints: Store<Endpoints>,
    triggers: TriggerTimes,
    recorder: Recorder,
    failures: Failures,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let services = context.informers.get::<Service>();
        let pods = context.informers.get::<Pod>();
        let endpoints = context.informers.get::<Endpoints>();
        let memberships = Arc::new(Memberships::default());
        let (service_store, pod_store) = (services.store(), pods.store());
        let controller = Controller::for_stream(services.objects(), services.store())
            .watches_stream(pods.objects(), move |pod: Pod| {
                memberships.services_for(&pod, &service_store, &pod_store)
            })
            .watches_stream(endpoints.objects(), |ep: Endpoints| {
                let ns = ep.metadata.namespace.clone().unwrap_or_default();
                ep.metadata
                    .name
                    .map(|name| ObjectRef::<Service>::new(&name).within(&ns))
            });
        let state = Arc::new(State {
            pods: pods.store(),
            endpoints: endpoints.store(),
            recorder: context.recorder(COMPONENT),
            context,
            written: Written::default(),
            triggers: TriggerTimes::default(),
            failures: Failures::default(),
        });
        tokio::join!(services.ready(), pods.ready(), endpoints.ready());
        let cleanup = clean_up_after_services(state.clone(), services.changes(), services.store());
        tokio::join!(
            runner::run(
                "endpoint",
                &services,
                controller,
                5,
                reconcile,
                error_policy,
                state,
                shutdown.clone(),
            ),
            async move {
                tokio::select! {
                    () = cleanup => {}
                    () = shutdown.cancelled() => {}
                }
            }
        );
    })
}

/// Deletes the Endpoints of deleted Services; on each resync (the first
/// listing, or changes this subscriber missed), those of every Service
/// that is gone.
async fn clean_up_after_services(
    state: Arc<State>,
    changes: impl futures::Stream<Item = Change<Service>> + Send,
    services: Store<Service>,
) {
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        let gone: Vec<(String, String)> = match change {
            Change::Deleted(svc) => vec![(
                svc.metadata.namespace.clone().unwrap_or_default(),
                svc.metadata.name.clone().unwrap_or_default(),
            )],
            // The first listing, or deletions this subscriber missed.
            Change::Resync => state
                .endpoints
                .state()
                .iter()
                .filter(|ep| {
                    !ep.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(LEADER_ANNOTATION))
                })
                .map(|ep| {
                    (
                        ep.metadata.namespace.clone().unwrap_or_default(),
                        ep.metadata.name.clone().unwrap_or_default(),
                    )
                })
                .collect(),
            Change::Applied(_) => Vec::new(),
        };
        for (ns, name) in gone {
            if services.get(&ObjectRef::new(&name).within(&ns)).is_some() {
                continue;
            }
            state.triggers.forget(&ns, &name);
            state.written.forget(&format!("{ns}/{name}"));
            let api: Api<Endpoints> = Api::namespaced(state.context.client.clone(), &ns);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::debug!(endpoints = %format!("{ns}/{name}"), "deleted with its service")
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(endpoints = %format!("{ns}/{name}"), error = %e, "deleting the endpoints of a deleted service")
                }
            }
        }
    }
}

/// The labels of the Service's Endpoints.
fn labels_for(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.metadata.labels.clone().unwrap_or_default();
    if endpointutil::is_ip_set(svc) {
        labels.remove(HEADLESS_LABEL);
    } else {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels
}

/// The Endpoints to write for `svc`, or `None` when `current` already is.
pub fn plan(
    svc: &Service,
    pods: &[Arc<Pod>],
    current: Option<&Endpoints>,
    trigger: Option<k8s_openapi::jiff::Timestamp>,
) -> Option<Endpoints> {
    let mut wanted = subsets::desired(svc, pods);
    let truncated = subsets::truncate(&mut wanted);
    let labels = labels_for(svc);
    if let Some(cur) = current {
        let same_subsets = cur.subsets.clone().unwrap_or_default() == wanted;
        let same_labels = cur.metadata.labels.clone().unwrap_or_default() == labels;
        let marked = cur
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(OVER_CAPACITY));
        if same_subsets && same_labels && marked == truncated {
            return None;
        }
    }
    let mut ep = current.cloned().unwrap_or_else(|| Endpoints {
        metadata: ObjectMeta {
            name: svc.metadata.name.clone(),
            namespace: svc.metadata.namespace.clone(),
            ..Default::default()
        },
        ..Default::default()
    });
    ep.subsets = (!wanted.is_empty()).then_some(wanted);
    ep.metadata.labels = (!labels.is_empty()).then_some(labels);
    let annotations = ep.metadata.annotations.get_or_insert_with(Default::default);
    match trigger {
        Some(t) => {
            annotations.insert(endpointutil::LAST_CHANGE_TRIGGER_TIME.into(), t.to_string());
        }
        None => {
            annotations.remove(endpointutil::LAST_CHANGE_TRIGGER_TIME);
        }
    }
    if truncated {
        annotations.insert(OVER_CAPACITY.into(), "truncated".into());
    } else {
        annotations.remove(OVER_CAPACITY);
    }
    if annotations.is_empty() {
        ep.metadata.annotations = None;
    }
    Some(ep)
}

fn is_namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403 && s.message.contains("terminat"))
}

async fn reconcile(svc: Arc<Service>, state: Arc<State>) -> Result<Action, Error> {
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    if endpointutil::selector(&svc).is_none() {
        return Ok(Action::await_change());
    }
    let current = state.endpoints.get(&ObjectRef::new(&name).within(&ns));
    let key = format!("{ns}/{name}");
    if !state.written.caught_up(&key, current.as_deref()) {
        return Err(Error::StaleCache {
            namespace: ns,
            name,
        });
    }
    let pods = endpointutil::pods_of(&svc, &state.pods);
    // Computed on every sync so the tracker sees every state.
    let trigger = state.triggers.compute(&svc, &pods);
    let Some(ep) = plan(&svc, &pods, current.as_deref(), trigger) else {
        state.failures.forget(&key);
        return Ok(Action::await_change());
    };
    let api: Api<Endpoints> = Api::namespaced(state.context.client.clone(), &ns);
    let reference = skiff_client::recorder::reference_to(&ep);
    let written = match current {
        None => match api.create(&PostParams::default(), &ep).await {
            Err(e) if is_namespace_terminating(&e) => Ok(()),
            Err(source) => {
                let msg = format!("Failed to create endpoint for service {ns}/{name}: {source}");
                state.recorder.record_for(
                    &reference,
                    EventType::Warning,
                    "FailedToCreateEndpoint",
                    "Create",
                    &msg,
                );
                Err(Error::Create {
                    namespace: ns.clone(),
                    name: name.clone(),
                    source,
                })
            }
            Ok(created) => {
                state.written.wrote(&key, &created);
                Ok(())
            }
        },
        Some(_) => match api.replace(&name, &PostParams::default(), &ep).await {
            Err(source) => {
                let msg = format!("Failed to update endpoint {ns}/{name}: {source}");
                state.recorder.record_for(
                    &reference,
                    EventType::Warning,
                    "FailedToUpdateEndpoint",
                    "Update",
                    &msg,
                );
                Err(Error::Update {
                    namespace: ns.clone(),
                    name: name.clone(),
                    source,
                })
            }
            Ok(updated) => {
                state.written.wrote(&key, &updated);
                Ok(())
            }
        },
    };
    written?;
    state.failures.forget(&key);
    Ok(Action::await_change())
}

fn error_policy(svc: Arc<Service>, _: &Error, state: Arc<State>) -> Action {
    let key = format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    );
    Action::requeue(state.failures.next_delay(&key))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceSpec;

    use super::*;

    fn svc(cluster_ip: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                labels: Some(BTreeMap::from([("tier".into(), "front".into())])),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([("app".into(), "web".into())])),
                cluster_ip: Some(cluster_ip.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn endpoints_carry_the_services_labels_and_the_headless_mark() {
        let ep = plan(&svc("None"), &[], None, None).unwrap();
        let labels = ep.metadata.labels.unwrap();
        assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
        assert_eq!(labels.get(HEADLESS_LABEL).map(String::as_str), Some(""));
        let ep = plan(&svc("10.96.0.5"), &[], None, None).unwrap();
        assert!(!ep.metadata.labels.unwrap().contains_key(HEADLESS_LABEL));
    }

    #[test]
    fn unchanged_endpoints_are_not_written_and_trigger_times_are_annotated() {
        let t: k8s_openapi::jiff::Timestamp = "2026-01-01T00:00:00.5Z".parse().unwrap();
        let first = plan(&svc("10.96.0.5"), &[], None, Some(t)).unwrap();
        assert_eq!(
            first
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(endpointutil::LAST_CHANGE_TRIGGER_TIME))
                .map(String::as_str),
            Some("2026-01-01T00:00:00.5Z")
        );
        assert!(plan(&svc("10.96.0.5"), &[], Some(&first), None).is_none());
        let mut relabelled = svc("10.96.0.5");
        relabelled.metadata.labels = None;
        assert!(plan(&relabelled, &[], Some(&first), None).is_some());
    }
}

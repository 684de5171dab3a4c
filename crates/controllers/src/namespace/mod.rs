//! The namespace controller (upstream's `namespace-controller`): a
//! namespace being deleted (deletionTimestamp set, `kubernetes` still in
//! spec.finalizers) has everything in it deleted through the API — every
//! namespaced resource discovery finds, custom resources included; pods
//! gracefully, objects with finalizers waiting for them — its status
//! conditions say what failed or remains, it is looked at again while
//! content remains, and once none does `kubernetes` is removed from
//! spec.finalizers through `namespaces/NAME/finalize` (the API server
//! then deletes it).
//!
//! Besides upstream's timed requeue, a pod being deleted in a namespace
//! wakes that namespace, so one whose kubelet deletes it quickly does not
//! hold the namespace for half its grace period.
//!
//! This module owns only terminating namespaces' content; it must not
//! touch a namespace that is not being deleted.

pub mod conditions;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::discovery::{verbs, Discovery, Scope};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::Api;
use serde_json::json;
use skiff_client::is_not_found;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use conditions::Findings;

/// The finalizer this controller owns.
pub const FINALIZER: &str = "kubernetes";
/// How long objects with finalizers are expected to take (upstream's
/// finalizerEstimateSeconds).
const FINALIZER_ESTIMATE_SECONDS: i64 = 15;

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing the namespace failed.
    #[error("namespace {name}")]
    Namespace {
        /// Which.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Discovery or deleting content failed (reported in conditions).
    #[error("deleting the content of namespace {name}: {message}")]
    Content {
        /// Which.
        name: String,
        /// What the conditions say.
        message: String,
    },
}

struct State {
    context: Context,
    failures: Failures,
}

/// Starts the namespace controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let namespaces = context.informers.get::<Namespace>();
        let pods = context.informers.get::<Pod>();
        let controller = Controller::for_stream(namespaces.objects(), namespaces.store())
            .watches_stream(pods.objects(), |pod: Pod| {
                pod.metadata
                    .deletion_timestamp
                    .as_ref()
                    .and(pod.metadata.namespace.as_deref())
                    .map(ObjectRef::new)
            });
        let state = Arc::new(State {
            context,
            failures: Failures::default(),
        });
        runner::run(
            "namespace",
            &namespaces,
            controller,
            10,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
    })
}

fn error_policy(ns: Arc<Namespace>, _: &Error, state: Arc<State>) -> Action {
    let key = ns.metadata.name.clone().unwrap_or_default();
    Action::requeue(state.failures.next_delay(&key))
}

async fn reconcile(ns: Arc<Namespace>, state: Arc<State>) -> Result<Action, Error> {
    if ns.metadata.deletion_timestamp.is_none() {
        return Ok(Action::await_change());
    }
    let name = ns.metadata.name.clone().unwrap_or_default();
    let action = sync(&state, &name).await?;
    state.failures.forget(&name);
    Ok(action)
}

fn ns_error(name: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |source| Error::Namespace {
        name: name.into(),
        source,
    }
}

/// Upstream's namespacedResourcesDeleter.Delete for one namespace.
async fn sync(state: &State, name: &str) -> Result<Action, Error> {
    let client = &state.context.client;
    let api: Api<Namespace> = Api::all(client.clone());
    // Several writers touch a terminating namespace: read it afresh.
    let Some(latest) = api.get_opt(name).await.map_err(ns_error(name))? else {
        return Ok(Action::await_change());
    };
    let finalizers = latest
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default();
    if latest.metadata.deletion_timestamp.is_none() || !finalizers.iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let (findings, estimate) = delete_content(state, name).await;
    let current = latest
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut latest = latest;
    if let Some(updated) = conditions::update(&current, &findings, Timestamp::now()) {
        let patch = json!({"status": {"phase": "Terminating", "conditions": updated}});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            // Finalizing below starts from what was written.
            Ok(written) => latest = written,
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(ns_error(name)(e)),
        }
    }
    let failed: Vec<String> = conditions::failing(&findings)
        .into_iter()
        .filter(|(t, _, _)| {
            [
                conditions::DISCOVERY_FAILURE,
                conditions::GV_PARSING_FAILURE,
                conditions::CONTENT_FAILURE,
            ]
            .contains(t)
        })
        .map(|(_, _, message)| message)
        .collect();
    if !failed.is_empty() {
        return Err(Error::Content {
            name: name.into(),
            message: failed.join("; "),
        });
    }
    if estimate > 0 || !findings.remaining.is_empty() {
        // upstream: some content remains; look again in half the estimate.
        let after = u64::try_from(estimate / 2 + 1).unwrap_or(1);
        return Ok(Action::requeue(Duration::from_secs(after)));
    }
    // Nothing left: finalize (drop our finalizer from spec.finalizers).
    let mut finalized = latest.clone();
    if let Some(spec) = finalized.spec.as_mut() {
        spec.finalizers = Some(finalizers.into_iter().filter(|f| f != FINALIZER).collect());
    }
    match api
        .replace_subresource("finalize", name, &PostParams::default(), &finalized)
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if is_not_found(&e) => Ok(Action::await_change()),
        Err(e) => Err(ns_error(name)(e)),
    }
}

/// `resource.group`, as upstream's conditions name resources.
fn resource_key(ar: &ApiResource) -> String {
    format!("{}.{}", ar.plural, ar.group)
}

/// `group/version, Resource=plural`, as Go prints a GroupVersionResource.
fn gvr(ar: &ApiResource) -> String {
    format!("{}/{}, Resource={}", ar.group, ar.version, ar.plural)
}

/// Deletes every namespaced resource's objects in `namespace`: what is
/// left and failed, and an estimate in seconds of how long what is left
/// takes to go.
async fn delete_content(state: &State, namespace: &str) -> (Findings, i64) {
    let client = &state.context.client;
    let mut findings = Findings::default();
    let discovery = match Discovery::new(client.clone()).run().await {
        Ok(d) => d,
        Err(e) => {
            findings.discovery_error = Some(e.to_string());
            return (findings, 0);
        }
    };
    let mut estimate = 0;
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::DELETE) {
                continue;
            }
            match delete_resource(state, namespace, &ar, &caps, &mut findings).await {
                Ok(e) => estimate = estimate.max(e),
                Err(message) => findings.content_errors.push(message),
            }
        }
    }
    (findings, estimate)
}

/// One resource's part of [`delete_content`]: its estimate, or what
/// failed.
async fn delete_resource(
    state: &State,
    namespace: &str,
    ar: &ApiResource,
    caps: &kube::discovery::ApiCapabilities,
    findings: &mut Findings,
) -> Result<i64, String> {
    let client = &state.context.client;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, ar);
    let is_pods = ar.group.is_empty() && ar.plural == "pods";
    let mut estimate = 0;
    if is_pods {
        // The longest grace period of the pods still running.
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let list = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        for pod in &list.items {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            let grace = pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .unwrap_or(0);
            estimate = estimate.max(grace);
        }
    }
    let background = DeleteParams::background();
    let listable = caps.supports_operation(verbs::LIST);
    if caps.supports_operation(verbs::DELETE_COLLECTION) {
        match api
            .delete_collection(&background, &ListParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.to_string()),
        }
    } else if listable {
        let list = api
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        for item in list.items {
            let name = item.metadata.name.unwrap_or_default();
            match api.delete(&name, &background).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    if !listable {
        return Ok(estimate);
    }
    let left = api
        .list_metadata(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    if left.items.is_empty() {
        return Ok(estimate);
    }
    findings
        .remaining
        .insert(resource_key(ar), left.items.len());
    let mut by_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    for item in &left.items {
        for f in item.metadata.finalizers.iter().flatten() {
            *by_finalizer.entry(f.clone()).or_default() += 1;
        }
    }
    let with_finalizers = !by_finalizer.is_empty();
    for (f, n) in by_finalizer {
        *findings.finalizers.entry(f).or_default() += n;
    }
    if estimate == 0 {
        if with_finalizers {
            return Ok(FINALIZER_ESTIMATE_SECONDS);
        }
        return Err(format!(
            "unexpected items still remain in namespace: {namespace} for gvr: {}",
            gvr(ar)
        ));
    }
    Ok(estimate)
}

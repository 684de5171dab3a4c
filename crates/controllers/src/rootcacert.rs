//! The root CA publisher (upstream's `root-ca-cert-publisher`): every
//! namespace has the ConfigMap `kube-root-ca.crt` whose `ca.crt` is the
//! cluster's CA bundle, so in-cluster clients can verify the API server;
//! it is created again when deleted and put right when edited.
//!
//! This module owns only that ConfigMap. Where the bundle comes from is
//! the manager's setting ([`crate::Config::root_ca`]); without one the
//! controller does not run.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use crate::serviceaccounts::ignorable;

/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";
/// Its one key.
pub const KEY: &str = "ca.crt";
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
when using internal endpoints such as the internal service IP or kubernetes.default.svc. \
No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The create or update failed.
    #[error("writing configmap {namespace}/{NAME}")]
    Write {
        /// Where.
        namespace: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

struct State {
    context: Context,
    configmaps: Store<ConfigMap>,
    root_ca: String,
    failures: Failures,
}

/// Starts the publisher in a controller manager (not without a CA).
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let Some(root_ca) = context.config.root_ca.clone() else {
            tracing::info!("no root CA bundle: not publishing kube-root-ca.crt");
            return;
        };
        let namespaces = context.informers.get::<Namespace>();
        let configmaps = context.informers.get::<ConfigMap>();
        let controller = Controller::for_stream(namespaces.objects(), namespaces.store())
            .watches_stream(configmaps.objects(), |cm: ConfigMap| {
                (cm.metadata.name.as_deref() == Some(NAME))
                    .then(|| ObjectRef::new(cm.metadata.namespace.as_deref().unwrap_or_default()))
            });
        let state = Arc::new(State {
            configmaps: configmaps.store(),
            context,
            root_ca,
            failures: Failures::default(),
        });
        configmaps.ready().await;
        runner::run(
            "root-ca-cert-publisher",
            &namespaces,
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

async fn reconcile(ns: Arc<Namespace>, state: Arc<State>) -> Result<Action, Error> {
    let name = ns.metadata.name.clone().unwrap_or_default();
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let data = BTreeMap::from([(KEY.to_string(), state.root_ca.clone())]);
    let api: Api<ConfigMap> = Api::namespaced(state.context.client.clone(), &name);
    let written = match state.configmaps.get(&ObjectRef::new(NAME).within(&name)) {
        None => {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(NAME.into()),
                    annotations: Some(BTreeMap::from([(
                        DESCRIPTION_ANNOTATION.to_string(),
                        DESCRIPTION.to_string(),
                    )])),
                    ..Default::default()
                },
                data: Some(data),
                ..Default::default()
            };
            match api.create(&PostParams::default(), &cm).await {
                Err(e) if ignorable(&e) => Ok(()),
                other => other.map(drop),
            }
        }
        Some(cm) => {
            let described = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
                .is_some_and(|d| !d.is_empty());
            if cm.data.as_ref() == Some(&data) && described {
                Ok(())
            } else {
                let mut cm = (*cm).clone();
                cm.data = Some(data);
                cm.binary_data = None;
                cm.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
                match api.replace(NAME, &PostParams::default(), &cm).await {
                    // A newer version is on its way here; it is looked at then.
                    Err(e) if ignorable(&e) => Ok(()),
                    other => other.map(drop),
                }
            }
        }
    };
    written.map_err(|source| Error::Write {
        namespace: name.clone(),
        source,
    })?;
    state.failures.forget(&name);
    Ok(Action::await_change())
}

fn error_policy(ns: Arc<Namespace>, _: &Error, state: Arc<State>) -> Action {
    let key = ns.metadata.name.clone().unwrap_or_default();
    Action::requeue(state.failures.next_delay(&key))
}

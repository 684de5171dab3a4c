//! The service account controller (upstream's `serviceaccount`): every
//! active namespace has the `default` ServiceAccount, created again when
//! it is deleted.
//!
//! This module owns only that ServiceAccount's existence; tokens are the
//! API server's (TokenRequest) and nothing here edits an existing one.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};

/// The ServiceAccount every namespace gets.
pub const DEFAULT: &str = "default";

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The create failed.
    #[error("creating serviceaccount {namespace}/{DEFAULT}")]
    Create {
        /// Where.
        namespace: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

struct State {
    context: Context,
    accounts: Store<ServiceAccount>,
    failures: Failures,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let namespaces = context.informers.get::<Namespace>();
        let accounts = context.informers.get::<ServiceAccount>();
        let controller = Controller::for_stream(namespaces.objects(), namespaces.store())
            // A deleted `default` account brings its namespace back here.
            .watches_stream(accounts.objects(), |sa: ServiceAccount| {
                (sa.metadata.name.as_deref() == Some(DEFAULT))
                    .then(|| ObjectRef::new(sa.metadata.namespace.as_deref().unwrap_or_default()))
            });
        let state = Arc::new(State {
            accounts: accounts.store(),
            context,
            failures: Failures::default(),
        });
        accounts.ready().await;
        runner::run(
            "serviceaccount",
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
    let active = ns.metadata.deletion_timestamp.is_none()
        && ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating");
    let present = state
        .accounts
        .get(&ObjectRef::new(DEFAULT).within(&name))
        .is_some();
    if active && !present {
        let api: Api<ServiceAccount> = Api::namespaced(state.context.client.clone(), &name);
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(DEFAULT.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            // Created meanwhile, or the namespace is going away.
            Err(e) if ignorable(&e) => {}
            Err(source) => {
                return Err(Error::Create {
                    namespace: name,
                    source,
                })
            }
        }
    }
    state.failures.forget(&name);
    Ok(Action::await_change())
}

/// Errors a create into a namespace may meet that need no retry: the
/// object exists, the namespace is gone or terminating.
pub(crate) fn ignorable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            s.code == 409 || s.code == 404 || (s.code == 403 && s.message.contains("terminat"))
        }
        _ => false,
    }
}

fn error_policy(ns: Arc<Namespace>, _: &Error, state: Arc<State>) -> Action {
    let key = ns.metadata.name.clone().unwrap_or_default();
    Action::requeue(state.failures.next_delay(&key))
}

//! The token cleaner (upstream's `tokencleaner`, ServiceAccount
//! `token-cleaner`): deletes a bootstrap token Secret
//! (`kube-system/bootstrap-token-<id>`, type `bootstrap.kubernetes.io/token`)
//! once its `expiration` has passed, so an expired join token is gone and
//! not only refused. Upstream leaves it off unless kubeadm turns it on;
//! skiff hands out join tokens itself, so it is on by default.
//!
//! It watches only kube-system's token Secrets (its role is a Role there)
//! with its own watch, not the shared informers, and owns only that
//! deletion. The rules of expiry are `skiff_api::bootstrap_token`'s.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::Api;
use skiff_api::bootstrap_token as bt;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::Failures;

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("deleting expired bootstrap token {0}")]
    Delete(String, #[source] kube::Error),
}

struct State {
    context: Context,
    failures: Failures,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let api: Api<Secret> = Api::namespaced(context.client.clone(), bt::NAMESPACE);
        let watch = watcher::Config::default().fields(&format!("type={}", bt::SECRET_TYPE));
        let state = Arc::new(State {
            context,
            failures: Failures::default(),
        });
        tracing::info!(controller = "tokencleaner", "starting");
        Controller::new(api, watch)
            .graceful_shutdown_on(async move { shutdown.cancelled_owned().await })
            .run(reconcile, error_policy, state)
            .for_each(|result| async move {
                if let Err(e) = result {
                    tracing::debug!(controller = "tokencleaner", error = %e, "reconcile failed");
                }
            })
            .await;
        tracing::info!(controller = "tokencleaner", "stopped");
    })
}

/// How long until the Secret's token expires: `None` when it never does,
/// zero when it has (an unreadable expiration counts as expired).
pub fn time_left(
    secret: &serde_json::Value,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    match bt::expiration(secret) {
        bt::Expiration::Never => None,
        bt::Expiration::At(at) => Some((at - now).to_std().unwrap_or(Duration::ZERO)),
        bt::Expiration::Unreadable => Some(Duration::ZERO),
    }
}

async fn reconcile(secret: Arc<Secret>, state: Arc<State>) -> Result<Action, Error> {
    if secret.metadata.deletion_timestamp.is_some()
        || secret.type_.as_deref() != Some(bt::SECRET_TYPE)
    {
        return Ok(Action::await_change());
    }
    let Ok(value) = serde_json::to_value(secret.as_ref()) else {
        return Ok(Action::await_change());
    };
    let clock = state.context.config.wall_clock.now();
    let now = chrono::DateTime::from_timestamp(
        clock.as_second(),
        clock.subsec_nanosecond().unsigned_abs(),
    )
    .unwrap_or_default();
    let Some(left) = time_left(&value, now) else {
        return Ok(Action::await_change());
    };
    if !left.is_zero() {
        return Ok(Action::requeue(left));
    }
    let name = secret.metadata.name.clone().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(state.context.client.clone(), bt::NAMESPACE);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: secret.metadata.uid.clone(),
            resource_version: secret.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => tracing::info!(
            "deleted expired bootstrap token secret {}/{name}",
            bt::NAMESPACE
        ),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
        Err(e) => return Err(Error::Delete(name, e)),
    }
    state.failures.forget(&name);
    Ok(Action::await_change())
}

fn error_policy(secret: Arc<Secret>, _: &Error, state: Arc<State>) -> Action {
    let name = secret.metadata.name.clone().unwrap_or_default();
    Action::requeue(state.failures.next_delay(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_secret(expiration: Option<&str>) -> serde_json::Value {
        let token = bt::Token::parse("abcdef.0123456789abcdef").unwrap();
        let mut s = bt::secret(&token, &bt::Options::default()).unwrap();
        if let Some(at) = expiration {
            s["stringData"] = serde_json::json!({ bt::KEY_EXPIRATION: at });
        }
        s
    }

    #[test]
    fn expiry() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-05T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(time_left(&token_secret(None), now), None);
        assert_eq!(
            time_left(&token_secret(Some("2026-12-05T12:00:30Z")), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            time_left(&token_secret(Some("2026-12-05T11:00:00Z")), now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            time_left(&token_secret(Some("tomorrow")), now),
            Some(Duration::ZERO)
        );
    }
}

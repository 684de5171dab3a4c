//! The legacy service-account token controller (upstream's
//! `serviceaccount-token`, its `TokensController`), only for Secrets
//! created by hand: a Secret of type `kubernetes.io/service-account-token`
//! naming its ServiceAccount in the annotation
//! `kubernetes.io/service-account.name` gets `data.token` (a legacy JWT
//! signed with the service-account key, `iss: kubernetes/serviceaccount`),
//! `ca.crt` and `namespace`, and the annotation
//! `kubernetes.io/service-account.uid`. A Secret whose ServiceAccount does
//! not exist (or has another UID) is deleted, as upstream does. The API
//! server accepts such a token while the Secret holds it.
//!
//! It never creates token Secrets for ServiceAccounts (upstream stopped in
//! 1.24; pods get bound tokens through TokenRequest). Without a signing
//! key ([`crate::Config::service_account_signer`]) it does not run.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::Api;
use skiff_api::jwt::{self, Signer};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use crate::serviceaccounts::ignorable;

/// The Secret type this controller fills.
pub const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming the ServiceAccount.
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// The annotation holding its UID.
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading serviceaccount {namespace}/{name}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing secret {namespace}/{name}")]
    Write {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("signing the token of secret {namespace}/{name}")]
    Sign {
        namespace: String,
        name: String,
        #[source]
        source: jwt::Error,
    },
}

struct State {
    context: Context,
    signer: Arc<Signer>,
    root_ca: Option<String>,
    failures: Failures,
}

/// Starts the controller in a controller manager (not without a key).
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let Some(signer) = context.config.service_account_signer.clone() else {
            tracing::info!("no service-account signing key: legacy token Secrets stay empty");
            return;
        };
        let secrets = context.informers.get::<Secret>();
        let controller = Controller::for_stream(secrets.objects(), secrets.store());
        let state = Arc::new(State {
            root_ca: context.config.root_ca.clone(),
            context,
            signer,
            failures: Failures::default(),
        });
        runner::run(
            "serviceaccount-token",
            &secrets,
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

/// What a token Secret should hold: `None` when it holds it already.
fn wanted(
    secret: &Secret,
    account_uid: &str,
    root_ca: Option<&str>,
    token: impl FnOnce() -> Result<String, jwt::Error>,
) -> Result<Option<Secret>, jwt::Error> {
    let ns = secret.metadata.namespace.clone().unwrap_or_default();
    let data = secret.data.clone().unwrap_or_default();
    let has = |k: &str, v: &[u8]| data.get(k).is_some_and(|b| b.0 == v);
    let uid_noted = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(UID_ANNOTATION))
        .is_some_and(|u| u == account_uid);
    let token_set = data.get("token").is_some_and(|t| !t.0.is_empty());
    let ca_set = root_ca.is_none_or(|ca| has("ca.crt", ca.as_bytes()));
    if token_set && ca_set && has("namespace", ns.as_bytes()) && uid_noted {
        return Ok(None);
    }
    let mut out = secret.clone();
    let mut data: BTreeMap<String, ByteString> = data;
    if !token_set {
        data.insert("token".into(), ByteString(token()?.into_bytes()));
    }
    if let Some(ca) = root_ca {
        data.insert("ca.crt".into(), ByteString(ca.as_bytes().to_vec()));
    }
    data.insert("namespace".into(), ByteString(ns.into_bytes()));
    out.data = Some(data);
    out.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(UID_ANNOTATION.into(), account_uid.into());
    Ok(Some(out))
}

async fn reconcile(secret: Arc<Secret>, state: Arc<State>) -> Result<Action, Error> {
    if secret.type_.as_deref() != Some(TOKEN_TYPE) || secret.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = secret.metadata.namespace.clone().unwrap_or_default();
    let name = secret.metadata.name.clone().unwrap_or_default();
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let Some(account) = annotations.get(NAME_ANNOTATION).filter(|a| !a.is_empty()) else {
        return Ok(Action::await_change());
    };
    let client = state.context.client.clone();
    let found = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .get_opt(account)
        .await
        .map_err(|source| Error::Read {
            namespace: ns.clone(),
            name: account.clone(),
            source,
        })?;
    let secrets: Api<Secret> = Api::namespaced(client, &ns);
    let write_error = |source| Error::Write {
        namespace: ns.clone(),
        name: name.clone(),
        source,
    };
    let account_uid = found.as_ref().and_then(|sa| sa.metadata.uid.clone());
    let noted_uid = annotations.get(UID_ANNOTATION).filter(|u| !u.is_empty());
    let Some(account_uid) = account_uid.filter(|uid| noted_uid.is_none_or(|n| n == uid)) else {
        // Its ServiceAccount is gone (or was replaced): the token goes too.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: secret.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match secrets.delete(&name, &params).await {
            Ok(_) => {}
            Err(e) if ignorable(&e) => {}
            Err(e) => return Err(write_error(e)),
        }
        return Ok(Action::await_change());
    };
    let updated = wanted(&secret, &account_uid, state.root_ca.as_deref(), || {
        jwt::legacy_token(&state.signer, &ns, account, &account_uid, &name)
    })
    .map_err(|source| Error::Sign {
        namespace: ns.clone(),
        name: name.clone(),
        source,
    })?;
    if let Some(updated) = updated {
        match secrets
            .replace(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {}
            // A newer version is on its way here; it is looked at then.
            Err(e) if ignorable(&e) => {}
            Err(e) => return Err(write_error(e)),
        }
    }
    state.failures.forget(&format!("{ns}/{name}"));
    Ok(Action::await_change())
}

fn error_policy(secret: Arc<Secret>, _: &Error, state: Arc<State>) -> Action {
    let key = format!(
        "{}/{}",
        secret.metadata.namespace.as_deref().unwrap_or_default(),
        secret.metadata.name.as_deref().unwrap_or_default()
    );
    Action::requeue(state.failures.next_delay(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(data: serde_json::Value, uid: Option<&str>) -> Secret {
        let mut annotations = serde_json::json!({NAME_ANNOTATION: "robot"});
        if let Some(uid) = uid {
            annotations[UID_ANNOTATION] = uid.into();
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "robot-token", "namespace": "ns", "annotations": annotations},
            "type": TOKEN_TYPE,
            "data": data,
        }))
        .unwrap()
    }

    #[test]
    fn an_empty_secret_is_filled_once() {
        let signer = Signer::from_pem(&jwt::generate_private_key_pem().unwrap()).unwrap();
        let empty = secret(serde_json::json!({}), None);
        let filled = wanted(&empty, "sa-uid", Some("CA"), || {
            jwt::legacy_token(&signer, "ns", "robot", "sa-uid", "robot-token")
        })
        .unwrap()
        .unwrap();
        let data = filled.data.clone().unwrap();
        assert_eq!(data["ca.crt"].0, b"CA");
        assert_eq!(data["namespace"].0, b"ns");
        let token = String::from_utf8(data["token"].0.clone()).unwrap();
        let claims: jwt::LegacyClaims = signer.public().verify(&token).unwrap();
        assert_eq!(claims.secret_name, "robot-token");
        assert_eq!(claims.service_account_uid, "sa-uid");
        assert_eq!(
            filled.metadata.annotations.as_ref().unwrap()[UID_ANNOTATION],
            "sa-uid"
        );
        // Filled: nothing more to do, and the token is never signed again.
        assert!(wanted(&filled, "sa-uid", Some("CA"), || unreachable!())
            .unwrap()
            .is_none());
    }
}

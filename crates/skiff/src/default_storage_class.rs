//! The default StorageClass `skiff server` makes at startup, as k3s ships
//! its `local-storage` manifest: `local-path`, provisioned by the
//! local-path provisioner (`skiff.dev/local-path`), bound when a pod first
//! uses a claim (WaitForFirstConsumer), deleted with its claim, and
//! annotated as the default class (so the DefaultStorageClass admission
//! plugin gives it to claims that name none).
//!
//! This module owns only that object: it is created through the API when
//! absent, at every start, and never overwritten, so a user's edits stay
//! and a deleted class comes back at the next start. It provisions
//! nothing itself.

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

/// The class's name.
pub const NAME: &str = "local-path";
/// The provisioner that serves it (the persistent volume controller's
/// local-path provisioner and the node agent).
pub const PROVISIONER: &str = "skiff.dev/local-path";
/// The annotation that makes a class the default.
const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// The class as created.
pub fn class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            annotations: Some([(IS_DEFAULT_CLASS.to_string(), "true".to_string())].into()),
            ..ObjectMeta::default()
        },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        ..StorageClass::default()
    }
}

/// Creates the class unless one of its name exists; true when created.
pub async fn ensure(client: kube::Client) -> Result<bool, kube::Error> {
    let api: Api<StorageClass> = Api::all(client);
    let params = PostParams {
        field_manager: Some("skiff-server".into()),
        ..PostParams::default()
    };
    match api.create(&params, &class()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => Ok(false),
        Err(e) => Err(e),
    }
}

/// [`ensure`], logging the outcome: the server runs on without the class
/// if it cannot be made.
pub async fn ensure_logged(client: kube::Client) {
    match ensure(client).await {
        Ok(true) => tracing::info!(name = NAME, "created the default StorageClass"),
        Ok(false) => {}
        Err(e) => tracing::warn!(name = NAME, error = %e, "cannot create the default StorageClass"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::api::{DeleteParams, Patch, PatchParams};
    use skiff_testkit::apiserver::{Options, TestApiServer};

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(30);

    async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(TIMEOUT, f)
            .await
            .expect("the API answers in time")
    }

    #[tokio::test]
    async fn made_when_absent_and_never_overwritten() {
        let server = TestApiServer::start(|c| c, Options::default()).await;
        let client = server.client().await;
        let api: Api<StorageClass> = Api::all(client.clone());
        assert!(within(ensure(client.clone())).await.unwrap());
        let made = within(api.get(NAME)).await.unwrap();
        assert_eq!(made.provisioner, PROVISIONER);
        assert_eq!(made.reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(
            made.volume_binding_mode.as_deref(),
            Some("WaitForFirstConsumer")
        );
        assert_eq!(made.metadata.annotations.unwrap()[IS_DEFAULT_CLASS], "true");
        // A user's edit survives the next start.
        let patch = k8s_openapi::serde_json::json!({"metadata": {"annotations": {IS_DEFAULT_CLASS: "false"}}});
        within(api.patch(NAME, &PatchParams::default(), &Patch::Merge(&patch)))
            .await
            .unwrap();
        assert!(!within(ensure(client.clone())).await.unwrap());
        let kept = within(api.get(NAME)).await.unwrap();
        assert_eq!(
            kept.metadata.annotations.unwrap()[IS_DEFAULT_CLASS],
            "false"
        );
        // A deleted class comes back.
        within(api.delete(NAME, &DeleteParams::default()))
            .await
            .unwrap();
        assert!(within(ensure(client)).await.unwrap());
    }
}

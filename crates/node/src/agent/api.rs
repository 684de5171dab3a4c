//! The cluster API adapters: [`PodApi`] (status patches and the final
//! deletion of a pod) and [`Objects`] (the ConfigMaps, Secrets and claims
//! containers refer to) over the agent's kube client.
//!
//! Each call is one request (two for a claim: it and its volume); they
//! keep no cache and decide nothing about pods.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, PodStatus, Secret,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};

use crate::api_error::ApiError;
use crate::pod_worker::env::Objects;
use crate::status::api::PodApi;

/// Status and deletion through the API.
#[derive(Clone)]
pub(crate) struct ApiPods(pub(crate) kube::Client);

impl std::fmt::Debug for ApiPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiPods")
    }
}

#[async_trait]
impl PodApi for ApiPods {
    async fn patch_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), ApiError> {
        let body = serde_json::json!({
            "metadata": { "uid": pod.metadata.uid },
            "status": status,
        });
        let request = pods_request(pod).patch_subresource(
            "status",
            pod.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )?;
        // The answer (the whole pod) is not read: the pod watch brings it.
        self.0
            .request_text(request)
            .await
            .map(|_| ())
            .map_err(ApiError::from)
    }

    async fn delete(&self, pod: &Pod) -> Result<(), ApiError> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let request =
            pods_request(pod).delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)?;
        match self.0.request_text(request).await {
            Ok(_) => Ok(()),
            Err(e) if skiff_client::is_not_found(&e) || skiff_client::is_conflict(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Requests about the pods of `pod`'s namespace. Status writes and
/// deletions go out as raw requests whose answers are not decoded into a
/// `Pod`: a decode of every answer was a few per cent of `skiff sim`.
fn pods_request(pod: &Pod) -> kube::core::Request {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
}

/// ConfigMaps, Secrets, claims and volumes read through the API when a
/// container starts; Services from the agent's informer (a store that
/// follows a watch, not a list per container); service-account tokens
/// requested (TokenRequest) and cached by the agent's token manager.
#[derive(Clone)]
pub(crate) struct ApiObjects(
    pub(crate) kube::Client,
    pub(crate) Option<skiff_client::informer::Informer<k8s_openapi::api::core::v1::Service>>,
    pub(crate) std::sync::Arc<crate::pod_worker::tokens::TokenManager>,
);

/// TokenRequests through the agent's client.
struct TokenApi<'a>(&'a kube::Client);

#[async_trait]
impl crate::pod_worker::tokens::Requester for TokenApi<'_> {
    async fn request(
        &self,
        key: &crate::pod_worker::tokens::Key,
    ) -> crate::pod_worker::tokens::Result<crate::pod_worker::tokens::Issued> {
        use crate::pod_worker::tokens::{Error, Issued};
        use k8s_openapi::api::authentication::v1::TokenRequest;
        let body = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": key.audiences,
                "expirationSeconds": key.expiration_seconds,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": key.pod_name,
                    "uid": key.pod_uid,
                },
            },
        });
        let api: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.0.clone(), &key.namespace);
        let answer: TokenRequest = api
            .create_subresource(
                "token",
                &key.service_account,
                &kube::api::PostParams::default(),
                &body,
            )
            .await
            .map_err(|e| Error::Request(e.to_string()))?;
        let status = answer
            .status
            .ok_or_else(|| Error::Request("the TokenRequest answer has no status".into()))?;
        Ok(Issued {
            token: status.token,
            expires: status.expiration_timestamp.0.as_second(),
        })
    }
}

impl std::fmt::Debug for ApiObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiObjects")
    }
}

#[async_trait]
impl Objects for ApiObjects {
    async fn service_env(
        &self,
        namespace: &str,
        enable_service_links: bool,
    ) -> Result<Vec<(String, String)>, String> {
        let Some(services) = &self.1 else {
            return Ok(vec![]);
        };
        if tokio::time::timeout(std::time::Duration::from_secs(10), services.ready())
            .await
            .is_err()
        {
            return Err(
                "services have not yet been read at least once, cannot construct envvars".into(),
            );
        }
        let all = services.store().state();
        Ok(crate::pod_worker::service_env::service_env(
            namespace,
            enable_service_links,
            all.iter().map(|s| &**s),
        ))
    }

    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ApiError> {
        let api: Api<ConfigMap> = Api::namespaced(self.0.clone(), namespace);
        let cm = api.get_opt(name).await?;
        Ok(cm.map(|cm| cm.data.unwrap_or_default()))
    }

    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError> {
        let api: Api<Secret> = Api::namespaced(self.0.clone(), namespace);
        let secret = api.get_opt(name).await?;
        Ok(secret.map(|s| {
            let mut data: BTreeMap<String, Vec<u8>> = s
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            // stringData is write-only upstream, folded into data on
            // write; read it too in case a store kept it.
            for (k, v) in s.string_data.unwrap_or_default() {
                data.entry(k).or_insert_with(|| v.into_bytes());
            }
            data
        }))
    }

    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, ApiError> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.0.clone(), namespace);
        Ok(claims.get_opt(name).await?)
    }

    async fn volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        let volumes: Api<PersistentVolume> = Api::all(self.0.clone());
        Ok(volumes.get(name).await?)
    }

    async fn service_account_token(
        &self,
        key: &crate::pod_worker::tokens::Key,
    ) -> Result<(String, i64), String> {
        self.2
            .get(&TokenApi(&self.0), key)
            .await
            .map_err(|e| e.to_string())
    }

    fn token_fresh(&self, key: &crate::pod_worker::tokens::Key) -> bool {
        self.2.fresh(key)
    }

    fn forget_pod(&self, uid: &str) {
        self.2.forget_pod(uid);
    }
}

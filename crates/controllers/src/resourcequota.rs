//! The resource quota controller (kube-controller-manager's
//! resourcequota): keeps every ResourceQuota's status.hard equal to its
//! spec.hard and status.used equal to what the namespace's objects use
//! (skiff-api's `quota` evaluators), so deletions give usage back. It
//! watches quotas and the counted kinds, recomputes the namespaces that
//! changed, and all namespaces with quotas every resync period. Usage it
//! cannot count (`count/` of kinds it does not know) is left as the
//! ResourceQuota admission plugin charged it. It writes only quota
//! status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, ResourceQuota, Secret, Service,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use skiff_api::quota::{self, counted_kind, Amount, Usage};
use tokio_util::sync::CancellationToken;

use crate::nswatch::{forward_owned, run_namespaces, track, Owners};
use kube::core::PartialObjectMeta;

/// Errors of the controller (logged; namespaces are retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing {what} in {namespace}")]
    List {
        what: String,
        namespace: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("updating the status of quota {namespace}/{name}")]
    Status {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("quota {0} does not convert")]
    Convert(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The controller.
#[derive(Debug, Clone)]
pub struct ResourceQuotaController {
    resync: Duration,
}

impl Default for ResourceQuotaController {
    fn default() -> Self {
        Self::new()
    }
}

/// The version each group's counted kinds are listed in.
fn version_of(group: &str) -> Option<&'static str> {
    match group {
        ""
        | "apps"
        | "batch"
        | "policy"
        | "networking.k8s.io"
        | "rbac.authorization.k8s.io"
        | "storage.k8s.io"
        | "discovery.k8s.io"
        | "scheduling.k8s.io"
        | "coordination.k8s.io" => Some("v1"),
        "autoscaling" => Some("v2"),
        _ => None,
    }
}

impl ResourceQuotaController {
    /// Full recompute every 30 s besides the watches.
    pub fn new() -> Self {
        ResourceQuotaController {
            resync: Duration::from_secs(30),
        }
    }

    /// Another full resync period (tests).
    pub fn with_resync(mut self, resync: Duration) -> Self {
        self.resync = resync;
        self
    }

    /// Runs until `shutdown`.
    pub async fn run(self, client: Client, shutdown: CancellationToken) -> Result<()> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        // The counted kinds' changes matter only where a quota is.
        let owners = Owners::default();
        track(
            Api::<PartialObjectMeta<ResourceQuota>>::all(client.clone()),
            tx.clone(),
            shutdown.clone(),
            owners.clone(),
        );
        forward_owned::<Pod>(client.clone(), tx.clone(), shutdown.clone(), owners.clone());
        forward_owned::<Service>(client.clone(), tx.clone(), shutdown.clone(), owners.clone());
        forward_owned::<ConfigMap>(client.clone(), tx.clone(), shutdown.clone(), owners.clone());
        forward_owned::<Secret>(client.clone(), tx.clone(), shutdown.clone(), owners.clone());
        forward_owned::<PersistentVolumeClaim>(
            client.clone(),
            tx,
            shutdown.clone(),
            owners.clone(),
        );
        tracing::info!("starting the resource quota controller");
        run_namespaces(rx, owners, self.resync, shutdown, "quotas", |ns| {
            let client = client.clone();
            async move { sync(&client, &ns).await }
        })
        .await;
        tracing::info!("shutting down the resource quota controller");
        Ok(())
    }
}

/// Recomputes the status of every quota in `ns`.
pub async fn sync(client: &Client, ns: &str) -> Result<()> {
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    let quotas = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::List {
            what: "resourcequotas".into(),
            namespace: ns.into(),
            source: Box::new(e),
        })?;
    if quotas.items.is_empty() {
        return Ok(());
    }
    let mut kinds: BTreeSet<(String, String)> = BTreeSet::new();
    for q in &quotas.items {
        let hard = q.spec.as_ref().and_then(|s| s.hard.as_ref());
        for name in hard.into_iter().flat_map(|h| h.keys()) {
            if let Some(k) = counted_kind(name) {
                kinds.insert(k);
            }
        }
    }
    let mut usage = Usage::new();
    let mut counted: BTreeSet<(String, String)> = BTreeSet::new();
    for (group, plural) in &kinds {
        let Some(version) = version_of(group) else {
            continue;
        };
        let gvk = GroupVersionKind::gvk(group, version, "Object");
        let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
        let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let list = match objects.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => {
                return Err(Error::List {
                    what: plural.clone(),
                    namespace: ns.into(),
                    source: Box::new(e),
                })
            }
        };
        counted.insert((group.clone(), plural.clone()));
        for o in list.items {
            let v = serde_json::to_value(&o).unwrap_or_default();
            usage = quota::add(&usage, &quota::object_usage(group, plural, &v));
        }
    }
    for q in quotas.items {
        let name = q.name_any();
        let mut v = serde_json::to_value(&q).map_err(|_| Error::Convert(name.clone()))?;
        let hard = v
            .pointer("/spec/hard")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        let before = quota::parse_list(v.pointer("/status/used"));
        let mut used: BTreeMap<String, Amount> = BTreeMap::new();
        for key in hard.as_object().into_iter().flat_map(|h| h.keys()) {
            let known = counted_kind(key).is_some_and(|k| counted.contains(&k));
            let amount = if known {
                usage.get(key).copied().unwrap_or(Amount::ZERO)
            } else {
                before.get(key).copied().unwrap_or(Amount::ZERO)
            };
            used.insert(key.clone(), amount);
        }
        let status = serde_json::json!({"hard": hard, "used": quota::to_json(&used)});
        if v.get("status") == Some(&status) {
            continue;
        }
        v["status"] = status;
        let updated: ResourceQuota =
            serde_json::from_value(v).map_err(|_| Error::Convert(name.clone()))?;
        api.replace_status(&name, &PostParams::default(), &updated)
            .await
            .map_err(|e| Error::Status {
                namespace: ns.into(),
                name: name.clone(),
                source: Box::new(e),
            })?;
    }
    Ok(())
}

/// Starts the resource quota controller in a controller manager.
pub(crate) fn start(
    ctx: crate::context::Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let controller = ResourceQuotaController::new().with_resync(ctx.config.resync);
        if let Err(e) = controller.run(ctx.client, shutdown).await {
            tracing::warn!(error = %e, "the resource quota controller stopped with an error");
        }
    })
}

//! The kinds a quota counts, read from the manager's shared informers:
//! each kind's informer is started the first time a quota names it (so
//! with no quota, or none counting Roles, nothing more is watched than
//! the other controllers watch already), and from then on every change
//! of one of its objects sends the quotas of that namespace which count
//! the kind to the controller (its `watches_stream`).
//!
//! This module owns the table of counted kinds (upstream's evaluators'
//! `count/<resource>.<group>` over the built-in namespaced kinds), the
//! per-kind forwarders and the usage sums over the stores. It never
//! writes, and it reads nothing but informer stores.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::UnboundedSender;
use futures::future::BoxFuture;
use futures::StreamExt as _;
use k8s_openapi::api::{apps, autoscaling, batch, coordination, core, discovery, networking};
use k8s_openapi::api::{policy, rbac, storage};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::ResourceExt;
use skiff_api::quota::{self, counted_kind, Usage};
use skiff_client::informer::{Change, Informer, Informers, Watched};
use tokio_util::sync::CancellationToken;

use k8s_openapi::api::core::v1::ResourceQuota;

/// A counted kind's store, type-erased.
pub(crate) trait Kind: Send + Sync {
    /// Waits for the informer's first list.
    fn ready(&self) -> BoxFuture<'static, ()>;
    /// What the kind's objects of `namespace` charge.
    fn usage(&self, namespace: &str) -> Usage;
}

struct Typed<K: Watched> {
    informer: Informer<K>,
    group: &'static str,
    plural: &'static str,
}

impl<K: Watched + serde::Serialize> Kind for Typed<K> {
    fn ready(&self) -> BoxFuture<'static, ()> {
        let informer = self.informer.clone();
        Box::pin(async move { informer.ready().await })
    }

    fn usage(&self, namespace: &str) -> Usage {
        let mut usage = Usage::new();
        for obj in self.informer.store().state() {
            if obj.namespace().as_deref() != Some(namespace) {
                continue;
            }
            let Ok(v) = serde_json::to_value(&*obj) else {
                continue;
            };
            usage = quota::add(&usage, &quota::object_usage(self.group, self.plural, &v));
        }
        usage
    }
}

/// Whether `q` counts objects of `group`/`plural`.
pub(crate) fn counts(q: &ResourceQuota, group: &str, plural: &str) -> bool {
    q.spec
        .as_ref()
        .and_then(|s| s.hard.as_ref())
        .into_iter()
        .flat_map(|h| h.keys())
        .filter_map(|k| counted_kind(k))
        .any(|(g, p)| g == group && p == plural)
}

/// The counted kinds started so far.
pub(crate) struct Counted {
    informers: Informers,
    quotas: Store<ResourceQuota>,
    triggers: UnboundedSender<ResourceQuota>,
    shutdown: CancellationToken,
    started: Mutex<HashMap<(String, String), Arc<dyn Kind>>>,
}

impl Counted {
    pub(crate) fn new(
        informers: Informers,
        quotas: Store<ResourceQuota>,
        triggers: UnboundedSender<ResourceQuota>,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            informers,
            quotas,
            triggers,
            shutdown,
            started: Mutex::default(),
        }
    }

    /// The store of `group`/`plural`, its informer and forwarder started
    /// now if they were not; `None` for a kind not in the table.
    pub(crate) fn get(&self, group: &str, plural: &str) -> Option<Arc<dyn Kind>> {
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        let key = (group.to_string(), plural.to_string());
        if let Some(kind) = started.get(&key) {
            return Some(kind.clone());
        }
        let kind = self.start(group, plural)?;
        started.insert(key, kind.clone());
        Some(kind)
    }

    fn start(&self, group: &str, plural: &str) -> Option<Arc<dyn Kind>> {
        start_kind(self, group, plural)
    }

    fn typed<K: Watched + serde::Serialize>(
        &self,
        group: &'static str,
        plural: &'static str,
    ) -> Arc<dyn Kind> {
        let informer = self.informers.get::<K>();
        forward(
            &informer,
            self.quotas.clone(),
            self.triggers.clone(),
            self.shutdown.clone(),
            group,
            plural,
        );
        Arc::new(Typed {
            informer,
            group,
            plural,
        })
    }
}

/// Only the metadata of a kind: enough to count its objects.
type Meta<K> = PartialObjectMeta<K>;

/// The table: the counted kinds by (group, plural), and their types: the
/// whole object where the usage reads its spec (pods, services, claims)
/// or another controller of the manager follows the kind anyway (its
/// informer is shared), only the metadata ([`Meta`]) of the kinds that
/// are only counted and that nothing else watches, so that a quota
/// counting Secrets does not keep every Secret's data in memory.
macro_rules! counted_kinds {
    ($(($g:literal, $p:literal, $t:ty)),* $(,)?) => {
        fn start_kind(counted: &Counted, group: &str, plural: &str) -> Option<Arc<dyn Kind>> {
            match (group, plural) {
                $(($g, $p) => Some(counted.typed::<$t>($g, $p)),)*
                _ => None,
            }
        }

        /// Each entry's (group, plural) and its type's.
        #[cfg(test)]
        fn table() -> Vec<((&'static str, &'static str), (String, String))> {
            use kube::Resource as _;
            vec![$((($g, $p), (<$t>::group(&()).to_string(), <$t>::plural(&()).to_string()))),*]
        }
    };
}

counted_kinds![
    ("", "pods", core::v1::Pod),
    ("", "services", core::v1::Service),
    ("", "configmaps", core::v1::ConfigMap),
    ("", "secrets", Meta<core::v1::Secret>),
    (
        "",
        "persistentvolumeclaims",
        core::v1::PersistentVolumeClaim
    ),
    (
        "",
        "replicationcontrollers",
        core::v1::ReplicationController
    ),
    ("", "resourcequotas", core::v1::ResourceQuota),
    ("", "serviceaccounts", core::v1::ServiceAccount),
    ("", "endpoints", core::v1::Endpoints),
    ("", "limitranges", Meta<core::v1::LimitRange>),
    ("", "podtemplates", Meta<core::v1::PodTemplate>),
    ("", "events", Meta<core::v1::Event>),
    ("apps", "deployments", apps::v1::Deployment),
    ("apps", "replicasets", apps::v1::ReplicaSet),
    ("apps", "statefulsets", apps::v1::StatefulSet),
    ("apps", "daemonsets", apps::v1::DaemonSet),
    ("apps", "controllerrevisions", apps::v1::ControllerRevision),
    ("batch", "jobs", batch::v1::Job),
    ("batch", "cronjobs", batch::v1::CronJob),
    (
        "policy",
        "poddisruptionbudgets",
        policy::v1::PodDisruptionBudget
    ),
    ("networking.k8s.io", "ingresses", Meta<networking::v1::Ingress>),
    (
        "networking.k8s.io",
        "networkpolicies",
        Meta<networking::v1::NetworkPolicy>
    ),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        Meta<autoscaling::v2::HorizontalPodAutoscaler>
    ),
    ("rbac.authorization.k8s.io", "roles", Meta<rbac::v1::Role>),
    (
        "rbac.authorization.k8s.io",
        "rolebindings",
        Meta<rbac::v1::RoleBinding>
    ),
    ("coordination.k8s.io", "leases", coordination::v1::Lease),
    (
        "discovery.k8s.io",
        "endpointslices",
        discovery::v1::EndpointSlice
    ),
    (
        "storage.k8s.io",
        "csistoragecapacities",
        Meta<storage::v1::CSIStorageCapacity>
    ),
];

/// Sends, for every change of `informer`'s objects that changes what the
/// object charges (a create, a delete, a pod ending, a Service changing
/// type: upstream's replenishment filters updates likewise), the quotas
/// of the object's namespace that count the kind (all such quotas after
/// a resync), until `shutdown`.
fn forward<K: Watched + serde::Serialize>(
    informer: &Informer<K>,
    quotas: Store<ResourceQuota>,
    triggers: UnboundedSender<ResourceQuota>,
    shutdown: CancellationToken,
    group: &'static str,
    plural: &'static str,
) {
    let mut changes = informer.changes().boxed();
    tokio::spawn(async move {
        let mut charges = Charges::default();
        loop {
            let change = tokio::select! {
                _ = shutdown.cancelled() => return,
                change = changes.next() => match change {
                    Some(change) => change,
                    None => return,
                },
            };
            let counting = |ns: Option<&str>| -> Vec<ResourceQuota> {
                quotas
                    .state()
                    .iter()
                    .filter(|q| ns.is_none_or(|ns| q.namespace().as_deref() == Some(ns)))
                    .filter(|q| counts(q, group, plural))
                    .map(|q| (**q).clone())
                    .collect()
            };
            let wanted = match &change {
                Change::Applied(o) => {
                    let wanted = counting(Some(&o.namespace().unwrap_or_default()));
                    let usage = serde_json::to_value(&**o)
                        .map(|v| quota::object_usage(group, plural, &v))
                        .unwrap_or_default();
                    // Nothing to tell when no quota counts it here, or
                    // when it charges what it charged before.
                    if !charges.changed(&**o, usage, !wanted.is_empty()) {
                        continue;
                    }
                    wanted
                }
                Change::Deleted(o) => {
                    charges.forget(&**o);
                    counting(Some(&o.namespace().unwrap_or_default()))
                }
                Change::Resync => {
                    // Changes may have been missed: start remembering anew.
                    charges = Charges::default();
                    counting(None)
                }
            };
            for q in wanted {
                if triggers.unbounded_send(q).is_err() {
                    return;
                }
            }
        }
    });
}

/// What each object counted by some quota charged at its last change.
struct Charges<K: Watched>(HashMap<ObjectRef<K>, Usage>);

impl<K: Watched> Default for Charges<K> {
    fn default() -> Self {
        Self(HashMap::new())
    }
}

impl<K: Watched> Charges<K> {
    /// Whether `obj`, now charging `usage`, changes a quota's usage;
    /// remembered only while a quota `counted` it.
    fn changed(&mut self, obj: &K, usage: Usage, counted: bool) -> bool {
        let key = ObjectRef::from_obj(obj);
        if !counted {
            self.0.remove(&key);
            return false;
        }
        self.0.insert(key, usage.clone()) != Some(usage)
    }

    fn forget(&mut self, obj: &K) {
        self.0.remove(&ObjectRef::from_obj(obj));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_counted_kind_is_its_types_group_and_plural() {
        let table = table();
        assert!(table.len() > 20);
        for (entry, of_type) in table {
            assert_eq!((entry.0.to_string(), entry.1.to_string()), of_type);
        }
    }

    #[test]
    fn only_changes_of_what_an_object_charges_reach_the_quotas() {
        use k8s_openapi::api::core::v1::Pod;
        let pod = |phase: &str| -> (Pod, Usage) {
            let v = serde_json::json!({
                "metadata": {"name": "p", "namespace": "n"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": phase},
            });
            let usage = quota::object_usage("", "pods", &v);
            (serde_json::from_value(v).unwrap(), usage)
        };
        let mut charges = Charges::default();
        let (pending, charge) = pod("Pending");
        assert!(charges.changed(&pending, charge.clone(), true));
        let (running, same) = pod("Running");
        assert!(!charges.changed(&running, same, true));
        let (done, nothing) = pod("Succeeded");
        assert!(charges.changed(&done, nothing, true));
        // Not counted: not remembered, so a quota made later hears of it.
        assert!(!charges.changed(&pending, charge.clone(), false));
        assert!(charges.changed(&pending, charge, true));
    }

    #[test]
    fn a_quota_counts_the_kinds_its_names_charge() {
        let q: ResourceQuota = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "q"},
            "spec": {"hard": {"requests.cpu": "1", "count/deployments.apps": "2"}},
        }))
        .unwrap();
        assert!(counts(&q, "", "pods"));
        assert!(counts(&q, "apps", "deployments"));
        assert!(!counts(&q, "", "services"));
        assert!(!counts(&q, "", "deployments"));
    }
}

//! The RBAC authorizer (upstream's `plugin/pkg/auth/authorizer/rbac`):
//! allows what a rule of a role bound to the caller allows, and otherwise
//! has no opinion (RBAC never denies). Decisions read an in-memory
//! [`Policy`] that [`Rbac::follow`] keeps current from the watch caches of
//! the four RBAC kinds, so no request reads the store. Until the caches
//! have been read once the authorizer allows nothing ([`Rbac::ready`]
//! tells when it may).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::Value;
use skiff_store::EventKind;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Attributes, Authorizer, Decision, Rules};
use crate::authn::User;
use crate::watchcache::follow::{follow, Change};
use crate::watchcache::{CachedEvent, Caches};

pub mod escalation;
mod policy;
pub mod rules;

pub use policy::{Binding, Policy, Who};

/// The four kinds the policy is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ClusterRole,
    Role,
    ClusterRoleBinding,
    RoleBinding,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::ClusterRole,
        Kind::Role,
        Kind::ClusterRoleBinding,
        Kind::RoleBinding,
    ];

    fn plural(self) -> &'static str {
        match self {
            Kind::ClusterRole => "clusterroles",
            Kind::Role => "roles",
            Kind::ClusterRoleBinding => "clusterrolebindings",
            Kind::RoleBinding => "rolebindings",
        }
    }
}

/// The authorizer; cheap to clone (all clones share one policy).
#[derive(Debug, Clone)]
pub struct Rbac {
    policy: Arc<RwLock<Policy>>,
    loaded: watch::Sender<usize>,
}

impl Default for Rbac {
    fn default() -> Self {
        Rbac {
            policy: Arc::default(),
            loaded: watch::channel(0).0,
        }
    }
}

impl Rbac {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Policy> {
        self.policy.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Policy> {
        self.policy.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The rules bound to `user` in `namespace` (see [`Policy::held`]).
    pub fn held(
        &self,
        user: &User,
        namespace: &str,
    ) -> (Vec<k8s_openapi::api::rbac::v1::PolicyRule>, bool) {
        self.read().held(user, namespace)
    }

    /// A role's rules (see [`Policy::role_rules`]).
    pub fn role_rules(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Vec<k8s_openapi::api::rbac::v1::PolicyRule>> {
        self.read().role_rules(namespace, name)
    }

    /// Waits until every kind has been read from its cache once; false
    /// after `timeout`.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut rx = self.loaded.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n >= Kind::ALL.len()))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Keeps the policy current from `caches` (storage names from
    /// `catalog`) until `shutdown`.
    pub async fn follow(
        self,
        caches: Arc<Caches>,
        catalog: Arc<crate::catalog::Catalog>,
        shutdown: CancellationToken,
    ) {
        let mut tasks = Vec::new();
        for kind in Kind::ALL {
            let Some(resource) = catalog.find("rbac.authorization.k8s.io", "v1", kind.plural())
            else {
                tracing::error!(
                    kind = kind.plural(),
                    "RBAC kind not served; RBAC allows nothing"
                );
                return;
            };
            let cache = caches.get_or_create(resource.storage);
            let prefix = format!("/registry/{}/", resource.storage);
            tasks.push(tokio::spawn(self.clone().follow_kind(
                kind,
                cache,
                prefix,
                shutdown.clone(),
            )));
        }
        for t in tasks {
            let _ = t.await;
        }
    }

    async fn follow_kind(
        self,
        kind: Kind,
        cache: Arc<crate::watchcache::WatchCache>,
        prefix: String,
        shutdown: CancellationToken,
    ) {
        let mut counted = false;
        follow(cache, prefix, shutdown, |change| match change {
            Change::Batch { reset, events } => {
                {
                    let mut policy = self.write();
                    if reset {
                        policy.clear(kind);
                    }
                    for event in events {
                        apply(&mut policy, kind, event);
                    }
                }
                if !counted {
                    counted = true;
                    self.loaded.send_modify(|n| *n += 1);
                }
            }
            Change::Event(event) => apply(&mut self.write(), kind, event),
        })
        .await
    }
}

/// `(namespace, name)` of a stored object from its key
/// (`/registry/STORAGE/[NS/]NAME`).
fn names(key: &str, namespaced: bool) -> Option<(String, String)> {
    let mut parts = key.trim_start_matches("/registry/").splitn(3, '/');
    let _storage = parts.next()?;
    if namespaced {
        Some((parts.next()?.to_string(), parts.next()?.to_string()))
    } else {
        Some((String::new(), parts.next()?.to_string()))
    }
}

fn typed<T: serde::de::DeserializeOwned>(event: &CachedEvent) -> Option<T> {
    let obj: Value = event.item.object()?;
    serde_json::from_value(obj)
        .map_err(|e| tracing::warn!(key = %event.item.key, error = %e, "RBAC object does not decode; ignored"))
        .ok()
}

fn apply(policy: &mut Policy, kind: Kind, event: &CachedEvent) {
    let key = &event.item.key;
    let deleted = event.kind == EventKind::Deleted;
    match kind {
        Kind::ClusterRole => {
            let Some((_, name)) = names(key, false) else {
                return;
            };
            match (deleted, typed::<ClusterRole>(event)) {
                (false, Some(r)) => policy.set_cluster_role(&name, r.rules.unwrap_or_default()),
                _ => policy.remove_cluster_role(&name),
            }
        }
        Kind::Role => {
            let Some((ns, name)) = names(key, true) else {
                return;
            };
            match (deleted, typed::<Role>(event)) {
                (false, Some(r)) => policy.set_role(&ns, &name, r.rules.unwrap_or_default()),
                _ => policy.remove_role(&ns, &name),
            }
        }
        Kind::ClusterRoleBinding => match (deleted, typed::<ClusterRoleBinding>(event)) {
            (false, Some(b)) => policy.set_binding(key, Binding::of_cluster_role_binding(&b)),
            _ => policy.remove_binding(key),
        },
        Kind::RoleBinding => match (deleted, typed::<RoleBinding>(event)) {
            (false, Some(b)) => policy.set_binding(key, Binding::of_role_binding(&b)),
            _ => policy.remove_binding(key),
        },
    }
}

impl Authorizer for Rbac {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        if self.read().allows(attrs) {
            Decision::Allow
        } else {
            Decision::NoOpinion
        }
    }

    fn rules(&self, user: &User, namespace: &str) -> Rules {
        self.read().rules_for(user, namespace)
    }
}

//! The Node authorizer (upstream's `plugin/pkg/auth/authorizer/node`):
//! judges requests of node agents, users `system:node:<name>` in the
//! group `system:nodes`, and has no opinion on anyone else's.
//!
//! A node may read a Secret, ConfigMap, PersistentVolumeClaim or
//! PersistentVolume only when a pod bound to it refers to it ([`graph`]),
//! create tokens only for the ServiceAccounts of its pods, and touch only
//! its own Lease and CSINode; everything else it is judged by upstream's
//! static node rules (the `system:node` ClusterRole's). What it may write
//! about its own objects is narrowed further by the NodeRestriction
//! admission plugin (`crate::admission`).
//!
//! The graph is kept current from the pods' and claims' watch caches by
//! [`NodeAuthorizer::follow`]; no decision reads the store.

use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use k8s_openapi::api::rbac::v1::PolicyRule;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Attributes, Authorizer, Decision};
use crate::authn::User;
use crate::watchcache::follow::{follow, Change};
use crate::watchcache::{CachedEvent, Caches};

pub mod graph;

use graph::{Graph, Kind};

/// The prefix of a node's user name.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The group every node is in.
pub const NODES_GROUP: &str = "system:nodes";
/// Where node heartbeat Leases live.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node a user is, as upstream's `NodeIdentifier`: `Some("")` for a
/// user in `system:nodes` whose name is the bare prefix.
pub fn node_identity(user: &User) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_PREFIX)?;
    user.groups.iter().any(|g| g == NODES_GROUP).then_some(name)
}

/// The authorizer; cheap to clone (clones share one graph).
#[derive(Debug, Clone)]
pub struct NodeAuthorizer {
    graph: Arc<RwLock<Graph>>,
    /// How many of the two caches (pods, claims) have been read once.
    loaded: watch::Sender<usize>,
    /// The pods' cache, read on a miss (see [`NodeAuthorizer::recheck`]).
    pods: Arc<OnceLock<(Arc<crate::watchcache::WatchCache>, String)>>,
    /// Upstream's static node rules (the `system:node` ClusterRole's),
    /// given by whoever makes the authorizer.
    node_rules: Arc<Vec<PolicyRule>>,
}

impl NodeAuthorizer {
    /// An authorizer judging nodes by `node_rules` beside its graph.
    pub fn new(node_rules: Vec<PolicyRule>) -> Self {
        NodeAuthorizer {
            graph: Arc::default(),
            loaded: watch::channel(0).0,
            pods: Arc::default(),
            node_rules: Arc::new(node_rules),
        }
    }
}

/// What the graph is fed from.
#[derive(Debug, Clone, Copy)]
enum Source {
    Pods,
    Claims,
}

impl NodeAuthorizer {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Graph> {
        self.graph.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Graph> {
        self.graph.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until pods and claims have been read once; false after
    /// `timeout`.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut rx = self.loaded.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n >= 2))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Keeps the graph current from `caches` until `shutdown`.
    pub async fn follow(
        self,
        caches: Arc<Caches>,
        catalog: Arc<crate::catalog::Catalog>,
        shutdown: CancellationToken,
    ) {
        let mut tasks = Vec::new();
        for (source, plural) in [
            (Source::Pods, "pods"),
            (Source::Claims, "persistentvolumeclaims"),
        ] {
            let Some(resource) = catalog.find("", "v1", plural) else {
                tracing::error!(
                    plural,
                    "not served; the Node authorizer allows nodes nothing"
                );
                return;
            };
            let cache = caches.get_or_create(resource.storage);
            let prefix = format!("/registry/{}/", resource.storage);
            if let Source::Pods = source {
                let _ = self.pods.set((cache.clone(), prefix.clone()));
            }
            let this = self.clone();
            let shutdown = shutdown.clone();
            tasks.push(tokio::spawn(async move {
                let mut counted = false;
                follow(cache, prefix, shutdown, |change| match change {
                    Change::Batch { reset, events } => {
                        {
                            let mut graph = this.write();
                            if reset {
                                match source {
                                    Source::Pods => graph.clear_pods(),
                                    Source::Claims => graph.clear_claims(),
                                }
                            }
                            for event in events {
                                apply(&mut graph, source, event);
                            }
                        }
                        if !counted {
                            counted = true;
                            this.loaded.send_modify(|n| *n += 1);
                        }
                    }
                    Change::Event(event) => apply(&mut this.write(), source, event),
                })
                .await
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    }

    fn judge(&self, node: &str, attrs: &Attributes<'_>) -> Decision {
        if node.is_empty() {
            return Decision::NoOpinion;
        }
        if attrs.resource_request {
            let graph_kind = match (attrs.api_group.as_str(), attrs.resource.as_str()) {
                ("", "secrets") => Some(Kind::Secret),
                ("", "configmaps") => Some(Kind::ConfigMap),
                _ => None,
            };
            if let Some(kind) = graph_kind {
                return self.read_namespaced(node, kind, attrs);
            }
            match (attrs.api_group.as_str(), attrs.resource.as_str()) {
                ("", "persistentvolumeclaims") => {
                    return if attrs.subresource == "status" {
                        let writes = matches!(attrs.verb.as_str(), "update" | "patch");
                        self.related(writes, node, Kind::Claim, attrs)
                    } else {
                        self.related(
                            attrs.verb == "get" && attrs.subresource.is_empty(),
                            node,
                            Kind::Claim,
                            attrs,
                        )
                    };
                }
                ("", "persistentvolumes") => {
                    let allowed = attrs.verb == "get"
                        && attrs.subresource.is_empty()
                        && !attrs.name.is_empty()
                        && self.read().reaches_volume(node, &attrs.name);
                    return allow_if(allowed);
                }
                ("", "serviceaccounts") => {
                    let token = attrs.verb == "create" && attrs.subresource == "token";
                    return self.related(token, node, Kind::ServiceAccount, attrs);
                }
                ("coordination.k8s.io", "leases") => {
                    return allow_if(
                        own_object(node, attrs) && attrs.namespace == NODE_LEASE_NAMESPACE,
                    );
                }
                ("storage.k8s.io", "csinodes") => {
                    return allow_if(own_object(node, attrs));
                }
                // Not followed here (Skiff attaches no volumes): nodes get
                // none.
                ("storage.k8s.io", "volumeattachments") => return Decision::NoOpinion,
                _ => {}
            }
        }
        allow_if(
            self.node_rules
                .iter()
                .any(|rule| super::rbac::rules::rule_allows(attrs, rule)),
        )
    }

    /// get/list/watch of one named object in a namespace that a pod of
    /// `node` refers to (upstream's `authorizeReadNamespacedObject`).
    fn read_namespaced(&self, node: &str, kind: Kind, attrs: &Attributes<'_>) -> Decision {
        let reads = matches!(attrs.verb.as_str(), "get" | "list" | "watch")
            && attrs.subresource.is_empty()
            && !attrs.namespace.is_empty();
        self.related(reads, node, kind, attrs)
    }

    /// Allowed when `verb_ok` and a pod of `node` refers to the named
    /// object.
    fn related(&self, verb_ok: bool, node: &str, kind: Kind, attrs: &Attributes<'_>) -> Decision {
        if !verb_ok || attrs.name.is_empty() {
            return Decision::NoOpinion;
        }
        let (namespace, name) = (attrs.namespace.as_str(), attrs.name.as_str());
        allow_if(
            self.read().reaches(node, kind, namespace, name)
                || self.recheck(node, kind, namespace, name),
        )
    }

    /// A miss checked again against the pods' cache itself: the node may
    /// have seen its new pod (and asked for its Secret) before the graph
    /// took the same change in. Reads only the node's pods in the
    /// namespace (by the cached `spec.nodeName`), no costlier than the
    /// pod list the node rules already allow.
    fn recheck(&self, node: &str, kind: Kind, namespace: &str, name: &str) -> bool {
        let Some((cache, prefix)) = self.pods.get() else {
            return false;
        };
        let Ok((_, pods)) = cache.list(&format!("{prefix}{namespace}/")) else {
            return false;
        };
        pods.iter()
            .filter(|p| {
                p.selectable()
                    .and_then(|s| s.field("spec.nodeName"))
                    .is_some_and(|n| n == node)
            })
            .filter_map(|p| p.object())
            .any(|pod| {
                graph::pod_refs(&pod)
                    .iter()
                    .any(|r| r.kind == kind && r.name == name)
            })
    }
}

fn allow_if(allowed: bool) -> Decision {
    if allowed {
        Decision::Allow
    } else {
        Decision::NoOpinion
    }
}

/// A node's own Lease or CSINode (named after it): get, update, patch,
/// delete of that name, create of any (NodeRestriction checks the name).
fn own_object(node: &str, attrs: &Attributes<'_>) -> bool {
    matches!(
        attrs.verb.as_str(),
        "get" | "create" | "update" | "patch" | "delete"
    ) && attrs.subresource.is_empty()
        && (attrs.verb == "create" || attrs.name == node)
}

fn apply(graph: &mut Graph, source: Source, event: &CachedEvent) {
    let deleted = event.kind == skiff_store::EventKind::Deleted;
    let object = if deleted { None } else { event.item.object() };
    match source {
        Source::Pods => graph.set_pod(&event.item.key, object.as_ref()),
        Source::Claims => {
            let mut parts = event
                .item
                .key
                .trim_start_matches("/registry/")
                .splitn(3, '/')
                .skip(1);
            if let (Some(ns), Some(name)) = (parts.next(), parts.next()) {
                graph.set_claim(ns, name, object.as_ref());
            }
        }
    }
}

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        match node_identity(attrs.user) {
            Some(node) => self.judge(node, attrs),
            None => Decision::NoOpinion,
        }
    }

    /// Nothing for users that are not nodes; a node's rules depend on its
    /// pods and cannot be listed (upstream's `RulesFor`).
    fn rules(&self, user: &User, _namespace: &str) -> super::Rules {
        if node_identity(user).is_some() {
            super::Rules::unknown()
        } else {
            super::Rules::default()
        }
    }
}

#[cfg(test)]
mod tests;

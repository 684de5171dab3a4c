//! Which resources the garbage collector knows: every served resource
//! (kube discovery of /api and /apis, custom resources included) for
//! resolving owner references by apiVersion and kind, and among them the
//! ones it watches (upstream's GetDeletableResources: the preferred
//! version of each resource that can be listed, watched and deleted;
//! events excepted, as upstream ignores them).
//! Each watched resource gets one metadata-only watch feeding the graph.
//!
//! This module owns the resource map and the watch tasks; the graph and
//! the decisions are elsewhere.

use std::collections::{HashMap, HashSet};

use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::{verbs, Discovery, Scope};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt as _;
use kube::{Api, Client};
use tokio::sync::mpsc;

use super::graph::{Facts, Identity};

/// A resource and whether it is namespaced.
#[derive(Debug, Clone)]
pub struct Served {
    /// Group, version, kind, plural.
    pub resource: ApiResource,
    /// Namespaced (or cluster-scoped).
    pub namespaced: bool,
}

impl Served {
    /// The key of a watch: `group/version/plural`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}",
            self.resource.group, self.resource.version, self.resource.plural
        )
    }

    /// Its API in `namespace` (ignored for cluster-scoped ones).
    pub fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        if self.namespaced {
            Api::namespaced_with(client.clone(), namespace, &self.resource)
        } else {
            Api::all_with(client.clone(), &self.resource)
        }
    }
}

/// What discovery found.
#[derive(Debug, Default, Clone)]
pub struct Resources {
    /// By (apiVersion, kind), every served version.
    by_version: HashMap<(String, String), Served>,
    /// By (group, kind): the preferred version.
    by_group: HashMap<(String, String), Served>,
    /// What is watched.
    pub watched: Vec<Served>,
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

impl Resources {
    /// Runs discovery.
    pub async fn discover(client: &Client) -> Result<Self, kube::Error> {
        let discovery = Discovery::new(client.clone()).run().await?;
        let mut resources = Resources::default();
        for group in discovery.groups() {
            for version in group.versions() {
                for (ar, caps) in group.versioned_resources(version) {
                    let served = Served {
                        namespaced: caps.scope == Scope::Namespaced,
                        resource: ar.clone(),
                    };
                    resources
                        .by_version
                        .insert((ar.api_version.clone(), ar.kind.clone()), served);
                }
            }
            for (ar, caps) in group.recommended_resources() {
                let served = Served {
                    namespaced: caps.scope == Scope::Namespaced,
                    resource: ar.clone(),
                };
                resources
                    .by_group
                    .insert((ar.group.clone(), ar.kind.clone()), served.clone());
                let deletable = [verbs::LIST, verbs::WATCH, verbs::DELETE]
                    .iter()
                    .all(|v| caps.supports_operation(v));
                if deletable && !ignored(&ar) {
                    resources.watched.push(served);
                }
            }
        }
        Ok(resources)
    }

    /// The resource of an owner reference's apiVersion and kind: that
    /// version when served, else the group's preferred one.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<&Served> {
        self.by_version
            .get(&(api_version.to_string(), kind.to_string()))
            .or_else(|| {
                self.by_group
                    .get(&(group_of(api_version).to_string(), kind.to_string()))
            })
    }
}

/// Resources never watched (upstream's DefaultIgnoredResources): events
/// own nothing and are many.
fn ignored(ar: &ApiResource) -> bool {
    ar.plural == "events" && (ar.group.is_empty() || ar.group == "events.k8s.io")
}

/// A change a watch observed.
#[derive(Debug)]
pub enum Change {
    /// Added or modified.
    Applied(Identity, Facts),
    /// Deleted (by uid).
    Deleted(String),
    /// The watch of this key listed everything once.
    Synced(String),
}

/// Watches `served` (metadata only) until aborted, sending its changes.
/// A relist reports the objects that went missing meanwhile as deleted.
pub async fn watch(client: Client, served: Served, changes: mpsc::UnboundedSender<Change>) {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &served.resource);
    let key = served.key();
    let identity = |meta: &kube::api::ObjectMeta| Identity {
        api_version: served.resource.api_version.clone(),
        kind: served.resource.kind.clone(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
    };
    let mut known: HashSet<String> = HashSet::new();
    let mut fresh: HashSet<String> = HashSet::new();
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    // Sends a change; false once the graph builder has stopped.
    let send = |change: Change| changes.send(change).is_ok();
    while let Some(event) = stream.next().await {
        let alive = match event {
            Ok(Event::Init) => {
                fresh.clear();
                true
            }
            Ok(Event::InitApply(obj)) => {
                let id = identity(&obj.metadata);
                fresh.insert(id.uid.clone());
                send(Change::Applied(id, Facts::of(&obj.metadata)))
            }
            Ok(Event::InitDone) => {
                let gone: Vec<String> = known.difference(&fresh).cloned().collect();
                known = std::mem::take(&mut fresh);
                gone.into_iter().all(|uid| send(Change::Deleted(uid)))
                    && send(Change::Synced(key.clone()))
            }
            Ok(Event::Apply(obj)) => {
                let id = identity(&obj.metadata);
                known.insert(id.uid.clone());
                send(Change::Applied(id, Facts::of(&obj.metadata)))
            }
            Ok(Event::Delete(obj)) => {
                let uid = obj.metadata.uid.clone().unwrap_or_default();
                known.remove(&uid);
                send(Change::Deleted(uid))
            }
            Err(e) => {
                tracing::debug!(resource = %key, error = %e, "garbage collector watch");
                true
            }
        };
        if !alive {
            return;
        }
    }
}

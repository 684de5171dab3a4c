//! The scheduler's informers: kube-rs watchers merged into one stream,
//! and relist bookkeeping.
//!
//! This module owns which objects the scheduler watches: pods that are not
//! Succeeded or Failed (one watch for pending and assigned pods alike, as
//! upstream's scheduler informer: a pod's binding arrives as one MODIFIED
//! event rather than a DELETED from a "pending" watch plus an ADDED to an
//! "assigned" one), nodes, and for VolumeBinding PersistentVolumeClaims,
//! PersistentVolumes and StorageClasses; and [`Relist`], which remembers
//! what an initial (re)list delivered so the caller can drop objects that
//! vanished while the watch was down. Errors are logged and retried with
//! kube-rs' default backoff; a storage kind the API server does not serve
//! (404) counts as listed and empty, so scheduling does not wait for it.
//! It does not interpret events; the loop does.

use std::collections::HashSet;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};

use skiff_client::trimmed::{untrim, Broken, Parts, Trimmed};

/// One event from one of the watchers.
#[derive(Debug)]
pub(crate) enum Input {
    /// A pod that is not Succeeded or Failed, pending or assigned.
    Pod(Box<Event<Pod>>),
    /// A node.
    Node(Box<Event<Node>>),
    /// A PersistentVolumeClaim.
    Claim(Box<Event<PersistentVolumeClaim>>),
    /// A PersistentVolume.
    Volume(Box<Event<PersistentVolume>>),
    /// A StorageClass.
    Class(Box<Event<StorageClass>>),
}

/// A watcher on `K`, decoded as [`Trimmed<K>`] (without managedFields).
fn watch<K>(
    client: Client,
    fields: Option<String>,
    what: &'static str,
) -> BoxStream<'static, Event<K>>
where
    K: Parts + k8s_openapi::Metadata<Ty = ObjectMeta> + Send + 'static,
    Trimmed<K>: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send,
{
    let api = Api::<Trimmed<K>>::all(client);
    let mut config = watcher::Config::default();
    if let Some(f) = fields {
        config = config.fields(&f);
    }
    watcher(api, config)
        .default_backoff()
        .filter_map(move |r| async move {
            r.map_err(|e| tracing::warn!(watch = what, error = %e, "watch failed; retrying"))
                .ok()
        })
        .filter_map(move |e| async move { untrim(e, what, Broken::Forget) })
        .boxed()
}

/// A watcher on `K`, decoded as it is (these objects are few); a list
/// the server refuses with 404 (it does not serve `K`) is reported as an
/// empty list.
fn watch_all<K>(client: Client, what: &'static str) -> BoxStream<'static, Event<K>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    watcher(Api::<K>::all(client), watcher::Config::default())
        .default_backoff()
        .flat_map(move |r| {
            let events = match r {
                Ok(e) => vec![e],
                Err(watcher::Error::InitialListFailed(e)) if skiff_client::is_not_found(&e) => {
                    tracing::debug!(watch = what, "not served; nothing to watch");
                    vec![Event::Init, Event::InitDone]
                }
                Err(e) => {
                    tracing::warn!(watch = what, error = %e, "watch failed; retrying");
                    Vec::new()
                }
            };
            futures::stream::iter(events)
        })
        .boxed()
}

/// The merged watch stream.
pub(crate) fn inputs(client: Client) -> BoxStream<'static, Input> {
    let pods = watch::<Pod>(
        client.clone(),
        Some("status.phase!=Succeeded,status.phase!=Failed".into()),
        "pods",
    )
    .map(|e| Input::Pod(Box::new(e)));
    let nodes = watch::<Node>(client.clone(), None, "nodes").map(|e| Input::Node(Box::new(e)));
    let claims = watch_all::<PersistentVolumeClaim>(client.clone(), "persistentvolumeclaims")
        .map(|e| Input::Claim(Box::new(e)));
    let volumes = watch_all::<PersistentVolume>(client.clone(), "persistentvolumes")
        .map(|e| Input::Volume(Box::new(e)));
    let classes =
        watch_all::<StorageClass>(client, "storageclasses").map(|e| Input::Class(Box::new(e)));
    futures::stream::select_all([
        pods.boxed(),
        nodes.boxed(),
        claims.boxed(),
        volumes.boxed(),
        classes.boxed(),
    ])
    .boxed()
}

/// What the current initial list of one watcher delivered.
#[derive(Debug, Default)]
pub(crate) struct Relist {
    seen: Option<HashSet<String>>,
    synced: bool,
}

impl Relist {
    /// `Init`: a (re)list starts.
    pub(crate) fn start(&mut self) {
        self.seen = Some(HashSet::new());
    }

    /// `InitApply`: `key` is present.
    pub(crate) fn saw(&mut self, key: String) {
        if let Some(seen) = &mut self.seen {
            seen.insert(key);
        }
    }

    /// `InitDone`: returns which of `known` the list did not contain.
    pub(crate) fn finish<'a>(&mut self, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        self.synced = true;
        let Some(seen) = self.seen.take() else {
            return Vec::new();
        };
        known
            .into_iter()
            .filter(|k| !seen.contains(*k))
            .map(str::to_string)
            .collect()
    }

    /// Whether the first list has completed.
    pub(crate) fn synced(&self) -> bool {
        self.synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relist_reports_vanished_keys() {
        let mut r = Relist::default();
        assert!(!r.synced());
        r.start();
        r.saw("a".into());
        assert!(r.finish(["a"]).is_empty());
        assert!(r.synced());
        r.start();
        r.saw("b".into());
        assert_eq!(r.finish(["a", "b"]), vec!["a".to_string()]);
        // An InitDone without Init forgets nothing.
        assert!(r.finish(["a"]).is_empty());
    }
}

//! Which namespaces changed: a kube-runtime watcher per kind, each
//! event reduced to the namespace of its object, for controllers that
//! recompute one namespace at a time (resource quota, disruption).

use std::fmt::Debug;

use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// Sends the namespace of every object `api` reports until `shutdown`
/// (errors are logged; the watcher backs off and relists).
pub(crate) fn forward<K>(api: Api<K>, tx: UnboundedSender<String>, shutdown: CancellationToken)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                event = stream.next() => match event {
                    Some(Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o))) => {
                        if let Some(ns) = o.namespace() {
                            if tx.send(ns).is_err() {
                                break;
                            }
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => tracing::debug!(error = %e, "watch"),
                    None => break,
                },
            }
        }
    });
}

//! Which namespaces changed: a kube-runtime watcher per kind, each
//! event reduced to the namespace of its object, for controllers that
//! recompute one namespace at a time (resource quota, disruption). The
//! watch of the controller's own kind (ResourceQuotas, budgets) also
//! keeps [`Owners`], the namespaces that hold one, and the other kinds'
//! changes count only there: a pod write in a namespace without a quota
//! costs the quota controller nothing (upstream reads its informers'
//! caches; without this, every pod event was a LIST request). The
//! watches read only each object's metadata (kube-runtime's
//! `Api<PartialObjectMeta<K>>`): decoding every pod whole, twice, just for its
//! namespace was a visible share of the server's CPU at 10,000 pods. And
//! while few namespaces hold an owner, the counted kinds are watched in
//! those namespaces only, so with no quota or budget no pod is read.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::core::NamespaceResourceScope;
use kube::core::PartialObjectMeta;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The namespaces that hold an object of a controller's own kind, by
/// name, as its watch reports them.
#[derive(Debug, Clone)]
pub(crate) struct Owners {
    state: Arc<Mutex<OwnersState>>,
    /// Told whenever the set of namespaces that hold one may have changed.
    changed: Arc<watch::Sender<()>>,
}

impl Default for Owners {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            changed: Arc::new(watch::channel(()).0),
        }
    }
}

#[derive(Debug, Default)]
struct OwnersState {
    held: HashMap<String, HashSet<String>>,
    /// A relist in progress: what it found so far.
    listing: Option<HashMap<String, HashSet<String>>>,
}

impl Owners {
    fn lock(&self) -> std::sync::MutexGuard<'_, OwnersState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The namespaces that hold one.
    pub(crate) fn namespaces(&self) -> Vec<String> {
        let s = self.lock();
        s.held
            .iter()
            .filter(|(_, names)| !names.is_empty())
            .map(|(ns, _)| ns.clone())
            .collect()
    }

    /// Whether `ns` holds one.
    pub(crate) fn holds(&self, ns: &str) -> bool {
        self.lock()
            .held
            .get(ns)
            .is_some_and(|names| !names.is_empty())
    }

    fn apply(&self, ns: &str, name: &str, listing: bool) {
        let mut s = self.lock();
        // During a relist the change lands in what it found so far, and
        // `listed` tells the watches; otherwise in what is held.
        let (map, held) = match (listing, s.listing.as_mut()) {
            (true, Some(l)) => (l, false),
            _ => (&mut s.held, true),
        };
        let names = map.entry(ns.to_string()).or_default();
        let first = names.is_empty();
        names.insert(name.to_string());
        drop(s);
        if first && held {
            self.changed.send_replace(());
        }
    }

    fn delete(&self, ns: &str, name: &str) {
        let emptied = self.lock().held.get_mut(ns).is_some_and(|names| {
            names.remove(name);
            names.is_empty()
        });
        if emptied {
            self.changed.send_replace(());
        }
    }

    /// A relist ended: what it found replaces what was held.
    fn listed(&self) {
        let mut s = self.lock();
        if let Some(found) = s.listing.take() {
            s.held = found;
        }
        drop(s);
        self.changed.send_replace(());
    }
}

/// The watch of the controller's own kind: sends the namespace of every
/// object it reports and keeps `owners`.
pub(crate) fn track<K>(
    api: Api<PartialObjectMeta<K>>,
    tx: UnboundedSender<String>,
    shutdown: CancellationToken,
    owners: Owners,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => break,
                event = stream.next() => event,
            };
            let ns = match event {
                Some(Ok(watcher::Event::Init)) => {
                    owners.lock().listing = Some(HashMap::new());
                    None
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    owners.listed();
                    None
                }
                Some(Ok(watcher::Event::InitApply(o))) => {
                    let ns = o.namespace();
                    if let Some(ns) = &ns {
                        owners.apply(ns, &o.name_any(), true);
                    }
                    ns
                }
                Some(Ok(watcher::Event::Apply(o))) => {
                    let ns = o.namespace();
                    if let Some(ns) = &ns {
                        owners.apply(ns, &o.name_any(), false);
                    }
                    ns
                }
                Some(Ok(watcher::Event::Delete(o))) => {
                    let ns = o.namespace();
                    if let Some(ns) = &ns {
                        owners.delete(ns, &o.name_any());
                    }
                    ns
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "watch");
                    None
                }
                None => break,
            };
            if let Some(ns) = ns {
                if tx.send(ns).is_err() {
                    break;
                }
            }
        }
    });
}

/// Above this many namespaces holding an owner, one cluster-wide watch
/// of a counted kind replaces the per-namespace ones.
const MAX_NAMESPACE_WATCHES: usize = 16;

/// The watches of a kind the controller counts: send the namespaces of
/// its objects that `owners` holds. While few namespaces hold one, each
/// gets its own watch (the server filters by namespace, so pods elsewhere
/// cost nothing: with no quota at all, none is watched); past
/// [`MAX_NAMESPACE_WATCHES`], one watch of every namespace, filtered here.
pub(crate) fn forward_owned<K>(
    client: kube::Client,
    tx: UnboundedSender<String>,
    shutdown: CancellationToken,
    owners: Owners,
) where
    K: Resource<Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash,
{
    let mut changed = owners.changed.subscribe();
    tokio::spawn(async move {
        // The running watches: by namespace, or `None` for all of them.
        let mut running: HashMap<Option<String>, CancellationToken> = HashMap::new();
        loop {
            let held = owners.namespaces();
            let wanted: HashSet<Option<String>> = if held.len() > MAX_NAMESPACE_WATCHES {
                HashSet::from([None])
            } else {
                held.into_iter().map(Some).collect()
            };
            running.retain(|scope, stop| {
                let keep = wanted.contains(scope);
                if !keep {
                    stop.cancel();
                }
                keep
            });
            for scope in wanted {
                if running.contains_key(&scope) {
                    continue;
                }
                let stop = shutdown.child_token();
                let api = match &scope {
                    Some(ns) => Api::<PartialObjectMeta<K>>::namespaced(client.clone(), ns),
                    None => Api::<PartialObjectMeta<K>>::all(client.clone()),
                };
                let owners = owners.clone();
                forward_if(api, tx.clone(), stop.clone(), move |ns| owners.holds(ns));
                running.insert(scope, stop);
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                r = changed.changed() => if r.is_err() { break },
                _ = tx.closed() => break,
            }
        }
        for stop in running.into_values() {
            stop.cancel();
        }
    });
}

/// Sends the namespace of every object `api` reports for which `wanted`
/// holds, until `shutdown` (errors are logged; the watcher backs off and
/// relists).
fn forward_if<K>(
    api: Api<PartialObjectMeta<K>>,
    tx: UnboundedSender<String>,
    shutdown: CancellationToken,
    wanted: impl Fn(&str) -> bool + Send + 'static,
) where
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
                        if let Some(ns) = o.namespace().filter(|ns| wanted(ns)) {
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

/// A namespace-at-a-time controller's loop, until `shutdown` or until
/// every watch has ended: the namespaces sent on `rx` (gathered while
/// one pass runs, each synced once) and, every `resync`, every namespace
/// `owners` holds are passed to `sync`; its errors are logged as `what`.
pub(crate) async fn run_namespaces<F, Fut, E>(
    mut rx: UnboundedReceiver<String>,
    owners: Owners,
    resync: Duration,
    shutdown: CancellationToken,
    what: &str,
    mut sync: F,
) where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut tick = tokio::time::interval(resync);
    loop {
        let mut dirty = BTreeSet::new();
        tokio::select! {
            _ = shutdown.cancelled() => break,
            ns = rx.recv() => match ns {
                Some(ns) => { dirty.insert(ns); }
                None => break,
            },
            _ = tick.tick() => dirty.extend(owners.namespaces()),
        }
        while let Ok(ns) = rx.try_recv() {
            dirty.insert(ns);
        }
        for ns in dirty {
            if shutdown.is_cancelled() {
                break;
            }
            if let Err(e) = sync(ns.clone()).await {
                tracing::warn!(namespace = %ns, error = %e, "syncing {what}");
            }
        }
    }
}

//! The persistent volume controller with the local-path provisioner
//! built in (kube-controller-manager's `persistentvolume-binder` plus
//! what k3s runs as rancher's local-path-provisioner).
//!
//! This module owns binding PersistentVolumeClaims to PersistentVolumes
//! (both pointers, their phases and upstream's annotations), provisioning
//! volumes for classes whose provisioner is [`LOCAL_PATH_PROVISIONER`]
//! (at once for `Immediate` classes, on the node the scheduler put in
//! `volume.kubernetes.io/selected-node` for `WaitForFirstConsumer` ones),
//! and reclaiming released volumes (Delete: the object is deleted and the
//! node agent, which owns the directory, removes it and then the
//! [`LOCAL_PATH_CLEANUP_FINALIZER`]; Retain: it stays Released).
//!
//! It watches claims, volumes, classes and nodes (kube-runtime watchers)
//! into one [`sync::View`], updated from the watches and from what its
//! own writes return (never to an older resourceVersion, as upstream's
//! `storeObjectUpdate`). Once all four have listed, each changed object is
//! synced, one at a time from one task: [`sync`] decides the next step
//! (pure), this module executes it, keeps what the API returned and asks
//! again until nothing is left to write. A failed sync is retried with
//! exponential backoff. It must not touch the directories on nodes, nor
//! pods (the scheduler and the node agent consume the bindings).

pub mod helpers;
pub mod local_path;
pub mod sync;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::Events;
use helpers::{claim_class, claim_key, claim_ref, claim_ref_key, has_annotation, name};
use sync::{plan_claim, plan_volume, Absent, Key, View, Write};

pub use local_path::{
    CLEANUP_FINALIZER as LOCAL_PATH_CLEANUP_FINALIZER, DIR_ANNOTATION as LOCAL_PATH_DIR_ANNOTATION,
    PROVISIONER as LOCAL_PATH_PROVISIONER,
};

/// The events' source component, as upstream's.
const COMPONENT: &str = "persistentvolume-controller";
/// The first retry of a failed sync; it doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// Most steps of one sync (binding takes four, provisioning two more).
const MAX_STEPS: usize = 16;

/// What went wrong syncing an object (logged; the object is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A write failed.
    #[error("{action} {kind} {name}")]
    Write {
        /// `updating`, `creating`, ...
        action: &'static str,
        /// `PersistentVolume` or `PersistentVolumeClaim`.
        kind: &'static str,
        /// The object.
        name: String,
        /// Why (boxed: kube's errors are large).
        #[source]
        source: Box<kube::Error>,
    },
    /// Reading an object the view says is gone failed.
    #[error("checking whether {kind} {name} still exists")]
    Confirm {
        /// `PersistentVolume` or `PersistentVolumeClaim`.
        kind: &'static str,
        /// The object.
        name: String,
        /// Why.
        #[source]
        source: Box<kube::Error>,
    },
    /// Recording an event failed.
    #[error("recording event {reason} about {name}")]
    Event {
        /// The event's reason.
        reason: &'static str,
        /// The object.
        name: String,
        /// Why.
        #[source]
        source: Box<crate::events::Error>,
    },
    /// The sync kept finding something to write.
    #[error("sync of {key:?} did not settle after {MAX_STEPS} steps")]
    Unsettled {
        /// The object.
        key: Key,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The persistent volume controller.
#[derive(Debug, Clone)]
pub struct PersistentVolumeController {
    first_retry: Duration,
    max_retry: Duration,
}

impl Default for PersistentVolumeController {
    fn default() -> Self {
        Self {
            first_retry: FIRST_RETRY,
            max_retry: MAX_RETRY,
        }
    }
}

impl PersistentVolumeController {
    /// A controller retrying failed syncs after 200 ms, doubling up to 60 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retries after `first`, doubling up to `max`.
    pub fn with_retry(mut self, first: Duration, max: Duration) -> Self {
        self.first_retry = first;
        self.max_retry = max.max(first);
        self
    }

    /// Runs until `shutdown`. API errors are logged and retried, never
    /// returned.
    pub async fn run(self, client: Client, shutdown: CancellationToken) -> Result<()> {
        tracing::info!("starting persistent volume controller");
        let mut state = State {
            client: client.clone(),
            volumes: Api::all(client.clone()),
            events: Events::new(client.clone(), COMPONENT),
            view: View::default(),
            listing: Listing::default(),
            synced: Synced::default(),
            queue: WorkQueue::new(self.first_retry, self.max_retry),
        };
        let mut inputs = inputs(client);
        loop {
            // Take in what the watches have delivered before working.
            loop {
                match inputs.next().now_or_never() {
                    Some(Some(input)) => state.on_input(input),
                    Some(None) => return Ok(()),
                    None => break,
                }
            }
            if shutdown.is_cancelled() {
                break;
            }
            state.queue.promote_due(Instant::now());
            if state.synced.all() {
                if let Some(key) = state.queue.pop() {
                    tokio::select! {
                        biased;
                        _ = shutdown.cancelled() => break,
                        _ = state.sync(key) => {}
                    }
                    continue;
                }
            }
            let due = state.queue.next_due();
            let retry = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                input = inputs.next() => match input {
                    Some(input) => state.on_input(input),
                    None => break,
                },
                _ = retry => {}
            }
        }
        tracing::info!("shutting down persistent volume controller");
        Ok(())
    }
}

/// One watch event (boxed: the kinds differ much in size).
#[derive(Debug)]
enum Input {
    Claim(Box<watcher::Event<PersistentVolumeClaim>>),
    Volume(Box<watcher::Event<PersistentVolume>>),
    Class(Box<watcher::Event<StorageClass>>),
    Node(Box<watcher::Event<Node>>),
}

fn watch<K>(
    api: Api<K>,
    what: &'static str,
    wrap: fn(Box<watcher::Event<K>>) -> Input,
) -> BoxStream<'static, Input>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |r| async move {
            r.map_err(|e| tracing::warn!(watch = what, error = %e, "watch failed; retrying"))
                .ok()
        })
        .map(move |e| wrap(Box::new(e)))
        .boxed()
}

/// The four watches, merged.
fn inputs(client: Client) -> BoxStream<'static, Input> {
    futures::stream::select_all([
        watch(
            Api::all(client.clone()),
            "persistentvolumeclaims",
            Input::Claim,
        ),
        watch(Api::all(client.clone()), "persistentvolumes", Input::Volume),
        watch(Api::all(client.clone()), "storageclasses", Input::Class),
        watch(Api::all(client), "nodes", Input::Node),
    ])
    .boxed()
}

/// The objects of lists in progress.
#[derive(Debug, Default)]
struct Listing {
    claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
    nodes: Vec<Node>,
}

/// Which watches have completed a list.
#[derive(Debug, Default)]
struct Synced {
    claims: bool,
    volumes: bool,
    classes: bool,
    nodes: bool,
}

impl Synced {
    fn all(&self) -> bool {
        self.claims && self.volumes && self.classes && self.nodes
    }
}

/// Whether `new` is not older than `old` (resourceVersions compared as
/// numbers, as upstream's `storeObjectUpdate`; unparsable ones win).
fn not_older(old: Option<&ObjectMeta>, new: &ObjectMeta) -> bool {
    let rv = |m: &ObjectMeta| m.resource_version.as_deref()?.parse::<u64>().ok();
    match (old.and_then(rv), rv(new)) {
        (Some(old), Some(new)) => new >= old,
        _ => true,
    }
}

/// Puts `obj` in `map` under `key` unless the map holds a newer version.
fn store<K>(
    map: &mut std::collections::BTreeMap<String, K>,
    key: String,
    obj: K,
    meta: fn(&K) -> &ObjectMeta,
) {
    if not_older(map.get(&key).map(meta), meta(&obj)) {
        map.insert(key, obj);
    }
}

/// Replaces `map` with a complete list, keeping cached objects newer than
/// the listed ones (our own writes may be newer than the list).
fn relist<K>(
    map: &mut std::collections::BTreeMap<String, K>,
    listed: Vec<K>,
    key: fn(&K) -> String,
    meta: fn(&K) -> &ObjectMeta,
) {
    let mut old = std::mem::take(map);
    for obj in listed {
        let k = key(&obj);
        match old.remove(&k) {
            Some(cached) if !not_older(Some(meta(&cached)), meta(&obj)) => {
                map.insert(k, cached);
            }
            _ => {
                map.insert(k, obj);
            }
        }
    }
}

fn claim_meta(c: &PersistentVolumeClaim) -> &ObjectMeta {
    &c.metadata
}
fn volume_meta(v: &PersistentVolume) -> &ObjectMeta {
    &v.metadata
}
fn class_meta(c: &StorageClass) -> &ObjectMeta {
    &c.metadata
}
fn node_meta(n: &Node) -> &ObjectMeta {
    &n.metadata
}
fn meta_name<K: kube::Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

/// What about a node matters to provisioning.
fn node_fingerprint(node: &Node) -> (bool, Option<String>, String, bool) {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let dir = helpers::annotation(&node.metadata, LOCAL_PATH_DIR_ANNOTATION).map(String::from);
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    (ready, dir, local_path::hostname(node).to_string(), cordoned)
}

/// Keys to sync, each once, with delayed retries.
#[derive(Debug)]
struct WorkQueue {
    ready: VecDeque<Key>,
    queued: HashSet<Key>,
    later: HashMap<Key, Instant>,
    failures: HashMap<Key, u32>,
    first_retry: Duration,
    max_retry: Duration,
}

impl WorkQueue {
    fn new(first_retry: Duration, max_retry: Duration) -> Self {
        Self {
            ready: VecDeque::new(),
            queued: HashSet::new(),
            later: HashMap::new(),
            failures: HashMap::new(),
            first_retry,
            max_retry,
        }
    }

    /// Queues `key` now (a retry waiting for it is dropped).
    fn add(&mut self, key: Key) {
        self.later.remove(&key);
        if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    fn pop(&mut self) -> Option<Key> {
        let key = self.ready.pop_front()?;
        self.queued.remove(&key);
        Some(key)
    }

    /// Queues `key` again after its backoff from `now`.
    fn retry(&mut self, key: Key, now: Instant) {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        let mut delay = self.first_retry;
        for _ in 1..*failures {
            if delay >= self.max_retry {
                break;
            }
            delay = delay.saturating_mul(2);
        }
        let at = now + delay.min(self.max_retry);
        let due = self.later.entry(key).or_insert(at);
        *due = (*due).min(at);
    }

    /// `key` synced cleanly: its backoff starts over.
    fn forget(&mut self, key: &Key) {
        self.failures.remove(key);
    }

    fn promote_due(&mut self, now: Instant) {
        let due: Vec<Key> = self
            .later
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.add(key);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.later.values().min().copied()
    }
}

/// How one sync ended.
enum Outcome {
    /// Nothing left to do.
    Done,
    /// Try again after the backoff.
    Retry,
}

/// The controller's state; one task owns it.
struct State {
    client: Client,
    volumes: Api<PersistentVolume>,
    events: Events,
    view: View,
    listing: Listing,
    synced: Synced,
    queue: WorkQueue,
}

impl State {
    fn on_input(&mut self, input: Input) {
        let was_synced = self.synced.all();
        match input {
            Input::Claim(event) => match *event {
                watcher::Event::Init => self.listing.claims.clear(),
                watcher::Event::InitApply(c) => self.listing.claims.push(c),
                watcher::Event::InitDone => {
                    let listed = std::mem::take(&mut self.listing.claims);
                    relist(&mut self.view.claims, listed, claim_key, claim_meta);
                    self.synced.claims = true;
                    self.relisted(was_synced);
                }
                watcher::Event::Apply(c) => {
                    let key = claim_key(&c);
                    store(&mut self.view.claims, key.clone(), c, claim_meta);
                    if was_synced {
                        self.queue.add(Key::Claim(key));
                    }
                }
                watcher::Event::Delete(c) => {
                    let key = claim_key(&c);
                    self.view.claims.remove(&key);
                    if was_synced {
                        self.claim_gone(&c);
                    }
                }
            },
            Input::Volume(event) => match *event {
                watcher::Event::Init => self.listing.volumes.clear(),
                watcher::Event::InitApply(v) => self.listing.volumes.push(v),
                watcher::Event::InitDone => {
                    let listed = std::mem::take(&mut self.listing.volumes);
                    relist(&mut self.view.volumes, listed, meta_name, volume_meta);
                    self.synced.volumes = true;
                    self.relisted(was_synced);
                }
                watcher::Event::Apply(v) => {
                    let key = meta_name(&v);
                    store(&mut self.view.volumes, key, v.clone(), volume_meta);
                    if was_synced {
                        self.volume_changed(&v);
                    }
                }
                watcher::Event::Delete(v) => {
                    self.view.volumes.remove(name(&v.metadata));
                    if was_synced {
                        self.volume_gone(&v);
                    }
                }
            },
            Input::Class(event) => match *event {
                watcher::Event::Init => self.listing.classes.clear(),
                watcher::Event::InitApply(c) => self.listing.classes.push(c),
                watcher::Event::InitDone => {
                    let listed = std::mem::take(&mut self.listing.classes);
                    relist(&mut self.view.classes, listed, meta_name, class_meta);
                    self.synced.classes = true;
                    self.relisted(was_synced);
                }
                watcher::Event::Apply(c) => {
                    let key = meta_name(&c);
                    store(&mut self.view.classes, key.clone(), c, class_meta);
                    if was_synced {
                        self.class_changed(&key);
                    }
                }
                watcher::Event::Delete(c) => {
                    let key = meta_name(&c);
                    self.view.classes.remove(&key);
                    if was_synced {
                        self.class_changed(&key);
                    }
                }
            },
            Input::Node(event) => match *event {
                watcher::Event::Init => self.listing.nodes.clear(),
                watcher::Event::InitApply(n) => self.listing.nodes.push(n),
                watcher::Event::InitDone => {
                    let listed = std::mem::take(&mut self.listing.nodes);
                    relist(&mut self.view.nodes, listed, meta_name, node_meta);
                    self.synced.nodes = true;
                    self.relisted(was_synced);
                }
                watcher::Event::Apply(n) => {
                    let key = meta_name(&n);
                    let before = self.view.nodes.get(&key).map(node_fingerprint);
                    let after = node_fingerprint(&n);
                    store(&mut self.view.nodes, key, n, node_meta);
                    if was_synced && before.as_ref() != Some(&after) {
                        self.nodes_changed();
                    }
                }
                watcher::Event::Delete(n) => {
                    self.view.nodes.remove(name(&n.metadata));
                    if was_synced {
                        self.nodes_changed();
                    }
                }
            },
        }
    }

    /// A list completed: once all have (first time or a relist), every
    /// object is synced.
    fn relisted(&mut self, was_synced: bool) {
        if !self.synced.all() {
            return;
        }
        if !was_synced {
            tracing::info!(
                claims = self.view.claims.len(),
                volumes = self.view.volumes.len(),
                classes = self.view.classes.len(),
                nodes = self.view.nodes.len(),
                "persistent volume caches synced"
            );
        }
        let claims: Vec<Key> = self.view.claims.keys().cloned().map(Key::Claim).collect();
        let volumes: Vec<Key> = self.view.volumes.keys().cloned().map(Key::Volume).collect();
        for key in claims.into_iter().chain(volumes) {
            self.queue.add(key);
        }
    }

    /// Unbound claims matching `filter`.
    fn queue_unbound_claims(&mut self, filter: impl Fn(&PersistentVolumeClaim) -> bool) {
        let keys: Vec<Key> = self
            .view
            .claims
            .iter()
            .filter(|(_, c)| !has_annotation(&c.metadata, helpers::ANN_BIND_COMPLETED) && filter(c))
            .map(|(k, _)| Key::Claim(k.clone()))
            .collect();
        for key in keys {
            self.queue.add(key);
        }
    }

    fn claim_gone(&mut self, claim: &PersistentVolumeClaim) {
        let key = claim_key(claim);
        let bound: Vec<Key> = self
            .view
            .volumes
            .iter()
            .filter(|(n, v)| {
                claim_ref(v).is_some_and(|r| claim_ref_key(r) == key)
                    || helpers::claim_volume_name(claim) == n.as_str()
            })
            .map(|(n, _)| Key::Volume(n.clone()))
            .collect();
        for k in bound {
            self.queue.add(k);
        }
    }

    fn volume_changed(&mut self, volume: &PersistentVolume) {
        self.queue.add(Key::Volume(meta_name(volume)));
        if let Some(r) = claim_ref(volume) {
            self.queue.add(Key::Claim(claim_ref_key(r)));
        }
        // It may serve claims waiting for a volume of its class.
        let class = helpers::volume_class(volume).to_string();
        self.queue_unbound_claims(|c| claim_class(c) == class);
    }

    fn volume_gone(&mut self, volume: &PersistentVolume) {
        let volume_name = meta_name(volume);
        let claims: Vec<Key> = self
            .view
            .claims
            .iter()
            .filter(|(_, c)| helpers::claim_volume_name(c) == volume_name)
            .map(|(k, _)| Key::Claim(k.clone()))
            .collect();
        for k in claims {
            self.queue.add(k);
        }
        if let Some(r) = claim_ref(volume) {
            self.queue.add(Key::Claim(claim_ref_key(r)));
        }
    }

    fn class_changed(&mut self, class: &str) {
        self.queue_unbound_claims(|c| claim_class(c) == class || !helpers::claim_has_class(c));
    }

    fn nodes_changed(&mut self) {
        let ours: HashSet<String> = self
            .view
            .classes
            .iter()
            .filter(|(_, c)| c.provisioner == LOCAL_PATH_PROVISIONER)
            .map(|(n, _)| n.clone())
            .collect();
        self.queue_unbound_claims(|c| ours.contains(claim_class(c)));
    }

    /// Plans and executes steps for `key` until one writes nothing.
    async fn sync(&mut self, key: Key) {
        match self.sync_steps(&key).await {
            Ok(Outcome::Done) => self.queue.forget(&key),
            Ok(Outcome::Retry) => self.queue.retry(key, Instant::now()),
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "persistent volume sync failed; retrying");
                self.queue.retry(key, Instant::now());
            }
        }
    }

    async fn sync_steps(&mut self, key: &Key) -> Result<Outcome> {
        let mut recorded: Vec<(String, &'static str, String)> = Vec::new();
        for _ in 0..MAX_STEPS {
            let step = match key {
                Key::Claim(k) => match self.view.claims.get(k) {
                    Some(c) => plan_claim(c, &self.view),
                    None => return Ok(Outcome::Done),
                },
                Key::Volume(k) => match self.view.volumes.get(k) {
                    Some(v) => plan_volume(v, &self.view),
                    None => return Ok(Outcome::Done),
                },
            };
            for k in step.enqueue {
                self.queue.add(k);
            }
            if let Some(absent) = &step.confirm {
                if !self.confirm(absent).await? {
                    // The view was behind; it is not now.
                    continue;
                }
            }
            let wrote = match step.write {
                Some(write) => self.execute(write).await?,
                None => false,
            };
            for e in step.events {
                let id = (
                    e.regarding.name.clone().unwrap_or_default(),
                    e.reason,
                    e.message.clone(),
                );
                if recorded.contains(&id) {
                    continue;
                }
                if let Err(source) = self
                    .events
                    .record(&e.regarding, e.type_, e.reason, &e.message)
                    .await
                {
                    let e = Error::Event {
                        reason: e.reason,
                        name: id.0.clone(),
                        source: Box::new(source),
                    };
                    tracing::warn!(error = %error_chain(&e), "event not recorded");
                }
                recorded.push(id);
            }
            if step.retry {
                return Ok(Outcome::Retry);
            }
            if !wrote {
                return Ok(Outcome::Done);
            }
        }
        Err(Error::Unsettled { key: key.clone() })
    }

    /// Whether `absent` is gone in the API too; if not, the view gets it.
    async fn confirm(&mut self, absent: &Absent) -> Result<bool> {
        match absent {
            Absent::Claim {
                namespace,
                name,
                uid,
            } => {
                let api: Api<PersistentVolumeClaim> =
                    Api::namespaced(self.client.clone(), namespace);
                match api.get_opt(name).await {
                    Ok(Some(claim)) if claim.metadata.uid.as_deref() == Some(uid.as_str()) => {
                        let key = claim_key(&claim);
                        store(&mut self.view.claims, key, claim, claim_meta);
                        Ok(false)
                    }
                    Ok(_) => Ok(true),
                    Err(source) => Err(Error::Confirm {
                        kind: "PersistentVolumeClaim",
                        name: format!("{namespace}/{name}"),
                        source: Box::new(source),
                    }),
                }
            }
            Absent::Volume(name) => match self.volumes.get_opt(name).await {
                Ok(Some(volume)) => {
                    store(&mut self.view.volumes, name.clone(), volume, volume_meta);
                    Ok(false)
                }
                Ok(None) => Ok(true),
                Err(source) => Err(Error::Confirm {
                    kind: "PersistentVolume",
                    name: name.clone(),
                    source: Box::new(source),
                }),
            },
        }
    }

    /// Executes one write and keeps what the API returned. `Ok(false)`
    /// when there was nothing to write after all (the object is gone).
    async fn execute(&mut self, write: Write) -> Result<bool> {
        let pp = PostParams::default();
        let volume_error = |action, name: &str| {
            let name = name.to_string();
            move |source| Error::Write {
                action,
                kind: "PersistentVolume",
                name,
                source: Box::new(source),
            }
        };
        let claim_error = |action, key: String| {
            move |source| Error::Write {
                action,
                kind: "PersistentVolumeClaim",
                name: key,
                source: Box::new(source),
            }
        };
        let result = match write {
            Write::UpdateVolume(v) => {
                let n = meta_name(&v);
                self.volumes
                    .replace(&n, &pp, &v)
                    .await
                    .map(|v| self.keep_volume(v))
                    .map_err(volume_error("updating", &n))
            }
            Write::UpdateVolumeStatus(v) => {
                let n = meta_name(&v);
                self.volumes
                    .replace_status(&n, &pp, &v)
                    .await
                    .map(|v| self.keep_volume(v))
                    .map_err(volume_error("updating the status of", &n))
            }
            Write::CreateVolume(v) => {
                let n = meta_name(&v);
                match self.volumes.create(&pp, &v).await {
                    Ok(created) => {
                        tracing::info!(volume = %n, "provisioned volume");
                        self.keep_volume(created);
                        Ok(())
                    }
                    Err(e) if skiff_client::is_conflict(&e) => {
                        // Provisioned before (upstream reuses it).
                        match self.volumes.get(&n).await {
                            Ok(existing) => {
                                self.keep_volume(existing);
                                Ok(())
                            }
                            Err(e) => Err(volume_error("reading", &n)(e)),
                        }
                    }
                    Err(e) => Err(volume_error("creating", &n)(e)),
                }
            }
            Write::DeleteVolume(v) => {
                let n = meta_name(&v);
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: v.metadata.uid.clone(),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match self.volumes.delete(&n, &dp).await {
                    Ok(either) => {
                        tracing::info!(volume = %n, "deleted released volume");
                        match either.left() {
                            // Kept by a finalizer, now with a deletionTimestamp.
                            Some(kept) => self.keep_volume(kept),
                            None => {
                                self.view.volumes.remove(&n);
                            }
                        }
                        Ok(())
                    }
                    Err(e) if skiff_client::is_not_found(&e) => {
                        self.view.volumes.remove(&n);
                        return Ok(false);
                    }
                    Err(e) => {
                        // upstream's VolumeFailedDelete, with the reason.
                        let message = match &e {
                            kube::Error::Api(s) => s.message.clone(),
                            other => other.to_string(),
                        };
                        let regarding = k8s_openapi::api::core::v1::ObjectReference {
                            api_version: Some("v1".into()),
                            kind: Some("PersistentVolume".into()),
                            name: Some(n.clone()),
                            uid: v.metadata.uid.clone(),
                            ..Default::default()
                        };
                        if let Err(err) = self
                            .events
                            .record(
                                &regarding,
                                "Warning",
                                sync::reason::VOLUME_FAILED_DELETE,
                                &message,
                            )
                            .await
                        {
                            tracing::warn!(error = %err, "event not recorded");
                        }
                        Err(volume_error("deleting", &n)(e))
                    }
                }
            }
            Write::UpdateClaim(c) => {
                let key = claim_key(&c);
                let api = self.claims_in(&c);
                api.replace(name(&c.metadata), &pp, &c)
                    .await
                    .map(|c| self.keep_claim(c))
                    .map_err(claim_error("updating", key))
            }
            Write::UpdateClaimStatus(c) => {
                let key = claim_key(&c);
                let api = self.claims_in(&c);
                api.replace_status(name(&c.metadata), &pp, &c)
                    .await
                    .map(|c| self.keep_claim(c))
                    .map_err(claim_error("updating the status of", key))
            }
        };
        match result {
            Ok(()) => Ok(true),
            // Deleted meanwhile: its delete event brings the rest.
            Err(Error::Write { source, .. }) if skiff_client::is_not_found(&source) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn claims_in(&self, claim: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
        Api::namespaced(
            self.client.clone(),
            claim.metadata.namespace.as_deref().unwrap_or("default"),
        )
    }

    fn keep_volume(&mut self, volume: PersistentVolume) {
        let key = meta_name(&volume);
        store(&mut self.view.volumes, key, volume, volume_meta);
    }

    fn keep_claim(&mut self, claim: PersistentVolumeClaim) {
        let key = claim_key(&claim);
        store(&mut self.view.claims, key, claim, claim_meta);
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Starts the persistent volume controller in a controller manager.
pub(crate) fn start(
    ctx: crate::context::Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        if let Err(e) = PersistentVolumeController::new()
            .run(ctx.client, shutdown)
            .await
        {
            tracing::warn!(error = %e, "the persistent volume controller stopped with an error");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{claim, ready_node};

    #[test]
    fn the_view_never_goes_back_to_an_older_version() {
        let mut map = std::collections::BTreeMap::new();
        let v = |rv: &str| claim("c").resource_version(rv).build();
        store(&mut map, "k".into(), v("10"), claim_meta);
        store(&mut map, "k".into(), v("9"), claim_meta);
        assert_eq!(map["k"].metadata.resource_version.as_deref(), Some("10"));
        store(&mut map, "k".into(), v("11"), claim_meta);
        assert_eq!(map["k"].metadata.resource_version.as_deref(), Some("11"));
        // A list older than what we wrote keeps ours; what it lacks goes.
        map.insert("gone".into(), v("3"));
        relist(&mut map, vec![v("10")], |_| "k".to_string(), claim_meta);
        assert_eq!(map.len(), 1);
        assert_eq!(map["k"].metadata.resource_version.as_deref(), Some("11"));
    }

    #[test]
    fn the_queue_dedupes_and_backs_off() {
        let mut q = WorkQueue::new(Duration::from_millis(100), Duration::from_millis(350));
        let a = Key::Claim("default/a".into());
        q.add(a.clone());
        q.add(a.clone());
        q.add(Key::Volume("v".into()));
        assert_eq!(q.pop(), Some(a.clone()));
        assert_eq!(q.pop(), Some(Key::Volume("v".into())));
        assert_eq!(q.pop(), None);
        let mut now = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..4 {
            q.retry(a.clone(), now);
            let due = q.next_due().expect("due");
            delays.push(due - now);
            q.promote_due(due - Duration::from_millis(1));
            assert_eq!(q.pop(), None, "not due yet");
            q.promote_due(due);
            assert_eq!(q.pop(), Some(a.clone()));
            now = due;
        }
        assert_eq!(
            delays,
            [100, 200, 350, 350].map(Duration::from_millis).to_vec()
        );
        q.forget(&a);
        q.retry(a.clone(), now);
        assert_eq!(
            q.next_due().map(|d| d - now),
            Some(Duration::from_millis(100))
        );
        // Queued now, the retry is dropped.
        q.add(a.clone());
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn only_provisioning_relevant_node_changes_count() {
        let base = ready_node("n1").local_path_dir("/d").build();
        let mut heartbeat = base.clone();
        heartbeat.metadata.resource_version = Some("99".into());
        assert_eq!(node_fingerprint(&base), node_fingerprint(&heartbeat));
        let moved = ready_node("n1").local_path_dir("/e").build();
        assert_ne!(node_fingerprint(&base), node_fingerprint(&moved));
        let down = ready_node("n1").local_path_dir("/d").not_ready().build();
        assert_ne!(node_fingerprint(&base), node_fingerprint(&down));
    }
}

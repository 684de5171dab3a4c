//! The watch cache. One store watch over all of `/registry/` feeds one
//! [`WatchCache`] per resource, which keeps every object (serialized once,
//! resourceVersion filled in) and a window of recent events, each with its
//! watch line already built. Watches and lists — consistent ones too — are
//! served from memory, so a thousand watchers cost the store one watch.
//!
//! Freshness: whenever the store watch has nothing more ready, every cache
//! is advanced to the last revision seen, so a cache's revision is the
//! store revision it reflects. A consistent list takes the store's current
//! revision and waits (briefly) for the cache to reach it, as upstream's
//! consistent reads from cache do.
//!
//! A watcher gets a bounded queue; one that falls behind is dropped (its
//! stream ends, the client re-watches), as upstream's cacher does.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock, RwLock};

mod counts;
pub mod filter;
pub mod follow;
pub mod selectable;
pub mod watchers;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use skiff_store::{EventKind, ListOptions, Store};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::object::with_revision;
use crate::watchcache::filter::RawFields;
use crate::watchcache::selectable::Selectable;

/// Events kept for watchers that resume from a recent resourceVersion.
const HISTORY: usize = 10_000;
/// Events queued per watcher before it is dropped as too slow.
const WATCHER_QUEUE: usize = 10_000;
/// The prefix every resource lives under.
const REGISTRY: &str = "/registry/";

/// Resources whose objects the cache keeps as stored and parses only when
/// first read (listed, watched, or offered to a watcher). Upstream does not
/// cache events at all (`DefaultWatchCacheSizes`: `events#0`): they are
/// half of a busy cluster's writes and rarely read. Here they stay in the
/// cache, so listing and watching them work as for any resource, but a
/// write nobody reads costs no parsing.
const PARSED_WHEN_READ: &[&str] = &["events"];

/// One object as the cache holds it.
#[derive(Debug)]
pub struct Cached {
    pub key: String,
    pub revision: i64,
    /// The kind of change that wrote this version.
    line_kind: EventKind,
    /// The bytes as stored, kept for an object parsed when first read.
    stored: Option<Bytes>,
    /// The selectable fields of its storage resource, for parsing
    /// `stored` (see [`FieldsOf`]).
    fields: &'static [&'static str],
    parsed: OnceLock<Option<Parsed>>,
}

/// What the cache serves of one object.
#[derive(Debug)]
pub struct Parsed {
    /// What selectors read (name, namespace, labels, selectable fields):
    /// the whole parsed tree of every object would cost several times
    /// the bytes below in memory.
    pub selectable: Selectable,
    /// The object serialized, resourceVersion included: the middle of
    /// `line`.
    pub json: Bytes,
    /// The watch line of the change that wrote this version, around `json`
    /// (one buffer for both: every write is kept once, not twice).
    line: Bytes,
}

impl Parsed {
    /// `line` is [`line_start`] + the object + [`LINE_END`].
    fn from_line(selectable: Selectable, kind: EventKind, mut line: Vec<u8>) -> Self {
        let start = line_start_len(kind);
        line.extend_from_slice(LINE_END);
        let line = Bytes::from(line);
        Parsed {
            selectable,
            json: line.slice(start..line.len() - LINE_END.len()),
            line,
        }
    }

    /// Wraps `json` (resourceVersion included) written by a `kind` change.
    fn new(selectable: Selectable, kind: EventKind, json: &[u8]) -> Self {
        let mut line = line_start(kind, json.len() + LINE_END.len());
        line.extend_from_slice(json);
        Self::from_line(selectable, kind, line)
    }
}

impl Cached {
    fn parsed_now(key: &str, revision: i64, kind: EventKind, parsed: Parsed) -> Self {
        Cached {
            key: key.to_string(),
            revision,
            line_kind: kind,
            stored: None,
            fields: &[],
            parsed: OnceLock::from(Some(parsed)),
        }
    }

    /// The object's served form, parsed from the stored bytes on first
    /// use for a resource parsed when read; `None` when those bytes are
    /// not a JSON object (the object is then left out of lists and
    /// watches, as one that failed to parse when written is).
    pub fn parsed(&self) -> Option<&Parsed> {
        self.parsed
            .get_or_init(|| {
                let stored = self.stored.as_ref()?;
                parse(
                    &self.key,
                    stored,
                    self.revision,
                    self.line_kind,
                    self.fields,
                )
            })
            .as_ref()
    }

    /// What selectors read; `None` as for [`Cached::parsed`].
    pub fn selectable(&self) -> Option<&Selectable> {
        self.parsed().map(|p| &p.selectable)
    }

    /// The object serialized, resourceVersion included; `None` as for
    /// [`Cached::parsed`].
    pub fn json(&self) -> Option<&Bytes> {
        self.parsed().map(|p| &p.json)
    }

    /// `{"type":KIND,"object":…}\n` for this version; shared, not copied,
    /// for the kind of change that wrote it.
    pub fn line(&self, kind: EventKind) -> Option<Bytes> {
        let parsed = self.parsed()?;
        Some(if kind == self.line_kind {
            parsed.line.clone()
        } else {
            watch_line(kind, &parsed.json)
        })
    }

    /// The whole object (resourceVersion included), parsed from `json` for
    /// the callers that need the tree; `None` as for [`Cached::parsed`].
    pub fn object(&self) -> Option<Value> {
        serde_json::from_slice(self.json()?).ok()
    }
}

/// One page of a cache list ([`WatchCache::page`]).
#[derive(Debug)]
pub struct Page {
    /// The revision the page reflects.
    pub revision: i64,
    pub items: Vec<Arc<Cached>>,
    /// Whether objects past the page matched too.
    pub more: bool,
}

/// One change, shared by every watcher.
#[derive(Debug, Clone)]
pub struct CachedEvent {
    pub kind: EventKind,
    pub revision: i64,
    pub item: Arc<Cached>,
    /// The object before this change (for MODIFIED), so a watch with a
    /// selector can tell an object entering or leaving it.
    pub prev: Option<Arc<Cached>>,
}

/// Why a request cannot be served from the cache.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("too old resource version: {requested} ({oldest})")]
    TooOld { requested: i64, oldest: i64 },
    #[error("the watch cache is not ready yet")]
    NotReady,
}

pub fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Added => "ADDED",
        EventKind::Modified => "MODIFIED",
        EventKind::Deleted => "DELETED",
    }
}

const LINE_END: &[u8] = b"}\n";

const LINE_TYPE: &[u8] = b"{\"type\":\"";
const LINE_OBJECT: &[u8] = b"\",\"object\":";

/// The length of `{"type":KIND,"object":`.
fn line_start_len(kind: EventKind) -> usize {
    LINE_TYPE.len() + kind_name(kind).len() + LINE_OBJECT.len()
}

/// `{"type":KIND,"object":`, with room for exactly `len` more bytes: the
/// object and [`LINE_END`] (a cached buffer keeps its whole capacity).
fn line_start(kind: EventKind, len: usize) -> Vec<u8> {
    named_line_start(kind_name(kind), len)
}

/// [`line_start`] for any event type name (`ERROR`, `BOOKMARK` too; a
/// plain upper-case word, so not escaped). `type` comes first, as
/// upstream's encoder writes it: kube-rs decodes the object straight from
/// the bytes only when it has read the tag first, which types that keep
/// raw parts (the scheduler's `Trimmed` pods) need.
fn named_line_start(name: &str, len: usize) -> Vec<u8> {
    let mut line = Vec::with_capacity(LINE_TYPE.len() + name.len() + LINE_OBJECT.len() + len);
    line.extend_from_slice(LINE_TYPE);
    line.extend_from_slice(name.as_bytes());
    line.extend_from_slice(LINE_OBJECT);
    line
}

/// `{"type":KIND,"object":<json>}\n` without re-serializing the object.
pub fn watch_line(kind: EventKind, object: &[u8]) -> Bytes {
    named_watch_line(kind_name(kind), object)
}

/// [`watch_line`] for any event type name.
pub fn named_watch_line(name: &str, object: &[u8]) -> Bytes {
    let mut line = named_line_start(name, object.len() + LINE_END.len());
    line.extend_from_slice(object);
    line.extend_from_slice(LINE_END);
    Bytes::from(line)
}

/// Which events a watcher wants, checked before queueing so that a
/// watcher with a selector is not woken for every change on its prefix
/// (1,000 node agents each watching their own pods).
pub type Interest = Arc<dyn Fn(&CachedEvent) -> bool + Send + Sync>;

#[derive(Debug, Default)]
struct State {
    ready: bool,
    revision: i64,
    objects: BTreeMap<String, Arc<Cached>>,
    history: VecDeque<CachedEvent>,
    /// Events after this revision are all in `history`.
    history_from: i64,
    watchers: crate::watchcache::watchers::Watchers,
}

/// The cache of one resource (one storage prefix).
#[derive(Debug)]
pub struct WatchCache {
    state: RwLock<State>,
    /// The revision the cache reflects (0 until the first list).
    revision: watch::Sender<i64>,
}

/// The cache's form of a stored object written by a `kind` change: parsed
/// now, or kept as stored for a resource parsed when read (bytes that then
/// do not parse replace the cached version, and the object drops out of
/// lists; a read object keeps both forms). `None` when it must be parsed
/// now and does not parse, and for a delete that lost its value (etcd
/// without prevKV after compaction), which the caller rebuilds from the
/// cached version.
fn cached(
    key: &str,
    value: &[u8],
    revision: i64,
    kind: EventKind,
    fields: &'static [&'static str],
) -> Option<Arc<Cached>> {
    let storage = storage_of(key).unwrap_or_default();
    if PARSED_WHEN_READ.contains(&storage) {
        if kind == EventKind::Deleted && value.is_empty() {
            return None;
        }
        return Some(Arc::new(Cached {
            key: key.to_string(),
            revision,
            line_kind: kind,
            // A copy: a value may be a slice of a larger response buffer
            // (etcd), which the cache must not keep alive.
            stored: Some(Bytes::copy_from_slice(value)),
            fields,
            parsed: OnceLock::new(),
        }));
    }
    let parsed = parse(key, value, revision, kind, fields)?;
    Some(Arc::new(Cached::parsed_now(key, revision, kind, parsed)))
}

/// Parses a stored object into what the cache serves of it.
fn parse(
    key: &str,
    value: &[u8],
    revision: i64,
    kind: EventKind,
    fields: &'static [&'static str],
) -> Option<Parsed> {
    let storage = storage_of(key).unwrap_or_default();
    // The usual case reads the bytes without building the object's tree,
    // and reads its top level and metadata once for both uses.
    let fast = || {
        let top: RawFields = serde_json::from_slice(value).ok()?;
        let meta: RawFields = serde_json::from_str(top.get("metadata")?.get()).ok()?;
        let line = spliced(line_start(kind, 0), value, &top, &meta, revision)?;
        let selectable =
            crate::watchcache::filter::selectable_view_fields(storage, fields, &top, Some(&meta))?;
        Some((line, selectable))
    };
    match fast() {
        Some((line, selectable)) => Some(Parsed::from_line(selectable, kind, line)),
        None => {
            let object: Value = serde_json::from_slice(value)
                .map_err(|e| tracing::warn!(key, error = %e, "stored object is not JSON"))
                .ok()?;
            let selectable = crate::watchcache::filter::selectable_view(storage, fields, &object);
            let json = serde_json::to_vec(&with_revision(object, revision)).ok()?;
            Some(Parsed::new(selectable, kind, &json))
        }
    }
}

/// [`spliced`] reading `raw`'s top level and metadata itself (a write's
/// answer is made this way from the bytes it stored).
pub(crate) fn with_revision_spliced(out: Vec<u8>, raw: &[u8], revision: i64) -> Option<Vec<u8>> {
    let top: RawFields = serde_json::from_slice(raw).ok()?;
    let meta: RawFields = serde_json::from_str(top.get("metadata")?.get()).ok()?;
    spliced(out, raw, &top, &meta, revision)
}

/// `out` followed by the stored bytes `raw` (whose top-level fields and
/// metadata fields are `top` and `meta`) with `"resourceVersion":"R"`
/// inserted at the start of the top-level `metadata` object, so the served
/// form is not serialized again from a parsed tree (every write passes
/// through here). `None` when the shape is unusual (no metadata object, a
/// resourceVersion already stored, escaped keys); the caller then parses
/// and serializes.
fn spliced(
    out: Vec<u8>,
    raw: &[u8],
    top: &RawFields,
    meta: &RawFields,
    revision: i64,
) -> Option<Vec<u8>> {
    let text = top.get("metadata")?.get();
    if meta.contains_key("resourceVersion") {
        return None;
    }
    // The raw value borrows from `raw`: its offset there.
    let start = (text.as_ptr() as usize).checked_sub(raw.as_ptr() as usize)?;
    let slot = crate::object::RevisionSlot {
        at: start + 1,
        more: !meta.is_empty(),
    };
    crate::object::splice_revision(out, raw, slot, revision, LINE_END.len())
}

/// A watch served from the cache: the events to send first, then a queue.
#[derive(Debug)]
pub struct Subscription {
    pub initial: Vec<CachedEvent>,
    pub live: mpsc::Receiver<CachedEvent>,
    /// The cache's revision when the watch started: every later event
    /// comes through `live`.
    pub revision: i64,
}

impl WatchCache {
    fn new() -> Arc<Self> {
        Arc::new(WatchCache {
            state: RwLock::new(State::default()),
            revision: watch::channel(0).0,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the cache reflects `revision` (0: until it is loaded);
    /// false after `timeout`.
    pub async fn wait_for(&self, revision: i64, timeout: Duration) -> bool {
        let mut rx = self.revision.subscribe();
        let target = revision.max(1);
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= target))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// One object, if the cache holds it.
    pub fn get(&self, key: &str) -> Option<Arc<Cached>> {
        self.read().objects.get(key).cloned()
    }

    /// The objects under `prefix` (inside this cache's), in key order, with
    /// the revision they reflect.
    pub fn list(&self, prefix: &str) -> Result<(i64, Vec<Arc<Cached>>), Error> {
        let state = self.read();
        if !state.ready {
            return Err(Error::NotReady);
        }
        let items = state
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect();
        Ok((state.revision, items))
    }

    /// A page of the objects under `prefix` that `keep` accepts, in key
    /// order: at most `limit` of them, and whether more follow. Stops at
    /// the first object past the page, so a limited LIST costs its page,
    /// not the whole collection.
    pub fn page(
        &self,
        prefix: &str,
        limit: Option<usize>,
        mut keep: impl FnMut(&Cached) -> bool,
    ) -> Result<Page, Error> {
        let state = self.read();
        if !state.ready {
            return Err(Error::NotReady);
        }
        let limit = limit.unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut more = false;
        for (_, item) in state
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            if !keep(item) {
                continue;
            }
            if items.len() == limit {
                more = true;
                break;
            }
            items.push(item.clone());
        }
        Ok(Page {
            revision: state.revision,
            items,
            more,
        })
    }

    /// Starts a watch on `prefix`: from `after` (events after that
    /// revision), or with `None` from the current state as ADDED events.
    pub fn subscribe(
        &self,
        prefix: &str,
        after: Option<i64>,
        interest: Option<Interest>,
        index: Option<crate::watchcache::watchers::IndexKey>,
    ) -> Result<Subscription, Error> {
        let mut state = self.write();
        if !state.ready {
            return Err(Error::NotReady);
        }
        let initial: Vec<CachedEvent> = match after {
            None => state
                .objects
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(_, item)| CachedEvent {
                    kind: EventKind::Added,
                    revision: item.revision,
                    item: item.clone(),
                    prev: None,
                })
                .collect(),
            Some(after) if after < state.history_from => {
                return Err(Error::TooOld {
                    requested: after,
                    oldest: state.history_from,
                })
            }
            Some(after) => state
                .history
                .iter()
                .filter(|e| e.revision > after && e.item.key.starts_with(prefix))
                .cloned()
                .collect(),
        };
        state.watchers.remove_closed();
        let (tx, live) = mpsc::channel(WATCHER_QUEUE);
        state.watchers.add(prefix, interest, tx, index);
        Ok(Subscription {
            initial,
            live,
            revision: state.revision,
        })
    }

    /// The revision every queued event is at or below: a bookmark at it is
    /// safe once the watcher's queue is empty.
    pub fn revision(&self) -> i64 {
        *self.revision.borrow()
    }

    /// The cached object for a delete event that lost its value.
    fn deleted_fallback(&self, key: &str, revision: i64) -> Option<Arc<Cached>> {
        let old = self.read().objects.get(key).cloned()?;
        let selectable = old.selectable()?.clone();
        let object = with_revision(old.object()?, revision);
        let json = serde_json::to_vec(&object).ok()?;
        let parsed = Parsed::new(selectable, EventKind::Deleted, &json);
        Some(Arc::new(Cached::parsed_now(
            key,
            revision,
            EventKind::Deleted,
            parsed,
        )))
    }

    /// Replaces the contents after a (re)list at `revision`.
    fn reset(&self, items: Vec<Arc<Cached>>, revision: i64) {
        let mut state = self.write();
        state.objects = items.into_iter().map(|c| (c.key.clone(), c)).collect();
        state.revision = revision;
        state.history.clear();
        state.history_from = revision;
        // Watchers of the previous cycle may have missed events.
        state.watchers.clear();
        state.ready = true;
        drop(state);
        self.revision.send_replace(revision);
    }

    /// Applies one event from the store. The watchers that may want it are
    /// found under the lock; their selectors run and their queues are fed
    /// after it is released. Events stay in order per watcher because one
    /// task applies them all.
    fn apply(&self, kind: EventKind, revision: i64, item: Arc<Cached>) {
        // An object parsed when read is parsed here, outside the lock, once
        // someone may be offered it.
        if item.stored.is_some() && !self.read().watchers.is_empty() {
            let _ = item.parsed();
        }
        let mut state = self.write();
        let prev = match kind {
            EventKind::Deleted => state.objects.remove(&item.key),
            _ => state.objects.insert(item.key.clone(), item.clone()),
        };
        let event = CachedEvent {
            kind,
            revision,
            item,
            prev,
        };
        state.revision = state.revision.max(revision);
        if state.history.len() >= HISTORY {
            if let Some(old) = state.history.pop_front() {
                state.history_from = old.revision;
            }
        }
        state.history.push_back(event.clone());
        // Nobody to offer it to: an object parsed when read stays unparsed.
        if state.watchers.is_empty() {
            return;
        }
        let Some(selectable) = event.item.selectable() else {
            return;
        };
        let candidates = state.watchers.candidates(
            &event.item.key,
            selectable,
            event.prev.as_deref().and_then(Cached::selectable),
        );
        drop(state);
        let mut gone = Vec::new();
        for (id, w) in candidates {
            if w.interest.as_ref().is_some_and(|wants| !wants(&event)) {
                continue;
            }
            // A full queue means the watcher fell behind: drop it.
            match w.tx.try_send(event.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(
                        prefix = %w.prefix,
                        queued = WATCHER_QUEUE,
                        "forcing a watcher closed: it fell behind"
                    );
                    gone.push(id);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => gone.push(id),
            }
        }
        if !gone.is_empty() {
            self.write().watchers.remove(&gone);
        }
    }

    /// Applies `value` (stored bytes) at `revision` as the store's watch
    /// would: lets a test hold a cache behind the store.
    #[cfg(test)]
    pub(crate) fn apply_for_test(&self, key: &str, value: &[u8], revision: i64) {
        let fields = test_fields(key);
        if let Some(item) = cached(key, value, revision, EventKind::Modified, fields) {
            self.apply(EventKind::Modified, revision, item);
        }
    }

    /// How many watchers the cache feeds.
    pub fn watcher_count(&self) -> usize {
        self.read().watchers.len()
    }

    /// Records that the store has nothing newer than `revision` for us.
    fn advance(&self, revision: i64) {
        let mut state = self.write();
        if revision > state.revision {
            state.revision = revision;
        }
        let current = state.revision;
        drop(state);
        self.revision.send_if_modified(|r| {
            let changed = *r != current;
            *r = current;
            changed
        });
    }
}

/// Every resource's cache, fed by one store watch. Built-in resources'
/// caches exist from the start; a custom resource's (storage name
/// `group/plural`, keys `/registry/<group>/<plural>/...`) is made when its
/// first object is seen or when it is first asked for, empty and current
/// as of the last event applied (every earlier event of its prefix would
/// have made it already).
/// The selectable fields of a storage resource name, as the server's
/// catalog answers (`Catalog::selectable_for_storage`): what the cache
/// keeps of each object for selectors.
#[derive(Clone)]
pub struct FieldsOf(pub Arc<FieldsFn>);

/// See [`FieldsOf`].
pub type FieldsFn = dyn Fn(&str) -> &'static [&'static str] + Send + Sync;

impl std::fmt::Debug for FieldsOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FieldsOf")
    }
}

/// The fields the built-in kinds select by (tests).
#[cfg(test)]
pub(crate) fn test_fields(key: &str) -> &'static [&'static str] {
    crate::resources::builtin().selectable_for_storage(storage_of(key).unwrap_or_default())
}

#[derive(Debug)]
pub struct Caches {
    by_storage: RwLock<HashMap<String, Arc<WatchCache>>>,
    fields_of: FieldsOf,
    /// Whether the first list has loaded every cache.
    synced: std::sync::atomic::AtomicBool,
    /// The revision of the last event applied.
    applied: std::sync::atomic::AtomicI64,
}

/// The storage resource name of a key: `/registry/<storage>/...`, or
/// `<group>/<plural>` for a custom resource's key (its first segment is a
/// dotted group no built-in storage name matches).
fn storage_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(REGISTRY)?;
    let first = rest.split('/').next()?;
    if !first.contains('.') {
        return Some(first);
    }
    let mut slashes = rest.match_indices('/').map(|(i, _)| i);
    let end = slashes.nth(1).unwrap_or(rest.len());
    rest.get(..end)
}

impl Caches {
    pub fn new(storages: impl IntoIterator<Item = &'static str>, fields_of: FieldsOf) -> Self {
        let by_storage = storages
            .into_iter()
            .map(|s| (s.to_string(), WatchCache::new()))
            .collect();
        Caches {
            by_storage: RwLock::new(by_storage),
            fields_of,
            synced: std::sync::atomic::AtomicBool::new(false),
            applied: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// The cache of one storage resource name, if it exists.
    pub fn get(&self, storage: &str) -> Option<Arc<WatchCache>> {
        self.by_storage
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(storage)
            .cloned()
    }

    /// The cache of a custom resource's storage name, made if needed.
    pub fn get_or_create(&self, storage: &str) -> Arc<WatchCache> {
        if let Some(cache) = self.get(storage) {
            return cache;
        }
        let mut map = self.by_storage.write().unwrap_or_else(|e| e.into_inner());
        if let Some(cache) = map.get(storage) {
            return cache.clone();
        }
        let cache = WatchCache::new();
        if self.synced.load(std::sync::atomic::Ordering::Acquire) {
            cache.reset(
                Vec::new(),
                self.applied.load(std::sync::atomic::Ordering::Acquire),
            );
        }
        map.insert(storage.to_string(), cache.clone());
        cache
    }

    /// The cache a stored key belongs to: a built-in resource's, or a
    /// custom resource's (made if needed); none for other keys.
    fn for_key(&self, key: &str) -> Option<(String, Arc<WatchCache>)> {
        let first = key.strip_prefix(REGISTRY)?.split('/').next()?;
        if let Some(cache) = self.get(first) {
            return Some((first.to_string(), cache));
        }
        let storage = storage_of(key)?;
        if !storage.contains('/') {
            return None;
        }
        Some((storage.to_string(), self.get_or_create(storage)))
    }

    fn all(&self) -> Vec<(String, Arc<WatchCache>)> {
        self.by_storage
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Loads everything and follows the store until `shutdown`.
    pub async fn run(self: Arc<Self>, store: Arc<dyn Store>, shutdown: CancellationToken) {
        let mut retry = Duration::from_millis(100);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                result = self.sync_once(store.as_ref()) => match result {
                    Ok(()) => retry = Duration::from_millis(100),
                    Err(e) => tracing::warn!(error = %e, "watch cache lost its store watch; relisting"),
                },
            }
            // Back off between relists when the store keeps failing.
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(retry) => {}
            }
            retry = (retry * 2).min(Duration::from_secs(5));
        }
    }

    /// One list + watch cycle; returns when the watch ends.
    async fn sync_once(&self, store: &dyn Store) -> skiff_store::Result<()> {
        let page = store.list(REGISTRY, ListOptions::default()).await?;
        let mut loaded: HashMap<String, Vec<Arc<Cached>>> = HashMap::new();
        for kv in &page.items {
            let Some((name, _)) = self.for_key(&kv.key) else {
                continue;
            };
            let fields = (self.fields_of.0)(&name);
            if let Some(item) = cached(
                &kv.key,
                &kv.value,
                kv.mod_revision,
                EventKind::Added,
                fields,
            ) {
                loaded.entry(name).or_default().push(item);
            }
        }
        {
            // Under the map's lock: a cache made meanwhile is reset too.
            let map = self.by_storage.write().unwrap_or_else(|e| e.into_inner());
            for (storage, cache) in map.iter() {
                cache.reset(loaded.remove(storage).unwrap_or_default(), page.revision);
            }
            self.applied
                .store(page.revision, std::sync::atomic::Ordering::Release);
            self.synced
                .store(true, std::sync::atomic::Ordering::Release);
        }
        let mut watch = store.watch(REGISTRY, page.revision).await?;
        let mut last = page.revision;
        loop {
            // Take what is ready; when nothing is, every cache is current.
            let next = match watch.next().now_or_never() {
                Some(next) => next,
                None => {
                    for (_, cache) in self.all() {
                        cache.advance(last);
                    }
                    watch.next().await
                }
            };
            let Some(event) = next else { return Ok(()) };
            let event = event?;
            last = event.revision;
            let Some((storage, cache)) = self.for_key(&event.kv.key) else {
                self.applied
                    .store(last, std::sync::atomic::Ordering::Release);
                continue;
            };
            let fields = (self.fields_of.0)(&storage);
            let item = cached(
                &event.kv.key,
                &event.kv.value,
                event.revision,
                event.kind,
                fields,
            )
            .or_else(|| {
                match event.kind {
                    // A delete whose last value is missing (etcd without
                    // prevKV after compaction): use what the cache holds.
                    EventKind::Deleted => cache.deleted_fallback(&event.kv.key, event.revision),
                    _ => None,
                }
            });
            if let Some(item) = item {
                cache.apply(event.kind, event.revision, item);
            }
            self.applied
                .store(last, std::sync::atomic::Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_resource_keys_name_group_and_plural() {
        assert_eq!(storage_of("/registry/pods/default/web"), Some("pods"));
        assert_eq!(
            storage_of("/registry/stable.example.com/crontabs/default/web"),
            Some("stable.example.com/crontabs")
        );
        assert_eq!(
            storage_of("/registry/stable.example.com/crontabs/web"),
            Some("stable.example.com/crontabs")
        );
        assert_eq!(storage_of("/registry/a.b"), Some("a.b"));
        let caches = Caches::new(["pods"], FieldsOf(Arc::new(test_fields)));
        assert!(caches.for_key("/registry/nodes/n").is_none());
        let (name, _) = caches.for_key("/registry/x.io/things/ns/a").expect("made");
        assert_eq!(name, "x.io/things");
        assert!(caches.get("x.io/things").is_some());
    }

    #[test]
    fn events_are_parsed_when_first_read() {
        let raw = br#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"d"},"reason":"Started","involvedObject":{"kind":"Pod","name":"web"}}"#;
        let cache = WatchCache::new();
        cache.reset(Vec::new(), 1);
        let first = cached(
            "/registry/events/d/e",
            raw,
            2,
            EventKind::Added,
            test_fields("/registry/events/d/e"),
        )
        .expect("kept");
        cache.apply(EventKind::Added, 2, first.clone());
        assert!(first.parsed.get().is_none(), "parsed with no reader");
        // A watcher makes every later event parsed as it is offered.
        let sub = cache
            .subscribe("/registry/events/", Some(2), None, None)
            .unwrap();
        let second = cached(
            "/registry/events/d/f",
            raw,
            3,
            EventKind::Added,
            test_fields("/registry/events/d/f"),
        )
        .expect("kept");
        cache.apply(EventKind::Added, 3, second.clone());
        assert!(second.parsed.get().is_some());
        drop(sub);
        // A read parses the first; the served form carries the revision.
        assert_eq!(first.selectable().unwrap().field("reason"), Some("Started"));
        let served: Value = serde_json::from_slice(first.json().unwrap()).unwrap();
        assert_eq!(served["metadata"]["resourceVersion"], "2");
        assert!(first
            .line(EventKind::Added)
            .unwrap()
            .starts_with(b"{\"type\":\"ADDED\""));
        // Bytes that do not parse: kept, but nothing to serve; a kind
        // parsed on write leaves them out of the cache at once.
        let bad = cached(
            "/registry/events/d/bad",
            b"not json",
            4,
            EventKind::Added,
            test_fields("/registry/events/d/bad"),
        )
        .unwrap();
        assert!(bad.parsed().is_none() && bad.object().is_none());
        assert!(bad.line(EventKind::Added).is_none() && bad.selectable().is_none());
        assert!(cached(
            "/registry/pods/d/bad",
            b"not json",
            4,
            EventKind::Added,
            test_fields("/registry/pods/d/bad")
        )
        .is_none());
        // A delete without its value is rebuilt from the cached version.
        assert!(cached(
            "/registry/events/d/e",
            b"",
            5,
            EventKind::Deleted,
            test_fields("/registry/events/d/e")
        )
        .is_none());
        let rebuilt = cache
            .deleted_fallback("/registry/events/d/e", 5)
            .expect("rebuilt");
        assert_eq!(
            rebuilt.selectable().unwrap().field("reason"),
            Some("Started")
        );
    }

    #[test]
    fn served_bytes_carry_the_revision_and_match_the_tree() {
        let cases: &[&[u8]] = &[
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"d"},"spec":{"template":{"metadata":{"name":"inner"}}}}"#,
            br#"{"data":{"k":"\"metadata\":{"},"metadata":{}}"#,
            br#" { "metadata" : { "name" : "spaced" } } "#,
            br#"{"kind":"X","metadata":{"name":"b","resourceVersion":"7"}}"#,
            br#"{"kind":"NoMetadata"}"#,
        ];
        for (i, raw) in cases.iter().enumerate() {
            // The first three are spliced; the others take the slow path.
            assert_eq!(with_revision_spliced(Vec::new(), raw, 42).is_some(), i < 3);
            if let Some(mut line) = with_revision_spliced(line_start(EventKind::Added, 0), raw, 42)
            {
                // Sized to what it holds: the cache keeps the whole buffer.
                line.extend_from_slice(LINE_END);
                assert!(line.capacity() - line.len() <= 1, "{}", line.capacity());
            }
            let item = cached(
                "/registry/x/a",
                raw,
                42,
                EventKind::Modified,
                test_fields("/registry/x/a"),
            )
            .expect("decodes");
            let served: Value = serde_json::from_slice(item.json().unwrap()).expect("served JSON");
            assert_eq!(
                Some(served.clone()),
                item.object(),
                "{}",
                String::from_utf8_lossy(raw)
            );
            // The watch lines carry the same object, for any kind.
            for (kind, name) in [
                (EventKind::Modified, "MODIFIED"),
                (EventKind::Added, "ADDED"),
                (EventKind::Deleted, "DELETED"),
            ] {
                let line = item.line(kind).unwrap();
                assert!(line.ends_with(b"}\n"));
                let event: Value = serde_json::from_slice(&line).expect("line is JSON");
                assert_eq!(
                    event,
                    serde_json::json!({"type": name, "object": served.clone()})
                );
            }
            let tree: Value = serde_json::from_slice(raw).unwrap();
            assert_eq!(
                item.selectable(),
                Some(&crate::watchcache::filter::selectable_view(
                    "x",
                    test_fields(concat!("/registry/", "x", "/")),
                    &tree
                )),
                "{}",
                String::from_utf8_lossy(raw)
            );
            assert_eq!(
                served.pointer("/metadata/resourceVersion"),
                Some(&serde_json::json!("42")),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }
}

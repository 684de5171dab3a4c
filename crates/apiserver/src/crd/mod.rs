//! CustomResourceDefinitions served end to end (upstream's
//! k8s.io/apiextensions-apiserver): the registry of served custom
//! resources (this file), the controller that accepts names and sets the
//! NamesAccepted, Established and Terminating conditions
//! ([`controller`], [`names`]) and builds the served entries ([`build`]),
//! the cleanup that removes a deleted CRD's objects
//! ([`cleanup`]), the custom objects' write rules through skiff-api's
//! structural schemas ([`strategy`], [`engine`]), their Tables
//! ([`table`]), scale subresource ([`scale`]) and OpenAPI documents
//! ([`openapi`]).
//!
//! The registry is process-wide: it is read by the free functions every
//! stage calls (`resources::find`, `strategy_of`, `normalize`), which have
//! no server state. Each entry names its owner (the API server whose
//! controller serves it, `AppState::crd_owner`): discovery, OpenAPI and
//! routing show a server only its own, so several servers in one process
//! (tests) do not see each other's (they must use distinct groups). Each
//! served (group, version) of a CRD is a [`Resource`] like a built-in one,
//! with storage name `group/plural`, so its objects live under
//! `/registry/<group>/<plural>/`, as upstream keeps them. Resources are
//! interned: the same definition served again reuses its `&'static`
//! entry, so creating and deleting CRDs repeatedly does not grow memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use crate::crd::engine::Structural;
use serde_json::Value;

use crate::resources::Resource;

pub mod build;
pub mod cleanup;
pub mod controller;
pub mod engine;
pub mod names;
pub mod openapi;
pub mod scale;
pub mod strategy;
pub mod table;

/// The finalizer a CRD carries while its objects are removed.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// An additionalPrinterColumn of one version.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// The scale subresource's paths (`.spec.replicas`...).
#[derive(Debug, Clone)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// One served version of one CRD.
#[derive(Debug, Clone)]
pub struct Served {
    /// The API server (its CRD controller) serving it.
    pub owner: u64,
    pub resource: &'static Resource,
    /// The CRD's name (`crontabs.stable.example.com`).
    pub crd_name: String,
    pub list_kind: String,
    /// The version objects are stored in.
    pub storage_version: String,
    /// Every served version of the CRD, in its order.
    pub versions: Vec<String>,
    pub schema: Option<Arc<Structural>>,
    /// The version's `openAPIV3Schema` as given (for OpenAPI).
    pub raw_schema: Value,
    pub columns: Vec<Column>,
    pub scale: Option<ScalePaths>,
    pub status: bool,
    /// Established: listed in discovery and OpenAPI.
    pub established: bool,
    /// Marked for deletion: no new objects.
    pub terminating: bool,
    pub deprecated: Option<String>,
    /// `selectableFields` as field selectors name them (`spec.color`),
    /// beside metadata.name/namespace.
    pub selectable: &'static [&'static str],
}

type Key = (String, String, String);

#[derive(Debug, Default)]
struct Registry {
    /// (group, version, plural) -> served entry, of every owner.
    served: HashMap<Key, Arc<Served>>,
    /// Each controller's entries (one per API server in the process).
    by_owner: HashMap<u64, HashMap<Key, Arc<Served>>>,
}

static OWNERS: AtomicU64 = AtomicU64::new(1);

/// A new owner id for [`replace`] (one per CRD controller).
pub fn new_owner() -> u64 {
    OWNERS.fetch_add(1, Ordering::Relaxed)
}

static REGISTRY: LazyLock<RwLock<Registry>> = LazyLock::new(Default::default);
/// Whether any served version is deprecated (requests then look for a
/// warning to send).
static ANY_DEPRECATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The `Warning` a request to a deprecated custom resource version gets
/// (upstream: the version's deprecationWarning, or `<group>/<version>
/// <Kind> is deprecated`).
pub fn deprecation(path: &str) -> Option<String> {
    if !ANY_DEPRECATED.load(Ordering::Relaxed) {
        return None;
    }
    let target = crate::request::parse_target(path)?;
    served(target.resource)?.deprecated.clone()
}

/// Bumped on every change of the served set (documents rebuild on it).
static GENERATION: AtomicU64 = AtomicU64::new(1);

fn read() -> std::sync::RwLockReadGuard<'static, Registry> {
    REGISTRY.read().unwrap_or_else(|e| e.into_inner())
}

/// The generation of the served set: discovery and OpenAPI documents are
/// rebuilt when it changes.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// The served custom resource at `group`/`version`/`plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<Arc<Served>> {
    read()
        .served
        .get(&(group.to_string(), version.to_string(), plural.to_string()))
        .cloned()
}

/// The served entry of a resource, if it is a custom one.
pub fn served(r: &Resource) -> Option<Arc<Served>> {
    if !is_custom_storage(r.storage) {
        return None;
    }
    find(r.group, r.version, r.plural)
}

/// Whether a storage name is a custom resource's (`group/plural`).
pub fn is_custom_storage(storage: &str) -> bool {
    storage.contains('/')
}

/// The served entry for a custom kind in `group` at `version` (any
/// version when `version` is empty: the storage one first).
pub fn by_kind(group: &str, kind: &str, version: &str) -> Option<Arc<Served>> {
    let reg = read();
    let mut candidates = reg
        .served
        .values()
        .filter(|s| s.resource.group == group && s.resource.kind == kind);
    if version.is_empty() {
        let all: Vec<&Arc<Served>> = candidates.collect();
        return all
            .iter()
            .find(|s| s.resource.version == s.storage_version)
            .or(all.first())
            .map(|s| Arc::clone(s));
    }
    candidates.find(|s| s.resource.version == version).cloned()
}

/// Every served custom resource, sorted by group, version order, plural.
pub fn all() -> Vec<Arc<Served>> {
    let mut out: Vec<Arc<Served>> = read().served.values().cloned().collect();
    out.sort_by(|a, b| {
        let ra = a.resource;
        let rb = b.resource;
        (ra.group, version_rank(a), ra.plural).cmp(&(rb.group, version_rank(b), rb.plural))
    });
    out
}

/// The custom resources API server `owner` serves (every server's with
/// `None`), as [`all`].
pub fn all_of(owner: Option<u64>) -> Vec<Arc<Served>> {
    let mut out = all();
    if let Some(owner) = owner {
        out.retain(|s| s.owner == owner);
    }
    out
}

/// Whether `r` is a custom resource another server of the process serves.
pub fn foreign(r: &Resource, owner: u64) -> bool {
    served(r).is_some_and(|s| s.owner != owner)
}

/// A version's place in its CRD's version list.
fn version_rank(s: &Served) -> usize {
    s.versions
        .iter()
        .position(|v| v == s.resource.version)
        .unwrap_or(usize::MAX)
}

/// Stops serving CRD `crd_name` of `owner` (its last objects are gone and
/// it is about to be).
pub fn remove(owner: u64, crd_name: &str) {
    let kept: Vec<Served> = {
        let reg = read();
        reg.by_owner
            .get(&owner)
            .map(|m| {
                m.values()
                    .filter(|s| s.crd_name != crd_name)
                    .map(|s| s.as_ref().clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    replace(owner, kept);
}

/// Replaces the served entries of `owner` (one API server's controller)
/// with `entries`.
pub fn replace(owner: u64, entries: Vec<Served>) {
    let mut reg = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    let mine: HashMap<Key, Arc<Served>> = entries
        .into_iter()
        .map(|s| {
            let r = s.resource;
            (
                (
                    r.group.to_string(),
                    r.version.to_string(),
                    r.plural.to_string(),
                ),
                Arc::new(s),
            )
        })
        .collect();
    reg.by_owner.insert(owner, mine);
    reg.by_owner.retain(|_, m| !m.is_empty());
    let next: HashMap<Key, Arc<Served>> = reg
        .by_owner
        .values()
        .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    let changed = next.len() != reg.served.len()
        || next
            .iter()
            .any(|(k, v)| reg.served.get(k).is_none_or(|old| !same(old, v)));
    ANY_DEPRECATED.store(
        next.values().any(|s| s.deprecated.is_some()),
        Ordering::Relaxed,
    );
    reg.served = next;
    drop(reg);
    if changed {
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// Whether two entries serve the same thing (a status-only change of a
/// CRD does not rebuild the documents).
fn same(a: &Served, b: &Served) -> bool {
    std::ptr::eq(a.resource, b.resource)
        && a.established == b.established
        && a.terminating == b.terminating
        && a.raw_schema == b.raw_schema
        && a.versions == b.versions
        && a.storage_version == b.storage_version
        && a.status == b.status
        && a.scale.is_some() == b.scale.is_some()
        && a.deprecated == b.deprecated
        && a.owner == b.owner
        && a.selectable == b.selectable
}

/// Interned strings and resources (see the module doc).
#[derive(Default)]
struct Interned {
    strings: std::collections::HashSet<&'static str>,
    lists: Vec<&'static [&'static str]>,
    resources: Vec<&'static Resource>,
}

static INTERNED: LazyLock<Mutex<Interned>> = LazyLock::new(Default::default);

impl Interned {
    fn str(&mut self, s: &str) -> &'static str {
        if let Some(found) = self.strings.get(s) {
            return found;
        }
        let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
        self.strings.insert(leaked);
        leaked
    }

    fn list(&mut self, items: &[String]) -> &'static [&'static str] {
        let items: Vec<&'static str> = items.iter().map(|s| self.str(s)).collect();
        if let Some(found) = self.lists.iter().find(|l| **l == items.as_slice()) {
            return found;
        }
        let leaked: &'static [&'static str] = Box::leak(items.into_boxed_slice());
        self.lists.push(leaked);
        leaked
    }
}

/// Interned `items` (for selectable fields).
pub fn intern_list(items: &[String]) -> &'static [&'static str] {
    INTERNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .list(items)
}

/// The selectable fields of custom resource `r` (none for others).
pub fn selectable_fields(r: &Resource) -> &'static [&'static str] {
    served(r).map_or(&[], |s| s.selectable)
}

/// The selectable fields of every served version stored under `storage`
/// (what the watch cache keeps of each object).
pub fn selectable_for_storage(storage: &str) -> &'static [&'static str] {
    if !is_custom_storage(storage) {
        return &[];
    }
    let mut fields: Vec<String> = Vec::new();
    for s in read()
        .served
        .values()
        .filter(|s| s.resource.storage == storage)
    {
        for f in s.selectable {
            if !fields.iter().any(|x| x == f) {
                fields.push(f.to_string());
            }
        }
    }
    if fields.is_empty() {
        return &[];
    }
    intern_list(&fields)
}

/// The names a custom resource is served under.
#[derive(Debug, Clone)]
pub struct Names {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub subresources: Vec<String>,
}

/// The `&'static` resource for `names`, reused when seen before.
pub fn intern(names: &Names) -> &'static Resource {
    let mut i = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
    let storage = format!("{}/{}", names.group, names.plural);
    let r = Resource {
        group: i.str(&names.group),
        version: i.str(&names.version),
        plural: i.str(&names.plural),
        singular: i.str(&names.singular),
        kind: i.str(&names.kind),
        namespaced: names.namespaced,
        short_names: i.list(&names.short_names),
        categories: i.list(&names.categories),
        subresources: i.list(&names.subresources),
        storage: i.str(&storage),
    };
    if let Some(found) = i.resources.iter().find(|x| same_resource(x, &r)) {
        return found;
    }
    let leaked: &'static Resource = Box::leak(Box::new(r));
    i.resources.push(leaked);
    leaked
}

fn same_resource(a: &Resource, b: &Resource) -> bool {
    a.group == b.group
        && a.version == b.version
        && a.plural == b.plural
        && a.singular == b.singular
        && a.kind == b.kind
        && a.namespaced == b.namespaced
        && a.short_names == b.short_names
        && a.categories == b.categories
        && a.subresources == b.subresources
        && a.storage == b.storage
}

/// The customresourcedefinitions resource.
pub fn crd_resource() -> Option<&'static Resource> {
    crate::resources::find_static("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// Whether `r` is the customresourcedefinitions resource.
pub fn is_crd(r: &Resource) -> bool {
    r.group == "apiextensions.k8s.io" && r.plural == "customresourcedefinitions"
}

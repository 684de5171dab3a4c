//! The custom resources one API server's CustomResourceDefinitions serve
//! (upstream's `apiextensions-apiserver/pkg/registry/customresource`):
//! the server's [`Registry`] of served versions, which the catalog reads
//! as its `CustomKinds` and the CRD controller (`crate::crd`) fills;
//! each version's write rules through skiff-api's structural schemas
//! ([`strategy`], [`engine`]), Tables ([`table`]), scale subresource
//! ([`scale`]) and OpenAPI documents ([`openapi`]).
//!
//! Each served (group, version) of a CRD is a [`Resource`] like a
//! built-in one, with storage name `group/plural`, so its objects live
//! under `/registry/<group>/<plural>/`, as upstream keeps them. Resources
//! are interned process-wide (only their strings: which ones a server
//! serves is its registry's): the same definition served again reuses
//! its `&'static` entry, so creating and deleting CRDs repeatedly does
//! not grow memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use serde_json::Value;

use crate::catalog::{CustomKind, CustomKinds, Kind, Resource, Strategy};
use crate::status::ApiResult;
use engine::Structural;

pub mod engine;
pub mod openapi;
pub mod scale;
pub mod strategy;
pub mod table;

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

/// The custom resources one API server serves.
#[derive(Debug)]
pub struct Registry {
    /// Unique in the process (document caches are kept per server).
    id: u64,
    /// (group, version, plural) -> served entry.
    served: RwLock<HashMap<Key, Arc<Served>>>,
    /// Bumped on every change of the served set (documents rebuild on it).
    generation: AtomicU64,
    /// Whether any served version is deprecated.
    any_deprecated: AtomicBool,
}

impl Default for Registry {
    fn default() -> Self {
        static IDS: AtomicU64 = AtomicU64::new(1);
        Registry {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            served: RwLock::default(),
            generation: AtomicU64::new(1),
            any_deprecated: AtomicBool::new(false),
        }
    }
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Key, Arc<Served>>> {
        self.served.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The served custom resource at `group`/`version`/`plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Served>> {
        self.read()
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// The served entry of a resource, if it is a custom one.
    pub fn served(&self, r: &Resource) -> Option<Arc<Served>> {
        if !crate::catalog::is_custom_storage(r.storage) {
            return None;
        }
        self.find(r.group, r.version, r.plural)
    }

    /// The served entry for a custom kind in `group` at `version` (any
    /// version when `version` is empty: the storage one first).
    pub fn by_kind(&self, group: &str, kind: &str, version: &str) -> Option<Arc<Served>> {
        let reg = self.read();
        let mut candidates = reg
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
    pub fn all(&self) -> Vec<Arc<Served>> {
        let mut out: Vec<Arc<Served>> = self.read().values().cloned().collect();
        out.sort_by(|a, b| {
            let ra = a.resource;
            let rb = b.resource;
            (ra.group, version_rank(a), ra.plural).cmp(&(rb.group, version_rank(b), rb.plural))
        });
        out
    }

    /// Unique in the process: what per-server caches are keyed by.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The generation of the served set.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Stops serving CRD `crd_name` (its last objects are gone and it is
    /// about to be).
    pub fn remove(&self, crd_name: &str) {
        let kept: Vec<Served> = self
            .read()
            .values()
            .filter(|s| s.crd_name != crd_name)
            .map(|s| s.as_ref().clone())
            .collect();
        self.replace(kept);
    }

    /// Replaces the served entries with `entries`.
    pub fn replace(&self, entries: Vec<Served>) {
        let next: HashMap<Key, Arc<Served>> = entries
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
        let mut reg = self.served.write().unwrap_or_else(|e| e.into_inner());
        let changed = next.len() != reg.len()
            || next
                .iter()
                .any(|(k, v)| reg.get(k).is_none_or(|old| !same(old, v)));
        self.any_deprecated.store(
            next.values().any(|s| s.deprecated.is_some()),
            Ordering::Relaxed,
        );
        *reg = next;
        drop(reg);
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The selectable fields of every served version stored under
    /// `storage` (what the watch cache keeps of each object).
    pub fn selectable_for_storage(&self, storage: &str) -> &'static [&'static str] {
        if !crate::catalog::is_custom_storage(storage) {
            return &[];
        }
        let mut fields: Vec<String> = Vec::new();
        for s in self
            .read()
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
}

impl CustomKinds for Registry {
    fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<dyn CustomKind>> {
        Registry::find(self, group, version, plural).map(|s| s as Arc<dyn CustomKind>)
    }
    fn by_kind(&self, group: &str, kind: &str, version: &str) -> Option<Arc<dyn CustomKind>> {
        Registry::by_kind(self, group, kind, version).map(|s| s as Arc<dyn CustomKind>)
    }
    fn all(&self) -> Vec<Arc<dyn CustomKind>> {
        Registry::all(self)
            .into_iter()
            .map(|s| s as Arc<dyn CustomKind>)
            .collect()
    }
    fn generation(&self) -> u64 {
        Registry::generation(self)
    }
    fn any_deprecated(&self) -> bool {
        self.any_deprecated.load(Ordering::Relaxed)
    }
    fn selectable_for_storage(&self, storage: &str) -> &'static [&'static str] {
        Registry::selectable_for_storage(self, storage)
    }
}

impl CustomKind for Served {
    fn resource(&self) -> &'static Resource {
        self.resource
    }
    fn established(&self) -> bool {
        self.established
    }
    fn strategy(&self) -> &dyn Strategy {
        self
    }
    fn normalize(&self, obj: Value, served: (&str, &str)) -> ApiResult<Value> {
        strategy::normalize(self, obj, served)
    }
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        strategy::unknown_fields(self, obj)
    }
    fn selectable_fields(&self) -> &'static [&'static str] {
        self.selectable
    }
    fn deprecation(&self) -> Option<&str> {
        self.deprecated.as_deref()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The served custom resource version a request resolved, if it is one.
pub fn served_of(kind: &Kind) -> Option<&Served> {
    kind.custom()?.as_any().downcast_ref::<Served>()
}

/// A version's place in its CRD's version list.
fn version_rank(s: &Served) -> usize {
    s.versions
        .iter()
        .position(|v| v == s.resource.version)
        .unwrap_or(usize::MAX)
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

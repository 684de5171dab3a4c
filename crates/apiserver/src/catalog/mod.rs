//! The catalog, the bottom layer of the API server: every kind it knows
//! and how to look one up. [`Resource`] is what a URL names, [`KindDef`]
//! a built-in kind's definition (its file in `crate::resources` fills it
//! in), [`CustomKinds`] the custom resources a server's
//! CustomResourceDefinitions serve, and [`Catalog`] the lookups over
//! both that one server owns. A request resolves its resource once
//! ([`Catalog::resolve`]) into a [`Kind`] and passes that down the
//! pipeline: decoding, defaults, validation, storage hooks and
//! conversion all come from it, none looks the kind up by name again.
//!
//! It depends only on the Status errors and on body decoding
//! (`crate::decode`), never on a stage that uses it.

mod custom;
mod hooks;
mod kind;
mod resource;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

pub use custom::{is_custom_storage, CustomKind, CustomKinds, NoCustomKinds};
pub use hooks::{NothingPending, Pending, StorageHooks};
pub use kind::{definition, KindDef, Plain, Strategy, Typed, TypedKind};
pub use resource::{resource, subresource_kind, Resource, ALL, NONE};

use crate::status::ApiResult;

/// The kinds one API server serves: the built-in ones and its custom
/// resources, with the storage hooks it registered.
#[derive(Debug)]
pub struct Catalog {
    kinds: &'static [&'static KindDef],
    /// Built-in resources, in the kinds' order.
    resources: Vec<&'static Resource>,
    /// Indexes into `resources` by plural (a handful share one, across
    /// groups and versions): every request looks its resource up, and a
    /// scan of the whole table was 2 % of the server's CPU in the sim
    /// benchmark.
    by_plural: HashMap<&'static str, Vec<usize>>,
    by_kind: HashMap<&'static str, Vec<&'static KindDef>>,
    kind_by_plural: HashMap<&'static str, Vec<&'static KindDef>>,
    /// The selectable fields of each built-in storage name (read for
    /// every store event the watch cache takes in).
    fields_by_storage: HashMap<&'static str, &'static [&'static str]>,
    custom: Arc<dyn CustomKinds>,
    hooks: HashMap<(&'static str, &'static str), Arc<dyn StorageHooks>>,
}

/// `items` grouped by `key`, in their order.
fn index_by<T: Copy>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(T) -> Option<&'static str>,
) -> HashMap<&'static str, Vec<T>> {
    let mut index: HashMap<&'static str, Vec<T>> = HashMap::new();
    for item in items {
        if let Some(k) = key(item) {
            index.entry(k).or_default().push(item);
        }
    }
    index
}

impl Catalog {
    /// The catalog of `kinds` (the built-in ones) and `custom`.
    pub fn new(kinds: &'static [&'static KindDef], custom: Arc<dyn CustomKinds>) -> Catalog {
        let resources: Vec<&'static Resource> =
            kinds.iter().filter_map(|k| k.resource.as_ref()).collect();
        let by_plural = index_by(0..resources.len(), |i| resources.get(i).map(|r| r.plural));
        // events.k8s.io/v1 Events are stored as core Events: the view is
        // core's (the first kind of each storage name wins).
        let mut fields_by_storage = HashMap::new();
        for k in kinds.iter().filter(|k| k.group != "events.k8s.io") {
            if let Some(r) = &k.resource {
                fields_by_storage
                    .entry(r.storage)
                    .or_insert(k.selectable_fields);
            }
        }
        Catalog {
            kinds,
            by_plural,
            by_kind: index_by(kinds.iter().copied(), |k| Some(k.kind)),
            kind_by_plural: index_by(kinds.iter().copied(), |k| {
                k.resource.as_ref().map(|r| r.plural)
            }),
            resources,
            fields_by_storage,
            custom,
            hooks: HashMap::new(),
        }
    }

    /// Registers the storage hooks of built-in kind `group`/`kind`.
    pub fn with_hooks(
        mut self,
        group: &'static str,
        kind: &'static str,
        hooks: Arc<dyn StorageHooks>,
    ) -> Catalog {
        self.hooks.insert((group, kind), hooks);
        self
    }

    /// Every built-in kind, served resources first.
    pub fn kinds(&self) -> &'static [&'static KindDef] {
        self.kinds
    }

    /// The built-in resources, in the kinds' order.
    pub fn builtin(&self) -> &[&'static Resource] {
        &self.resources
    }

    /// The custom resources of this server.
    pub fn custom_kinds(&self) -> &dyn CustomKinds {
        self.custom.as_ref()
    }

    /// The resource served at `group`/`version`/`plural`: a built-in one
    /// or a custom resource.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
        self.find_builtin(group, version, plural).or_else(|| {
            self.custom
                .find(group, version, plural)
                .map(|c| c.resource())
        })
    }

    /// The built-in resource served at `group`/`version`/`plural`.
    pub fn find_builtin(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&'static Resource> {
        self.by_plural
            .get(plural)?
            .iter()
            .filter_map(|&i| self.resources.get(i).copied())
            .find(|r| r.group == group && r.version == version)
    }

    /// Every served resource: the built-in ones in table order, then the
    /// established custom resources (by group, version order, plural).
    pub fn served(&self) -> Vec<&'static Resource> {
        let custom = self.custom.all();
        self.resources
            .iter()
            .copied()
            .chain(
                custom
                    .iter()
                    .filter(|c| c.established())
                    .map(|c| c.resource()),
            )
            .collect()
    }

    /// Every resource objects may be stored under: [`Catalog::served`]
    /// and the custom resources of CRDs not established yet or being
    /// deleted.
    pub fn all(&self) -> Vec<&'static Resource> {
        let custom = self.custom.all();
        self.resources
            .iter()
            .copied()
            .chain(custom.iter().map(|c| c.resource()))
            .collect()
    }

    /// The distinct non-core (group, version) pairs of the served
    /// resources: built-in ones in table order, then the custom ones.
    pub fn groups(&self) -> Vec<(&'static str, &'static str)> {
        let mut out: Vec<(&str, &str)> = Vec::new();
        for r in self.served().into_iter().filter(|r| !r.group.is_empty()) {
            if !out.iter().any(|(g, v)| *g == r.group && *v == r.version) {
                out.push((r.group, r.version));
            }
        }
        out
    }

    /// A built-in kind by group and kind name (a Scale is found by "apps"
    /// too, the group of the workloads it scales).
    pub fn find_kind(&self, group: &str, kind: &str) -> Option<&'static KindDef> {
        let group = if kind == "Scale" && group == "apps" {
            "autoscaling"
        } else {
            group
        };
        self.by_kind
            .get(kind)?
            .iter()
            .copied()
            .find(|k| k.group == group)
    }

    /// The built-in kind a resource serves.
    pub fn kind_of(&self, r: &Resource) -> Option<&'static KindDef> {
        self.kind_by_plural
            .get(r.plural)?
            .iter()
            .copied()
            .find(|k| {
                k.resource
                    .as_ref()
                    .is_some_and(|kr| kr.group == r.group && kr.version == r.version)
            })
    }

    /// The custom resource version `r` is, if it is one.
    pub fn custom(&self, r: &Resource) -> Option<Arc<dyn CustomKind>> {
        if !is_custom_storage(r.storage) {
            return None;
        }
        self.custom.find(r.group, r.version, r.plural)
    }

    /// `r` resolved once for a request: its rules, hooks and conversion.
    pub fn resolve(&self, r: &'static Resource) -> Kind {
        let def = self.kind_of(r);
        Kind {
            resource: r,
            def,
            custom: if def.is_none() { self.custom(r) } else { None },
            hooks: def.and_then(|d| self.hooks.get(&(d.group, d.kind)).cloned()),
        }
    }

    /// The fields besides metadata.name and metadata.namespace that field
    /// selectors may name on `r`.
    pub fn selectable_fields(&self, r: &Resource) -> &'static [&'static str] {
        match self.kind_of(r) {
            Some(k) => k.selectable_fields,
            None => self.custom(r).map_or(&[], |c| c.selectable_fields()),
        }
    }

    /// The selectable fields the watch cache keeps of each object stored
    /// under `storage`: the built-in kind's, or every served custom
    /// version's.
    pub fn selectable_for_storage(&self, storage: &str) -> &'static [&'static str] {
        match self.fields_by_storage.get(storage) {
            Some(fields) => fields,
            None => self.custom.selectable_for_storage(storage),
        }
    }

    /// The generation of the served custom resources: discovery and
    /// OpenAPI documents are rebuilt when it changes.
    pub fn generation(&self) -> u64 {
        self.custom.generation()
    }

    /// The `Warning` a request to a deprecated custom resource version
    /// `r` gets.
    pub fn deprecation(&self, r: &Resource) -> Option<String> {
        if !self.custom.any_deprecated() {
            return None;
        }
        self.custom(r)?.deprecation().map(String::from)
    }

    /// Decodes `obj` (stored form of a `group`/`kind` object) as its type
    /// and returns it as that type encodes (see `decode::typed`);
    /// quantities must parse. `served` is the (kind, version) the client
    /// used, for messages.
    pub fn normalize(
        &self,
        group: &str,
        kind: &str,
        served: (&str, &str),
        obj: Value,
    ) -> ApiResult<Value> {
        crate::decode::typed::check_depth(&obj, served)?;
        let obj = match self.find_kind(group, kind) {
            Some(k) => k.typed.normalize(obj, served)?,
            None => match self.custom.by_kind(group, kind, served.1) {
                Some(custom) => custom.normalize(obj, served)?,
                None => obj,
            },
        };
        quantities_parse(kind, served, obj)
    }

    /// Decodes the request body `raw` of a `group`/`kind` object straight
    /// into its type: field validation (unknown fields when `unknown`)
    /// and typed decoding in one pass instead of a decode for each.
    /// `None` for kinds without a one-pass decoder (custom resources,
    /// HPAs) and for bytes the typed decoder refuses; the caller then
    /// takes [`Catalog::field_findings`] and [`Catalog::normalize`],
    /// which word the error.
    pub fn decode_one_pass(
        &self,
        group: &str,
        kind: &str,
        raw: &[u8],
        unknown: bool,
    ) -> Option<OnePass> {
        let (object, ignored) = self
            .find_kind(group, kind)?
            .typed
            .decode_raw(raw, unknown)?;
        let findings = if unknown {
            crate::decode::strict::findings(raw, Some(ignored))
        } else {
            Vec::new()
        };
        Some(OnePass { object, findings })
    }

    /// Refuses a body of a `group`/`kind` object that repeats a key, when
    /// one of the repeated values has the wrong type (the tree keeps only
    /// the last; Go's decoder reports the first misfit, see
    /// `decode::typed::raw_type_error`).
    pub fn check_duplicated_types(
        &self,
        group: &str,
        kind: &str,
        served: (&str, &str),
        raw: &[u8],
    ) -> ApiResult<()> {
        if !crate::decode::strict::has_duplicates(raw) {
            return Ok(());
        }
        match self
            .find_kind(group, kind)
            .and_then(|k| k.typed.raw_type_error(raw))
        {
            Some(detail) => Err(crate::decode::typed::cannot_handle(served, &detail)),
            None => Ok(()),
        }
    }

    /// Unknown and duplicate fields of `raw` (parsed as `obj`), for a
    /// `group`/`kind` object (see `decode::strict`).
    pub fn field_findings(&self, group: &str, kind: &str, raw: &[u8], obj: &Value) -> Vec<String> {
        let builtin = self.find_kind(group, kind);
        let ignored = builtin.and_then(|k| k.typed.ignored(raw, obj));
        let mut out = crate::decode::strict::findings(raw, ignored);
        if builtin.is_none() {
            let version = obj
                .get("apiVersion")
                .and_then(Value::as_str)
                .and_then(|gv| gv.split_once('/'))
                .map_or("", |(_, v)| v);
            if let Some(custom) = self.custom.by_kind(group, kind, version) {
                out.extend(custom.unknown_fields(obj));
            }
        }
        out
    }
}

/// A body decoded by one typed pass over its bytes (see
/// [`Catalog::decode_one_pass`]).
#[derive(Debug)]
pub struct OnePass {
    /// The object as its type encodes it (what [`Catalog::normalize`]
    /// would give for the body as sent).
    pub object: Value,
    /// Duplicate and (when asked for) unknown fields, as
    /// [`Catalog::field_findings`] words them.
    pub findings: Vec<String>,
}

/// `obj` (already in typed form) if its quantities parse.
fn quantities_parse(kind: &str, served: (&str, &str), obj: Value) -> ApiResult<Value> {
    if let Some(detail) = skiff_api::validation::bad_quantity(kind, &obj) {
        return Err(crate::decode::typed::cannot_handle(served, &detail));
    }
    Ok(obj)
}

/// `typed` (a body decoded by [`Catalog::decode_one_pass`], its metadata
/// then filled in by the create path) as [`Catalog::normalize`] would
/// give it: the create path only adds strings and numbers in the forms
/// its type writes, so only the checks beyond decoding (depth,
/// quantities) remain.
pub fn prepared_typed(kind: &str, served: (&str, &str), typed: Value) -> ApiResult<Value> {
    crate::decode::typed::check_depth(&typed, served)?;
    quantities_parse(kind, served, typed)
}

/// A resource as one request resolved it ([`Catalog::resolve`]): the
/// built-in kind or custom resource version it serves and the storage
/// hooks its server registered.
#[derive(Debug, Clone)]
pub struct Kind {
    pub resource: &'static Resource,
    def: Option<&'static KindDef>,
    custom: Option<Arc<dyn CustomKind>>,
    hooks: Option<Arc<dyn StorageHooks>>,
}

impl Kind {
    /// The built-in kind's definition.
    pub fn def(&self) -> Option<&'static KindDef> {
        self.def
    }

    /// The custom resource version.
    pub fn custom(&self) -> Option<&Arc<dyn CustomKind>> {
        self.custom.as_ref()
    }

    /// How its objects are defaulted, validated and converted ([`Plain`]
    /// for a resource without a kind, which cannot happen for a served
    /// one).
    pub fn strategy(&self) -> &dyn Strategy {
        match (self.def, &self.custom) {
            (Some(def), _) => def.strategy,
            (None, Some(custom)) => custom.strategy(),
            (None, None) => &Plain,
        }
    }

    /// Its storage hooks, if its server registered any.
    pub fn hooks(&self) -> Option<&Arc<dyn StorageHooks>> {
        self.hooks.as_ref()
    }

    /// (kind, version) as the client used them, for messages.
    pub fn served(&self) -> (&'static str, &'static str) {
        (self.resource.kind, self.resource.version)
    }
}

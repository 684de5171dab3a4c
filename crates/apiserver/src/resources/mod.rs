//! Served resources and their kinds, one file per kind (`pods.rs`,
//! `deployments.rs`, ...): each holds its resource entry (group, version,
//! plural, scope, short names, categories, subresources, storage), the
//! fields it can be selected by and its k8s-openapi type, from which typed
//! decoding, field validation and the OpenAPI schema come, and its
//! [`Strategy`] (defaults, create-time fields, validation, name rule, with
//! skiff-api's functions for the kind), as upstream's
//! `registry/<kind>/strategy.go`. Adding a kind is a new file and a line
//! in [`KINDS`]. Table columns and patch schemas come from skiff-api by
//! kind name (they also cover built-in kinds not served yet). One list
//! drives discovery, routing and storage keys; the custom resources that
//! CustomResourceDefinitions serve (`crate::crd`) join it at run time
//! through [`find`], [`served`], [`all`] and [`groups`], with their own
//! strategy ([`strategy_of`]) and decoding ([`normalize`]).

use std::collections::HashMap;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use skiff_api::validation::FieldError;

use crate::decode::strict::Segment;
use crate::status::ApiResult;

/// One served resource.
#[derive(Debug, Clone, Copy)]
pub struct Resource {
    /// API group ("" for core).
    pub group: &'static str,
    pub version: &'static str,
    /// Plural name in the URL.
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub subresources: &'static [&'static str],
    /// Resource name under `/registry/` (events.k8s.io events share core's).
    pub storage: &'static str,
}

impl Resource {
    /// `v1` or `apps/v1`.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`, as in upstream error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// Every served resource, from the kinds' files, in their order.
pub static RESOURCES: std::sync::LazyLock<Vec<Resource>> =
    std::sync::LazyLock::new(|| KINDS.iter().filter_map(|k| k.resource).collect());

/// Group, version, kind and verbs of a subresource of `r`.
pub fn subresource_kind(
    r: &Resource,
    sub: &str,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
) {
    match sub {
        "binding" => ("", "v1", "Binding", &["create"]),
        "eviction" => ("policy", "v1", "Eviction", &["create"]),
        "log" => ("", "v1", "Pod", &["get"]),
        "exec" => ("", "v1", "PodExecOptions", &["create", "get"]),
        "attach" => ("", "v1", "PodAttachOptions", &["create", "get"]),
        "portforward" => ("", "v1", "PodPortForwardOptions", &["create", "get"]),
        "scale" => ("autoscaling", "v1", "Scale", &["get", "patch", "update"]),
        _ => (r.group, r.version, r.kind, &["get", "patch", "update"]),
    }
}

/// The namespaces resource (always served; bootstrap and admission use it).
#[expect(
    clippy::expect_used,
    reason = "namespaces.rs serves namespaces; the kinds test finds every kind"
)]
pub fn namespaces() -> &'static Resource {
    find("", "v1", "namespaces").expect("namespaces are served")
}

/// The resource served at `group`/`version`/`plural`: a built-in one, or
/// a custom resource a CustomResourceDefinition serves (see `crate::crd`).
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    find_static(group, version, plural)
        .or_else(|| crate::crd::find(group, version, plural).map(|s| s.resource))
}

/// The built-in resource served at `group`/`version`/`plural`.
pub fn find_static(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    BY_PLURAL
        .get(plural)?
        .iter()
        .map(|&i| &RESOURCES[i])
        .find(|r| r.group == group && r.version == version)
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

/// [`RESOURCES`] by plural (a handful share one, across groups and
/// versions): every request looks its resource up, and a scan of the
/// whole table was 2 % of the server's CPU in the sim benchmark.
static BY_PLURAL: std::sync::LazyLock<HashMap<&'static str, Vec<usize>>> =
    std::sync::LazyLock::new(|| index_by(0..RESOURCES.len(), |i| Some(RESOURCES[i].plural)));

/// [`KINDS`] by kind name (see [`BY_PLURAL`]).
static BY_KIND: std::sync::LazyLock<HashMap<&'static str, Vec<&'static Kind>>> =
    std::sync::LazyLock::new(|| index_by(KINDS.iter().copied(), |k| Some(k.kind)));

/// [`KINDS`] that serve a resource, by the resource's plural.
static KIND_BY_PLURAL: std::sync::LazyLock<HashMap<&'static str, Vec<&'static Kind>>> =
    std::sync::LazyLock::new(|| index_by(KINDS.iter().copied(), |k| k.resource.map(|r| r.plural)));

/// Every served resource: the built-in ones in table order, then the
/// established custom resources (by group, version order, plural).
pub fn served() -> Vec<&'static Resource> {
    served_by(None)
}

/// [`served`], with only the custom resources API server `owner` serves
/// (a process may run several servers, in tests).
pub fn served_by(owner: Option<u64>) -> Vec<&'static Resource> {
    RESOURCES
        .iter()
        .chain(
            crate::crd::all_of(owner)
                .iter()
                .filter(|s| s.established)
                .map(|s| s.resource),
        )
        .collect()
}

/// Every resource objects may be stored under: [`served`] and the custom
/// resources of CRDs not established yet or being deleted.
pub fn all() -> Vec<&'static Resource> {
    RESOURCES
        .iter()
        .chain(crate::crd::all().iter().map(|s| s.resource))
        .collect()
}

/// The distinct non-core (group, version) pairs: built-in ones in table
/// order, then those of established CustomResourceDefinitions.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    groups_by(None)
}

/// [`groups`] of the resources [`served_by`] `owner`.
pub fn groups_by(owner: Option<u64>) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in served_by(owner).into_iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, v)| *g == r.group && *v == r.version) {
            out.push((r.group, r.version));
        }
    }
    out
}

mod binding;
pub(crate) mod componentstatuses;
mod configmaps;
mod controllerrevisions;
mod cronjobs;
mod customresourcedefinitions;
mod daemonsets;
mod deployments;
mod endpoints;
mod events;
mod events_v1;
mod eviction;
mod horizontalpodautoscalers;
pub(crate) mod horizontalpodautoscalers_v1;
mod ipaddresses;
mod jobs;
mod leases;
mod limitranges;
mod namespaces;
mod nodes;
mod persistentvolumeclaims;
mod persistentvolumes;
mod poddisruptionbudgets;
mod pods;
mod podtemplates;
mod priorityclasses;
mod replicasets;
mod replicationcontrollers;
mod resourcequotas;
mod scale;
mod secrets;
mod serviceaccounts;
mod servicecidrs;
mod services;
mod statefulsets;
mod workloads_status;
pub use priorityclasses::system_classes as system_priority_classes;
mod apiservices;
mod certificatesigningrequests;
mod clusterrolebindings;
mod clusterroles;
mod csidrivers;
mod csinodes;
mod csistoragecapacities;
mod endpointslices;
pub(crate) mod flowcontrol_bootstrap;
mod flowschemas;
mod ingressclasses;
mod ingresses;
mod networkpolicies;
mod prioritylevelconfigurations;
pub(crate) mod requester;
mod reviews_authentication;
mod reviews_authorization;
mod rolebindings;
mod roles;
mod runtimeclasses;
mod storageclasses;
mod validatingadmissionpolicies;
mod volumeattachments;
mod webhookconfigurations;

/// Every kind, served resources in discovery order, then the kinds only
/// subresources speak (Binding, Eviction, Scale).
pub static KINDS: &[&Kind] = &[
    &namespaces::KIND,
    &pods::KIND,
    &nodes::KIND,
    &events::KIND,
    &configmaps::KIND,
    &secrets::KIND,
    &services::KIND,
    &endpoints::KIND,
    &serviceaccounts::KIND,
    &persistentvolumes::KIND,
    &persistentvolumeclaims::KIND,
    &resourcequotas::KIND,
    &limitranges::KIND,
    &leases::KIND,
    &deployments::KIND,
    &replicasets::KIND,
    &jobs::KIND,
    &storageclasses::KIND,
    &csidrivers::KIND,
    &csinodes::KIND,
    &volumeattachments::KIND,
    &csistoragecapacities::KIND,
    &ingresses::KIND,
    &ingressclasses::KIND,
    &networkpolicies::KIND,
    &endpointslices::KIND,
    &runtimeclasses::KIND,
    &certificatesigningrequests::KIND,
    &flowschemas::KIND,
    &prioritylevelconfigurations::KIND,
    &webhookconfigurations::MUTATING,
    &webhookconfigurations::VALIDATING,
    &validatingadmissionpolicies::POLICY,
    &validatingadmissionpolicies::BINDING,
    &poddisruptionbudgets::KIND,
    &priorityclasses::KIND,
    &servicecidrs::KIND,
    &ipaddresses::KIND,
    &roles::KIND,
    &rolebindings::KIND,
    &clusterroles::KIND,
    &clusterrolebindings::KIND,
    &apiservices::KIND,
    &reviews_authentication::TOKEN_REVIEW,
    &reviews_authentication::SELF_SUBJECT_REVIEW,
    &reviews_authorization::SUBJECT_ACCESS_REVIEW,
    &reviews_authorization::SELF_SUBJECT_ACCESS_REVIEW,
    &reviews_authorization::LOCAL_SUBJECT_ACCESS_REVIEW,
    &reviews_authorization::SELF_SUBJECT_RULES_REVIEW,
    &customresourcedefinitions::KIND,
    &events_v1::KIND,
    &replicationcontrollers::KIND,
    &podtemplates::KIND,
    &componentstatuses::KIND,
    &statefulsets::KIND,
    &daemonsets::KIND,
    &controllerrevisions::KIND,
    &cronjobs::KIND,
    &horizontalpodautoscalers::KIND,
    &horizontalpodautoscalers_v1::KIND,
    &binding::KIND,
    &eviction::KIND,
    &scale::KIND,
];

/// One kind.
#[derive(Debug)]
pub struct Kind {
    pub group: &'static str,
    pub kind: &'static str,
    /// The resource serving it; none for kinds only subresources speak.
    pub resource: Option<Resource>,
    /// Fields besides metadata.name and metadata.namespace that field
    /// selectors may name (upstream's field label conversion).
    pub selectable_fields: &'static [&'static str],
    /// Its k8s-openapi type.
    pub typed: &'static dyn TypedKind,
    /// How its objects are defaulted and validated.
    pub strategy: &'static dyn Strategy,
}

/// A kind's write rules, as upstream's `registry/<kind>/strategy.go`
/// holds them: defaulting, what create sets, validation on create and
/// update (beyond ObjectMeta, which every kind gets), and the name rule.
/// Each kind's file implements it with skiff-api's functions for the kind.
pub trait Strategy: Sync + std::fmt::Debug {
    /// Defaults, on create and update (upstream `SetDefaults_<Kind>`).
    fn defaults(&self, _obj: &mut Value) {}
    /// What create sets beyond defaults (generated fields).
    fn prepare_for_create(&self, _obj: &mut Value) {}
    /// What a write to the status subresource sets, given the stored
    /// object and the new one (whose spec is already the stored one).
    fn prepare_for_status_update(&self, _old: &Value, _new: &mut Value) {}
    /// Validation of a new object, stored form, beyond ObjectMeta.
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    /// Validation of an update: the new object and what may change.
    fn validate_update(&self, _old: &Value, new: &Value) -> Vec<FieldError> {
        self.validate(new)
    }
    /// Validation of a new object in the form the client sent (for kinds
    /// served in another form than they are stored in).
    fn validate_served(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    /// What an update of the object itself (not a subresource) sets,
    /// given the stored object (upstream `PrepareForUpdate`; the stored
    /// status is already kept).
    fn prepare_for_update(&self, _old: &Value, _new: &mut Value) {}
    /// What a write to the `approval` subresource (CertificateSigningRequests)
    /// sets, given the stored object and the new one as sent.
    fn prepare_for_approval_update(&self, _old: &Value, _new: &mut Value) {}
    /// Validation of an update through `subresource` ("status",
    /// "approval", or none for the object itself); most kinds check every
    /// update alike.
    fn validate_subresource_update(
        &self,
        _subresource: Option<&str>,
        old: &Value,
        new: &Value,
    ) -> Vec<FieldError> {
        self.validate_update(old, new)
    }
    /// Whether an update of the main resource keeps the stored status
    /// (status is written through its subresource, or the kind has none);
    /// custom resources without a status subresource take it from the body.
    fn keeps_status(&self) -> bool {
        true
    }
    /// What is wrong with `name` as this kind's name (most kinds: a DNS
    /// subdomain).
    fn name_errors(&self, name: &str) -> Vec<String> {
        skiff_api::validation::names::dns1123_subdomain(name)
    }
}

/// A kind with no rules beyond ObjectMeta and the name.
#[derive(Debug)]
pub struct Plain;

impl Strategy for Plain {}

/// Decodes `obj` (stored form of a `group`/`kind` object) as its type and
/// returns it as that type encodes (see `decode::typed`); quantities must
/// parse. `served` is the (kind, version) the client used, for messages.
pub fn normalize(group: &str, kind: &str, served: (&str, &str), obj: Value) -> ApiResult<Value> {
    crate::decode::typed::check_depth(&obj, served)?;
    let obj = match find_kind(group, kind) {
        Some(k) => k.typed.normalize(obj, served)?,
        None => match crate::crd::by_kind(group, kind, served.1) {
            Some(custom) => crate::crd::strategy::normalize(&custom, obj, served)?,
            None => obj,
        },
    };
    quantities_parse(kind, served, obj)
}

/// `obj` (already in typed form) if its quantities parse.
fn quantities_parse(kind: &str, served: (&str, &str), obj: Value) -> ApiResult<Value> {
    if let Some(detail) = skiff_api::validation::bad_quantity(kind, &obj) {
        return Err(crate::decode::typed::cannot_handle(served, &detail));
    }
    Ok(obj)
}

/// A body decoded by one typed pass over its bytes (see
/// [`decode_one_pass`]).
#[derive(Debug)]
pub struct OnePass {
    /// The object as its type encodes it (what [`normalize`] would give
    /// for the body as sent).
    pub object: Value,
    /// Duplicate and (when asked for) unknown fields, as
    /// [`field_findings`] words them.
    pub findings: Vec<String>,
}

/// Decodes the request body `raw` of a `group`/`kind` object straight into
/// its type: field validation (unknown fields when `unknown`) and typed
/// decoding in one pass instead of a decode for each. `None` for kinds
/// without a one-pass decoder (custom resources, HPAs) and for bytes the
/// typed decoder refuses; the caller then takes [`field_findings`] and
/// [`normalize`], which word the error.
pub fn decode_one_pass(group: &str, kind: &str, raw: &[u8], unknown: bool) -> Option<OnePass> {
    let (object, ignored) = find_kind(group, kind)?.typed.decode_raw(raw, unknown)?;
    let findings = if unknown {
        crate::decode::strict::findings(raw, Some(ignored))
    } else {
        Vec::new()
    };
    Some(OnePass { object, findings })
}

/// Refuses a body of a `group`/`kind` object that repeats a key, when one
/// of the repeated values has the wrong type (the tree keeps only the
/// last; Go's decoder reports the first misfit, see
/// `decode::typed::raw_type_error`).
pub fn check_duplicated_types(
    group: &str,
    kind: &str,
    served: (&str, &str),
    raw: &[u8],
) -> ApiResult<()> {
    if !crate::decode::strict::has_duplicates(raw) {
        return Ok(());
    }
    match find_kind(group, kind).and_then(|k| k.typed.raw_type_error(raw)) {
        Some(detail) => Err(crate::decode::typed::cannot_handle(served, &detail)),
        None => Ok(()),
    }
}

/// `typed` (a body decoded by [`decode_one_pass`], its metadata then
/// filled in by the create path) as [`normalize`] would give it: the
/// create path only adds strings and numbers in the forms its type
/// writes, so only the checks beyond decoding (depth, quantities) remain.
pub fn prepared_typed(kind: &str, served: (&str, &str), typed: Value) -> ApiResult<Value> {
    crate::decode::typed::check_depth(&typed, served)?;
    quantities_parse(kind, served, typed)
}

/// Unknown and duplicate fields of `raw` (parsed as `obj`), for a
/// `group`/`kind` object (see `decode::strict`).
pub fn field_findings(group: &str, kind: &str, raw: &[u8], obj: &Value) -> Vec<String> {
    let ignored = find_kind(group, kind).and_then(|k| k.typed.ignored(raw, obj));
    let mut out = crate::decode::strict::findings(raw, ignored);
    if find_kind(group, kind).is_none() {
        let version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|gv| gv.split_once('/'))
            .map_or("", |(_, v)| v);
        if let Some(custom) = crate::crd::by_kind(group, kind, version) {
            out.extend(crate::crd::strategy::unknown_fields(&custom, obj));
        }
    }
    out
}

/// A kind by group and kind name (a Scale is found by "apps" too, the
/// group of the workloads it scales).
pub fn find_kind(group: &str, kind: &str) -> Option<&'static Kind> {
    let group = if kind == "Scale" && group == "apps" {
        "autoscaling"
    } else {
        group
    };
    BY_KIND
        .get(kind)?
        .iter()
        .copied()
        .find(|k| k.group == group)
}

/// How a resource's objects are defaulted and validated ([`Plain`] for a
/// resource without a kind file, which cannot happen for a served one).
pub fn strategy_of(r: &Resource) -> &'static dyn Strategy {
    if let Some(k) = kind_of(r) {
        return k.strategy;
    }
    match crate::crd::served(r) {
        Some(custom) => crate::crd::strategy::of(custom.resource),
        None => &Plain,
    }
}

/// The kind a resource serves.
pub fn kind_of(r: &Resource) -> Option<&'static Kind> {
    KIND_BY_PLURAL.get(r.plural)?.iter().copied().find(|k| {
        k.resource
            .is_some_and(|kr| kr.group == r.group && kr.version == r.version)
    })
}

/// What is done with a kind's k8s-openapi type.
pub trait TypedKind: Sync + std::fmt::Debug {
    /// Decodes `obj` as the type and returns it as the type encodes.
    fn normalize(&self, obj: Value, served: (&str, &str)) -> ApiResult<Value>;
    /// The fields of `raw` (parsed as `obj`) the type's decoder skips.
    fn ignored(&self, raw: &[u8], obj: &Value) -> Option<Vec<Vec<Segment>>>;
    /// Decodes the request body `raw` straight as the type and returns it
    /// as the type encodes, with the fields the decoder skipped when
    /// `unknown` is asked for; `None` where that is not done in one pass.
    fn decode_raw(&self, _raw: &[u8], _unknown: bool) -> Option<(Value, Vec<Vec<Segment>>)> {
        None
    }
    /// The first value of the wrong type in the body `raw`, read straight
    /// from its bytes (duplicate keys included), in Go's words.
    fn raw_type_error(&self, _raw: &[u8]) -> Option<String> {
        None
    }
    /// Adds the type's schema to `generator`; returns its definition name.
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> String;
    /// Whether `json` decodes as the type (for tests and checks).
    fn check(&self, json: &[u8]) -> Result<(), String>;
}

/// [`TypedKind`] for the k8s-openapi type `T`.
pub struct Typed<T>(PhantomData<fn() -> T>);

impl<T> Typed<T> {
    pub const NEW: Typed<T> = Typed(PhantomData);
}

impl<T> std::fmt::Debug for Typed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(std::any::type_name::<T>())
    }
}

impl<T> TypedKind for Typed<T>
where
    T: DeserializeOwned + Serialize + schemars::JsonSchema,
{
    fn normalize(&self, obj: Value, served: (&str, &str)) -> ApiResult<Value> {
        crate::decode::typed::round_trip::<T>(obj, served)
    }

    fn ignored(&self, raw: &[u8], obj: &Value) -> Option<Vec<Vec<Segment>>> {
        crate::decode::strict::ignored::<T>(raw, obj)
    }

    fn decode_raw(&self, raw: &[u8], unknown: bool) -> Option<(Value, Vec<Vec<Segment>>)> {
        let (typed, ignored) = crate::decode::strict::decode_with_ignored::<T>(raw, unknown)?;
        Some((serde_json::to_value(&typed).ok()?, ignored))
    }

    fn raw_type_error(&self, raw: &[u8]) -> Option<String> {
        crate::decode::typed::raw_type_error::<T>(raw)
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> String {
        let schema = generator.subschema_for::<T>();
        schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .map(String::from)
            .unwrap_or_else(|| T::schema_name().to_string())
    }

    fn check(&self, json: &[u8]) -> Result<(), String> {
        serde_json::from_slice::<T>(json)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Categories and short names.
pub const ALL: &[&str] = &["all"];
pub const NONE: &[&str] = &[];

/// A served resource whose storage name is its plural.
#[allow(clippy::too_many_arguments)] // the table's columns, named at each use
pub const fn resource(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [&'static str],
) -> Resource {
    Resource {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        short_names,
        categories,
        subresources,
        storage: plural,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_found_and_resources_are_unique() {
        for k in KINDS {
            // A kind served at two versions of one group (HPA at
            // autoscaling/v2 and v1) is found by its storage version.
            if k.resource
                .is_some_and(|r| r.group == "autoscaling" && r.version == "v1")
            {
                continue;
            }
            assert!(
                std::ptr::eq(find_kind(k.group, k.kind).unwrap(), *k),
                "{}",
                k.kind
            );
            if let Some(r) = &k.resource {
                assert!(std::ptr::eq(kind_of(r).unwrap(), *k));
                assert_eq!(r.kind, k.kind);
                assert_eq!(r.group, k.group);
            }
        }
        assert_eq!(find_kind("apps", "Scale").unwrap().group, "autoscaling");
        let mut plurals: Vec<_> = KINDS
            .iter()
            .filter_map(|k| k.resource.map(|r| (r.group, r.version, r.plural)))
            .collect();
        let n = plurals.len();
        plurals.sort_unstable();
        plurals.dedup();
        assert_eq!(plurals.len(), n);
    }

    /// The one-pass create decode gives what the two passes give: field
    /// findings and the normalized object, server-set metadata included.
    #[test]
    fn one_pass_decoding_matches_the_two_passes() {
        let bodies: &[(&str, &str, &str)] = &[
            (
                "",
                "pods",
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"p-","labels":{"a":"b"},"x":1,"annotations":null},
                "spec":{"foo":null,"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1"}},"bogus":[1]}]},"status":{}}"#,
            ),
            (
                "",
                "pods",
                r#"{"metadata":{"name":"a","name":"b","resourceVersion":"7","namespace":"ns"},"spec":{"containers":[]}}"#,
            ),
            (
                "",
                "events",
                r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e.1","uid":"given"},"involvedObject":{"kind":"Pod","name":"p"},
                "reason":"Started","message":"m","count":1,"firstTimestamp":"2026-01-01T00:00:00Z","source":{"component":"kubelet"}}"#,
            ),
            (
                "apps",
                "deployments",
                r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},
                "template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}"#,
            ),
            (
                "",
                "configmaps",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"extra":{"x":1},"data":{"k":"v"}}"#,
            ),
        ];
        for (group, plural, raw) in bodies {
            let r = find(group, "v1", plural).unwrap();
            let served = (r.kind, r.version);
            let tree: Value = serde_json::from_slice(raw.as_bytes()).unwrap();
            let one = decode_one_pass(r.group, r.kind, raw.as_bytes(), true).unwrap();
            assert_eq!(
                one.findings,
                field_findings(r.group, r.kind, raw.as_bytes(), &tree),
                "{raw}"
            );
            let mut prepared = tree.clone();
            crate::object::prepare_create(r, Some("ns"), &mut prepared).unwrap();
            let mut two = normalize(r.group, r.kind, served, prepared).unwrap();
            let mut typed = one.object;
            crate::object::prepare_create(r, Some("ns"), &mut typed).unwrap();
            let mut fused = prepared_typed(r.kind, served, typed).unwrap();
            // Already in the form normalizing gives, server-set fields too.
            let again = normalize(r.group, r.kind, served, fused.clone()).unwrap();
            assert_eq!(again, fused, "{raw}");
            // Each create drew its own uid, generated name (and maybe second).
            for obj in [&mut two, &mut fused] {
                let meta = obj["metadata"].as_object_mut().unwrap();
                assert!(meta.remove("uid").is_some());
                assert!(meta.remove("creationTimestamp").is_some());
                if meta.contains_key("generateName") {
                    assert!(meta.remove("name").is_some());
                }
            }
            assert_eq!(fused, two, "{raw}");
            let ignoring = decode_one_pass(r.group, r.kind, raw.as_bytes(), false).unwrap();
            assert!(ignoring.findings.is_empty());
        }
        // Bytes the typed decoder refuses in one pass are left to the two.
        let dup = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":1,"spec":{"containers":[]}}"#;
        assert!(decode_one_pass("", "Pod", dup, true).is_none());
        let bad = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"a":1}}}"#;
        assert!(decode_one_pass("", "Pod", bad, true).is_none());
        // Custom resources and HPAs have no one-pass decoder.
        assert!(decode_one_pass("autoscaling", "HorizontalPodAutoscaler", b"{}", true).is_none());
        assert!(decode_one_pass("example.com", "Widget", b"{}", true).is_none());
    }
}

//! A built-in kind's definition ([`KindDef`]): its resource, selectable
//! fields, k8s-openapi type ([`TypedKind`], [`Typed`]) and write rules
//! ([`Strategy`], as upstream's `registry/<kind>/strategy.go`), and the
//! properties the shared write path asks of a kind instead of matching
//! its name (the property methods of [`Strategy`]). The kinds' own files
//! (`crate::resources`) fill them in; nothing here looks a kind up.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use skiff_api::validation::FieldError;

use super::Resource;
use crate::decode::strict::Segment;
use crate::status::ApiResult;

/// One built-in kind, as its file in `crate::resources` defines it.
#[derive(Debug)]
pub struct KindDef {
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
    /// What a write to the `ephemeralcontainers` subresource (Pods)
    /// takes from the object as sent (`sent`) into `new`, the stored
    /// object (upstream's dropNonEphemeralContainerUpdates).
    fn prepare_for_ephemeral_containers_update(&self, _sent: &Value, _new: &mut Value) {}
    /// Validation of a write to the status subresource (upstream's status
    /// strategy); most kinds check every update alike.
    fn validate_status_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        self.validate_update(old, new)
    }
    /// Validation of an update through `subresource` ("status",
    /// "approval", "ephemeralcontainers", or none for the object itself).
    fn validate_subresource_update(
        &self,
        subresource: Option<&str>,
        old: &Value,
        new: &Value,
    ) -> Vec<FieldError> {
        match subresource {
            Some("status") => self.validate_status_update(old, new),
            _ => self.validate_update(old, new),
        }
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
    /// What the first delete of an object sets beside its deletion (the
    /// finalizers the delete writes are in `finalizers`): a
    /// CustomResourceDefinition's cleanup finalizer and condition.
    fn prepare_for_delete(&self, _obj: &mut Value, _finalizers: &mut Vec<String>) {}
    /// Whether a status update may skip normalizing the top-level fields
    /// it does not read: every top-level field of the type but metadata
    /// is optional, so the candidate without them goes through the type
    /// exactly when the whole one does (Pods and Nodes, whose agents
    /// write status most).
    fn status_reads_less(&self) -> bool {
        false
    }
    /// Whether the served form differs from the stored one, so reads go
    /// through [`Strategy::to_served`] and writes through
    /// [`Strategy::to_stored`] (events.k8s.io/v1 Events, autoscaling/v1
    /// HorizontalPodAutoscalers, custom resources).
    fn converts(&self) -> bool {
        false
    }
    /// The stored form as this resource serves it.
    fn to_served(&self, obj: Value) -> Value {
        obj
    }
    /// A served object as it is stored.
    fn to_stored(&self, obj: Value) -> Value {
        obj
    }
}

/// A kind with no rules beyond ObjectMeta and the name.
#[derive(Debug)]
pub struct Plain;

impl Strategy for Plain {}

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
        definition::<T>(generator)
    }

    fn check(&self, json: &[u8]) -> Result<(), String> {
        serde_json::from_slice::<T>(json)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// The definition name of `T`, added to `generator` (the OpenAPI
/// documents name their schemas so).
pub fn definition<T: schemars::JsonSchema>(generator: &mut schemars::SchemaGenerator) -> String {
    let schema = generator.subschema_for::<T>();
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .map(String::from)
        .unwrap_or_else(|| T::schema_name().to_string())
}

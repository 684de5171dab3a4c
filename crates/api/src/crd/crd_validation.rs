//! Validation and defaulting of CustomResourceDefinition objects
//! (apiextensions.k8s.io/v1), after upstream's
//! pkg/apis/apiextensions/validation. Upstream validates the internal
//! form, into which v1 converts by moving a schema, subresources or
//! printer columns that all versions share to the top level, so their
//! errors read `spec.validation.openAPIV3Schema…`, `spec.subresources…`
//! and `spec.additionalPrinterColumns[0]…`; per-version ones keep
//! `spec.versions[i]…`. Field names are the internal ones too
//! (`JSONPath`, `conversion.webhookClientConfig`).

use serde_json::{Map, Value};

use super::crd_parts::{
    api_approval, column, conversion, names_errors, preserve_unknown_fields, selectable_fields,
    status_errors, subresources,
};
use super::errors::{self as fe, child, index};
use crate::validation::{meta, names, FieldError};

/// Fields allowed at the root of a schema when the status subresource is
/// on, in JSONSchemaProps' declaration order, by JSON name.
const ROOT_FIELDS_ORDER: [(&str, bool); 44] = [
    ("id", false),
    ("$schema", false),
    ("$ref", false),
    ("description", true),
    ("type", true),
    ("nullable", false),
    ("format", true),
    ("title", true),
    ("default", false),
    ("maximum", true),
    ("exclusiveMaximum", true),
    ("minimum", true),
    ("exclusiveMinimum", true),
    ("maxLength", true),
    ("minLength", true),
    ("pattern", true),
    ("maxItems", true),
    ("minItems", true),
    ("uniqueItems", true),
    ("multipleOf", true),
    ("enum", false),
    ("maxProperties", false),
    ("minProperties", false),
    ("required", true),
    ("items", true),
    ("allOf", false),
    ("oneOf", false),
    ("anyOf", false),
    ("not", false),
    ("properties", true),
    ("additionalProperties", false),
    ("patternProperties", false),
    ("dependencies", false),
    ("additionalItems", false),
    ("definitions", false),
    ("externalDocs", true),
    ("example", true),
    ("x-kubernetes-preserve-unknown-fields", true),
    ("x-kubernetes-embedded-resource", false),
    ("x-kubernetes-int-or-string", false),
    ("x-kubernetes-list-map-keys", false),
    ("x-kubernetes-list-type", false),
    ("x-kubernetes-map-type", false),
    ("x-kubernetes-validations", true),
];

pub(crate) fn s(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn arr(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn is_zero(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::String(x)) => x.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::Number(_) | Value::Bool(true)) => false,
    }
}

/// Semantic equality of optional parts: absent, null and empty agree.
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    if is_zero(a) && is_zero(b) {
        return true;
    }
    a == b
}

/// The spec as upstream's internal form sees it.
struct Spec<'a> {
    spec: &'a Map<String, Value>,
    versions: Vec<&'a Map<String, Value>>,
    /// Shared by all versions (moved to the top level).
    top_schema: Option<&'a Value>,
    top_subresources: Option<&'a Value>,
    top_columns: Option<&'a Value>,
    top_selectable: Option<&'a Value>,
}

impl<'a> Spec<'a> {
    fn new(spec: &'a Map<String, Value>) -> Spec<'a> {
        let versions: Vec<&Map<String, Value>> = arr(spec.get("versions"))
            .iter()
            .filter_map(Value::as_object)
            .collect();
        let shared = |k: &str| -> Option<&'a Value> {
            let first = versions.first()?.get(k);
            if versions.iter().all(|v| same(v.get(k), first)) && !is_zero(first) {
                first
            } else {
                None
            }
        };
        Spec {
            spec,
            top_schema: shared("schema"),
            top_subresources: shared("subresources"),
            top_columns: shared("additionalPrinterColumns"),
            top_selectable: shared("selectableFields"),
            versions,
        }
    }
    fn version_schema(&self, v: &'a Map<String, Value>) -> Option<&'a Value> {
        if self.top_schema.is_some() {
            None
        } else {
            v.get("schema").filter(|x| !x.is_null())
        }
    }
    fn version_subresources(&self, v: &'a Map<String, Value>) -> Option<&'a Value> {
        if self.top_subresources.is_some() {
            None
        } else {
            v.get("subresources").filter(|x| !x.is_null())
        }
    }
    fn version_columns(&self, v: &'a Map<String, Value>) -> &'a [Value] {
        if self.top_columns.is_some() {
            &[]
        } else {
            arr(v.get("additionalPrinterColumns"))
        }
    }
    /// getSubresourcesForVersion
    fn subresources_for(&self, v: &'a Map<String, Value>) -> Option<&'a Value> {
        self.top_subresources
            .or_else(|| self.version_subresources(v))
    }
    fn any_status(&self) -> bool {
        has_status(self.top_subresources)
            || self
                .versions
                .iter()
                .any(|v| has_status(self.version_subresources(v)))
    }
    fn preserve_unknown(&self) -> bool {
        self.spec
            .get("preserveUnknownFields")
            .and_then(Value::as_bool)
            == Some(true)
    }
    /// Every version's schema, for "has defaults" style questions.
    fn schemas(&self) -> Vec<&'a Value> {
        let mut out: Vec<&Value> = self.top_schema.into_iter().collect();
        for v in &self.versions {
            if let Some(sc) = self.version_schema(v) {
                out.push(sc);
            }
        }
        out.into_iter()
            .filter_map(|sc| sc.get("openAPIV3Schema"))
            .collect()
    }
}

fn has_status(sub: Option<&Value>) -> bool {
    sub.and_then(|s| s.get("status"))
        .is_some_and(|x| !x.is_null())
}

/// Whether any schema node has a key satisfying `pred`.
fn schema_has(schema: &Value, pred: &dyn Fn(&Map<String, Value>) -> bool) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    if pred(m) {
        return true;
    }
    for k in ["items", "not", "additionalProperties", "additionalItems"] {
        if let Some(sub) = m.get(k) {
            if sub.is_object() && schema_has(sub, pred) {
                return true;
            }
            if let Some(list) = sub.as_array() {
                if list.iter().any(|x| schema_has(x, pred)) {
                    return true;
                }
            }
        }
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        if arr(m.get(k)).iter().any(|x| schema_has(x, pred)) {
            return true;
        }
    }
    for k in [
        "properties",
        "patternProperties",
        "definitions",
        "dependencies",
    ] {
        if let Some(o) = m.get(k).and_then(Value::as_object) {
            if o.values().any(|x| schema_has(x, pred)) {
                return true;
            }
        }
    }
    false
}

/// Options that differ between create and update.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opts {
    require_open_api_schema: bool,
    pub(crate) require_recognized_conversion_review_version: bool,
}

/// Validation of a CustomResourceDefinition on create.
pub fn validate_crd(obj: &Value) -> Vec<FieldError> {
    let opts = Opts {
        require_open_api_schema: true,
        require_recognized_conversion_review_version: true,
    };
    let mut errs = metadata(obj);
    errs.extend(spec_errors(obj, opts));
    errs.extend(status_errors(obj));
    errs.extend(api_approval(obj, None));
    errs.extend(preserve_unknown_fields(obj, None));
    errs
}

/// Validation of a CustomResourceDefinition on update (`new` after the
/// strategy copied status from `old`).
pub fn validate_crd_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let old_spec = old.get("spec").and_then(Value::as_object);
    let empty = Map::new();
    let old_view = Spec::new(old_spec.unwrap_or(&empty));
    // requireOpenAPISchema: only when the old object gave every version one.
    let all_have_schema = old_view.top_schema.is_some()
        || old_view.versions.iter().all(|v| {
            v.get("schema")
                .and_then(|s| s.get("openAPIV3Schema"))
                .is_some_and(|x| !x.is_null())
        });
    let old_review = old
        .pointer("/spec/conversion/webhook/conversionReviewVersions")
        .and_then(Value::as_array);
    let recognized = old_review.is_none_or(|l| {
        l.is_empty()
            || l.iter()
                .any(|v| matches!(v.as_str(), Some("v1" | "v1beta1")))
    });
    let opts = Opts {
        require_open_api_schema: all_have_schema,
        require_recognized_conversion_review_version: recognized,
    };
    let mut errs = metadata_update(old, new);
    errs.extend(spec_errors(new, opts));
    // immutable fields
    let established = arr(old.pointer("/status/conditions")).iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Established")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    let field = |o: &Value, p: &str| {
        o.pointer(p)
            .cloned()
            .unwrap_or(Value::String(String::new()))
    };
    let mut immutable = vec![
        ("/spec/group", "spec.group"),
        ("/spec/names/plural", "spec.names.plural"),
    ];
    if established {
        immutable.insert(0, ("/spec/names/kind", "spec.names.kind"));
        immutable.insert(0, ("/spec/scope", "spec.scope"));
    }
    for (p, path) in immutable {
        let (a, b) = (field(old, p), field(new, p));
        if a != b {
            errs.push(fe::invalid(path, &b, "field is immutable"));
        }
    }
    errs.extend(status_errors(new));
    errs.extend(api_approval(new, Some(old)));
    errs.extend(preserve_unknown_fields(new, Some(old)));
    errs
}

/// Validation of an update of the status subresource
/// (ValidateUpdateCustomResourceDefinitionStatus): metadata and the
/// accepted names.
pub fn validate_crd_status_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = metadata_update(old, new);
    errs.extend(names_errors(
        new.pointer("/status/acceptedNames"),
        "status.acceptedNames",
    ));
    errs
}

/// v1 defaults (SetDefaults_CustomResourceDefinition): names.singular and
/// listKind from kind, conversion strategy None, a webhook service's port
/// 443, and status.storedVersions from the storage version when empty.
pub fn default_crd(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = s(names.get("kind")).to_string();
        if s(names.get("singular")).is_empty() {
            names.insert("singular".into(), Value::String(kind.to_lowercase()));
        }
        if s(names.get("listKind")).is_empty() && !kind.is_empty() {
            names.insert("listKind".into(), Value::String(format!("{kind}List")));
        }
    }
    match spec.get_mut("conversion") {
        Some(Value::Object(c)) => {
            if let Some(svc) = c
                .get_mut("webhook")
                .and_then(|w| w.get_mut("clientConfig"))
                .and_then(|cc| cc.get_mut("service"))
                .and_then(Value::as_object_mut)
            {
                if svc.get("port").is_none_or(Value::is_null) {
                    svc.insert("port".into(), Value::from(443));
                }
            }
        }
        _ => {
            spec.insert("conversion".into(), serde_json::json!({"strategy": "None"}));
        }
    }
    let storage = arr(spec.get("versions"))
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name"))
        .cloned();
    let Some(obj) = obj.as_object_mut() else {
        return;
    };
    let status = obj
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if let (Some(status), Some(name)) = (status.as_object_mut(), storage) {
        if arr(status.get("storedVersions")).is_empty() {
            status.insert("storedVersions".into(), Value::Array(vec![name]));
        }
    }
}

fn metadata(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = s(obj.pointer("/metadata/name"));
    let required = format!(
        "{}.{}",
        s(obj.pointer("/spec/names/plural")),
        s(obj.pointer("/spec/group"))
    );
    if !name.is_empty() && name != required {
        errs.push(fe::invalid_str(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if !s(obj.pointer("/metadata/namespace")).is_empty() {
        errs.push(fe::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    errs.extend(meta::object_meta(obj.get("metadata"), "metadata"));
    errs
}

fn metadata_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = metadata(new);
    let (a, b) = (
        s(old.pointer("/metadata/name")),
        s(new.pointer("/metadata/name")),
    );
    if a != b {
        errs.push(fe::invalid_str("metadata.name", b, "field is immutable"));
    }
    errs
}

fn spec_errors(obj: &Value, opts: Opts) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let spec_map = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let spec = Spec::new(spec_map);
    let group = s(spec_map.get("group"));
    if group.is_empty() {
        errs.push(fe::required("spec.group", ""));
    } else {
        let e = names::dns1123_subdomain(group);
        if !e.is_empty() {
            errs.push(fe::invalid_str("spec.group", group, &e.join(",")));
        } else if group.split('.').count() < 2 {
            errs.push(fe::invalid_str(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    let scope = s(spec_map.get("scope"));
    if scope.is_empty() {
        errs.push(fe::required("spec.scope", ""));
    } else if scope != "Cluster" && scope != "Namespaced" {
        errs.push(fe::not_supported(
            "spec.scope",
            &Value::from(scope),
            &["Cluster".into(), "Namespaced".into()],
        ));
    }
    let preserve = spec.preserve_unknown();
    let top_has_schema = spec
        .top_schema
        .and_then(|x| x.get("openAPIV3Schema"))
        .is_some_and(|x| !x.is_null());
    if !top_has_schema {
        for (i, v) in spec.versions.iter().enumerate() {
            let has = v
                .get("schema")
                .and_then(|x| x.get("openAPIV3Schema"))
                .is_some_and(|x| !x.is_null());
            let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
            if opts.require_open_api_schema {
                if !has {
                    errs.push(fe::required(&at, "schemas are required"));
                }
            } else if !preserve && v.get("served").and_then(Value::as_bool) == Some(true) && !has {
                errs.push(fe::required(&at, "because otherwise all fields are pruned"));
            }
        }
    }
    let has_defaults = spec
        .schemas()
        .iter()
        .any(|sc| schema_has(sc, &|m| m.get("default").is_some_and(|d| !d.is_null())));
    if has_defaults && preserve {
        errs.push(fe::invalid(
            "spec.preserveUnknownFields",
            &Value::Bool(true),
            "must be false in order to use defaults in the schema",
        ));
    }

    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in spec.versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        let name = s(v.get("name"));
        if seen.contains(&name) {
            unique = false;
        } else {
            seen.push(name);
        }
        let e = names::dns1035_label(name);
        if !e.is_empty() {
            errs.push(fe::invalid_str(&child(&at, "name"), name, &e.join(",")));
        }
        let status_enabled = has_status(spec.subresources_for(v));
        errs.extend(version(&spec, v, &at, status_enabled));
    }
    let versions_shown = go_versions(&spec, &spec.versions);
    if !unique {
        errs.push(fe::invalid_shown(
            "spec.versions",
            &versions_shown,
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(fe::invalid_shown(
            "spec.versions",
            &versions_shown,
            "must have exactly one version marked as storage version",
        ));
    }
    // The internal spec.version is versions[0].name.
    if let Some(first) = spec.versions.first() {
        let name = s(first.get("name"));
        let e = names::dns1035_label(name);
        if !e.is_empty() {
            errs.push(fe::invalid_str("spec.version", name, &e.join(",")));
        }
    }
    let names_map = spec_map.get("names");
    for k in ["plural", "singular", "kind", "listKind"] {
        if s(names_map.and_then(|n| n.get(k))).is_empty() {
            errs.push(fe::required(&format!("spec.names.{k}"), ""));
        }
    }
    errs.extend(names_errors(names_map, "spec.names"));
    if let Some(v) = spec.top_schema {
        errs.extend(validation(v, "spec.validation", spec.any_status()));
    }
    if let Some(sub) = spec.top_subresources {
        errs.extend(subresources(sub, "spec.subresources"));
    }
    if let Some(cols) = spec.top_columns {
        for (i, c) in arr(Some(cols)).iter().enumerate() {
            errs.extend(column(c, &format!("spec.additionalPrinterColumns[{i}]")));
        }
    }
    if let Some(fields) = spec.top_selectable {
        let at = "spec.selectableFields";
        match spec
            .top_schema
            .and_then(|x| x.get("openAPIV3Schema"))
            .filter(|x| !x.is_null())
        {
            None => errs.push(fe::invalid_str(
                at,
                "",
                "selectableFields may only be set when validations.schema is included",
            )),
            Some(sc) => errs.extend(selectable_fields(arr(Some(fields)), sc, at)),
        }
    }
    errs.extend(conversion(spec_map.get("conversion"), preserve, opts));
    errs
}

/// validateCustomResourceDefinitionVersion
fn version(spec: &Spec, v: &Map<String, Value>, at: &str, status_enabled: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let deprecated = v.get("deprecated").and_then(Value::as_bool) == Some(true);
    if let Some(w) = v.get("deprecationWarning").filter(|w| !w.is_null()) {
        let at = child(at, "deprecationWarning");
        let text = w.as_str().unwrap_or("");
        if !deprecated {
            errs.push(fe::invalid(
                &at,
                w,
                "can only be set for deprecated versions",
            ));
        } else {
            if text.len() > 256 {
                errs.push(fe::invalid(&at, w, "must be <= 256 characters long"));
            }
            if text.is_empty() {
                errs.push(fe::invalid(&at, w, "must not be an empty string"));
            }
            for (i, c) in text.char_indices() {
                if c.is_control() {
                    errs.push(fe::invalid(
                        &at,
                        w,
                        &format!("must only contain printable UTF-8 characters; non-printable character found at index {i}"),
                    ));
                    break;
                }
            }
        }
    }
    if let Some(sc) = spec.version_schema(v) {
        errs.extend(validation(sc, &child(at, "schema"), status_enabled));
    }
    if let Some(sub) = spec.version_subresources(v) {
        errs.extend(subresources(sub, &child(at, "subresources")));
    }
    for (i, c) in spec.version_columns(v).iter().enumerate() {
        errs.extend(column(c, &index(&child(at, "additionalPrinterColumns"), i)));
    }
    let fields = if spec.top_selectable.is_some() {
        &[]
    } else {
        arr(v.get("selectableFields"))
    };
    if !fields.is_empty() {
        let schema = spec
            .version_schema(v)
            .and_then(|x| x.get("openAPIV3Schema"))
            .filter(|x| !x.is_null());
        match schema {
            None => errs.push(fe::invalid_str(
                &child(at, "selectableFields"),
                "",
                "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
            )),
            Some(sc) => errs.extend(selectable_fields(fields, sc, &child(at, "selectableFields"))),
        }
    }
    errs
}

/// validateCustomResourceDefinitionValidation at `at` (`…schema`).
fn validation(v: &Value, at: &str, status_enabled: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(schema) = v.get("openAPIV3Schema").filter(|x| !x.is_null()) else {
        return errs;
    };
    let base = child(at, "openAPIV3Schema");
    if status_enabled {
        if let Some(m) = schema.as_object() {
            for (k, allowed) in ROOT_FIELDS_ORDER {
                if is_zero(m.get(k)) {
                    continue;
                }
                if k == "type" {
                    let t = s(m.get("type"));
                    if t != "object" {
                        errs.push(fe::invalid_str(
                            &format!("{base}.type"),
                            t,
                            "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                        ));
                        break;
                    }
                    continue;
                }
                if !allowed {
                    errs.push(fe::invalid_shown(
                        &base,
                        "apiextensions.JSONSchemaProps{...}",
                        "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled",
                    ));
                    break;
                }
            }
        }
    }
    errs.extend(super::schema_checks::check(schema, &base));
    errs
}

/// Go's `%#v` of the internal versions list (spec.versions' bad value).
/// Per-version parts the conversion moved to the top level are nil; a
/// pointer still set prints as an address upstream, a fixed one here.
fn go_versions(spec: &Spec, versions: &[&Map<String, Value>]) -> String {
    let ptr = |set: bool, ty: &str| {
        if set {
            format!("(*apiextensions.{ty})(0xc000100000)")
        } else {
            format!("(*apiextensions.{ty})(nil)")
        }
    };
    let slice = |n: usize, ty: &str| {
        if n == 0 {
            format!("[]apiextensions.{ty}(nil)")
        } else {
            let one = format!("apiextensions.{ty}{{...}}");
            format!("[]apiextensions.{ty}{{{}}}", vec![one; n].join(", "))
        }
    };
    let items: Vec<String> = versions
        .iter()
        .map(|v| {
            let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
            let warning = match v.get("deprecationWarning").and_then(Value::as_str) {
                Some(_) => "(*string)(0xc000100000)".to_string(),
                None => "(*string)(nil)".to_string(),
            };
            format!(
                "apiextensions.CustomResourceDefinitionVersion{{Name:{}, Served:{}, Storage:{}, Deprecated:{}, DeprecationWarning:{}, Schema:{}, Subresources:{}, AdditionalPrinterColumns:{}, SelectableFields:{}}}",
                fe::quote(s(v.get("name"))),
                flag("served"),
                flag("storage"),
                flag("deprecated"),
                warning,
                ptr(spec.version_schema(v).is_some(), "CustomResourceValidation"),
                ptr(spec.version_subresources(v).is_some(), "CustomResourceSubresources"),
                slice(spec.version_columns(v).len(), "CustomResourceColumnDefinition"),
                slice(
                    if spec.top_selectable.is_some() { 0 } else { arr(v.get("selectableFields")).len() },
                    "SelectableField"
                ),
            )
        })
        .collect();
    format!(
        "[]apiextensions.CustomResourceDefinitionVersion{{{}}}",
        items.join(", ")
    )
}

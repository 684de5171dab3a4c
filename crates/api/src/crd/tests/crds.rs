//! CustomResourceDefinition objects and their schemas.

use serde_json::{json, Value};

use super::super::*;
use super::{expect, shown};

fn crontab() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                        "image": {"type": "string"},
                        "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "labelSelector": {"type": "string"}}}}}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.labelSelector"}},
                "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
            }]
        }
    })
}

fn with(mut crd: Value, pointer: &str, v: Value) -> Value {
    if let Some(slot) = crd.pointer_mut(pointer) {
        *slot = v;
    } else {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        crd.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert(key.into(), v);
    }
    crd
}

fn defaulted(crd: Value) -> Value {
    let mut crd = crd;
    default_crd(&mut crd);
    crd
}

#[test]
fn crd_defaults() {
    let crd = defaulted(with(
        crontab(),
        "/spec/names",
        json!({"plural": "crontabs", "kind": "CronTab"}),
    ));
    assert_eq!(crd.pointer("/spec/names/singular"), Some(&json!("crontab")));
    assert_eq!(
        crd.pointer("/spec/names/listKind"),
        Some(&json!("CronTabList"))
    );
    assert_eq!(
        crd.pointer("/spec/conversion"),
        Some(&json!({"strategy": "None"}))
    );
    assert_eq!(crd.pointer("/status/storedVersions"), Some(&json!(["v1"])));
    let crd = defaulted(with(
        crontab(),
        "/spec/conversion",
        json!({"strategy": "Webhook",
        "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}, "conversionReviewVersions": ["v1"]}}),
    ));
    assert_eq!(
        crd.pointer("/spec/conversion/webhook/clientConfig/service/port"),
        Some(&json!(443))
    );
}

#[test]
fn valid_crd_passes() {
    let crd = defaulted(crontab());
    expect(&validate_crd(&crd), &[]);
    let two = defaulted(with(
        crontab(),
        "/spec/versions",
        json!([
        {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]),
    ));
    expect(&validate_crd(&two), &[]);
    expect(&validate_crd_update(&crd, &crd), &[]);
}

#[test]
fn crd_names_group_scope_versions() {
    let crd = defaulted(with(
        crontab(),
        "/metadata/name",
        json!("wrong.example.com"),
    ));
    expect(
        &validate_crd(&crd),
        &[
            r#"metadata.name: Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group"#,
        ],
    );
    let crd = defaulted(with(
        with(crontab(), "/spec/group", json!("example")),
        "/metadata/name",
        json!("crontabs.example"),
    ));
    expect(
        &validate_crd(&crd),
        &[r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#],
    );
    let crd = defaulted(with(crontab(), "/spec/scope", json!("Global")));
    expect(
        &validate_crd(&crd),
        &[r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#],
    );
    let crd = defaulted(with(crontab(), "/spec/names/kind", json!("Cron_Tab")));
    let errs = shown(&validate_crd(&crd));
    assert!(
        errs.iter().any(|e| e.starts_with(
            r#"spec.names.kind: Invalid value: "Cron_Tab": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case"#
        )),
        "{errs:?}"
    );
    let crd = defaulted(with(crontab(), "/spec/versions/0/storage", json!(false)));
    let errs = shown(&validate_crd(&crd));
    assert!(
        errs.contains(&"spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{apiextensions.CustomResourceDefinitionVersion{Name:\"v1\", Served:true, Storage:false, Deprecated:false, DeprecationWarning:(*string)(nil), Schema:(*apiextensions.CustomResourceValidation)(nil), Subresources:(*apiextensions.CustomResourceSubresources)(nil), AdditionalPrinterColumns:[]apiextensions.CustomResourceColumnDefinition(nil), SelectableFields:[]apiextensions.SelectableField(nil)}}: must have exactly one version marked as storage version".to_string()),
        "{errs:?}"
    );
    let crd = defaulted(with(crontab(), "/spec/versions/0/schema", Value::Null));
    let errs = shown(&validate_crd(&crd));
    assert!(
        errs.contains(
            &"spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"
                .to_string()
        ),
        "{errs:?}"
    );
    let crd = defaulted(with(crontab(), "/spec/preserveUnknownFields", json!(true)));
    expect(
        &validate_crd(&crd),
        &[
            "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
            "spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema",
        ],
    );
}

#[test]
fn crd_structural_schema_errors() {
    let bad = json!({"type": "object", "properties": {
        "spec": {"properties": {"foo": {"type": "array"}}},
        "status": {"type": "object", "additionalProperties": {"type": "string"}, "properties": {"a": {"type": "string"}}}},
        "additionalProperties": true});
    let crd = defaulted(with(
        crontab(),
        "/spec/versions/0/schema/openAPIV3Schema",
        bad,
    ));
    expect(
        &validate_crd(&crd),
        &[
            "spec.validation.openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root",
            "spec.validation.openAPIV3Schema.properties[spec].properties[foo].items: Required value: must be specified",
            "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            "spec.validation.openAPIV3Schema.properties[status].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            r#"spec.validation.openAPIV3Schema: Invalid value: apiextensions.JSONSchemaProps{...}: only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"#,
        ],
    );
    // per-version schemas that differ keep their version's path
    let crd = defaulted(with(
        crontab(),
        "/spec/versions",
        json!([
        {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"a": {}}}}},
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]),
    ));
    expect(
        &validate_crd(&crd),
        &["spec.versions[0].schema.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields"],
    );
}

#[test]
fn structural_new_checks() {
    let base = "spec.versions[0].schema.openAPIV3Schema";
    let err = |schema: Value| shown(&Structural::new(&schema, base).err().unwrap_or_default());
    assert_eq!(
        err(json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}})),
        vec![format!("{base}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified")]
    );
    assert!(Structural::new(
        &json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}}),
        base
    )
    .is_ok());
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "string", "default": 5}}})),
        vec![format!(
            r#"{base}.properties[a].default: Invalid value: "integer":  in body must be of type string: "integer""#
        )]
    );
    assert_eq!(
        err(
            json!({"type": "object", "properties": {"a": {"type": "object", "default": {"x": 1}, "properties": {}}}})
        ),
        vec![format!(
            r#"{base}.properties[a].default: Invalid value: map[string]interface {{}}{{"x":1}}: must not have unknown fields"#
        )]
    );
    assert_eq!(
        err(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}})
        ),
        vec![format!(
            "{base}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        )]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(x"}}})),
        vec![format!("{base}.properties[a].pattern: Invalid value: \"(x\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(x`")]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}})),
        vec![format!("{base}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic")]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}})),
        vec![format!("{base}.properties[a].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map")]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"], "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}})),
        vec![format!("{base}.properties[a].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property")]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "object"}},
            "anyOf": [{"properties": {"a": {"properties": {"b": {"type": "string"}}}}}]})),
        vec![
            format!("{base}.anyOf[0].properties[a].properties[b].type: Forbidden: must be empty to be structural"),
            format!("{base}.properties[a].properties[b]: Required value: because it is defined in {base}.anyOf[0].properties[a].properties[b]"),
        ]
    );
    assert_eq!(
        err(json!({"type": "object", "nullable": true})),
        vec![format!(
            "{base}.nullable: Forbidden: nullable cannot be true at the root"
        )]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "foo"}}})),
        vec![format!(
            r#"{base}.properties[a].type: Unsupported value: "foo": supported values: "array", "boolean", "integer", "number", "object", "string""#
        )]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-preserve-unknown-fields": false}}})),
        vec![format!("{base}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined")]
    );
    assert_eq!(
        err(json!({"type": "object", "properties": {"a": {"type": "object", "x-kubernetes-embedded-resource": true}}})),
        vec![format!("{base}.properties[a].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields")]
    );
    // embedded defaults must be valid resources (upstream's
    // "object-defaults-with-missing-typemeta")
    assert_eq!(
        err(
            json!({"type": "object", "properties": {"o": {"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true, "default": {"metadata": {}}}}})
        ),
        vec![
            format!("{base}.properties[o].default.apiVersion: Required value: must not be empty"),
            format!("{base}.properties[o].default.kind: Required value: must not be empty"),
        ]
    );
    // int-or-string's usual anyOf is allowed
    assert!(Structural::new(
        &json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^\\d+%?$"}}}),
        base
    )
    .is_ok());
}

#[test]
fn crd_columns_subresources_conversion() {
    let crd = defaulted(with(
        crontab(),
        "/spec/versions/0/additionalPrinterColumns",
        json!([{"name": "", "type": "map", "format": "yaml", "jsonPath": "spec"}]),
    ));
    expect(
        &validate_crd(&crd),
        &[
            r#"spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec": must be a simple json path starting with ."#,
            r#"spec.additionalPrinterColumns[0].format: Invalid value: "yaml": must be one of byte,date,date-time,double,float,int32,int64,password"#,
            "spec.additionalPrinterColumns[0].name: Required value",
            r#"spec.additionalPrinterColumns[0].type: Invalid value: "map": must be one of boolean,date,integer,number,string"#,
        ],
    );
    let crd = defaulted(with(
        crontab(),
        "/spec/versions/0/subresources/scale",
        json!({"specReplicasPath": ".status.replicas", "statusReplicasPath": ""}),
    ));
    expect(
        &validate_crd(&crd),
        &[
            r#"spec.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec"#,
            "spec.subresources.scale.statusReplicasPath: Required value",
        ],
    );
    let crd = defaulted(with(
        crontab(),
        "/spec/conversion",
        json!({"strategy": "Webhook",
        "webhook": {"clientConfig": {"url": "http://x/y?z=1"}, "conversionReviewVersions": ["v2"]}}),
    ));
    expect(
        &validate_crd(&crd),
        &[
            r#"spec.conversion.conversionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "z=1": query parameters are not permitted in the URL"#,
        ],
    );
    let crd = defaulted(with(
        crontab(),
        "/spec/conversion",
        json!({"strategy": "Webhook"}),
    ));
    expect(
        &validate_crd(&crd),
        &[
            "spec.conversion.conversionReviewVersions: Required value",
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
        ],
    );
}

#[test]
fn crd_update_rules() {
    let old = defaulted(crontab());
    let new = with(
        with(old.clone(), "/spec/group", json!("other.example.com")),
        "/metadata/name",
        json!("crontabs.other.example.com"),
    );
    let errs = shown(&validate_crd_update(&old, &new));
    assert!(
        errs.contains(
            &r#"spec.group: Invalid value: "other.example.com": field is immutable"#.to_string()
        ),
        "{errs:?}"
    );
    assert!(
        errs.contains(
            &r#"metadata.name: Invalid value: "crontabs.other.example.com": field is immutable"#
                .to_string()
        ),
        "{errs:?}"
    );
    // a version dropped while still in storedVersions
    let old2 = with(
        old.clone(),
        "/status/storedVersions",
        json!(["v1beta1", "v1"]),
    );
    expect(
        &validate_crd_update(&old2, &old2),
        &[
            r#"status.storedVersions[0]: Invalid value: "v1beta1": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions"#,
        ],
    );
    // protected groups need the approval annotation
    let k8s = defaulted(with(
        with(crontab(), "/spec/group", json!("stable.k8s.io")),
        "/metadata/name",
        json!("crontabs.stable.k8s.io"),
    ));
    expect(
        &validate_crd(&k8s),
        &[
            r#"metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111"#,
        ],
    );
}

#[test]
fn hostile_schemas_do_not_panic() {
    for schema in [
        json!(null),
        json!(5),
        json!([]),
        json!({"type": 5}),
        json!({"properties": []}),
        json!({"type": "object", "properties": {"a": 5}}),
        json!({"items": [1]}),
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(((((("}}}),
        json!({"allOf": [5]}),
        json!({"type": "array", "items": {"type": "array"}}),
    ] {
        let _ = Structural::new(&schema, "s");
        let s = Structural::unchecked(&schema);
        let mut obj = json!({"a": [1, {"b": null}], "metadata": 3});
        s.default(&mut obj);
        s.prune(&mut obj);
        let _ = s.validate(&obj);
    }
    let _ = validate_crd(&json!({"spec": {"versions": [5, {"schema": 3}], "names": 1}}));
    let _ = validate_crd(&json!(null));
}

#[test]
fn schema_keys_outside_json_schema_props_are_dropped() {
    let mut schema = json!({"type": "object", "bogus": 1, "properties": {"spec": {"type": "object",
        "propertis": {}, "x-kubernetes-validations": [{"rule": "true", "msg": "x"}],
        "externalDocs": {"url": "u", "x": 1}}}});
    let dropped = prune_schema(&mut schema, "spec.versions[0].schema.openAPIV3Schema");
    assert_eq!(
        dropped,
        vec![
            "spec.versions[0].schema.openAPIV3Schema.bogus",
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.externalDocs.x",
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.propertis",
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.x-kubernetes-validations[0].msg",
        ]
    );
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "true"}], "externalDocs": {"url": "u"}}}})
    );
}

#[test]
fn validation_rule_shapes() {
    let base = "s";
    let errs = |schema: Value| shown(&Structural::new(&schema, base).err().unwrap_or_default());
    assert_eq!(
        errs(
            json!({"type": "object", "properties": {"a": {"type": "string"}, "m": {"type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string"}}}},
            "x-kubernetes-validations": [
                {"rule": " "},
                {"rule": "true", "reason": "Bad"},
                {"rule": "true", "fieldPath": ".b"},
                {"rule": "true", "fieldPath": ".a"},
                {"rule": "true", "fieldPath": ".m['k'][0]"},
                {"rule": "a\nb"}]})
        ),
        vec![
            r#"s.x-kubernetes-validations[0].rule: Required value: rule is not specified"#,
            r#"s.x-kubernetes-validations[1].reason: Unsupported value: "Bad": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#,
            r#"s.x-kubernetes-validations[2].fieldPath: Invalid value: ".b": fieldPath must be a valid path"#,
            r#"s.x-kubernetes-validations[5].message: Required value: message must be specified if rule contains line breaks"#,
        ]
    );
}

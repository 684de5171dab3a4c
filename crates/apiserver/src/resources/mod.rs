//! The built-in kinds, one file per kind (`pods.rs`, `deployments.rs`,
//! ...): each defines its [`KindDef`]: resource entry (group, version,
//! plural, scope, short names, categories, subresources, storage), the
//! fields it can be selected by, its k8s-openapi type (from which typed
//! decoding, field validation and the OpenAPI schema come) and its
//! [`crate::catalog::Strategy`] (defaults, create-time fields,
//! validation, name rule, conversion, with skiff-api's functions for the
//! kind), as upstream's `registry/<kind>/strategy.go`; `services.rs` also
//! holds the Services' storage hooks (ClusterIP and NodePort allocation).
//! Adding a kind is a new file and a line in [`KINDS`]; the test at the
//! end checks that every kind has a table, defaults, validation and a
//! protobuf binding or says it has none.
//!
//! Everything looks kinds up through a server's `crate::catalog::Catalog`,
//! built from [`KINDS`]; [`builtin`] is the catalog of these kinds alone,
//! for what only ever names built-in ones.

use std::sync::{Arc, LazyLock};

use crate::catalog::{Catalog, KindDef, NoCustomKinds, Resource};

/// The catalog of the built-in kinds alone (no custom resources).
pub fn builtin() -> &'static Catalog {
    static BUILTIN: LazyLock<Catalog> =
        LazyLock::new(|| Catalog::new(KINDS, Arc::new(NoCustomKinds)));
    &BUILTIN
}

/// The built-in resource served at `group`/`version`/`plural`.
pub fn find_builtin(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    builtin().find_builtin(group, version, plural)
}

/// The namespaces resource (always served; bootstrap and admission use it).
#[expect(
    clippy::expect_used,
    reason = "namespaces.rs serves namespaces; the kinds test finds every kind"
)]
pub fn namespaces() -> &'static Resource {
    find_builtin("", "v1", "namespaces").expect("namespaces are served")
}

mod binding;
pub(crate) mod componentstatuses;
mod configmaps;
mod controllerrevisions;
mod cronjobs;
pub mod customresourcedefinitions;
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
pub mod services;
mod statefulsets;
mod tokenrequest;
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
mod flowschemas;
mod ingressclasses;
mod ingresses;
mod networkpolicies;
mod prioritylevelconfigurations;
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
pub static KINDS: &[&KindDef] = &[
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
    &tokenrequest::KIND,
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn every_kind_is_found_and_resources_are_unique() {
        for k in KINDS {
            // A kind served at two versions of one group (HPA at
            // autoscaling/v2 and v1) is found by its storage version.
            if k.resource
                .as_ref()
                .is_some_and(|r| r.group == "autoscaling" && r.version == "v1")
            {
                continue;
            }
            assert!(
                std::ptr::eq(builtin().find_kind(k.group, k.kind).unwrap(), *k),
                "{}",
                k.kind
            );
            if let Some(r) = &k.resource {
                assert!(std::ptr::eq(builtin().kind_of(r).unwrap(), *k));
                assert_eq!(r.kind, k.kind);
                assert_eq!(r.group, k.group);
            }
        }
        assert_eq!(
            builtin().find_kind("apps", "Scale").unwrap().group,
            "autoscaling"
        );
        let mut plurals: Vec<_> = KINDS
            .iter()
            .filter_map(|k| k.resource.map(|r| (r.group, r.version, r.plural)))
            .collect();
        let n = plurals.len();
        plurals.sort_unstable();
        plurals.dedup();
        assert_eq!(plurals.len(), n);
    }

    /// Kinds served with upstream's default Table (NAME, CREATED AT).
    const DEFAULT_TABLE: &[&str] = &[
        "LimitRange",
        "Role",
        "ClusterRole",
        "CustomResourceDefinition",
    ];
    /// Kinds whose rules are ObjectMeta's and the name's alone.
    const PLAIN: &[&str] = &["ServiceAccount", "ComponentStatus"];
    /// Kinds no vendored protobuf message describes (their API groups'
    /// .proto files are not in `proto/`).
    const NO_PROTOBUF: &[&str] = &["APIService", "CustomResourceDefinition"];

    /// Each served kind is known to every lookup keyed by kind name outside
    /// its own file, or says here that it has none: its Table columns and
    /// cells agree (skiff-api's two printer tables), its object layout
    /// (patch merge keys, apply schemas), its strategy, and its protobuf
    /// message. A kind added to [`KINDS`] without them fails here.
    #[test]
    fn every_served_kind_has_a_table_a_layout_rules_and_a_protobuf_binding() {
        let now = chrono::Utc::now();
        let mut missing = Vec::new();
        for k in KINDS {
            let Some(r) = &k.resource else { continue };
            if crate::reviews::create_only(r) {
                // Reviews are answered, never stored, listed or patched.
                continue;
            }
            let kind = k.kind;
            let printer = skiff_api::tables::has_printer(kind);
            if printer == DEFAULT_TABLE.contains(&kind) {
                missing.push(format!("{kind}: table (printer: {printer})"));
            }
            let cells = skiff_api::tables::row_cells(kind, &serde_json::json!({}), now).len();
            let columns = skiff_api::tables::column_definitions(kind).len();
            if cells != columns {
                missing.push(format!("{kind}: {cells} cells for {columns} columns"));
            }
            if !skiff_api::kinds::has_layout(kind) {
                missing.push(format!("{kind}: patch layout"));
            }
            let plain = format!("{:?}", k.strategy) == "Plain";
            if plain != PLAIN.contains(&kind) {
                missing.push(format!("{kind}: strategy (plain: {plain})"));
            }
            let protobuf = crate::protobuf::has_message(&r.group_version(), kind);
            if protobuf == NO_PROTOBUF.contains(&kind) {
                missing.push(format!("{kind}: protobuf (has: {protobuf})"));
            }
        }
        assert!(missing.is_empty(), "{missing:#?}");
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
            let r = builtin().find_builtin(group, "v1", plural).unwrap();
            let served = (r.kind, r.version);
            let tree: Value = serde_json::from_slice(raw.as_bytes()).unwrap();
            let one = builtin()
                .decode_one_pass(r.group, r.kind, raw.as_bytes(), true)
                .unwrap();
            assert_eq!(
                one.findings,
                builtin().field_findings(r.group, r.kind, raw.as_bytes(), &tree),
                "{raw}"
            );
            let mut prepared = tree.clone();
            crate::object::prepare_create(&builtin().resolve(r), Some("ns"), &mut prepared)
                .unwrap();
            let mut two = builtin()
                .normalize(r.group, r.kind, served, prepared)
                .unwrap();
            let mut typed = one.object;
            crate::object::prepare_create(&builtin().resolve(r), Some("ns"), &mut typed).unwrap();
            let mut fused = crate::catalog::prepared_typed(r.kind, served, typed).unwrap();
            // Already in the form normalizing gives, server-set fields too.
            let again = builtin()
                .normalize(r.group, r.kind, served, fused.clone())
                .unwrap();
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
            let ignoring = builtin()
                .decode_one_pass(r.group, r.kind, raw.as_bytes(), false)
                .unwrap();
            assert!(ignoring.findings.is_empty());
        }
        // Bytes the typed decoder refuses in one pass are left to the two.
        let dup = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":1,"spec":{"containers":[]}}"#;
        assert!(builtin().decode_one_pass("", "Pod", dup, true).is_none());
        let bad = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"a":1}}}"#;
        assert!(builtin().decode_one_pass("", "Pod", bad, true).is_none());
        // Custom resources and HPAs have no one-pass decoder.
        assert!(builtin()
            .decode_one_pass("autoscaling", "HorizontalPodAutoscaler", b"{}", true)
            .is_none());
        assert!(builtin()
            .decode_one_pass("example.com", "Widget", b"{}", true)
            .is_none());
    }
}

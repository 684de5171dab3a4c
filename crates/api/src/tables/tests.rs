//! Tests of `human_duration`, the column definitions and the default
//! table, plus the fixtures the other printer tests share.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use super::{column_definitions, has_printer, human_duration, row_cells};

pub(super) fn now() -> DateTime<Utc> {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

pub(super) fn ago(d: Duration) -> String {
    (now() - d).to_rfc3339()
}

pub(super) fn meta(name: &str) -> Value {
    json!({"name": name, "creationTimestamp": ago(Duration::days(3))})
}

const KINDS: &[&str] = &[
    "Pod",
    "Node",
    "Namespace",
    "Event",
    "ConfigMap",
    "Secret",
    "Service",
    "Endpoints",
    "ServiceAccount",
    "Lease",
    "Deployment",
    "ReplicaSet",
    "Job",
    "StatefulSet",
    "DaemonSet",
    "CronJob",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "Widget",
];

#[test]
fn human_duration_boundaries() {
    let s = Duration::seconds;
    let (m, h, d) = (Duration::minutes, Duration::hours, Duration::days);
    let cases = [
        (s(-2), "<invalid>"),
        (s(-1), "0s"),
        (Duration::milliseconds(-1500), "0s"),
        (s(0), "0s"),
        (Duration::milliseconds(999), "0s"),
        (s(45), "45s"),
        (s(119), "119s"),
        (s(120), "2m"),
        (s(310), "5m10s"),
        (s(599), "9m59s"),
        (m(10), "10m"),
        (m(179) + s(59), "179m"),
        (h(3), "3h"),
        (h(3) + m(30), "3h30m"),
        (h(7) + m(59) + s(59), "7h59m"),
        (h(8), "8h"),
        (h(47) + m(59), "47h"),
        (h(48), "2d"),
        (d(2) + h(5), "2d5h"),
        (d(7) + h(23), "7d23h"),
        (d(8), "8d"),
        (d(400), "400d"),
        (d(729) + h(23), "729d"),
        (d(730), "2y"),
        (d(731), "2y1d"),
        (d(8 * 365 - 1), "7y364d"),
        (d(8 * 365), "8y"),
        (d(10 * 365 + 100), "10y"),
    ];
    for (dur, want) in cases {
        assert_eq!(human_duration(dur), want, "{dur:?}");
    }
}

fn names(kind: &str) -> Vec<(String, u64)> {
    column_definitions(kind)
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_uppercase(),
                c["priority"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `kubectl get` headers (upper-cased names) and which are `-o wide` only.
#[test]
fn column_names_and_priorities() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "Pod",
            "NAME READY STATUS RESTARTS AGE",
            "IP NODE NOMINATED_NODE READINESS_GATES",
        ),
        (
            "Node",
            "NAME STATUS ROLES AGE VERSION",
            "INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME",
        ),
        ("Namespace", "NAME STATUS AGE", ""),
        (
            "Event",
            "LAST_SEEN TYPE REASON OBJECT MESSAGE",
            "SUBOBJECT SOURCE FIRST_SEEN COUNT NAME",
        ),
        ("ConfigMap", "NAME DATA AGE", ""),
        ("Secret", "NAME TYPE DATA AGE", ""),
        (
            "Service",
            "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE",
            "SELECTOR",
        ),
        ("Endpoints", "NAME ENDPOINTS AGE", ""),
        ("ServiceAccount", "NAME SECRETS AGE", ""),
        ("Lease", "NAME HOLDER AGE", ""),
        (
            "Deployment",
            "NAME READY UP-TO-DATE AVAILABLE AGE",
            "CONTAINERS IMAGES SELECTOR",
        ),
        (
            "ReplicaSet",
            "NAME DESIRED CURRENT READY AGE",
            "CONTAINERS IMAGES SELECTOR",
        ),
        (
            "Job",
            "NAME STATUS COMPLETIONS DURATION AGE",
            "CONTAINERS IMAGES SELECTOR",
        ),
        (
            "PersistentVolume",
            "NAME CAPACITY ACCESS_MODES RECLAIM_POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE",
            "VOLUMEMODE",
        ),
        (
            "PersistentVolumeClaim",
            "NAME STATUS VOLUME CAPACITY ACCESS_MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE",
            "VOLUMEMODE",
        ),
        (
            "StorageClass",
            "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
            "",
        ),
        ("Widget", "NAME CREATED_AT", ""),
    ];
    for (kind, normal, wide) in cases {
        let cols = names(kind);
        let pick = |p: u64| {
            cols.iter()
                .filter(|c| c.1 == p)
                .map(|c| c.0.replace(' ', "_"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(pick(0), *normal, "{kind}");
        assert_eq!(pick(1), *wide, "{kind} wide");
    }
}

#[test]
fn column_definition_shape() {
    for kind in KINDS {
        let cols = column_definitions(kind);
        let name_cols: Vec<&Value> = cols.iter().filter(|c| c["format"] == "name").collect();
        assert_eq!(name_cols.len(), 1, "{kind}");
        assert_eq!(name_cols[0]["name"], "Name");
        for c in &cols {
            let keys: Vec<&String> = c.as_object().unwrap().keys().collect();
            assert_eq!(
                keys,
                ["description", "format", "name", "priority", "type"],
                "{kind}"
            );
            assert!(!c["description"].as_str().unwrap().is_empty());
        }
        // Every printer fills exactly one cell per column, even for `{}`.
        assert_eq!(
            row_cells(kind, &json!({}), now()).len(),
            cols.len(),
            "{kind}"
        );
    }
    assert!(has_printer("Pod") && !has_printer("Widget"));
    let created = &column_definitions("Widget")[1];
    assert_eq!(
        (&created["type"], &created["description"]),
        (&json!("date"), &column_definitions("Pod")[4]["description"])
    );
}

#[test]
fn default_table_prints_name_and_creation_time() {
    let obj =
        json!({"metadata": {"name": "w", "creationTimestamp": "2024-05-01T11:00:00.5+01:00"}});
    assert_eq!(
        row_cells("Widget", &obj, now()),
        [json!("w"), json!("2024-05-01T10:00:00Z")]
    );
}

#[test]
fn label_and_selector_strings() {
    use super::util::{format_label_selector, format_labels, selector_string};
    // Set.String sorts the `k=v` strings themselves, so '.' sorts before '='.
    assert_eq!(
        format_labels(Some(&json!({"a": "1", "a.b": "2"}))),
        "a.b=2,a=1"
    );
    assert_eq!(format_labels(Some(&json!({}))), "<none>");
    assert_eq!(format_labels(None), "<none>");
    // Selector requirements are ordered by key.
    let sel = json!({"matchLabels": {"a.b": "2", "a": "1"},
        "matchExpressions": [{"key": "z", "operator": "NotIn", "values": ["y", "x"]}, {"key": "m", "operator": "Exists"}]});
    assert_eq!(
        selector_string(Some(&sel)),
        Ok("a=1,a.b=2,m,z notin (x,y)".to_string())
    );
    assert_eq!(selector_string(None), Ok(String::new()));
    assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
    let bad = json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]});
    assert_eq!(format_label_selector(Some(&bad)), "<error>");
}

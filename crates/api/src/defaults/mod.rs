//! Defaulting, as upstream's `SetDefaults_*` functions apply it: one
//! function per kind, called by that kind's strategy in the API server.
//! Works on wire-form JSON; fills only what is absent. Also the defaults
//! that are chosen rather than filled in: which StorageClass is the
//! default one (for the DefaultStorageClass admission plugin), and the
//! fields 1.33's default feature gates drop.

use serde_json::{json, Map, Value};

mod workloads;
pub use workloads::{
    cron_job, daemon_set, horizontal_pod_autoscaler, initial_status, pod_template,
    replication_controller, stateful_set, HPA_ROUND_TRIP_ANNOTATIONS,
};

pub mod admissionregistration;
pub mod csi;
pub mod flowcontrol;
pub mod networking;
pub mod policy;
pub mod rbac;

/// Sets `obj[field]` to `value` when absent or null.
fn default(obj: &mut Map<String, Value>, field: &str, value: Value) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj.insert(field.to_string(), value);
    }
}

fn object_at<'a>(value: &'a mut Value, field: &str) -> Option<&'a mut Map<String, Value>> {
    value.get_mut(field).and_then(Value::as_object_mut)
}

/// `value[field]` as an object, made one when absent or null; `None` when
/// `value` is not an object or the field holds something else.
fn object_entry<'a>(value: &'a mut Value, field: &str) -> Option<&'a mut Map<String, Value>> {
    let map = value.as_object_mut()?;
    let entry = map.entry(field).or_insert_with(|| json!({}));
    if entry.is_null() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

/// `Always` for `:latest` or no tag, `IfNotPresent` otherwise (digests too).
pub fn image_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

fn default_probe(probe: &mut Value) {
    let Some(p) = probe.as_object_mut() else {
        return;
    };
    default(p, "timeoutSeconds", json!(1));
    default(p, "periodSeconds", json!(10));
    default(p, "successThreshold", json!(1));
    default(p, "failureThreshold", json!(3));
    if let Some(http) = object_at(probe, "httpGet") {
        default(http, "scheme", json!("HTTP"));
        default(http, "path", json!("/"));
    }
}

fn default_container(c: &mut Value) {
    let Some(obj) = c.as_object_mut() else { return };
    let image = obj
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !image.is_empty() {
        default(obj, "imagePullPolicy", json!(image_pull_policy(&image)));
    }
    default(obj, "terminationMessagePath", json!("/dev/termination-log"));
    default(obj, "terminationMessagePolicy", json!("File"));
    default(obj, "resources", json!({}));
    if let Some(ports) = obj.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(port, "protocol", json!("TCP"));
        }
    }
    if let Some(env) = obj.get_mut("env").and_then(Value::as_array_mut) {
        for var in env {
            if let Some(field_ref) = var
                .pointer_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
            {
                default(field_ref, "apiVersion", json!("v1"));
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = obj.get_mut(probe) {
            default_probe(p);
        }
    }
}

/// The QoS class of a pod spec (upstream's GetPodQOS).
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|f| spec.get(*f).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        let relevant = |m: Option<&Map<String, Value>>| {
            m.map(|m| {
                m.iter()
                    .filter(|(k, _)| *k == "cpu" || *k == "memory")
                    .count()
            })
            .unwrap_or(0)
        };
        if relevant(requests) > 0 || relevant(limits) > 0 {
            any = true;
        }
        for resource in ["cpu", "memory"] {
            let limit = limits.and_then(|l| l.get(resource)).and_then(Value::as_str);
            let request = requests
                .and_then(|r| r.get(resource))
                .and_then(Value::as_str)
                .or(limit);
            match (request, limit) {
                (Some(r), Some(l)) if crate::quantity::equal(r, l) => {}
                _ => guaranteed = false,
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// Pod spec defaults (also used for pod templates).
pub fn pod_spec(spec: &mut Value) {
    let Some(obj) = spec.as_object_mut() else {
        return;
    };
    default(obj, "restartPolicy", json!("Always"));
    default(obj, "terminationGracePeriodSeconds", json!(30));
    default(obj, "dnsPolicy", json!("ClusterFirst"));
    default(obj, "schedulerName", json!("default-scheduler"));
    default(obj, "securityContext", json!({}));
    default(obj, "enableServiceLinks", json!(true));
    // `serviceAccount` is the deprecated alias of `serviceAccountName`:
    // upstream keeps one field and writes both out, so a body that names
    // only one means the same as a stored pod that has both.
    let named = |key: &str| {
        obj.get(key)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(String::from)
    };
    if let Some(account) = named("serviceAccountName").or_else(|| named("serviceAccount")) {
        obj.insert("serviceAccountName".into(), json!(account));
        obj.insert("serviceAccount".into(), json!(account));
    }
    // Ephemeral containers too (upstream's SetDefaults_EphemeralContainer
    // defaults their common part as a container's).
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = obj.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(default_container);
        }
    }
}

/// Pod defaults and the initial status. (The not-ready and unreachable
/// tolerations come from the API server's DefaultTolerationSeconds
/// admission plugin.)
pub fn pod(pod: &mut Value) {
    if let Some(spec) = pod.get_mut("spec") {
        pod_spec(spec);
    }
    // spec.priority and preemptionPolicy come from the API server's
    // Priority admission plugin (the pod's class, the global default, or
    // 0 and PreemptLowerPriority), as upstream.
    let qos = pod.get("spec").map(qos_class).unwrap_or("BestEffort");
    if let Some(status) = object_entry(pod, "status") {
        default(status, "phase", json!("Pending"));
        default(status, "qosClass", json!(qos));
    }
}

fn template(obj: &mut Value) {
    if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
        pod_spec(spec);
    }
}

/// `map[field]` as an object, replacing a null or non-object value.
fn object_entry_map<'a>(
    map: &'a mut Map<String, Value>,
    field: &str,
) -> &'a mut Map<String, Value> {
    let entry = map.entry(field).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    match entry {
        Value::Object(m) => m,
        _ => unreachable_object(),
    }
}

#[expect(
    clippy::panic,
    reason = "the caller made the value an object just before"
)]
fn unreachable_object() -> ! {
    panic!("value was just made an object")
}

/// What upstream's Job strategy sets when a Job is created (not on
/// update): the generated selector and the labels it selects on (unless
/// `spec.manualSelector`).
pub fn job_selector(obj: &mut Value) {
    let manual = obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true);
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(String::from);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(String::from);
    let (Some(uid), Some(name)) = (uid, name) else {
        return;
    };
    if manual {
        return;
    }
    if let Some(spec) = object_at(obj, "spec") {
        spec.insert(
            "selector".into(),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
    }
    let Some(template) = obj.pointer_mut("/spec/template") else {
        return;
    };
    let Some(meta) = object_entry(template, "metadata") else {
        return;
    };
    let labels = object_entry_map(meta, "labels");
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        labels.insert(k.into(), json!(v));
    }
}

/// Namespace defaults: the kubernetes finalizer, phase Active, and the
/// `kubernetes.io/metadata.name` label.
pub fn namespace(obj: &mut Value) {
    if let Some(spec) = object_entry(obj, "spec") {
        default(spec, "finalizers", json!(["kubernetes"]));
    }
    if let Some(o) = obj.as_object_mut() {
        o.insert("status".into(), json!({"phase": "Active"}));
    }
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(meta) = object_at(obj, "metadata") {
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("kubernetes.io/metadata.name".into(), name);
        }
    }
}

/// Secret defaults: type Opaque.
pub fn secret(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        default(o, "type", json!("Opaque"));
    }
}

/// Service defaults: type ClusterIP, no session affinity, TCP ports whose
/// targetPort is their port.
pub fn service(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default(spec, "type", json!("ClusterIP"));
        default(spec, "sessionAffinity", json!("None"));
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                default(port, "protocol", json!("TCP"));
                if let Some(p) = port.get("port").cloned() {
                    default(port, "targetPort", p);
                }
            }
        }
    }
}

/// Deployment defaults, the RollingUpdate strategy (25%/25%) included.
pub fn deployment(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default(spec, "replicas", json!(1));
        default(spec, "revisionHistoryLimit", json!(10));
        default(spec, "progressDeadlineSeconds", json!(600));
        let strategy = object_entry_map(spec, "strategy");
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let rolling = object_entry_map(strategy, "rollingUpdate");
            default(rolling, "maxUnavailable", json!("25%"));
            default(rolling, "maxSurge", json!("25%"));
        }
    }
    template(obj);
}

/// ReplicaSet defaults.
pub fn replica_set(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default(spec, "replicas", json!(1));
    }
    template(obj);
}

/// Job defaults (restartPolicy Never in its template; completions only
/// when parallelism is unset too; with `backoffLimitPerIndex`, no global
/// backoffLimit, i.e. MaxInt32).
pub fn job(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        // Both unset: one pod to one completion; parallelism alone set:
        // a work queue, with no completions (upstream's SetDefaults_Job).
        let unset = |k: &str| spec.get(k).is_none_or(Value::is_null);
        if unset("completions") && unset("parallelism") {
            spec.insert("completions".into(), json!(1));
        }
        default(spec, "parallelism", json!(1));
        let per_index = spec
            .get("backoffLimitPerIndex")
            .is_some_and(|v| !v.is_null());
        default(
            spec,
            "backoffLimit",
            json!(if per_index { i32::MAX } else { 6 }),
        );
        default(spec, "completionMode", json!("NonIndexed"));
        default(spec, "suspend", json!(false));
    }
    if let Some(spec) = obj
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    {
        default(spec, "restartPolicy", json!("Never"));
    }
    template(obj);
}

/// PersistentVolume defaults (upstream `SetDefaults_PersistentVolume`):
/// reclaim policy Retain, volume mode Filesystem, phase Pending, and a
/// hostPath's unset type `""`.
pub fn persistent_volume(obj: &mut Value) {
    if let Some(spec) = object_entry(obj, "spec") {
        default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        default(spec, "volumeMode", json!("Filesystem"));
        if let Some(host_path) = spec.get_mut("hostPath").and_then(Value::as_object_mut) {
            default(host_path, "type", json!(""));
        }
    }
    if let Some(status) = object_entry(obj, "status") {
        default(status, "phase", json!("Pending"));
    }
}

/// PersistentVolumeClaim defaults: volume mode Filesystem, phase Pending,
/// and `dataSource` and `dataSourceRef` each filled from the other
/// (upstream `NormalizeDataSources`; a reference to another namespace has
/// no `dataSource` form).
pub fn persistent_volume_claim(obj: &mut Value) {
    if let Some(spec) = object_entry(obj, "spec") {
        default(spec, "volumeMode", json!("Filesystem"));
        let set = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
        let source = set(spec.get("dataSource"));
        let reference = set(spec.get("dataSourceRef"));
        let copy = |from: &Value| {
            let mut to = Map::new();
            for field in ["apiGroup", "kind", "name"] {
                if let Some(v) = from.get(field).filter(|v| !v.is_null()) {
                    to.insert(field.into(), v.clone());
                }
            }
            Value::Object(to)
        };
        match (source, reference) {
            (Some(s), None) => {
                spec.insert("dataSourceRef".into(), copy(&s));
            }
            (None, Some(r))
                if r.get("namespace")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty) =>
            {
                spec.insert("dataSource".into(), copy(&r));
            }
            _ => {}
        }
    }
    if let Some(status) = object_entry(obj, "status") {
        default(status, "phase", json!("Pending"));
    }
}

/// What a PersistentVolume's or claim's strategy drops while the
/// VolumeAttributesClass feature gate is off, as it is by default in
/// 1.33 (upstream `DropDisabledFields`): `spec.volumeAttributesClassName`,
/// which no stored object can have for the same reason.
pub fn drop_volume_attributes_class(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        spec.remove("volumeAttributesClassName");
    }
}

/// StorageClass defaults: reclaim policy Delete, binding mode Immediate.
pub fn storage_class(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        default(o, "reclaimPolicy", json!("Delete"));
        default(o, "volumeBindingMode", json!("Immediate"));
    }
}

/// The annotation that marks the default StorageClass.
pub const IS_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
const BETA_IS_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// Whether a StorageClass is marked default (upstream
/// `IsDefaultAnnotation`: the GA or the beta annotation is `"true"`).
pub fn is_default_storage_class(class: &Value) -> bool {
    [
        IS_DEFAULT_CLASS_ANNOTATION,
        BETA_IS_DEFAULT_CLASS_ANNOTATION,
    ]
    .iter()
    .any(|a| {
        class
            .pointer("/metadata/annotations")
            .and_then(|m| m.get(*a))
            .and_then(Value::as_str)
            == Some("true")
    })
}

/// The default StorageClass among `classes` (upstream `GetDefaultClass`):
/// of those marked default, the newest, then the first by name.
pub fn default_storage_class<'a>(
    classes: impl IntoIterator<Item = &'a Value>,
) -> Option<&'a Value> {
    let created = |c: &Value| {
        c.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_nanos_opt().unwrap_or(i64::MIN))
            .unwrap_or(i64::MIN)
    };
    let name = |c: &'a Value| {
        c.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    classes
        .into_iter()
        .filter(|c| is_default_storage_class(c))
        .min_by(|a, b| {
            created(b)
                .cmp(&created(a))
                .then_with(|| name(a).cmp(name(b)))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn service_account_and_its_deprecated_alias_are_one() {
        for spec in [
            json!({"serviceAccountName": "sa"}),
            json!({"serviceAccount": "sa"}),
            json!({"serviceAccountName": "sa", "serviceAccount": ""}),
        ] {
            let mut spec = spec;
            super::pod_spec(&mut spec);
            assert_eq!(spec["serviceAccountName"], "sa", "{spec}");
            assert_eq!(spec["serviceAccount"], "sa", "{spec}");
        }
        let mut none = json!({});
        super::pod_spec(&mut none);
        assert!(none.get("serviceAccount").is_none());
    }

    #[test]
    fn an_empty_deployment_strategy_is_rolling_update_25_percent() {
        let mut d = json!({"spec": {"strategy": {}, "template": {"spec": {"containers": []}}}});
        deployment(&mut d);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let mut recreate = json!({"spec": {"strategy": {"type": "Recreate"}}});
        deployment(&mut recreate);
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn a_new_job_gets_its_selector_and_labels_unless_manual() {
        let mut j =
            json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {}}}});
        job_selector(&mut j);
        assert_eq!(
            j["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        let labels = &j["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["batch.kubernetes.io/job-name"], "pi");
        assert_eq!(labels["controller-uid"], "u-1");
        assert_eq!(labels["job-name"], "pi");
        let mut manual = json!({"metadata": {"name": "pi", "uid": "u-1"},
            "spec": {"manualSelector": true, "template": {}}});
        job_selector(&mut manual);
        assert!(manual["spec"].get("selector").is_none());
    }

    use super::*;

    #[test]
    fn pull_policy() {
        assert_eq!(image_pull_policy("busybox"), "Always");
        assert_eq!(image_pull_policy("busybox:latest"), "Always");
        assert_eq!(image_pull_policy("busybox:1.36"), "IfNotPresent");
        assert_eq!(image_pull_policy("localhost:5000/busybox"), "Always");
        assert_eq!(
            image_pull_policy("localhost:5000/busybox:1"),
            "IfNotPresent"
        );
        assert_eq!(image_pull_policy("busybox@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn pod_defaults() {
        let mut p = json!({"spec": {"containers": [{"name": "c", "image": "busybox",
            "ports": [{"containerPort": 80}],
            "livenessProbe": {"httpGet": {"port": 80}}}]}});
        pod(&mut p);
        let spec = &p["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["enableServiceLinks"], true);
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["livenessProbe"]["periodSeconds"], 10);
        assert_eq!(c["livenessProbe"]["timeoutSeconds"], 1);
        assert_eq!(c["livenessProbe"]["failureThreshold"], 3);
        assert_eq!(c["livenessProbe"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["status"]["qosClass"], "BestEffort");
    }

    #[test]
    fn storage_defaults() {
        let mut pv = json!({"spec": {"hostPath": {"path": "/data"}}, "status": {}});
        persistent_volume(&mut pv);
        assert_eq!(
            pv,
            json!({"spec": {"hostPath": {"path": "/data", "type": ""},
                "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}})
        );
        let mut kept = json!({"spec": {"persistentVolumeReclaimPolicy": "Delete", "volumeMode": "Block",
            "hostPath": {"path": "/d", "type": "Directory"}}, "status": {"phase": "Bound"}});
        let before = kept.clone();
        persistent_volume(&mut kept);
        assert_eq!(kept, before);
        let mut pvc = json!({"spec": {"volumeAttributesClassName": "gold"}});
        persistent_volume_claim(&mut pvc);
        drop_volume_attributes_class(&mut pvc);
        assert_eq!(
            pvc,
            json!({"spec": {"volumeMode": "Filesystem"}, "status": {"phase": "Pending"}})
        );
        let mut restore =
            json!({"spec": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}}});
        persistent_volume_claim(&mut restore);
        assert_eq!(
            restore["spec"]["dataSourceRef"],
            json!({"kind": "PersistentVolumeClaim", "name": "src"})
        );
        let mut populated = json!({"spec": {"dataSourceRef": {"apiGroup": "example.com", "kind": "Pop", "name": "p"}}});
        persistent_volume_claim(&mut populated);
        assert_eq!(
            populated["spec"]["dataSource"],
            json!({"apiGroup": "example.com", "kind": "Pop", "name": "p"})
        );
        let mut elsewhere =
            json!({"spec": {"dataSourceRef": {"kind": "Pop", "name": "p", "namespace": "other"}}});
        persistent_volume_claim(&mut elsewhere);
        assert!(elsewhere["spec"].get("dataSource").is_none());
        let mut sc = json!({"provisioner": "p"});
        storage_class(&mut sc);
        assert_eq!(
            sc,
            json!({"provisioner": "p", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        );
    }

    #[test]
    fn the_default_class_is_the_newest_marked_one() {
        let class = |name: &str, created: &str, default: Option<&str>| {
            let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}});
            if let Some(v) = default {
                c["metadata"]["annotations"] = json!({IS_DEFAULT_CLASS_ANNOTATION: v});
            }
            c
        };
        let classes = [
            class("old", "2024-01-01T00:00:00Z", Some("true")),
            class("b", "2024-02-01T00:00:00Z", Some("true")),
            class("a", "2024-02-01T00:00:00Z", Some("true")),
            class("newest", "2024-03-01T00:00:00Z", Some("false")),
            class("plain", "2024-03-01T00:00:00Z", None),
        ];
        let pick = default_storage_class(&classes).unwrap();
        assert_eq!(pick["metadata"]["name"], "a");
        assert!(default_storage_class(&classes[3..]).is_none());
        let beta = json!({"metadata": {"name": "x",
            "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}}});
        assert!(is_default_storage_class(&beta));
    }

    #[test]
    fn qos() {
        let g = json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&b), "Burstable");
    }
}

//! Ephemeral containers (upstream `validateEphemeralContainers` and
//! `ValidatePodEphemeralContainersUpdate`, 1.33): what one may set (the
//! container fields upstream's allow list keeps, no subPath), a name
//! unique across every container of the pod, a `targetContainerName`
//! that names an init or regular container, and an update through
//! `pods/ephemeralcontainers` that only adds to the list.
//!
//! It judges wire-form JSON only; what the subresource writes (the stored
//! pod with the new list) is the API server's.

use serde_json::Value;

use super::common::{forbidden, items, str_at};
use super::FieldError;

/// The container fields an ephemeral container may not set (upstream's
/// `allowedEphemeralContainerFields` entries that are false), by their
/// JSON names.
const NOT_ALLOWED: &[&str] = &[
    "ports",
    "resources",
    "resizePolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "restartPolicy",
];

/// Upstream's detail for every field an ephemeral container may not set.
const NOT_FOR_EPHEMERAL: &str = "cannot be set for an Ephemeral Container";

/// Whether a field is set as Go's `reflect.Value.IsZero` sees the decoded
/// field: absent or null is zero; a struct (resources) also when it has
/// no field set; a pointer or slice is set as soon as it is there.
fn is_set(field: &str, v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Object(m)) if field == "resources" => m.values().any(|v| !v.is_null()),
        Some(_) => true,
    }
}

/// `field.NotFound(path, value)` for a string.
fn not_found(field: String, value: &str) -> FieldError {
    FieldError {
        reason: "FieldValueNotFound",
        field,
        message: format!("Not found: \"{value}\""),
    }
}

/// The names of the pod's init and regular containers.
fn other_names(spec: &Value) -> Vec<String> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|list| items(spec, list))
        .filter_map(|c| str_at(c, "name"))
        .map(str::to_string)
        .collect()
}

/// An ephemeral container with only the fields a container may have
/// and an ephemeral one may set, for the checks every container gets.
fn common_part(ec: &Value) -> Value {
    let mut c = ec.clone();
    if let Some(o) = c.as_object_mut() {
        o.remove("targetContainerName");
        for f in NOT_ALLOWED {
            o.remove(*f);
        }
    }
    c
}

/// The checks of `spec.ephemeralContainers` at `path` (a pod's `spec`):
/// each as a container (name, image, environment, mounts, security
/// context), its name unique among every container, its target an init
/// or regular container, none of the fields upstream forbids.
pub(crate) fn containers(spec: &Value, path: &str) -> Vec<FieldError> {
    let list = items(spec, "ephemeralContainers");
    if list.is_empty() {
        return Vec::new();
    }
    let others = other_names(spec);
    let mut errors = Vec::new();
    // Names, images and enums as for any container; a name already used
    // by an init, regular or earlier ephemeral container is a Duplicate.
    let common: Vec<Value> = list.iter().map(common_part).collect();
    let mut names = others.clone();
    super::containers(
        &mut errors,
        &serde_json::json!({ "ephemeralContainers": common }),
        "ephemeralContainers",
        path,
        &mut names,
    );
    let volumes: Vec<&str> = items(spec, "volumes")
        .iter()
        .filter_map(|v| str_at(v, "name"))
        .collect();
    for (i, (ec, c)) in list.iter().zip(&common).enumerate() {
        let at = format!("{path}.ephemeralContainers[{i}]");
        super::pod::container(&mut errors, c, &at, false, &volumes);
        if let Some(target) = str_at(ec, "targetContainerName").filter(|t| !t.is_empty()) {
            if !others.iter().any(|n| n == target) {
                errors.push(not_found(format!("{at}.targetContainerName"), target));
            }
        }
        for f in NOT_ALLOWED {
            if is_set(f, ec.get(*f)) {
                errors.push(forbidden(format!("{at}.{f}"), NOT_FOR_EPHEMERAL));
            }
        }
        for (j, m) in items(ec, "volumeMounts").iter().enumerate() {
            for f in ["subPath", "subPathExpr"] {
                if str_at(m, f).is_some_and(|s| !s.is_empty()) {
                    errors.push(forbidden(
                        format!("{at}.volumeMounts[{j}].{f}"),
                        NOT_FOR_EPHEMERAL,
                    ));
                }
            }
        }
    }
    errors
}

/// A pod on create may not have ephemeral containers: they are added
/// through the subresource only.
pub(crate) fn on_create(obj: &Value) -> Vec<FieldError> {
    let set = obj
        .pointer("/spec/ephemeralContainers")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty());
    if set {
        vec![forbidden(
            "spec.ephemeralContainers",
            "cannot be set on create",
        )]
    } else {
        Vec::new()
    }
}

/// The annotation of a static pod's mirror.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The fields of `new` that differ from `old`, one line each, as a
/// short stand-in for upstream's `cmp.Diff` of the two containers.
fn diff(old: &Value, new: &Value) -> String {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return format!("-\t{old}\n+\t{new}\n");
    };
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    for k in keys {
        let (a, b) = (o.get(k), n.get(k));
        if super::common::same(a, b) {
            continue;
        }
        let show = |v: Option<&Value>| v.map(Value::to_string).unwrap_or_else(|| "null".into());
        out.push_str(&format!("-\t{k}: {}\n+\t{k}: {}\n", show(a), show(b)));
    }
    out
}

/// An update through `pods/ephemeralcontainers` (upstream
/// `ValidatePodEphemeralContainersUpdate`): the new pod as a pod, then
/// the change to its list: a static pod's mirror takes none; existing
/// ephemeral containers may be neither removed nor changed.
pub fn update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = super::pod(new);
    if old
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_ANNOTATION))
        .is_some()
    {
        return vec![forbidden(
            "",
            "static pods do not support ephemeral containers",
        )];
    }
    let path = "spec.ephemeralContainers";
    let old_list = old.pointer("/spec/ephemeralContainers");
    let new_list = new.pointer("/spec/ephemeralContainers");
    let by_name = |list: Option<&Value>, name: &str| -> Option<Value> {
        list.and_then(Value::as_array)?
            .iter()
            .find(|c| str_at(c, "name") == Some(name))
            .cloned()
    };
    for o in old_list.and_then(Value::as_array).into_iter().flatten() {
        let name = str_at(o, "name").unwrap_or_default();
        match by_name(new_list, name) {
            None => errors.push(forbidden(
                path,
                &format!("existing ephemeral containers {name:?} may not be removed\n"),
            )),
            Some(n) if !super::common::same(Some(o), Some(&n)) => errors.push(forbidden(
                path,
                &format!(
                    "existing ephemeral containers {name:?} may not be changed\n{}",
                    diff(o, &n)
                ),
            )),
            Some(_) => {}
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ephemeral: Value) -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [{"name": "c", "image": "busybox"}],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "ephemeralContainers": ephemeral,
            }
        })
    }

    fn debugger() -> Value {
        json!({"name": "debugger", "image": "busybox", "stdin": true, "tty": true,
               "targetContainerName": "c", "terminationMessagePolicy": "File",
               "resources": {}})
    }

    /// (field, message) of each finding.
    fn found(errors: &[FieldError]) -> Vec<(String, String)> {
        errors
            .iter()
            .map(|e| (e.field.clone(), e.message.clone()))
            .collect()
    }

    /// One row of the table: what it shows, the fields over [`debugger`],
    /// and the (field, message) findings.
    type Row = (&'static str, Value, Vec<(String, &'static str)>);

    /// The rules of `validateEphemeralContainers`, one row each: the
    /// ephemeral container's fields over [`debugger`], and what upstream
    /// answers (nothing when empty).
    #[test]
    fn the_ephemeral_container_table() {
        let at = "spec.ephemeralContainers[0]";
        let cases: Vec<Row> = vec![
            ("kubectl debug's container is valid", json!({}), vec![]),
            (
                "without a target",
                json!({"targetContainerName": null}),
                vec![],
            ),
            (
                "an init container may be the target",
                json!({"targetContainerName": "init"}),
                vec![],
            ),
            (
                "the target must name an init or regular container",
                json!({"targetContainerName": "nope"}),
                vec![(format!("{at}.targetContainerName"), "Not found: \"nope\"")],
            ),
            (
                "the name may not be a regular container's",
                json!({"name": "c"}),
                vec![(format!("{at}.name"), "Duplicate value: \"c\"")],
            ),
            (
                "nor an init container's",
                json!({"name": "init"}),
                vec![(format!("{at}.name"), "Duplicate value: \"init\"")],
            ),
            (
                "a name is required",
                json!({"name": ""}),
                vec![(format!("{at}.name"), "Required value")],
            ),
            (
                "an image is required",
                json!({"image": ""}),
                vec![(format!("{at}.image"), "Required value")],
            ),
            (
                "no ports",
                json!({"ports": [{"containerPort": 80}]}),
                vec![(
                    format!("{at}.ports"),
                    "Forbidden: cannot be set for an Ephemeral Container",
                )],
            ),
            (
                "no resources",
                json!({"resources": {"limits": {"cpu": "1"}}}),
                vec![(
                    format!("{at}.resources"),
                    "Forbidden: cannot be set for an Ephemeral Container",
                )],
            ),
            (
                "no probes",
                json!({"readinessProbe": {"exec": {"command": ["true"]}},
                       "livenessProbe": {}}),
                vec![
                    (
                        format!("{at}.livenessProbe"),
                        "Forbidden: cannot be set for an Ephemeral Container",
                    ),
                    (
                        format!("{at}.readinessProbe"),
                        "Forbidden: cannot be set for an Ephemeral Container",
                    ),
                ],
            ),
            (
                "no lifecycle",
                json!({"lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}),
                vec![(
                    format!("{at}.lifecycle"),
                    "Forbidden: cannot be set for an Ephemeral Container",
                )],
            ),
            (
                "no restart policy",
                json!({"restartPolicy": "Always"}),
                vec![(
                    format!("{at}.restartPolicy"),
                    "Forbidden: cannot be set for an Ephemeral Container",
                )],
            ),
            (
                "mounts of the pod's volumes, without subPath",
                json!({"volumeMounts": [{"name": "data", "mountPath": "/d", "subPath": "x"}]}),
                vec![(
                    format!("{at}.volumeMounts[0].subPath"),
                    "Forbidden: cannot be set for an Ephemeral Container",
                )],
            ),
            (
                "a mount of an unknown volume",
                json!({"volumeMounts": [{"name": "other", "mountPath": "/d"}]}),
                vec![(format!("{at}.volumeMounts[0].name"), "Not found: \"other\"")],
            ),
        ];
        for (what, fields, want) in cases {
            let mut ec = debugger();
            for (k, v) in fields.as_object().unwrap() {
                if v.is_null() {
                    ec.as_object_mut().unwrap().remove(k);
                } else {
                    ec[k] = v.clone();
                }
            }
            let p = pod(json!([ec]));
            let mut got = found(&containers(&p["spec"], "spec"));
            got.sort();
            let mut want: Vec<(String, String)> =
                want.into_iter().map(|(f, m)| (f, m.to_string())).collect();
            want.sort();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn two_ephemeral_containers_may_not_share_a_name() {
        let p = pod(json!([debugger(), debugger()]));
        assert_eq!(
            found(&containers(&p["spec"], "spec")),
            [(
                "spec.ephemeralContainers[1].name".to_string(),
                "Duplicate value: \"debugger\"".to_string()
            )]
        );
    }

    #[test]
    fn they_are_refused_on_create() {
        let p = pod(json!([debugger()]));
        assert_eq!(
            found(&on_create(&p)),
            [(
                "spec.ephemeralContainers".to_string(),
                "Forbidden: cannot be set on create".to_string()
            )]
        );
        assert!(on_create(&pod(json!([]))).is_empty());
    }

    #[test]
    fn an_update_may_only_add() {
        let old = pod(json!([debugger()]));
        let mut second = debugger();
        second["name"] = json!("debugger-2");
        let added = pod(json!([second.clone(), debugger()]));
        assert!(
            update(&old, &added).is_empty(),
            "{:?}",
            update(&old, &added)
        );
        // Removed.
        let removed = pod(json!([second]));
        assert_eq!(
            found(&update(&old, &removed)),
            [(
                "spec.ephemeralContainers".to_string(),
                "Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
                    .to_string()
            )]
        );
        // Changed.
        let mut changed = debugger();
        changed["image"] = json!("alpine");
        let errors = update(&old, &pod(json!([changed])));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec.ephemeralContainers");
        assert!(
            errors[0].message.starts_with(
                "Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"
            ),
            "{}",
            errors[0].message
        );
        assert!(
            errors[0].message.contains("alpine"),
            "{}",
            errors[0].message
        );
        // An invalid new one is refused as on any pod update.
        let mut bad = second_with_port();
        bad["name"] = json!("d3");
        let errors = update(&old, &pod(json!([debugger(), bad])));
        assert_eq!(
            found(&errors),
            [(
                "spec.ephemeralContainers[1].ports".to_string(),
                "Forbidden: cannot be set for an Ephemeral Container".to_string()
            )]
        );
    }

    fn second_with_port() -> Value {
        let mut c = debugger();
        c["ports"] = json!([{"containerPort": 8080}]);
        c
    }

    #[test]
    fn a_static_pods_mirror_takes_none() {
        let mut old = pod(json!([]));
        old["metadata"]["annotations"] = json!({MIRROR_ANNOTATION: "x"});
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] = json!([debugger()]);
        assert_eq!(
            found(&update(&old, &new)),
            [(
                String::new(),
                "Forbidden: static pods do not support ephemeral containers".to_string()
            )]
        );
    }
}

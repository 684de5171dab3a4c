//! Pods, with status, binding, eviction, log, exec, attach, portforward
//! and ephemeralcontainers subresources.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "Pod",
    resource: Some(resource(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        ALL,
        &[
            "status",
            "binding",
            "eviction",
            "log",
            "exec",
            "attach",
            "portforward",
            "ephemeralcontainers",
        ],
    )),
    selectable_fields: &[
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ],
    strategy: &PodStrategy,
    typed: &Typed::<Pod>::NEW,
};

#[derive(Debug)]
struct PodStrategy;

impl Strategy for PodStrategy {
    /// Every top-level field of the type but metadata is optional (see
    /// [`Strategy::status_reads_less`]).
    fn status_reads_less(&self) -> bool {
        true
    }
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::pod(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::pod_create(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::pod_update_all(old, new)
    }
    fn validate_subresource_update(
        &self,
        subresource: Option<&str>,
        old: &Value,
        new: &Value,
    ) -> Vec<FieldError> {
        match subresource {
            Some("status") => self.validate_status_update(old, new),
            Some("ephemeralcontainers") => {
                skiff_api::validation::pod_ephemeral_containers_update(old, new)
            }
            _ => self.validate_update(old, new),
        }
    }
    /// Only spec.ephemeralContainers is taken from the pod as sent (upstream's
    /// dropNonEphemeralContainerUpdates): metadata, the rest of the spec and
    /// status stay as stored. A body without the list removes them all
    /// (which validation then refuses).
    fn prepare_for_ephemeral_containers_update(&self, sent: &Value, new: &mut Value) {
        let list = sent
            .pointer("/spec/ephemeralContainers")
            .filter(|l| !l.is_null())
            .cloned();
        let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        match list {
            Some(list) => {
                spec.insert("ephemeralContainers".into(), list);
            }
            None => {
                spec.remove("ephemeralContainers");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ephemeral: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "ephemeralContainers": ephemeral},
            "status": {"phase": "Running"}
        })
    }

    /// What `pods/ephemeralcontainers` takes from a body (only the list)
    /// and how each update through it is judged, one row each: the list
    /// sent over a stored pod with `debugger`, and the findings.
    #[test]
    fn the_ephemeral_containers_subresource_table() {
        let debugger = json!({"name": "debugger", "image": "busybox", "targetContainerName": "c"});
        let added = json!({"name": "second", "image": "busybox"});
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("one added", json!([debugger, added]), vec![]),
            ("the same list", json!([debugger]), vec![]),
            (
                "removed",
                json!([added]),
                vec!["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"],
            ),
            (
                "none left",
                Value::Null,
                vec!["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"],
            ),
            (
                "a port",
                json!([debugger, {"name": "p", "image": "busybox", "ports": [{"containerPort": 80}]}]),
                vec!["spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container"],
            ),
            (
                "an unknown target",
                json!([debugger, {"name": "t", "image": "busybox", "targetContainerName": "x"}]),
                vec!["spec.ephemeralContainers[1].targetContainerName: Not found: \"x\""],
            ),
            (
                "the name of the pod's container",
                json!([debugger, {"name": "c", "image": "busybox"}]),
                vec!["spec.ephemeralContainers[1].name: Duplicate value: \"c\""],
            ),
        ];
        let old = pod(json!([debugger]));
        for (what, list, want) in cases {
            // The body also changes labels, the spec and status: dropped.
            let mut sent = pod(list.clone());
            sent["metadata"]["labels"] = json!({"app": "changed"});
            sent["spec"]["activeDeadlineSeconds"] = json!(5);
            sent["status"]["phase"] = json!("Failed");
            let mut new = old.clone();
            PodStrategy.prepare_for_ephemeral_containers_update(&sent, &mut new);
            let mut expected = old.clone();
            match list {
                Value::Null => {
                    expected["spec"]
                        .as_object_mut()
                        .unwrap()
                        .remove("ephemeralContainers");
                }
                l => expected["spec"]["ephemeralContainers"] = l,
            }
            assert_eq!(new, expected, "{what}");
            let got: Vec<String> = PodStrategy
                .validate_subresource_update(Some("ephemeralcontainers"), &old, &new)
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect();
            assert_eq!(got, want, "{what}");
        }
        // Through the pod itself the list may not change, and a new pod
        // may not have one.
        let errors =
            PodStrategy.validate_subresource_update(None, &old, &pod(json!([debugger, added])));
        assert!(
            errors[0]
                .message
                .starts_with("Forbidden: pod updates may not change fields"),
            "{errors:?}"
        );
        let errors = PodStrategy.validate(&old);
        assert_eq!(errors[0].message, "Forbidden: cannot be set on create");
    }
}

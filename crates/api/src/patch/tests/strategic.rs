//! Strategic merge patch cases.

use serde_json::{json, Value};

use super::{run, smp, Case, Want};
use crate::patch::PatchType;

fn container(name: &str, image: &str) -> Value {
    json!({"name": name, "image": image})
}

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "a"}},
           "spec": {"containers": containers}})
}

fn deployment(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": containers}}}})
}

#[test]
fn strategic_lists() {
    let two = json!([
        {"name": "a", "image": "a:1", "ports": [{"containerPort": 80}],
         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
         "args": ["x", "y"], "envFrom": [{"configMapRef": {"name": "one"}}]},
        {"name": "b", "image": "b:1"}
    ]);
    let mut a_image = two.clone();
    a_image[0]["image"] = json!("a:2");
    let mut env = two.clone();
    env[0]["env"] = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                           {"name": "C", "value": "4"}]);
    let mut atomic = two.clone();
    atomic[0]["args"] = json!(["z"]);
    atomic[0]["envFrom"] = json!([{"secretRef": {"name": "two"}}]);
    let mut ports = two.clone();
    ports[0]["ports"] = json!([{"containerPort": 80, "name": "http"}, {"containerPort": 443}]);
    run(vec![
        smp(
            "containers merged by name",
            "Pod",
            pod(two.clone()),
            json!({"spec": {"containers": [{"name": "a", "image": "a:2"}]}}),
            Want::Ok(pod(a_image.clone())),
        ),
        smp(
            "template containers merged by name",
            "Deployment",
            deployment(two.clone()),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:2"}]}}}}),
            Want::Ok(deployment(a_image)),
        ),
        smp(
            "env merged by name",
            "Pod",
            pod(two.clone()),
            json!({"spec": {"containers": [{"name": "a", "env": [
                {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}}),
            Want::Ok(pod(env)),
        ),
        smp(
            "args and envFrom replaced whole",
            "Pod",
            pod(two.clone()),
            json!({"spec": {"containers": [{"name": "a", "args": ["z"],
                                            "envFrom": [{"secretRef": {"name": "two"}}]}]}}),
            Want::Ok(pod(atomic)),
        ),
        smp(
            "ports merged by containerPort",
            "Pod",
            pod(two.clone()),
            json!({"spec": {"containers": [{"name": "a", "ports": [
                {"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}}),
            Want::Ok(pod(ports)),
        ),
        // kubectl docs (update-api-object-kubectl-patch): the new container comes first.
        smp(
            "new container is prepended",
            "Pod",
            pod(json!([container("a", "a:1")])),
            json!({"spec": {"containers": [{"name": "n", "image": "n:1", "stdin": null}]}}),
            Want::Ok(pod(json!([container("n", "n:1"), container("a", "a:1")]))),
        ),
        smp(
            "$patch delete of a container",
            "Pod",
            pod(two.clone()),
            json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
            Want::Ok(pod(json!([container("b", "b:1")]))),
        ),
        smp(
            "$patch replace of a list",
            "Pod",
            pod(two.clone()),
            json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": "c:1"}]}}),
            Want::Ok(pod(json!([container("c", "c:1")]))),
        ),
        smp(
            "$setElementOrder reorders",
            "Pod",
            pod(json!([
                container("a", "1"),
                container("b", "1"),
                container("c", "1")
            ])),
            json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}}),
            Want::Ok(pod(json!([
                container("c", "1"),
                container("a", "1"),
                container("b", "1")
            ]))),
        ),
        // apimachinery: "set elements order in a list with server-only items 2".
        smp(
            "$setElementOrder keeps server-only items in place",
            "Pod",
            pod(json!([
                container("1", "a"),
                container("2", "2"),
                container("9", "9"),
                container("3", "3"),
                container("4", "4")
            ])),
            json!({"spec": {"$setElementOrder/containers":
                [{"name": "2"}, {"name": "1"}, {"name": "4"}, {"name": "3"}]}}),
            Want::Ok(pod(json!([
                container("2", "2"),
                container("1", "a"),
                container("9", "9"),
                container("4", "4"),
                container("3", "3")
            ]))),
        ),
        // apimachinery: "add map and delete map from merging list".
        smp(
            "$setElementOrder with an addition and a deletion",
            "Pod",
            pod(json!([{"name": "1"}, {"name": "2", "other": "b"}, {"name": "4", "other": "c"}])),
            json!({"spec": {"$setElementOrder/containers": [{"name": "2"}, {"name": "3"}],
                            "containers": [{"name": "3"}, {"name": "1", "$patch": "delete"}]}}),
            Want::Ok(pod(
                json!([{"name": "2", "other": "b"}, {"name": "4", "other": "c"},
                                {"name": "3"}]),
            )),
        ),
        // apimachinery: "preserve the order from the patch in a merging list 2".
        smp(
            "patch order wins, server-only items interleave",
            "Pod",
            pod(json!([{"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}])),
            json!({"spec": {"containers": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"}]}}),
            Want::Ok(pod(
                json!([{"name": "2", "value": "b"}, {"name": "3", "value": "c"},
                                {"name": "1", "value": "a"}]),
            )),
        ),
        // apimachinery: "delete all duplicate entries in a merging list".
        smp(
            "$patch delete removes every match",
            "Pod",
            pod(
                json!([{"name": "1"}, {"name": "1"}, {"name": "2", "value": "a"}, {"name": "3"}, {"name": "3"}]),
            ),
            json!({"spec": {"containers": [{"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}]}}),
            Want::Ok(pod(json!([{"name": "2", "value": "a"}]))),
        ),
        smp(
            "$setElementOrder of a primitive list",
            "Pod",
            json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
            json!({"metadata": {"$setElementOrder/finalizers": ["c", "a", "b", "d"], "finalizers": ["d"]}}),
            Want::Ok(json!({"metadata": {"finalizers": ["c", "a", "b", "d"]}})),
        ),
        smp(
            "new values lose nulls and directives",
            "Pod",
            pod(json!([])),
            json!({"spec": {"containers": [{"name": "n", "env": [{"name": "A", "value": null}],
                                            "$setElementOrder/env": [{"name": "A"}]}]}}),
            Want::Ok(pod(json!([{"name": "n", "env": [{"name": "A"}]}]))),
        ),
        smp(
            "kubectl apply patch",
            "Pod",
            pod(json!([container("c", "busybox:1")])),
            json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                   "spec": {"$setElementOrder/containers": [{"name": "c"}],
                            "containers": [{"image": "busybox:2", "name": "c"}]}}),
            Want::Ok(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"app": "a"},
                             "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                "spec": {"containers": [container("c", "busybox:2")]}})),
        ),
        smp(
            "tolerations replaced whole",
            "Pod",
            json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}),
            json!({"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}}),
            Want::Ok(json!({"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}})),
        ),
        smp(
            "node taints replaced whole (kubectl taint)",
            "Node",
            json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]}}),
            json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]}}),
            Want::Ok(
                json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
                                                {"key": "b", "effect": "NoExecute"}],
                                     "podCIDRs": ["10.0.0.0/24"]}}),
            ),
        ),
        smp(
            "pod conditions merged by type",
            "Pod",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"},
                                             {"type": "PodScheduled", "status": "True"}]}}),
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            Want::Ok(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"},
                                                      {"type": "PodScheduled", "status": "True"}]}}),
            ),
        ),
        smp(
            "node addresses merged by type",
            "Node",
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                            {"type": "Hostname", "address": "n"}]}}),
            json!({"status": {"addresses": [{"type": "Hostname", "address": "m"}]}}),
            Want::Ok(
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                                     {"type": "Hostname", "address": "m"}]}}),
            ),
        ),
        smp(
            "service ports merged by port",
            "Service",
            json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}),
            json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}),
            Want::Ok(json!({"spec": {"ports": [{"port": 80, "name": "http"},
                                               {"port": 443, "name": "https", "targetPort": 8443}]}})),
        ),
        smp(
            "endpoint subsets replaced whole",
            "Endpoints",
            json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]}),
            json!({"subsets": [{"addresses": [{"ip": "10.0.0.2"}]}]}),
            Want::Ok(json!({"subsets": [{"addresses": [{"ip": "10.0.0.2"}]}]})),
        ),
    ]);
}

#[test]
fn strategic_maps_and_metadata() {
    let meta = json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"},
        "finalizers": ["f/a", "f/b", "f/c"],
        "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "r1"}]}});
    let with_meta = |m: Value| json!({"metadata": m});
    let strategy = json!({"spec": {"strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}});
    run(vec![
        smp(
            "null deletes a key, labels merge",
            "ConfigMap",
            meta.clone(),
            json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
            Want::Ok(with_meta(
                json!({"name": "x", "labels": {"b": "2", "c": "3"},
                "finalizers": ["f/a", "f/b", "f/c"],
                "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "r1"}]}),
            )),
        ),
        smp(
            "$deleteFromPrimitiveList/finalizers",
            "ConfigMap",
            meta.clone(),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f/b"]}}),
            Want::Ok(with_meta(
                json!({"name": "x", "labels": {"a": "1", "b": "2"},
                "finalizers": ["f/a", "f/c"],
                "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "r1"}]}),
            )),
        ),
        smp(
            "finalizers merge as a set, ownerReferences by uid",
            "Pod",
            meta.clone(),
            json!({"metadata": {"finalizers": ["f/c", "f/d"],
                "ownerReferences": [{"uid": "u1", "controller": true}]}}),
            Want::Ok(with_meta(
                json!({"name": "x", "labels": {"a": "1", "b": "2"},
                "finalizers": ["f/a", "f/b", "f/c", "f/d"],
                "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "r1", "controller": true}]}),
            )),
        ),
        smp(
            "$patch replace on a map",
            "ConfigMap",
            meta.clone(),
            json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}}),
            Want::Ok(with_meta(json!({"name": "x", "labels": {"z": "9"},
                "finalizers": ["f/a", "f/b", "f/c"],
                "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "r1"}]}))),
        ),
        // Upstream leaves an empty map ("delete map from nested map").
        smp(
            "$patch delete on a map",
            "ConfigMap",
            json!({"data": {"a": "1"}, "x": 1}),
            json!({"data": {"$patch": "delete"}}),
            Want::Ok(json!({"data": {}, "x": 1})),
        ),
        smp(
            "$retainKeys clears other keys",
            "Deployment",
            strategy.clone(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
            Want::Ok(json!({"spec": {"strategy": {"type": "Recreate"}}})),
        ),
        smp(
            "$retainKeys must list patched keys",
            "Deployment",
            strategy.clone(),
            json!({"spec": {"strategy": {"$retainKeys": ["rollingUpdate"], "type": "Recreate"}}}),
            Want::Bad("invalid patch format of retainKeys"),
        ),
        smp(
            "pdb selector replaced whole",
            "PodDisruptionBudget",
            json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}}),
            json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
            Want::Ok(json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}})),
        ),
    ]);
}

#[test]
fn strategic_errors() {
    let mut original = pod(json!([container("a", "a:1")]));
    original["metadata"]["finalizers"] = json!(["x"]);
    let errors: Vec<(&'static str, &'static str, Value, Want)> = vec![
        (
            "element without merge key",
            "Pod",
            json!({"spec": {"containers": [{"image": "x"}]}}),
            Want::Bad("does not contain declared merge key: name"),
        ),
        (
            "merge key of the wrong type",
            "Pod",
            json!({"spec": {"containers": [{"name": 5, "image": "x"}]}}),
            Want::Bad("invalid merge key name in containers: expected a string"),
        ),
        (
            "integer merge key given as a string",
            "Pod",
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "80"}]}]}}),
            Want::Bad("invalid merge key containerPort"),
        ),
        (
            "merge key type checked in new values",
            "Pod",
            json!({"spec": {"containers": [{"name": "n", "ports": [{"containerPort": true}]}]}}),
            Want::Bad("invalid merge key containerPort in ports: expected an integer"),
        ),
        (
            "delete without merge key",
            "Pod",
            json!({"spec": {"containers": [{"$patch": "delete"}]}}),
            Want::Bad("does not contain declared merge key: name"),
        ),
        (
            "unknown directive",
            "Pod",
            json!({"spec": {"$patch": "frob"}}),
            Want::Bad("unknown patch type: \"frob\""),
        ),
        (
            "patch is not an object",
            "Pod",
            json!([1]),
            Want::Bad("cannot unmarshal array into Go value of type map[string]interface {}"),
        ),
        (
            "setElementOrder does not match the list",
            "Pod",
            json!({"spec": {"$setElementOrder/containers": [{"name": "a"}],
                         "containers": [{"name": "b"}]}}),
            Want::Bad("doesn't match $setElementOrder list"),
        ),
        (
            "bad deleteFromPrimitiveList key",
            "Pod",
            json!({"metadata": {"$deleteFromPrimitiveList": ["x"]}}),
            Want::Bad("invalid patch format of primitive list"),
        ),
        (
            "deleteFromPrimitiveList whose value is not a list",
            "Pod",
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
            Want::Bad("invalid patch format of primitive list"),
        ),
        (
            "deleteFromPrimitiveList whose value is an object",
            "Pod",
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": {"a": 1}}}),
            Want::Bad("invalid patch format of primitive list"),
        ),
        (
            "setElementOrder that is not a list",
            "Pod",
            json!({"spec": {"$setElementOrder/containers": "x"}}),
            Want::Bad("invalid patch format of setElementOrder list"),
        ),
        (
            "setElementOrder of a merge list naming no merge key",
            "Pod",
            json!({"spec": {"$setElementOrder/containers": [1, 2]}}),
            Want::Bad("expected a map"),
        ),
        (
            "setElementOrder of a list of objects without merge key",
            "Pod",
            json!({"spec": {"$setElementOrder/tolerations": [{"key": "a"}],
                         "tolerations": [{"key": "a", "operator": "Exists"}]}}),
            Want::Bad("invalid patch format of setElementOrder list"),
        ),
        (
            "setElementOrder of primitives holding objects",
            "Pod",
            json!({"metadata": {"$setElementOrder/finalizers": [{"a": 1}]}}),
            Want::Bad("invalid patch format of setElementOrder list"),
        ),
        (
            "delete directive in a list not merged by key",
            "Pod",
            json!({"spec": {"tolerations": [{"$patch": "delete", "key": "a"}]}}),
            Want::Bad("is not a list merged by key"),
        ),
        (
            "delete directive without the merge key's shape in a new list",
            "Pod",
            json!({"spec": {"containers": [{"name": "a", "ports": [{"$patch": "delete", "protocol": "TCP"}]}]}}),
            Want::Bad("does not contain declared merge key: containerPort"),
        ),
        (
            "unknown directive in a value that lands as it is",
            "Pod",
            json!({"spec": {"affinity": {"$patch": 5}}}),
            Want::Bad("unknown patch type: 5"),
        ),
        (
            "mixed element types",
            "Pod",
            json!({"spec": {"containers": ["a"]}}),
            Want::Bad("list element types are not identical"),
        ),
        (
            "lists of lists",
            "Pod",
            json!({"metadata": {"finalizers": [["a"]]}}),
            Want::Invalid("lists of lists are not supported"),
        ),
        (
            "custom resources",
            "Widget",
            json!({"spec": {}}),
            Want::Unsupported,
        ),
    ];
    let mut cases: Vec<Case> = errors
        .into_iter()
        .map(|(name, kind, patch, want)| smp(name, kind, original.clone(), patch, want))
        .collect();
    cases.push(Case {
        name: "malformed JSON",
        kind: "Pod",
        ty: PatchType::StrategicMerge,
        original: original.clone(),
        patch: "{\"spec\":".into(),
        want: Want::Bad("invalid JSON patch"),
    });
    run(cases);
}

//! Who-can-do-what cases for the Node authorizer, after upstream's
//! `node_authorizer_test.go`: reads through the graph, token creation,
//! leases and CSINodes, the static node rules, and users that are not
//! nodes.

use serde_json::json;

use super::*;

fn node(name: &str) -> User {
    User {
        name: format!("{NODE_USER_PREFIX}{name}"),
        groups: vec![NODES_GROUP.into(), "system:authenticated".into()],
    }
}

fn pod(ns: &str, name: &str, node: &str) -> serde_json::Value {
    json!({
        "metadata": {"namespace": ns, "name": name},
        "spec": {
            "nodeName": node,
            "serviceAccountName": format!("sa-{name}"),
            "imagePullSecrets": [{"name": format!("pull-{name}")}],
            "containers": [{
                "name": "c",
                "envFrom": [{"configMapRef": {"name": format!("envcm-{name}")}}],
                "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": format!("envsecret-{name}"), "key": "k"}}}]
            }],
            "volumes": [
                {"name": "s", "secret": {"secretName": format!("vol-{name}")}},
                {"name": "p", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}},
                {"name": "c", "persistentVolumeClaim": {"claimName": format!("claim-{name}")}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}
            ]
        }
    })
}

/// A graph with pod p0 on node0 and p1 on node1 (namespace ns), and
/// claim-p0 bound to pv0.
fn authorizer() -> NodeAuthorizer {
    let a = NodeAuthorizer::new(crate::rbac_defaults::node_rules());
    {
        let mut g = a.write();
        g.set_pod("/registry/pods/ns/p0", Some(&pod("ns", "p0", "node0")));
        g.set_pod("/registry/pods/ns/p1", Some(&pod("ns", "p1", "node1")));
        g.set_pod(
            "/registry/pods/ns/unbound",
            Some(&json!({"metadata": {"namespace": "ns", "name": "unbound"},
                "spec": {"volumes": [{"name": "s", "secret": {"secretName": "unbound-secret"}}]}})),
        );
        g.set_claim(
            "ns",
            "claim-p0",
            Some(&json!({"spec": {"volumeName": "pv0"}})),
        );
    }
    a
}

struct Case {
    user: User,
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    namespace: &'static str,
    name: &'static str,
    allowed: bool,
}

fn case(
    user: User,
    verb: &'static str,
    resource: &'static str,
    namespace: &'static str,
    name: &'static str,
    allowed: bool,
) -> Case {
    Case {
        user,
        verb,
        group: "",
        resource,
        subresource: "",
        namespace,
        name,
        allowed,
    }
}

fn decide(a: &NodeAuthorizer, c: &Case) -> Decision {
    let mut attrs = Attributes::resource(&c.user, c.verb, c.group, c.resource);
    attrs.subresource = c.subresource.into();
    attrs.namespace = c.namespace.into();
    attrs.name = c.name.into();
    a.authorize(&attrs)
}

fn check(a: &NodeAuthorizer, cases: &[Case]) {
    for (i, c) in cases.iter().enumerate() {
        let got = decide(a, c);
        let want = if c.allowed {
            Decision::Allow
        } else {
            Decision::NoOpinion
        };
        assert_eq!(
            got, want,
            "case {i}: {} {} {}/{} {}/{} {}",
            c.user.name, c.verb, c.group, c.resource, c.namespace, c.name, c.subresource
        );
    }
}

#[test]
fn reads_follow_the_graph() {
    let a = authorizer();
    check(
        &a,
        &[
            // Each way a pod refers to a Secret or ConfigMap.
            case(node("node0"), "get", "secrets", "ns", "vol-p0", true),
            case(node("node0"), "get", "secrets", "ns", "pull-p0", true),
            case(node("node0"), "get", "secrets", "ns", "envsecret-p0", true),
            case(node("node0"), "get", "configmaps", "ns", "envcm-p0", true),
            case(
                node("node0"),
                "get",
                "configmaps",
                "ns",
                "kube-root-ca.crt",
                true,
            ),
            // A single object by name may be listed and watched (the
            // fieldSelector metadata.name=NAME form).
            case(node("node0"), "list", "secrets", "ns", "vol-p0", true),
            case(node("node0"), "watch", "configmaps", "ns", "envcm-p0", true),
            // Another node's pod's objects, or an unbound pod's: no.
            case(node("node0"), "get", "secrets", "ns", "vol-p1", false),
            case(node("node1"), "get", "secrets", "ns", "vol-p0", false),
            case(
                node("node0"),
                "get",
                "secrets",
                "ns",
                "unbound-secret",
                false,
            ),
            // Same name, other namespace: no.
            case(node("node0"), "get", "secrets", "other", "vol-p0", false),
            // Reads only, and never a whole list.
            case(node("node0"), "update", "secrets", "ns", "vol-p0", false),
            case(
                node("node0"),
                "delete",
                "configmaps",
                "ns",
                "envcm-p0",
                false,
            ),
            case(node("node0"), "list", "secrets", "ns", "", false),
            case(node("node0"), "list", "secrets", "", "", false),
            // Claims, the generic ephemeral volume's claim, and the bound
            // volume.
            case(
                node("node0"),
                "get",
                "persistentvolumeclaims",
                "ns",
                "claim-p0",
                true,
            ),
            case(
                node("node0"),
                "get",
                "persistentvolumeclaims",
                "ns",
                "p0-scratch",
                true,
            ),
            case(
                node("node1"),
                "get",
                "persistentvolumeclaims",
                "ns",
                "claim-p0",
                false,
            ),
            case(
                node("node0"),
                "list",
                "persistentvolumeclaims",
                "ns",
                "claim-p0",
                false,
            ),
            case(node("node0"), "get", "persistentvolumes", "", "pv0", true),
            case(node("node1"), "get", "persistentvolumes", "", "pv0", false),
            case(node("node0"), "get", "persistentvolumes", "", "pv9", false),
        ],
    );
    let mut status = case(
        node("node0"),
        "patch",
        "persistentvolumeclaims",
        "ns",
        "claim-p0",
        true,
    );
    status.subresource = "status";
    let mut other_status = case(
        node("node1"),
        "patch",
        "persistentvolumeclaims",
        "ns",
        "claim-p0",
        false,
    );
    other_status.subresource = "status";
    check(&a, &[status, other_status]);
}

#[test]
fn tokens_leases_and_csinodes_are_the_nodes_own() {
    let a = authorizer();
    let token = |user: User, sa: &'static str, allowed: bool| Case {
        subresource: "token",
        ..case(user, "create", "serviceaccounts", "ns", sa, allowed)
    };
    let lease =
        |user: User, verb: &'static str, ns: &'static str, name: &'static str, allowed| Case {
            group: "coordination.k8s.io",
            ..case(user, verb, "leases", ns, name, allowed)
        };
    let csinode = |user: User, verb: &'static str, name: &'static str, allowed| Case {
        group: "storage.k8s.io",
        ..case(user, verb, "csinodes", "", name, allowed)
    };
    check(
        &a,
        &[
            token(node("node0"), "sa-p0", true),
            token(node("node0"), "sa-p1", false),
            case(
                node("node0"),
                "get",
                "serviceaccounts",
                "ns",
                "sa-p0",
                false,
            ),
            lease(node("node0"), "update", "kube-node-lease", "node0", true),
            lease(node("node0"), "get", "kube-node-lease", "node0", true),
            lease(node("node0"), "create", "kube-node-lease", "", true),
            lease(node("node0"), "update", "kube-node-lease", "node1", false),
            lease(node("node0"), "update", "default", "node0", false),
            lease(node("node0"), "list", "kube-node-lease", "", false),
            csinode(node("node0"), "update", "node0", true),
            csinode(node("node0"), "update", "node1", false),
        ],
    );
}

#[test]
fn everything_else_is_the_static_node_rules() {
    let a = authorizer();
    check(
        &a,
        &[
            case(node("node0"), "list", "pods", "", "", true),
            case(node("node0"), "watch", "services", "", "", true),
            case(node("node0"), "get", "nodes", "", "node1", true),
            case(node("node0"), "create", "events", "ns", "", true),
            Case {
                subresource: "status",
                ..case(node("node0"), "patch", "pods", "ns", "p0", true)
            },
            case(node("node0"), "create", "deployments", "ns", "", false),
            case(node("node0"), "delete", "nodes", "", "node0", false),
            case(node("node0"), "list", "namespaces", "", "", false),
        ],
    );
}

#[test]
fn users_that_are_not_nodes_get_no_opinion() {
    let a = authorizer();
    let not_in_group = User {
        name: "system:node:node0".into(),
        groups: vec![],
    };
    let other = User {
        name: "jane".into(),
        groups: vec![NODES_GROUP.into()],
    };
    let bare = User {
        name: "system:node:".into(),
        groups: vec![NODES_GROUP.into()],
    };
    check(
        &a,
        &[
            case(not_in_group, "get", "secrets", "ns", "vol-p0", false),
            case(other, "list", "pods", "", "", false),
            case(bare, "list", "pods", "", "", false),
        ],
    );
}

#[test]
fn the_graph_forgets_what_pods_no_longer_refer_to() {
    let a = authorizer();
    let get =
        |name: &'static str, allowed| case(node("node0"), "get", "configmaps", "ns", name, allowed);
    // A second pod on node0 refers to the same ConfigMap: deleting one
    // keeps it reachable, deleting both does not.
    a.write()
        .set_pod("/registry/pods/ns/p2", Some(&pod("ns", "p2", "node0")));
    a.write().set_pod("/registry/pods/ns/p2", None);
    check(&a, &[get("kube-root-ca.crt", true), get("envcm-p0", true)]);
    a.write().set_pod("/registry/pods/ns/p0", None);
    check(
        &a,
        &[get("kube-root-ca.crt", false), get("envcm-p0", false)],
    );
    // A finished pod keeps its reach (its node may still sync it); a pod
    // moving (re-created) to another node takes its reach along.
    let mut done = pod("ns", "p1", "node1");
    done["status"] = json!({"phase": "Succeeded"});
    a.write().set_pod("/registry/pods/ns/p1", Some(&done));
    check(
        &a,
        &[case(node("node1"), "get", "secrets", "ns", "vol-p1", true)],
    );
    a.write()
        .set_pod("/registry/pods/ns/p1", Some(&pod("ns", "p1", "node0")));
    check(
        &a,
        &[
            case(node("node0"), "get", "secrets", "ns", "vol-p1", true),
            case(node("node1"), "get", "secrets", "ns", "vol-p1", false),
        ],
    );
    // An unbound claim reaches no volume.
    a.write()
        .set_claim("ns", "claim-p0", Some(&json!({"spec": {}})));
    assert!(!a.read().reaches_volume("node0", "pv0"));
    assert_eq!(a.read().pod_count(), 1);
}

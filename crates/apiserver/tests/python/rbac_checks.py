"""RBAC through the Python `kubernetes` client against a Skiff API server.

Run by tests/python_client.rs with KUBECONFIG (the admin), SKIFF_URL,
SKIFF_CA and SKIFF_TOKENS (JSON: user name -> bearer token from the
server's tokens.csv, none of them in system:masters); exits non-zero on the
first failed check. The authorizer follows bindings through the watch
cache, so a check that needs a new binding polls it (with a timeout).
"""

import json
import os
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException

NS = "rbac-py"
OTHER = "rbac-py-other"
RBAC = "rbac.authorization.k8s.io"


def expect_status(code, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        assert e.status == code, f"expected {code}, got {e.status}: {e.body}"
        return e
    raise AssertionError(f"expected HTTP {code}, {fn.__name__} succeeded")


def forbidden(fn, *args, **kwargs):
    """The call answers 403; the Status's message."""
    e = expect_status(403, fn, *args, **kwargs)
    status = json.loads(e.body)
    assert status["kind"] == "Status" and status["reason"] == "Forbidden", status
    assert status["code"] == 403, status
    return status["message"]


def eventually(what, fn, timeout=20):
    """fn() until it neither raises a 403 nor returns False; its value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = fn()
            if value is not False:
                return value
            last = "returned False"
        except ApiException as e:
            if e.status != 403:
                raise
            last = e.body
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s: {last}")
        time.sleep(0.05)


def as_user(token):
    cfg = client.Configuration()
    cfg.host = os.environ["SKIFF_URL"]
    cfg.ssl_ca_cert = os.environ["SKIFF_CA"]
    cfg.api_key = {"authorization": "Bearer " + token}
    return client.ApiClient(cfg)


def role(name, rules, labels=None):
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {"name": name, "labels": labels or {}},
        "rules": rules,
    }


def binding(kind, name, role_kind, role_name, user, namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }


def configmap(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}


def rule_tuple(r):
    return (
        sorted(r.api_groups or []),
        sorted(r.resources or []),
        sorted(r.verbs or []),
        sorted(r.resource_names or []),
    )


def admin_crud(rbac):
    """Roles, RoleBindings, ClusterRoles, ClusterRoleBindings: create,
    read, patch (strategic merge and JSON patch), list, delete."""
    made = rbac.create_namespaced_role(
        NS, role("py-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], {"t": "py"})
    )
    assert made.metadata.uid and made.metadata.namespace == NS, made.metadata
    read = rbac.read_namespaced_role("py-reader", NS)
    assert [rule_tuple(r) for r in read.rules] == [([""], ["pods"], ["get"], [])], read.rules
    patched = rbac.patch_namespaced_role("py-reader", NS, {"metadata": {"labels": {"patched": "yes"}}})
    assert patched.metadata.labels == {"t": "py", "patched": "yes"}, patched.metadata.labels
    patched = rbac.patch_namespaced_role(
        "py-reader", NS, [{"op": "replace", "path": "/rules/0/verbs", "value": ["get", "list"]}]
    )
    assert patched.rules[0].verbs == ["get", "list"], patched.rules
    names = [r.metadata.name for r in rbac.list_namespaced_role(NS, label_selector="t=py").items]
    assert names == ["py-reader"], names
    assert "py-reader" in [r.metadata.name for r in rbac.list_role_for_all_namespaces().items]
    expect_status(409, rbac.create_namespaced_role, NS, role("py-reader", []))

    rb = rbac.create_namespaced_role_binding(NS, binding("RoleBinding", "py-rb", "Role", "py-reader", "someone"))
    assert rb.role_ref.kind == "Role" and rb.subjects[0].name == "someone", rb
    rb = rbac.patch_namespaced_role_binding(
        "py-rb",
        NS,
        {"subjects": [{"apiGroup": RBAC, "kind": "User", "name": "someone-else"}]},
        _content_type="application/merge-patch+json",
    )
    assert [s.name for s in rb.subjects] == ["someone-else"], rb.subjects
    assert rbac.read_namespaced_role_binding("py-rb", NS).subjects[0].name == "someone-else"
    # roleRef is immutable.
    e = expect_status(
        422,
        rbac.patch_namespaced_role_binding,
        "py-rb",
        NS,
        [{"op": "replace", "path": "/roleRef/name", "value": "other"}],
    )
    message = json.loads(e.body)["message"]
    assert "cannot change roleRef" in message, message
    assert [b.metadata.name for b in rbac.list_namespaced_role_binding(NS).items] == ["py-rb"]

    cr = rbac.create_cluster_role(
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "py-cluster-reader", "labels": {"t": "py"}},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
        }
    )
    assert cr.metadata.namespace is None and cr.rules[0].resources == ["nodes"], cr
    cr = rbac.patch_cluster_role("py-cluster-reader", {"metadata": {"annotations": {"a": "b"}}})
    assert cr.metadata.annotations == {"a": "b"}, cr.metadata
    assert rbac.read_cluster_role("py-cluster-reader").metadata.labels == {"t": "py"}
    names = [r.metadata.name for r in rbac.list_cluster_role(label_selector="t=py").items]
    assert names == ["py-cluster-reader"], names
    # The default roles are there.
    names = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert {"cluster-admin", "admin", "edit", "view", "system:node"} <= names, names

    crb = rbac.create_cluster_role_binding(
        binding("ClusterRoleBinding", "py-crb", "ClusterRole", "py-cluster-reader", "someone")
    )
    assert crb.role_ref.name == "py-cluster-reader", crb
    crb = rbac.patch_cluster_role_binding("py-crb", {"metadata": {"labels": {"t": "py"}}})
    assert crb.metadata.labels == {"t": "py"}, crb.metadata
    assert rbac.read_cluster_role_binding("py-crb").subjects[0].name == "someone"
    names = [b.metadata.name for b in rbac.list_cluster_role_binding(label_selector="t=py").items]
    assert names == ["py-crb"], names
    names = {b.metadata.name for b in rbac.list_cluster_role_binding().items}
    assert {"cluster-admin", "system:kube-scheduler"} <= names, names

    rbac.delete_cluster_role_binding("py-crb")
    rbac.delete_cluster_role("py-cluster-reader")
    rbac.delete_namespaced_role_binding("py-rb", NS)
    rbac.delete_namespaced_role("py-reader", NS)
    expect_status(404, rbac.read_cluster_role_binding, "py-crb")
    expect_status(404, rbac.read_cluster_role, "py-cluster-reader")
    expect_status(404, rbac.read_namespaced_role_binding, "py-rb", NS)
    e = expect_status(404, rbac.read_namespaced_role, "py-reader", NS)
    message = json.loads(e.body)["message"]
    assert message == f'roles.{RBAC} "py-reader" not found', message
    print("admin CRUD ok", flush=True)


def ssar(authz, verb, resource, namespace, name=None, group=""):
    attrs = {"verb": verb, "resource": resource, "namespace": namespace, "group": group}
    if name:
        attrs["name"] = name
    review = authz.create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
    )
    return review.status.allowed


def sar(authz, user, attrs):
    key = "nonResourceAttributes" if "path" in attrs else "resourceAttributes"
    review = authz.create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, key: attrs},
        }
    )
    return review.status


def jane_view(rbac, authz, tokens):
    """Nothing bound, then view in NS: read there only."""
    jane = as_user(tokens["jane"])
    core = client.CoreV1Api(jane)
    message = forbidden(core.list_namespaced_pod, NS)
    assert message == (
        f'pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "{NS}"'
    ), message
    message = forbidden(core.read_namespaced_config_map, "cm", NS)
    assert message.startswith('configmaps "cm" is forbidden: User "jane" cannot get resource "configmaps"'), message
    message = forbidden(client.CoreV1Api(jane).list_node)
    assert message == 'nodes is forbidden: User "jane" cannot list resource "nodes" in API group "" at the cluster scope', message
    jane_authz = client.AuthorizationV1Api(jane)
    assert ssar(jane_authz, "list", "pods", NS) is False

    rbac.create_namespaced_role_binding(NS, binding("RoleBinding", "jane-view", "ClusterRole", "view", "jane"))
    eventually("jane lists pods after the binding", lambda: core.list_namespaced_pod(NS))
    assert core.read_namespaced_config_map("cm", NS).data == {"a": "1"}
    apps = client.AppsV1Api(jane)
    apps.list_namespaced_deployment(NS)
    message = forbidden(core.list_namespaced_pod, OTHER)
    assert message == (
        f'pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "{OTHER}"'
    ), message
    message = forbidden(core.list_pod_for_all_namespaces)
    assert message.endswith("at the cluster scope"), message
    message = forbidden(core.create_namespaced_config_map, NS, configmap("by-jane"))
    assert message == (
        f'configmaps is forbidden: User "jane" cannot create resource "configmaps" in API group "" in the namespace "{NS}"'
    ), message
    message = forbidden(core.list_namespaced_secret, NS)
    assert 'cannot list resource "secrets"' in message, message

    # SelfSubjectAccessReview: what jane may do, as she asks it.
    assert ssar(jane_authz, "list", "pods", NS) is True
    assert ssar(jane_authz, "watch", "deployments", NS, group="apps") is True
    assert ssar(jane_authz, "get", "configmaps", NS, name="cm") is True
    assert ssar(jane_authz, "create", "pods", NS) is False
    assert ssar(jane_authz, "list", "pods", OTHER) is False
    assert ssar(jane_authz, "get", "secrets", NS) is False

    # SelfSubjectRulesReview: view's rules in NS.
    review = jane_authz.create_self_subject_rules_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": NS},
        }
    )
    rules = review.status.resource_rules
    pods = [r for r in rules if "pods" in (r.resources or []) and "" in (r.api_groups or [])]
    assert pods and any(sorted(r.verbs) == ["get", "list", "watch"] for r in pods), rules
    deployments = [r for r in rules if "deployments" in (r.resources or []) and "apps" in (r.api_groups or [])]
    assert deployments and all(sorted(r.verbs) == ["get", "list", "watch"] for r in deployments), rules
    assert not any("secrets" in (r.resources or []) for r in rules), rules
    # Nothing but reads, apart from the self reviews every user may create.
    reviews = {"selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"}
    writes = [r for r in rules if set(r.verbs) - {"get", "list", "watch"}]
    assert all(set(r.verbs) == {"create"} and set(r.resources) <= reviews for r in writes), writes
    # Self reviews come with system:authenticated (basic-user).
    selfreviews = [r for r in rules if "selfsubjectaccessreviews" in (r.resources or [])]
    assert selfreviews and "create" in selfreviews[0].verbs, rules
    assert review.status.incomplete is False, review.status
    # In the other namespace: only what every authenticated user has.
    review = jane_authz.create_self_subject_rules_review({"spec": {"namespace": OTHER}})
    assert not any("pods" in (r.resources or []) for r in review.status.resource_rules), review.status

    # SubjectAccessReview: the admin asks about jane; jane may not ask.
    status = sar(authz, "jane", {"verb": "list", "resource": "pods", "namespace": NS})
    assert status.allowed is True, status
    status = sar(authz, "jane", {"verb": "delete", "resource": "pods", "namespace": NS, "name": "p"})
    assert status.allowed is False, status
    status = sar(authz, "jane", {"verb": "list", "resource": "pods", "namespace": OTHER})
    assert status.allowed is False, status
    message = forbidden(
        jane_authz.create_subject_access_review,
        {"spec": {"user": "jane", "resourceAttributes": {"verb": "list", "resource": "pods"}}},
    )
    assert 'cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io"' in message, message
    print("view binding ok", flush=True)


def resource_names(rbac, tokens):
    """A Role naming one ConfigMap: get that one, nothing else."""
    rbac.create_namespaced_role(
        NS,
        role(
            "cm-named",
            [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update"], "resourceNames": ["cm"]}],
        ),
    )
    rbac.create_namespaced_role_binding(NS, binding("RoleBinding", "bob-cm", "Role", "cm-named", "bob"))
    core = client.CoreV1Api(as_user(tokens["bob"]))
    got = eventually("bob reads cm", lambda: core.read_namespaced_config_map("cm", NS))
    assert got.data == {"a": "1"}
    got.data["b"] = "2"
    assert core.replace_namespaced_config_map("cm", NS, got).data == {"a": "1", "b": "2"}
    message = forbidden(core.read_namespaced_config_map, "cm2", NS)
    assert message == (
        f'configmaps "cm2" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "{NS}"'
    ), message
    message = forbidden(core.list_namespaced_config_map, NS)
    assert 'cannot list resource "configmaps"' in message, message
    message = forbidden(core.delete_namespaced_config_map, "cm", NS)
    assert 'cannot delete resource "configmaps"' in message, message
    authz = client.AuthorizationV1Api(as_user(tokens["bob"]))
    assert ssar(authz, "get", "configmaps", NS, name="cm") is True
    assert ssar(authz, "get", "configmaps", NS, name="cm2") is False
    assert ssar(authz, "get", "configmaps", NS) is False
    print("resourceNames ok", flush=True)


def non_resource_urls(rbac, authz):
    """A ClusterRole with nonResourceURLs, checked by SubjectAccessReview."""
    assert sar(authz, "carol", {"verb": "get", "path": "/healthz/etcd"}).allowed is False
    rbac.create_cluster_role(
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "py-health"},
            "rules": [{"nonResourceURLs": ["/healthz/*", "/metrics"], "verbs": ["get"]}],
        }
    )
    rbac.create_cluster_role_binding(
        binding("ClusterRoleBinding", "carol-health", "ClusterRole", "py-health", "carol")
    )
    eventually(
        "the non-resource rule reaches the authorizer",
        lambda: sar(authz, "carol", {"verb": "get", "path": "/healthz/etcd"}).allowed,
    )
    assert sar(authz, "carol", {"verb": "get", "path": "/healthz/poststarthook/x"}).allowed is True
    assert sar(authz, "carol", {"verb": "get", "path": "/metrics"}).allowed is True
    assert sar(authz, "carol", {"verb": "post", "path": "/healthz/etcd"}).allowed is False
    assert sar(authz, "carol", {"verb": "get", "path": "/metrics/extra"}).allowed is False
    assert sar(authz, "carol", {"verb": "get", "path": "/logs"}).allowed is False
    # A resource rule it is not.
    assert sar(authz, "carol", {"verb": "get", "resource": "pods", "namespace": NS}).allowed is False
    rbac.delete_cluster_role_binding("carol-health")
    rbac.delete_cluster_role("py-health")
    eventually(
        "the rule leaves the authorizer",
        lambda: not sar(authz, "carol", {"verb": "get", "path": "/healthz/etcd"}).allowed,
    )
    print("nonResourceURLs ok", flush=True)


def escalation(rbac, tokens):
    """edit may not bind at all; admin binds what it holds, no more."""
    rbac.create_namespaced_role_binding(NS, binding("RoleBinding", "ed-edit", "ClusterRole", "edit", "ed"))
    ed = as_user(tokens["ed"])
    core = client.CoreV1Api(ed)
    eventually("ed creates a ConfigMap with edit", lambda: core.create_namespaced_config_map(NS, configmap("by-ed")))
    ed_rbac = client.RbacAuthorizationV1Api(ed)
    for role_name in ("admin", "view"):
        message = forbidden(
            ed_rbac.create_namespaced_role_binding,
            NS,
            binding("RoleBinding", f"ed-{role_name}", "ClusterRole", role_name, "ed"),
        )
        assert message == (
            f'rolebindings.{RBAC} is forbidden: User "ed" cannot create resource "rolebindings" '
            f'in API group "{RBAC}" in the namespace "{NS}"'
        ), message
    message = forbidden(ed_rbac.create_namespaced_role, NS, role("ed-role", []))
    assert f'roles.{RBAC} is forbidden: User "ed" cannot create resource "roles"' in message, message
    message = forbidden(ed_rbac.list_namespaced_role_binding, NS)
    assert 'cannot list resource "rolebindings"' in message, message

    rbac.create_namespaced_role_binding(NS, binding("RoleBinding", "ada-admin", "ClusterRole", "admin", "ada"))
    ada = client.RbacAuthorizationV1Api(as_user(tokens["ada"]))
    eventually("ada lists RoleBindings with admin", lambda: ada.list_namespaced_role_binding(NS))
    # Rights she holds: granted.
    made = ada.create_namespaced_role_binding(NS, binding("RoleBinding", "erin-edit", "ClusterRole", "edit", "erin"))
    assert made.role_ref.name == "edit"
    ada.create_namespaced_role(
        NS, role("pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])
    )
    ada.create_namespaced_role_binding(NS, binding("RoleBinding", "erin-pods", "Role", "pod-reader", "erin"))
    # Rights she lacks: refused in upstream's words.
    message = forbidden(
        ada.create_namespaced_role,
        NS,
        role("node-reader", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
    )
    assert message.startswith(
        f'roles.{RBAC} "node-reader" is forbidden: user "ada" (groups=["system:authenticated"]) '
        "is attempting to grant RBAC permissions not currently held:"
    ), message
    assert '{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}' in message, message
    message = forbidden(
        ada.create_namespaced_role,
        NS,
        role("all", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    )
    assert "is attempting to grant RBAC permissions not currently held" in message, message
    message = forbidden(
        ada.create_namespaced_role_binding,
        NS,
        binding("RoleBinding", "ada-root", "ClusterRole", "cluster-admin", "ada"),
    )
    assert message.startswith(
        f'rolebindings.{RBAC} "ada-root" is forbidden: user "ada" (groups=["system:authenticated"]) '
        "is attempting to grant RBAC permissions not currently held:"
    ), message
    # Widening her own Role by a patch is an escalation too.
    message = forbidden(
        ada.patch_namespaced_role,
        "pod-reader",
        NS,
        [{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}}],
    )
    assert "is attempting to grant RBAC permissions not currently held" in message, message
    # Cluster-wide objects are not hers at all.
    message = forbidden(ada.create_cluster_role_binding, binding("ClusterRoleBinding", "x", "ClusterRole", "view", "ada"))
    assert 'cannot create resource "clusterrolebindings"' in message and "at the cluster scope" in message, message
    names = sorted(b.metadata.name for b in ada.list_namespaced_role_binding(NS).items)
    assert "erin-edit" in names and "ada-root" not in names, names
    print("escalation ok", flush=True)


def main():
    config.load_kube_config(os.environ["KUBECONFIG"])
    tokens = json.loads(os.environ["SKIFF_TOKENS"])
    core = client.CoreV1Api()
    rbac = client.RbacAuthorizationV1Api()
    authz = client.AuthorizationV1Api()
    for ns in (NS, OTHER):
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    core.create_namespaced_config_map(NS, configmap("cm"))
    core.create_namespaced_config_map(NS, configmap("cm2"))

    admin_crud(rbac)
    jane_view(rbac, authz, tokens)
    resource_names(rbac, tokens)
    non_resource_urls(rbac, authz)
    escalation(rbac, tokens)

    # Deleting the binding takes the rights away again.
    rbac.delete_namespaced_role_binding("jane-view", NS)
    jane = client.CoreV1Api(as_user(tokens["jane"]))

    def refused():
        try:
            jane.list_namespaced_pod(NS)
            return False
        except ApiException as e:
            assert e.status == 403, e
            return True

    eventually("jane loses view", refused)
    print("all RBAC checks passed", flush=True)


if __name__ == "__main__":
    main()

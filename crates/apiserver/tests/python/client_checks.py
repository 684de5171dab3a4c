"""The Python `kubernetes` client against a Skiff API server.

Run by tests/python_client.rs with KUBECONFIG pointing at the server; exits
non-zero on the first failed check.
"""

import json
import os
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def expect_status(code, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        assert e.status == code, f"expected {code}, got {e.status}: {e.body}"
        return e
    raise AssertionError(f"expected HTTP {code}, call succeeded")


def main():
    config.load_kube_config(os.environ["KUBECONFIG"])
    version = client.VersionApi().get_code()
    assert version.major == "1" and version.minor == "33", version

    v1 = client.CoreV1Api()
    ns = "default"
    created = v1.create_namespaced_config_map(
        ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py"}, "data": {"a": "1"}}
    )
    assert created.metadata.uid and created.metadata.resource_version

    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns).items]
    assert names == ["py"], names

    # A watch without resourceVersion starts with synthetic ADDED events.
    w = watch.Watch()
    first = next(iter(w.stream(v1.list_namespaced_config_map, ns, timeout_seconds=10)))
    w.stop()
    assert first["type"] == "ADDED" and first["object"].metadata.name == "py", first

    # Replace, then a replace with the stale resourceVersion conflicts.
    created.data["a"] = "2"
    replaced = v1.replace_namespaced_config_map("py", ns, created)
    assert replaced.data["a"] == "2"
    created.data["a"] = "3"
    e = expect_status(409, v1.replace_namespaced_config_map, "py", ns, created)
    assert "the object has been modified" in e.body, e.body

    # A watch from a resourceVersion sees the next change.
    w = watch.Watch()
    stream = w.stream(
        v1.list_namespaced_config_map, ns, resource_version=replaced.metadata.resource_version, timeout_seconds=10
    )
    v1.delete_namespaced_config_map("py", ns)
    event = next(iter(stream))
    w.stop()
    assert event["type"] == "DELETED" and event["object"].metadata.name == "py", event

    expect_status(404, v1.read_namespaced_config_map, "py", ns)

    pod = v1.create_namespaced_pod(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "py-"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
        },
    )
    assert pod.metadata.name.startswith("py-") and len(pod.metadata.name) == 8, pod.metadata.name
    assert pod.spec.containers[0].image_pull_policy == "IfNotPresent"
    assert pod.status.phase == "Pending"
    pods = v1.list_namespaced_pod(ns, label_selector="", field_selector=f"metadata.name={pod.metadata.name}")
    assert [p.metadata.name for p in pods.items] == [pod.metadata.name]
    v1.delete_namespaced_pod(pod.metadata.name, ns)
    expect_status(404, v1.read_namespaced_pod, pod.metadata.name, ns)

    # Patch with a dict (strategic merge) and with a list (JSON patch).
    v1.create_namespaced_pod(
        ns,
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pt", "labels": {"a": "1"}},
         "spec": {"containers": [{"name": "c", "image": "busybox:1"}, {"name": "d", "image": "busybox:1"}]}},
    )
    patched = v1.patch_namespaced_pod(
        "pt", ns, {"metadata": {"labels": {"b": "2"}}, "spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}
    )
    assert patched.metadata.labels == {"a": "1", "b": "2"}, patched.metadata.labels
    images = {c.name: c.image for c in patched.spec.containers}
    assert images == {"c": "busybox:2", "d": "busybox:1"}, images
    patched = v1.patch_namespaced_pod("pt", ns, [{"op": "replace", "path": "/metadata/labels/a", "value": "9"}])
    assert patched.metadata.labels["a"] == "9"
    e = expect_status(422, v1.patch_namespaced_pod, "pt", ns, [{"op": "test", "path": "/metadata/labels/a", "value": "0"}])
    assert v1.read_namespaced_pod("pt", ns).metadata.labels["a"] == "9", "a failed patch changed nothing"

    # Server-side apply: a second manager changing an owned field conflicts.
    ssa = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "1"}}
    ct = "application/apply-patch+yaml"
    v1.patch_namespaced_config_map("ssa", ns, ssa, field_manager="alice", _content_type=ct)
    ssa["data"]["k"] = "2"
    e = expect_status(409, v1.patch_namespaced_config_map, "ssa", ns, ssa, field_manager="bob", _content_type=ct)
    status = json.loads(e.body)
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .data.k', status
    assert status["details"]["causes"] == [
        {"field": ".data.k", "message": 'conflict with "alice"', "reason": "FieldManagerConflict"}
    ], status
    forced = v1.patch_namespaced_config_map("ssa", ns, ssa, field_manager="bob", force=True, _content_type=ct)
    assert forced.data["k"] == "2"
    managers = sorted(m.manager for m in forced.metadata.managed_fields)
    assert "bob" in managers, managers

    e = expect_status(422, v1.create_namespaced_pod, ns, {"metadata": {"name": "bad"}, "spec": {"containers": []}})
    assert "spec.containers: Required value" in e.body, e.body
    print("python client: all checks passed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"python client check failed: {e}", file=sys.stderr)
        raise

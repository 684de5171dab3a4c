"""The Python client's DynamicClient against custom resources.

Run by tests/crd.rs with KUBECONFIG pointing at the server: creates a
CustomResourceDefinition, waits (with a deadline) for Established, then
creates, gets, lists, patches, watches and deletes custom objects through
discovery; exits non-zero on the first failed check.
"""

import os
import time

from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

GROUP = "py.example.com"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gizmos.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "shortNames": ["gz"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer", "default": 2},
                                    "name": {"type": "string"},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def wait_for(what, check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def main():
    config.load_kube_config(os.environ["KUBECONFIG"])
    dyn = DynamicClient(client.ApiClient())
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(body=CRD)

    def established():
        crd = crds.get(name=f"gizmos.{GROUP}")
        conditions = (crd.status or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for("Established", established)

    def resource():
        try:
            dyn.resources.invalidate_cache()
            return dyn.resources.get(api_version=f"{GROUP}/v1", kind="Gizmo")
        except ResourceNotFoundError:
            return None

    gizmos = wait_for("discovery of gizmos", resource)
    assert gizmos.namespaced and gizmos.short_names == ["gz"], (gizmos.namespaced, gizmos.short_names)

    made = gizmos.create(
        namespace="default",
        body={"apiVersion": f"{GROUP}/v1", "kind": "Gizmo", "metadata": {"name": "g1"}, "spec": {"name": "one"}},
    )
    assert made.spec.size == 2, made.spec
    got = gizmos.get(name="g1", namespace="default")
    assert got.metadata.uid == made.metadata.uid
    listed = gizmos.get(namespace="default")
    assert [i.metadata.name for i in listed.items] == ["g1"], listed
    patched = gizmos.patch(
        name="g1",
        namespace="default",
        body={"spec": {"size": 5}},
        content_type="application/merge-patch+json",
    )
    assert patched.spec.size == 5, patched.spec

    seen = []
    for event in gizmos.watch(namespace="default", timeout=5):
        seen.append((event["type"], event["object"].metadata.name))
        break
    assert seen == [("ADDED", "g1")], seen

    gizmos.delete(name="g1", namespace="default")
    wait_for("g1 gone", lambda: not gizmos.get(namespace="default").items)

    crds.delete(name=f"gizmos.{GROUP}")

    def gone():
        return all(c.metadata.name != f"gizmos.{GROUP}" for c in crds.get().items)

    wait_for("CRD gone", gone)
    print("ok")


if __name__ == "__main__":
    main()

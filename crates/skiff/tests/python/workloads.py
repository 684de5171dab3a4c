"""The Python `kubernetes` client driving workloads on a real Skiff cluster:
a Deployment created, waited for and rolled, a DaemonSet, a Job to
Complete, and a Deployment deleted with Foreground propagation.

Run by tests/controllers.rs with KUBECONFIG and NAMESPACE set; exits
non-zero on the first failed check. Every wait is a watch with a timeout.
"""

import os
import sys

from kubernetes import client, config, watch

TIMEOUT = 180


def wait(list_fn, name, ns, check, what):
    """Watches `list_fn` until the object `name` passes `check`."""
    for event in watch.Watch().stream(
        list_fn, ns, field_selector=f"metadata.name={name}", timeout_seconds=TIMEOUT
    ):
        obj = event["object"]
        if event["type"] != "DELETED" and check(obj):
            return obj
    raise AssertionError(f"{name} never {what} within {TIMEOUT}s")


def container(command):
    return {"name": "c", "image": "busybox", "imagePullPolicy": "IfNotPresent", "command": command}


def main():
    config.load_kube_config(os.environ["KUBECONFIG"])
    ns = os.environ["NAMESPACE"]
    apps = client.AppsV1Api()
    batch = client.BatchV1Api()

    labels = {"app": "py-web"}
    apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "py-web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [container(["sleep", "3600"])],
            }},
        },
    })

    def rolled(d):
        s = d.status
        return s is not None and (s.observed_generation == d.metadata.generation and s.updated_replicas == 2
                and s.replicas == 2 and s.available_replicas == 2)

    d = wait(apps.list_namespaced_deployment, "py-web", ns, rolled, "became available")
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "1", d.metadata.annotations
    apps.patch_namespaced_deployment("py-web", ns, {"spec": {"template": {"spec": {
        "containers": [dict(container(["sleep", "3601"]))]}}}})
    d = wait(apps.list_namespaced_deployment, "py-web", ns,
             lambda d: rolled(d) and d.metadata.annotations.get("deployment.kubernetes.io/revision") == "2",
             "rolled to revision 2")
    sets = apps.list_namespaced_replica_set(ns, label_selector="app=py-web").items
    assert sorted(rs.spec.replicas for rs in sets) == [0, 2], [(rs.metadata.name, rs.spec.replicas) for rs in sets]

    apps.create_namespaced_daemon_set(ns, {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "py-agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "py-agent"}},
            "template": {"metadata": {"labels": {"app": "py-agent"}}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [container(["sleep", "3600"])],
            }},
        },
    })
    wait(apps.list_namespaced_daemon_set, "py-agent", ns,
         lambda ds: ds.status is not None and ds.status.desired_number_scheduled == 1
         and ds.status.number_ready == 1,
         "had its pod ready")

    batch.create_namespaced_job(ns, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "py-job"},
        "spec": {"completions": 2, "template": {"spec": {
            "restartPolicy": "Never", "containers": [container(["true"])]}}},
    })

    def complete(j):
        conditions = (j.status.conditions if j.status else None) or []
        return any(c.type == "Complete" and c.status == "True" for c in conditions)

    j = wait(batch.list_namespaced_job, "py-job", ns, complete, "completed")
    assert j.status.succeeded == 2, j.status

    # Foreground: the Deployment goes after its ReplicaSets and pods.
    apps.delete_namespaced_deployment(
        "py-web", ns, body=client.V1DeleteOptions(propagation_policy="Foreground"))
    for event in watch.Watch().stream(apps.list_namespaced_deployment, ns,
                                      field_selector="metadata.name=py-web", timeout_seconds=TIMEOUT):
        if event["type"] == "DELETED":
            break
    else:
        raise AssertionError("the deployment was never deleted")
    left = apps.list_namespaced_replica_set(ns, label_selector="app=py-web").items
    assert not left, [rs.metadata.name for rs in left]
    print("ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)

//! End to end, as root, on real containerd: PersistentVolumeClaims on the
//! built-in local-path provisioner ([lifecycle] deliverable 6). A claim of
//! the default class waits for its first consumer, is provisioned on the
//! node the pod is scheduled to and bound; the pod's data survives the
//! pod's deletion and re-creation; deleting the claim deletes the volume
//! and the node removes its directory. A claim of an Immediate class
//! nobody provisions keeps its pod Pending with upstream's message.

mod cluster;

use std::time::Duration;

use cluster::{wait_for, Cluster, Options};

const CLAIM: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
"#;

fn pod(name: &str, command: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "{command}"]
    volumeMounts: [{{name: d, mountPath: /data}}]
  volumes:
  - {{name: d, persistentVolumeClaim: {{claimName: data}}}}
"#
    )
}

#[test]
fn local_path_claims_bind_on_first_use_and_keep_their_data() {
    let c = Cluster::start(Options::default());
    let class = c.kubectl(&["get", "storageclass", "--no-headers"]);
    assert!(
        class.starts_with("local-path (default)"),
        "the default class: {class}"
    );
    c.apply(CLAIM);
    c.wait_event("data", "WaitForFirstConsumer", 30);
    assert_eq!(
        c.kubectl(&["get", "pvc", "data", "-o", "jsonpath={.status.phase}"]),
        "Pending"
    );

    c.apply(&pod("writer", "echo kept > /data/file"));
    c.wait("pod/writer", "jsonpath={.status.phase}=Succeeded", 90);
    c.wait("pvc/data", "jsonpath={.status.phase}=Bound", 30);
    let pv = c.kubectl(&["get", "pvc", "data", "-o", "jsonpath={.spec.volumeName}"]);
    let path = c.kubectl(&["get", "pv", &pv, "-o", "jsonpath={.spec.hostPath.path}"]);
    let node = c.kubectl(&[
        "get",
        "pv",
        &pv,
        "-o",
        "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}",
    ]);
    assert_eq!(node, c.node(), "pinned to the pod's node");
    assert!(
        path.starts_with(&c.data_dir.display().to_string()),
        "under the node's data dir: {path}"
    );
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&path).join("file")).unwrap_or_default(),
        "kept\n"
    );

    c.kubectl(&["delete", "pod", "writer", "--timeout=60s"]);
    c.apply(&pod("reader", "cat /data/file"));
    c.wait("pod/reader", "jsonpath={.status.phase}=Succeeded", 90);
    assert_eq!(c.kubectl(&["logs", "reader"]), "kept\n");
    c.kubectl(&["delete", "pod", "reader", "--timeout=60s"]);

    // Reclaim policy Delete: the volume goes, and so does its directory.
    c.kubectl(&["delete", "pvc", "data", "--timeout=60s"]);
    wait_for("the volume to be deleted", Duration::from_secs(60), || {
        let out = c.kubectl_output(&["get", "pv", &pv]);
        (!out.status.success()).then_some(())
    });
    assert!(
        !std::path::Path::new(&path).exists(),
        "{path} is removed by the node"
    );
}

#[test]
fn an_unbound_immediate_claim_keeps_its_pod_pending() {
    let c = Cluster::start(Options::default());
    c.apply(&format!(
        r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: manual}}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data}}
spec:
  storageClassName: manual
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 64Mi}}}}
---{}"#,
        pod("waits", "true")
    ));
    // The first try may race the claim's creation ("not found"); the
    // claim's arrival retries the pod.
    let message = wait_for("the unbound-claim verdict", Duration::from_secs(60), || {
        let m = c.wait_event("waits", "FailedScheduling", 60);
        m.contains("0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
            .then_some(m)
    });
    assert!(
        message.contains("preemption: 0/1 nodes are available"),
        "{message}"
    );
    assert_eq!(c.pod_field("waits", "{.status.phase}"), "Pending");
}

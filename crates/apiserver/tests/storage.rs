//! PersistentVolumes, PersistentVolumeClaims and StorageClasses with the
//! real kubectl (1.30 and 1.33): `apply`, the `get pv,pvc,sc` tables with
//! kubectl's columns and the `(default)` class, `explain`, discovery,
//! upstream's validation messages, the default class filled in by the
//! DefaultStorageClass admission plugin, the claim spec's immutability,
//! the status subresource, and deletion that does not wait on finalizers.

mod support;

use support::{ok, within, Kubectl, TestServer};

/// `kubectl apply -f -` of `yaml`: (success, stdout, stderr).
async fn apply(k: &Kubectl, yaml: &str) -> (bool, String, String) {
    let out = within(
        "apply",
        k.run_stdin(&["--request-timeout=30s", "apply", "-f", "-"], yaml),
    )
    .await;
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

/// The cells of `row` under the columns `names` of `header`, as kubectl's
/// tab writer lines them up (a column starts where its name does).
fn cells(header: &str, row: &str, names: &[&str]) -> Vec<String> {
    let starts: Vec<usize> = names
        .iter()
        .scan(0, |from, name| {
            let at = *from + header[*from..].find(name).expect("column in header");
            *from = at + name.len();
            Some(at)
        })
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            let end = starts.get(i + 1).copied().unwrap_or(row.len());
            row.get(start..end.min(row.len()))
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .collect()
}

const PV_COLUMNS: &[&str] = &[
    "NAME",
    "CAPACITY",
    "ACCESS MODES",
    "RECLAIM POLICY",
    "STATUS",
    "CLAIM",
    "STORAGECLASS",
    "VOLUMEATTRIBUTESCLASS",
    "REASON",
    "AGE",
];
const PVC_COLUMNS: &[&str] = &[
    "NAME",
    "STATUS",
    "VOLUME",
    "CAPACITY",
    "ACCESS MODES",
    "STORAGECLASS",
    "VOLUMEATTRIBUTESCLASS",
    "AGE",
];
const SC_COLUMNS: &[&str] = &[
    "NAME",
    "PROVISIONER",
    "RECLAIMPOLICY",
    "VOLUMEBINDINGMODE",
    "ALLOWVOLUMEEXPANSION",
    "AGE",
];

const OBJECTS: &str = r#"apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: example.com/standard
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
provisioner: example.com/fast
parameters:
  type: ssd
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv1
spec:
  capacity:
    storage: 1Gi
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  storageClassName: manual
  hostPath:
    path: /data/pv1
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: classless
spec:
  storageClassName: ""
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 2Gi
"#;

/// One table of `kubectl get pv,pvc,sc` output: its header and the row
/// whose first cell starts with `name`.
fn table_row<'a>(out: &'a str, first_column: &str, name: &str) -> (&'a str, &'a str) {
    let mut header = None;
    for line in out.lines() {
        if line.starts_with("NAME ") {
            header = Some(line);
        } else if line.starts_with(name) {
            if let Some(h) = header.filter(|h| h.contains(first_column)) {
                return (h, line);
            }
        }
    }
    panic!("no {name} row under a header with {first_column} in:\n{out}");
}

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);

    // Discovery: resources, short names, scope, kinds.
    let resources = ok(&k, &["api-resources", "--no-headers"]).await;
    for (name, short, version, namespaced, kind) in [
        ("persistentvolumes", "pv", "v1", "false", "PersistentVolume"),
        (
            "persistentvolumeclaims",
            "pvc",
            "v1",
            "true",
            "PersistentVolumeClaim",
        ),
        (
            "storageclasses",
            "sc",
            "storage.k8s.io/v1",
            "false",
            "StorageClass",
        ),
    ] {
        let line = resources
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("kubectl 1.{minor}: no {name} in:\n{resources}"));
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            fields,
            [name, short, version, namespaced, kind],
            "1.{minor}"
        );
    }
    let verbs = ok(
        &k,
        &["api-resources", "--api-group=storage.k8s.io", "-o", "wide"],
    )
    .await;
    // (The group also serves the CSI kinds, which widen the columns.)
    assert!(
        verbs
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..]
                == [
                    "storageclasses",
                    "sc",
                    "storage.k8s.io/v1",
                    "false",
                    "StorageClass",
                    "create,delete,deletecollection,get,list,patch,update,watch"
                ]),
        "{verbs}"
    );

    // Apply: a default class, a volume and claims.
    let (success, stdout, stderr) = apply(&k, OBJECTS).await;
    assert!(success, "kubectl 1.{minor} apply: {stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "storageclass.storage.k8s.io/standard created",
            "storageclass.storage.k8s.io/fast created",
            "persistentvolume/pv1 created",
            "persistentvolumeclaim/data created",
            "persistentvolumeclaim/classless created",
        ]
    );
    let (_, again, _) = apply(&k, OBJECTS).await;
    assert!(
        again.lines().all(|l| l.ends_with(" unchanged")),
        "kubectl 1.{minor}: a re-apply changed something:\n{again}"
    );

    // DefaultStorageClass admission: no class gets the default, "" stays.
    let class = ok(
        &k,
        &[
            "get",
            "pvc",
            "data",
            "-o",
            "jsonpath={.spec.storageClassName}",
        ],
    )
    .await;
    assert_eq!(class, "standard");
    let class = ok(
        &k,
        &[
            "get",
            "pvc",
            "classless",
            "-o",
            "jsonpath={.spec.storageClassName}|{.spec.volumeMode}|{.status.phase}",
        ],
    )
    .await;
    assert_eq!(class, "|Filesystem|Pending");
    let pv = ok(
        &k,
        &[
            "get",
            "pv",
            "pv1",
            "-o",
            "jsonpath={.spec.persistentVolumeReclaimPolicy}|{.spec.volumeMode}|{.spec.hostPath.type}|{.status.phase}",
        ],
    )
    .await;
    assert_eq!(pv, "Retain|Filesystem||Pending");
    let transition = ok(
        &k,
        &[
            "get",
            "pv",
            "pv1",
            "-o",
            "jsonpath={.status.lastPhaseTransitionTime}",
        ],
    )
    .await;
    assert!(transition.ends_with('Z'), "{transition}");
    let sc = ok(
        &k,
        &[
            "get",
            "sc",
            "fast",
            "-o",
            "jsonpath={.reclaimPolicy}|{.volumeBindingMode}",
        ],
    )
    .await;
    assert_eq!(sc, "Delete|Immediate");

    // The tables, with kubectl's columns.
    let tables = ok(&k, &["get", "pv,pvc,sc"]).await;
    let (header, row) = table_row(&tables, "RECLAIM POLICY", "persistentvolume/pv1");
    assert_eq!(
        cells(header, row, PV_COLUMNS)[..9],
        [
            "persistentvolume/pv1",
            "1Gi",
            "RWO,ROX",
            "Retain",
            "Pending",
            "",
            "manual",
            "<unset>",
            ""
        ],
        "kubectl 1.{minor}:\n{tables}"
    );
    let (header, row) = table_row(&tables, "VOLUME ", "persistentvolumeclaim/data");
    assert_eq!(
        cells(header, row, PVC_COLUMNS)[..7],
        [
            "persistentvolumeclaim/data",
            "Pending",
            "",
            "",
            "",
            "standard",
            "<unset>"
        ],
        "kubectl 1.{minor}:\n{tables}"
    );
    let (header, row) = table_row(
        &tables,
        "PROVISIONER",
        "storageclass.storage.k8s.io/standard",
    );
    assert_eq!(
        cells(header, row, SC_COLUMNS)[..5],
        [
            "storageclass.storage.k8s.io/standard (default)",
            "example.com/standard",
            "Delete",
            "WaitForFirstConsumer",
            "false"
        ],
        "kubectl 1.{minor}:\n{tables}"
    );
    let (header, row) = table_row(&tables, "PROVISIONER", "storageclass.storage.k8s.io/fast");
    assert_eq!(
        cells(header, row, SC_COLUMNS)[..5],
        [
            "storageclass.storage.k8s.io/fast",
            "example.com/fast",
            "Delete",
            "Immediate",
            "true"
        ]
    );
    let wide = ok(&k, &["get", "pvc", "-o", "wide"]).await;
    assert!(
        wide.lines().next().unwrap().ends_with("AGE   VOLUMEMODE"),
        "{wide}"
    );

    // explain, from the OpenAPI v3 documents.
    let explained = ok(&k, &["explain", "pvc.spec"]).await;
    assert!(
        explained.contains("FIELD: spec <PersistentVolumeClaimSpec>")
            && explained.contains("accessModes\t<[]string>")
            && explained.contains("storageClassName\t<string>"),
        "kubectl 1.{minor}:\n{explained}"
    );

    // Upstream's validation messages.
    let (success, _, err) = apply(
        &k,
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: bad}\nspec: {}\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("The PersistentVolumeClaim \"bad\" is invalid: ")
            && err.contains("spec.accessModes: Required value: at least 1 access mode is required")
            && err.contains("spec.resources[storage]: Required value"),
        "kubectl 1.{minor}: {err}"
    );
    let (success, _, err) = apply(
        &k,
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: nosource}\n\
         spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce]}\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains(
            "The PersistentVolume \"nosource\" is invalid: spec: Required value: must specify a volume type"
        ),
        "kubectl 1.{minor}: {err}"
    );
    let (success, _, err) = apply(
        &k,
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\n\
         provisioner: example.com/other\nparameters: {type: ssd}\nallowVolumeExpansion: true\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("The StorageClass \"fast\" is invalid: provisioner: Forbidden: updates to provisioner are forbidden."),
        "kubectl 1.{minor}: {err}"
    );

    // A claim's spec is immutable but for expanding a bound claim.
    let changed = OBJECTS.split("---\n").nth(3).unwrap().replace(
        "accessModes: [ReadWriteOnce]",
        "accessModes: [ReadWriteMany]",
    );
    let (success, _, err) = apply(&k, &changed).await;
    assert!(!success, "kubectl 1.{minor}: the access modes changed");
    assert!(
        err.contains("The PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"),
        "kubectl 1.{minor}: {err}"
    );
    let modes = ok(
        &k,
        &["get", "pvc", "data", "-o", "jsonpath={.spec.accessModes}"],
    )
    .await;
    assert_eq!(modes, r#"["ReadWriteOnce"]"#);

    // Status: the subresource keeps the spec and stamps the transition.
    let patched = ok(
        &k,
        &[
            "patch",
            "pv",
            "pv1",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"spec":{"persistentVolumeReclaimPolicy":"Delete"},"status":{"phase":"Available"}}"#,
            "-o",
            "jsonpath={.spec.persistentVolumeReclaimPolicy}|{.status.phase}",
        ],
    )
    .await;
    assert_eq!(patched, "Retain|Available");
    let status = ok(
        &k,
        &[
            "patch",
            "pvc",
            "data",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Bound","capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"]}}"#,
            "-o",
            "jsonpath={.status.phase}",
        ],
    )
    .await;
    assert_eq!(status, "Bound");
    // The main resource keeps the status it has.
    let kept = ok(
        &k,
        &[
            "patch",
            "pvc",
            "data",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"a":"b"}},"status":{"phase":"Lost"}}"#,
            "-o",
            "jsonpath={.status.phase}",
        ],
    )
    .await;
    assert_eq!(kept, "Bound");
    // Bound: binding to the volume once, then expansion, are allowed.
    let bound = ok(
        &k,
        &[
            "patch",
            "pvc",
            "data",
            "--type=merge",
            "-p",
            r#"{"spec":{"volumeName":"pv1","resources":{"requests":{"storage":"2Gi"}}}}"#,
            "-o",
            "jsonpath={.spec.volumeName}|{.spec.resources.requests.storage}",
        ],
    )
    .await;
    assert_eq!(bound, "pv1|2Gi");
    let pvc = ok(&k, &["get", "pvc", "data"]).await;
    let (header, row) = table_row(&pvc, "VOLUME ", "data");
    assert_eq!(
        cells(header, row, PVC_COLUMNS)[..5],
        ["data", "Bound", "pv1", "1Gi", "RWO"],
        "kubectl 1.{minor}:\n{pvc}"
    );

    // describe, which reads them with kubectl's typed clients.
    for (what, expect) in [
        (["sc", "standard"], ["IsDefaultClass:", "Yes"]),
        (["pv", "pv1"], ["Reclaim Policy:", "Retain"]),
        (["pvc", "data"], ["StorageClass:", "standard"]),
    ] {
        let described = ok(&k, &["describe", what[0], what[1]]).await;
        assert!(
            described.lines().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.len() >= 2 && l.starts_with(expect[0]) && words.last() == Some(&expect[1])
            }),
            "kubectl 1.{minor} describe {what:?}:\n{described}"
        );
    }

    // Deletion is immediate: no finalizers are added.
    let finalizers = ok(
        &k,
        &[
            "get",
            "pvc",
            "data",
            "-o",
            "jsonpath={.metadata.finalizers}",
        ],
    )
    .await;
    assert_eq!(finalizers, "");
    let deleted = ok(
        &k,
        &[
            "delete",
            "pvc/data",
            "pvc/classless",
            "pv/pv1",
            "sc/fast",
            "--wait",
            "--timeout=30s",
        ],
    )
    .await;
    assert!(
        deleted.contains("persistentvolumeclaim \"data\" deleted")
            && deleted.contains("persistentvolume \"pv1\" deleted")
            && deleted.contains("storageclass.storage.k8s.io \"fast\" deleted"),
        "{deleted}"
    );
    let left = ok(&k, &["get", "pv,pvc", "-o", "name"]).await;
    assert_eq!(left, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_with_kubectl_1_30() {
    scenario(30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_with_kubectl_1_33() {
    scenario(33).await;
}

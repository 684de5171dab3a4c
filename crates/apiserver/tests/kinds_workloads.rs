//! StatefulSets, DaemonSets, ReplicationControllers, PodTemplates,
//! ControllerRevisions, CronJobs, HorizontalPodAutoscalers (autoscaling/v2
//! and v1) and ComponentStatuses with the real kubectl (1.27, 1.30 and
//! 1.33): discovery, `apply`, `create cronjob`, the `get` tables with
//! kubectl's columns, `describe`, `scale`, `autoscale`, `get cs` with its
//! deprecation warning, upstream's defaults and validation messages, and
//! status subresources that leave the spec alone.

mod support;

use support::{fails, ok, run, within, Kubectl, TestServer};

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
            let at = *from
                + header[*from..]
                    .find(name)
                    .unwrap_or_else(|| panic!("column {name} in {header}"));
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

/// The row of `out` whose first cell is `name`, with the header above it.
fn row<'a>(out: &'a str, name: &str) -> (&'a str, &'a str) {
    let mut header = None;
    for line in out.lines() {
        if line.starts_with("NAME ") {
            header = Some(line);
        } else if line.split_whitespace().next() == Some(name) {
            if let Some(h) = header {
                return (h, line);
            }
        }
    }
    panic!("no {name} row in:\n{out}");
}

const OBJECTS: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: web
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      nodeSelector: {role: edge}
      containers:
      - name: agent
        image: busybox:1.36
---
apiVersion: v1
kind: ReplicationController
metadata:
  name: legacy
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: legacy}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: tick
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: tick
            image: busybox:1.36
            command: [date]
---
apiVersion: v1
kind: PodTemplate
metadata:
  name: tpl
template:
  metadata:
    labels: {tier: batch}
  spec:
    containers:
    - name: work
      image: busybox:1.36
---
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: web-7d4b9c
  ownerReferences:
  - apiVersion: apps/v1
    kind: StatefulSet
    name: web
    uid: 00000000-0000-0000-0000-000000000001
    controller: true
data:
  spec:
    template:
      metadata:
        labels: {app: web}
revision: 1
"#;

async fn jsonpath(k: &Kubectl, what: &[&str], path: &str) -> String {
    let expr = format!("jsonpath={path}");
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", &expr]);
    ok(k, &args).await
}

async fn discovery(k: &Kubectl, minor: u32) {
    let resources = ok(k, &["api-resources", "--no-headers"]).await;
    for expect in [
        "replicationcontrollers rc v1 true ReplicationController",
        "podtemplates v1 true PodTemplate",
        "componentstatuses cs v1 false ComponentStatus",
        "statefulsets sts apps/v1 true StatefulSet",
        "daemonsets ds apps/v1 true DaemonSet",
        "controllerrevisions apps/v1 true ControllerRevision",
        "cronjobs cj batch/v1 true CronJob",
        "horizontalpodautoscalers hpa autoscaling/v2 true HorizontalPodAutoscaler",
    ] {
        let name = expect.split(' ').next().unwrap_or_default();
        let line = resources
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("kubectl 1.{minor}: no {name} in:\n{resources}"));
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>().join(" "),
            expect,
            "kubectl 1.{minor}"
        );
    }
    let versions = ok(k, &["api-versions"]).await;
    assert!(
        versions.contains("autoscaling/v1\n") && versions.contains("autoscaling/v2\n"),
        "{versions}"
    );
}

async fn defaults(k: &Kubectl, minor: u32) {
    let sts = jsonpath(
        k,
        &["sts", "web"],
        "{.spec.replicas}|{.spec.podManagementPolicy}|{.spec.updateStrategy.type}|{.spec.updateStrategy.rollingUpdate.partition}|{.spec.persistentVolumeClaimRetentionPolicy.whenDeleted}|{.spec.revisionHistoryLimit}|{.spec.volumeClaimTemplates[0].spec.volumeMode}|{.spec.template.spec.restartPolicy}|{.status.replicas}|{.metadata.generation}",
    )
    .await;
    assert_eq!(
        sts, "1|OrderedReady|RollingUpdate|0|Retain|10|Filesystem|Always|0|1",
        "kubectl 1.{minor}"
    );
    let ds = jsonpath(
        k,
        &["ds", "agent"],
        r"{.spec.updateStrategy.type}|{.spec.updateStrategy.rollingUpdate.maxUnavailable}|{.spec.updateStrategy.rollingUpdate.maxSurge}|{.spec.revisionHistoryLimit}|{.metadata.annotations.deprecated\.daemonset\.template\.generation}|{.status.numberReady}",
    )
    .await;
    assert_eq!(ds, "RollingUpdate|1|0|10|1|0", "kubectl 1.{minor}");
    let rc = jsonpath(
        k,
        &["rc", "legacy"],
        "{.spec.selector.app}|{.metadata.labels.app}|{.spec.replicas}|{.status.replicas}",
    )
    .await;
    assert_eq!(rc, "legacy|legacy|2|0", "kubectl 1.{minor}");
    let cj = jsonpath(
        k,
        &["cj", "tick"],
        "{.spec.concurrencyPolicy}|{.spec.suspend}|{.spec.successfulJobsHistoryLimit}|{.spec.failedJobsHistoryLimit}|{.spec.jobTemplate.spec.template.spec.terminationGracePeriodSeconds}",
    )
    .await;
    assert_eq!(cj, "Allow|false|3|1|30", "kubectl 1.{minor}");
    let tpl = jsonpath(
        k,
        &["podtemplates", "tpl"],
        "{.template.spec.restartPolicy}|{.template.spec.containers[0].imagePullPolicy}",
    )
    .await;
    assert_eq!(tpl, "Always|IfNotPresent", "kubectl 1.{minor}");
}

async fn tables(k: &Kubectl, minor: u32) {
    let out = ok(k, &["get", "sts,ds,rc,cj"]).await;
    let (h, r) = row(&out, "statefulset.apps/web");
    assert_eq!(
        cells(h, r, &["NAME", "READY", "AGE"])[..2],
        ["statefulset.apps/web", "0/1"],
        "kubectl 1.{minor}:\n{out}"
    );
    let (h, r) = row(&out, "daemonset.apps/agent");
    assert_eq!(
        cells(
            h,
            r,
            &[
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE SELECTOR",
                "AGE"
            ]
        )[..7],
        ["daemonset.apps/agent", "0", "0", "0", "0", "0", "role=edge"],
        "kubectl 1.{minor}:\n{out}"
    );
    let (h, r) = row(&out, "replicationcontroller/legacy");
    assert_eq!(
        cells(h, r, &["NAME", "DESIRED", "CURRENT", "READY", "AGE"])[..4],
        ["replicationcontroller/legacy", "2", "0", "0"],
        "kubectl 1.{minor}:\n{out}"
    );
    let (h, r) = row(&out, "cronjob.batch/tick");
    assert_eq!(
        cells(
            h,
            r,
            &[
                "NAME",
                "SCHEDULE",
                "TIMEZONE",
                "SUSPEND",
                "ACTIVE",
                "LAST SCHEDULE",
                "AGE"
            ]
        )[..6],
        [
            "cronjob.batch/tick",
            "*/5 * * * *",
            "<none>",
            "False",
            "0",
            "<none>"
        ],
        "kubectl 1.{minor}:\n{out}"
    );
    let out = ok(k, &["get", "podtemplates,controllerrevisions"]).await;
    let (h, r) = row(&out, "podtemplate/tpl");
    assert_eq!(
        cells(h, r, &["NAME", "CONTAINERS", "IMAGES", "POD LABELS"]),
        ["podtemplate/tpl", "work", "busybox:1.36", "tier=batch"],
        "kubectl 1.{minor}:\n{out}"
    );
    let (h, r) = row(&out, "controllerrevision.apps/web-7d4b9c");
    assert_eq!(
        cells(h, r, &["NAME", "CONTROLLER", "REVISION", "AGE"])[..3],
        [
            "controllerrevision.apps/web-7d4b9c",
            "statefulset.apps/web",
            "1"
        ],
        "kubectl 1.{minor}:\n{out}"
    );
    let wide = ok(k, &["get", "rc", "-o", "wide"]).await;
    let (h, r) = row(&wide, "legacy");
    assert_eq!(
        cells(h, r, &["CONTAINERS", "IMAGES", "SELECTOR"]),
        ["nginx", "nginx:1.27", "app=legacy"],
        "kubectl 1.{minor}:\n{wide}"
    );
    // `get all` lists the kinds in the `all` category.
    let all = ok(k, &["get", "all", "-o", "name"]).await;
    for name in [
        "statefulset.apps/web",
        "daemonset.apps/agent",
        "replicationcontroller/legacy",
        "cronjob.batch/tick",
    ] {
        assert!(all.lines().any(|l| l == name), "kubectl 1.{minor}:\n{all}");
    }
}

async fn describe(k: &Kubectl, minor: u32) {
    for (what, expect) in [
        (["statefulset", "web"], "Pods Status:"),
        (["daemonset", "agent"], "Node-Selector:"),
        (["rc", "legacy"], "Replicas:"),
        (["cronjob", "tick"], "Schedule:"),
        (["podtemplate", "tpl"], "Image Pull Policy:  IfNotPresent"),
    ] {
        let described = ok(k, &["describe", what[0], what[1]]).await;
        assert!(
            described.contains("Name:") && described.contains(expect),
            "kubectl 1.{minor} describe {what:?}:\n{described}"
        );
    }
}

async fn scale_and_status(k: &Kubectl, minor: u32) {
    let out = ok(k, &["scale", "sts", "web", "--replicas=3"]).await;
    assert_eq!(out.trim(), "statefulset.apps/web scaled");
    let out = ok(k, &["scale", "rc", "legacy", "--replicas=4"]).await;
    assert_eq!(out.trim(), "replicationcontroller/legacy scaled");
    let replicas = jsonpath(
        k,
        &["sts", "web"],
        "{.spec.replicas}|{.metadata.generation}",
    )
    .await;
    assert_eq!(replicas, "3|2", "kubectl 1.{minor}");
    assert_eq!(
        jsonpath(k, &["rc", "legacy"], "{.spec.replicas}").await,
        "4"
    );
    // The Scale itself, with the selector upstream renders.
    let scale = ok(
        k,
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/replicationcontrollers/legacy/scale",
        ],
    )
    .await;
    assert!(
        scale.contains(r#""selector":"app=legacy""#) && scale.contains(r#""replicas":4"#),
        "{scale}"
    );
    // The status subresource changes status, not spec.
    let patched = ok(
        k,
        &[
            "patch",
            "sts",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":9},"status":{"replicas":2,"readyReplicas":1}}"#,
            "-o",
            "jsonpath={.spec.replicas}|{.status.replicas}|{.status.readyReplicas}",
        ],
    )
    .await;
    assert_eq!(patched, "3|2|1", "kubectl 1.{minor}");
    let out = ok(k, &["get", "sts", "web"]).await;
    let (h, r) = row(&out, "web");
    assert_eq!(cells(h, r, &["NAME", "READY", "AGE"])[..2], ["web", "1/3"]);
    let refused = fails(
        k,
        &[
            "patch",
            "sts",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"readyReplicas":5}}"#,
        ],
    )
    .await;
    assert!(
        refused.contains(
            "status.readyReplicas: Invalid value: 5: cannot be greater than status.replicas"
        ),
        "kubectl 1.{minor}: {refused}"
    );
    let patched = ok(
        k,
        &[
            "patch",
            "cj",
            "tick",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":true},"status":{"lastScheduleTime":"2024-01-01T00:00:00Z"}}"#,
            "-o",
            "jsonpath={.spec.suspend}|{.status.lastScheduleTime}",
        ],
    )
    .await;
    assert_eq!(patched, "false|2024-01-01T00:00:00Z", "kubectl 1.{minor}");
    // The main resource keeps the status it has.
    let kept = ok(
        k,
        &[
            "patch",
            "ds",
            "agent",
            "--type=merge",
            "-p",
            r#"{"status":{"numberReady":7}}"#,
            "-o",
            "jsonpath={.status.numberReady}",
        ],
    )
    .await;
    assert_eq!(kept, "0", "kubectl 1.{minor}");
    // A new pod template bumps the DaemonSet's template generation.
    ok(k, &["set", "image", "ds/agent", "agent=busybox:1.37"]).await;
    let generations = jsonpath(
        k,
        &["ds", "agent"],
        r"{.metadata.annotations.deprecated\.daemonset\.template\.generation}|{.metadata.generation}",
    )
    .await;
    assert_eq!(generations, "2|2", "kubectl 1.{minor}");
}

async fn validation(k: &Kubectl, minor: u32) {
    let (success, _, err) = apply(
        k,
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: bad}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: other}}\n    spec: {containers: [{name: c, image: nginx}]}\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("The StatefulSet \"bad\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"),
        "kubectl 1.{minor}: {err}"
    );
    let (success, _, err) = apply(
        k,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: badcron}\nspec:\n  schedule: bogus\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers: [{name: c, image: busybox}]\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("The CronJob \"badcron\" is invalid: spec.schedule: Invalid value: \"bogus\": expected exactly 5 fields, found 1: [bogus]"),
        "kubectl 1.{minor}: {err}"
    );
    let (success, _, err) = apply(
        k,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: always}\nspec:\n  schedule: '@hourly'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: c, image: busybox}]\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""),
        "kubectl 1.{minor}: {err}"
    );
    let (success, _, err) = apply(
        k,
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: badds}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""),
        "kubectl 1.{minor}: {err}"
    );
    let (success, _, err) = apply(
        k,
        "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: badrc}\nspec:\n  selector: {app: one}\n  template:\n    metadata: {labels: {app: two}}\n    spec: {containers: [{name: c, image: nginx}]}\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("The ReplicationController \"badrc\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"two\"}: `selector` does not match template `labels`"),
        "kubectl 1.{minor}: {err}"
    );
    // An update of a StatefulSet may not touch most of its spec.
    let err = fails(
        k,
        &[
            "patch",
            "sts",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"serviceName":"other"}}"#,
        ],
    )
    .await;
    assert!(
        err.contains("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"),
        "kubectl 1.{minor}: {err}"
    );
    let err = fails(
        k,
        &[
            "patch",
            "ds",
            "agent",
            "--type=merge",
            "-p",
            r#"{"spec":{"selector":{"matchLabels":{"app":"other"}},"template":{"metadata":{"labels":{"app":"other"}}}}}"#,
        ],
    )
    .await;
    assert!(
        err.contains("spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"other\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"),
        "kubectl 1.{minor}: {err}"
    );
    let err = fails(
        k,
        &[
            "patch",
            "controllerrevision",
            "web-7d4b9c",
            "--type=merge",
            "-p",
            r#"{"data":{"other":1}}"#,
        ],
    )
    .await;
    assert!(
        err.contains("data: Invalid value: ") && err.contains("field is immutable"),
        "kubectl 1.{minor}: {err}"
    );
}

async fn cronjob_create(k: &Kubectl, minor: u32) {
    let out = run(
        k,
        &[
            "create",
            "cronjob",
            "hello",
            "--image=busybox:1.36",
            "--schedule=*/1 * * * *",
            "-v=8",
            "--",
            "date",
        ],
    )
    .await;
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl 1.{minor}: {log}");
    if minor >= 32 {
        // client-go's typed client: the body is protobuf.
        assert!(
            log.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "kubectl 1.{minor} create cronjob sends protobuf:\n{log}"
        );
    }
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.trim(),
        "cronjob.batch/hello created",
        "kubectl 1.{minor}"
    );
    let got = jsonpath(
        k,
        &["cj", "hello"],
        "{.spec.schedule}|{.spec.jobTemplate.spec.template.spec.restartPolicy}|{.spec.jobTemplate.spec.template.spec.containers[0].command[0]}|{.spec.concurrencyPolicy}",
    )
    .await;
    assert_eq!(got, "*/1 * * * *|OnFailure|date|Allow", "kubectl 1.{minor}");
    let err = fails(
        k,
        &[
            "create",
            "cronjob",
            "late",
            "--image=busybox",
            "--schedule=61 * * * *",
        ],
    )
    .await;
    assert!(
        err.contains("spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"),
        "kubectl 1.{minor}: {err}"
    );
}

async fn autoscale(k: &Kubectl, minor: u32) {
    ok(k, &["create", "deployment", "front", "--image=nginx:1.27"]).await;
    let out = run(
        k,
        &[
            "autoscale",
            "deployment",
            "front",
            "--min",
            "2",
            "--max",
            "5",
            "--cpu-percent",
            "80",
            "-v=8",
        ],
    )
    .await;
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl 1.{minor}: {log}");
    let post = log
        .lines()
        .find(|l| l.contains("verb=\"POST\"") || l.starts_with("POST ") || l.contains("] POST "))
        .unwrap_or_default();
    // kubectl 1.33 creates autoscaling/v2 objects; older ones v1.
    let version = if minor >= 33 { "v2" } else { "v1" };
    assert!(
        post.contains(&format!(
            "/apis/autoscaling/{version}/namespaces/default/horizontalpodautoscalers"
        )),
        "kubectl 1.{minor} autoscale sends autoscaling/{version}:\n{log}"
    );
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.trim(),
        "horizontalpodautoscaler.autoscaling/front autoscaled",
        "kubectl 1.{minor}"
    );
    let out = ok(k, &["get", "hpa"]).await;
    let (h, r) = row(&out, "front");
    assert_eq!(
        cells(
            h,
            r,
            &[
                "NAME",
                "REFERENCE",
                "TARGETS",
                "MINPODS",
                "MAXPODS",
                "REPLICAS",
                "AGE"
            ]
        )[..6],
        [
            "front",
            "Deployment/front",
            "cpu: <unknown>/80%",
            "2",
            "5",
            "0"
        ],
        "kubectl 1.{minor}:\n{out}"
    );
    // The same object at both versions.
    let v2 = jsonpath(
        k,
        &["horizontalpodautoscalers.v2.autoscaling", "front"],
        "{.apiVersion}|{.spec.metrics[0].resource.name}|{.spec.metrics[0].resource.target.averageUtilization}|{.spec.minReplicas}",
    )
    .await;
    assert_eq!(v2, "autoscaling/v2|cpu|80|2", "kubectl 1.{minor}");
    let v1 = jsonpath(
        k,
        &["horizontalpodautoscalers.v1.autoscaling", "front"],
        "{.apiVersion}|{.spec.targetCPUUtilizationPercentage}|{.spec.maxReplicas}",
    )
    .await;
    assert_eq!(v1, "autoscaling/v1|80|5", "kubectl 1.{minor}");
    // A v2-only metric rides through v1 in upstream's annotation.
    let (success, _, err) = apply(
        k,
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: qps}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: front}\n  maxReplicas: 3\n  metrics:\n  - type: Pods\n    pods:\n      metric: {name: qps}\n      target: {type: AverageValue, averageValue: 1k}\n",
    )
    .await;
    assert!(success, "kubectl 1.{minor}: {err}");
    let annotation = jsonpath(
        k,
        &["horizontalpodautoscalers.v1.autoscaling", "qps"],
        r"{.metadata.annotations.autoscaling\.alpha\.kubernetes\.io/metrics}|{.spec.targetCPUUtilizationPercentage}",
    )
    .await;
    assert_eq!(
        annotation, r#"[{"pods":{"metricName":"qps","targetAverageValue":"1k"},"type":"Pods"}]|"#,
        "kubectl 1.{minor}"
    );
    // A v1 write keeps it.
    ok(
        k,
        &[
            "patch",
            "horizontalpodautoscalers.v1.autoscaling",
            "qps",
            "--type=merge",
            "-p",
            r#"{"spec":{"maxReplicas":4}}"#,
        ],
    )
    .await;
    let v2 = jsonpath(
        k,
        &["horizontalpodautoscalers.v2.autoscaling", "qps"],
        r"{.spec.maxReplicas}|{.spec.metrics[*].type}|{.metadata.annotations.autoscaling\.alpha\.kubernetes\.io/metrics}",
    )
    .await;
    assert_eq!(v2, "4|Pods|", "kubectl 1.{minor}");
    let out = ok(k, &["get", "hpa", "qps"]).await;
    let (h, r) = row(&out, "qps");
    assert_eq!(
        cells(
            h,
            r,
            &["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS"]
        )[2..4],
        ["<unknown>/1k", "1"],
        "kubectl 1.{minor}:\n{out}"
    );
    // The v1 view prints the same row.
    let out = ok(
        k,
        &["get", "horizontalpodautoscalers.v1.autoscaling", "qps"],
    )
    .await;
    let (h, r) = row(&out, "qps");
    assert_eq!(
        cells(
            h,
            r,
            &["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS"]
        )[2..4],
        ["<unknown>/1k", "1"],
        "kubectl 1.{minor}:\n{out}"
    );
    let described = ok(k, &["describe", "hpa", "front"]).await;
    assert!(
        described.contains("Reference:") && described.contains("Deployment/front"),
        "kubectl 1.{minor}:\n{described}"
    );
    // Refused by the server, in upstream's words, at v2 and (converted) v1.
    let (success, _, err) = apply(
        k,
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: tight}\nspec:\n  scaleTargetRef: {kind: Deployment, name: front}\n  minReplicas: 3\n  maxReplicas: 2\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("The HorizontalPodAutoscaler \"tight\" is invalid: spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"),
        "kubectl 1.{minor}: {err}"
    );
    let (success, _, err) = apply(
        k,
        "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: zero}\nspec:\n  scaleTargetRef: {kind: Deployment, name: front}\n  maxReplicas: 2\n  targetCPUUtilizationPercentage: 0\n",
    )
    .await;
    assert!(!success);
    assert!(
        err.contains("spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"),
        "kubectl 1.{minor}: {err}"
    );
}

async fn component_statuses(k: &Kubectl, minor: u32) {
    let out = run(k, &["get", "cs"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl 1.{minor}: {stderr}");
    assert!(
        stderr.contains("Warning: v1 ComponentStatus is deprecated in v1.19+"),
        "kubectl 1.{minor}: {stderr}"
    );
    let (h, r) = row(&stdout, "etcd-0");
    assert_eq!(
        cells(h, r, &["NAME", "STATUS", "MESSAGE", "ERROR"]),
        ["etcd-0", "Healthy", "ok", ""],
        "kubectl 1.{minor}:\n{stdout}"
    );
    let (h, r) = row(&stdout, "scheduler");
    assert_eq!(
        cells(h, r, &["NAME", "STATUS", "MESSAGE", "ERROR"]),
        [
            "scheduler",
            "Unhealthy",
            "",
            "no kube-scheduler holds the kube-system/kube-scheduler Lease"
        ],
        "kubectl 1.{minor}: no scheduler runs here:\n{stdout}"
    );
    // A scheduler that renews its Lease is healthy.
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let lease = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: kube-scheduler, namespace: kube-system}}\nspec: {{holderIdentity: test, leaseDurationSeconds: 60, renewTime: \"{now}\"}}\n"
    );
    let (success, _, err) = apply(k, &lease).await;
    assert!(success, "{err}");
    let one = ok(
        k,
        &[
            "get",
            "cs",
            "scheduler",
            "-o",
            "jsonpath={.conditions[0].status}|{.conditions[0].message}",
        ],
    )
    .await;
    assert_eq!(one, "True|ok", "kubectl 1.{minor}");
    let picked = ok(
        k,
        &[
            "get",
            "cs",
            "--field-selector=metadata.name=etcd-0",
            "-o",
            "name",
        ],
    )
    .await;
    assert_eq!(picked.trim(), "componentstatus/etcd-0", "kubectl 1.{minor}");
    let err = fails(k, &["delete", "cs", "etcd-0"]).await;
    assert!(
        err.contains("MethodNotAllowed") || err.contains("does not allow this method"),
        "{err}"
    );
}

/// Server-side apply creates and then updates with the kinds' schemas.
async fn server_side(k: &Kubectl, minor: u32) {
    let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: ssa}\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers: [{name: c, image: busybox:1.36}]\n";
    for (yaml, expect) in [
        (cron.to_string(), "cronjob.batch/ssa serverside-applied"),
        (
            cron.replace("'@daily'", "'@hourly'"),
            "cronjob.batch/ssa serverside-applied",
        ),
    ] {
        let out = within(
            "apply --server-side",
            k.run_stdin(&["apply", "--server-side", "-f", "-"], &yaml),
        )
        .await;
        assert!(
            out.status.success(),
            "kubectl 1.{minor}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expect);
    }
    let got = jsonpath(
        k,
        &["cj", "ssa"],
        "{.spec.schedule}|{.spec.concurrencyPolicy}",
    )
    .await;
    assert_eq!(got, "@hourly|Allow", "kubectl 1.{minor}");
    ok(k, &["delete", "cj", "ssa"]).await;
}

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);
    discovery(&k, minor).await;

    let (success, stdout, stderr) = apply(&k, OBJECTS).await;
    assert!(success, "kubectl 1.{minor} apply: {stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "statefulset.apps/web created",
            "daemonset.apps/agent created",
            "replicationcontroller/legacy created",
            "cronjob.batch/tick created",
            "podtemplate/tpl created",
            "controllerrevision.apps/web-7d4b9c created",
        ],
        "kubectl 1.{minor}"
    );
    // volumeClaimTemplates is an atomic list whose live items carry their
    // defaults (volumeMode, status.phase), so kubectl re-sends it and says
    // "configured", as it does against upstream; everything else is
    // unchanged.
    let (_, again, err) = apply(&k, OBJECTS).await;
    assert!(
        again
            .lines()
            .all(|l| l.ends_with(" unchanged") || l == "statefulset.apps/web configured"),
        "kubectl 1.{minor}: a re-apply changed something:\n{again}{err}"
    );

    defaults(&k, minor).await;
    server_side(&k, minor).await;
    tables(&k, minor).await;
    describe(&k, minor).await;
    scale_and_status(&k, minor).await;
    validation(&k, minor).await;
    cronjob_create(&k, minor).await;
    autoscale(&k, minor).await;
    component_statuses(&k, minor).await;

    let deleted = ok(
        &k,
        &[
            "delete",
            "sts/web",
            "ds/agent",
            "rc/legacy",
            "cj/tick",
            "cj/hello",
            "podtemplate/tpl",
            "controllerrevision/web-7d4b9c",
            "hpa/front",
            "hpa/qps",
            "--wait",
            "--timeout=30s",
        ],
    )
    .await;
    assert!(
        deleted.contains("statefulset.apps \"web\" deleted")
            && deleted.contains("horizontalpodautoscaler.autoscaling \"qps\" deleted"),
        "{deleted}"
    );
    let left = ok(
        &k,
        &[
            "get",
            "sts,ds,rc,cj,podtemplates,controllerrevisions,hpa",
            "-o",
            "name",
        ],
    )
    .await;
    assert_eq!(left, "", "kubectl 1.{minor}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_with_kubectl_1_27() {
    scenario(27).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_with_kubectl_1_30() {
    scenario(30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_with_kubectl_1_33() {
    scenario(33).await;
}

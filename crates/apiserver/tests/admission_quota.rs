//! The API-level admission behaviour with the real kubectl (1.27, 1.30 and
//! 1.33): PriorityClasses (the system ones present, `kubectl create
//! priorityclass`, reserved names, one global default) and the Priority
//! plugin; ResourceQuota (`kubectl create quota`, refusals in upstream's
//! words, usage in `kubectl describe quota`, released on delete);
//! LimitRange defaults and bounds (`kubectl describe limitrange`); and
//! PodDisruptionBudgets (`kubectl create pdb`, validation, columns) with
//! the eviction subresource answering 429 while a budget allows no
//! disruption and taking one when it does (`kubectl drain`).

mod support;

use support::{fails, ok, within, Kubectl, TestServer};

async fn apply(k: &Kubectl, yaml: &str) -> (bool, String) {
    let out = within(
        "apply",
        k.run_stdin(&["--request-timeout=30s", "apply", "-f", "-"], yaml),
    )
    .await;
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

async fn json(k: &Kubectl, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ok(k, &all).await).expect("kubectl -o json")
}

fn pod(ns: &str, name: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    app: a\nspec:\n{extra_spec}  containers:\n  - name: c\n    image: busybox\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_classes_and_the_priority_plugin() {
    let server = TestServer::start().await;
    for minor in [27, 30, 33] {
        let k = server.kubectl(minor);
        let ns = format!("prio{minor}");
        let n = ns.as_str();
        ok(&k, &["create", "namespace", n]).await;
        let list = ok(&k, &["get", "pc"]).await;
        let header = list.lines().next().unwrap();
        for col in ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"] {
            assert!(header.contains(col), "{list}");
        }
        assert!(
            list.contains("system-node-critical") && list.contains("2000001000"),
            "{list}"
        );
        assert!(
            list.contains("system-cluster-critical") && list.contains("2000000000"),
            "{list}"
        );
        let class = format!("high{minor}");
        ok(
            &k,
            &[
                "create",
                "priorityclass",
                &class,
                "--value=1000",
                "--description=important",
            ],
        )
        .await;
        let pc = json(&k, &["get", "pc", &class]).await;
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
        let (done, out) = apply(
            &k,
            &pod(n, "classy", &format!("  priorityClassName: {class}\n")),
        )
        .await;
        assert!(done, "{out}");
        let p = json(&k, &["get", "pod", "classy", "-n", n]).await;
        assert_eq!(p["spec"]["priority"], 1000);
        assert_eq!(p["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        let (done, out) = apply(&k, &pod(n, "lost", "  priorityClassName: foo\n")).await;
        assert!(!done);
        assert!(
            out.contains("pods \"lost\" is forbidden: no PriorityClass with name foo was found"),
            "{out}"
        );
        let (done, out) = apply(
            &k,
            &pod(
                n,
                "liar",
                &format!("  priorityClassName: {class}\n  priority: 5\n"),
            ),
        )
        .await;
        assert!(!done);
        assert!(out.contains("the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"), "{out}");
        let (done, out) = apply(&k, &pod(n, "plain", "")).await;
        assert!(done, "{out}");
        assert_eq!(
            json(&k, &["get", "pod", "plain", "-n", n]).await["spec"]["priority"],
            0
        );
        let err = fails(
            &k,
            &["create", "priorityclass", "system-mine", "--value=10"],
        )
        .await;
        assert!(err.contains("priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"), "{err}");
        let err = fails(
            &k,
            &[
                "create",
                "priorityclass",
                &format!("huge{minor}"),
                "--value=2000000000",
            ],
        )
        .await;
        assert!(
            err.contains(
                "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
            ),
            "{err}"
        );
    }
    // One global default, which class-less pods then get.
    let k = server.kubectl(33);
    ok(
        &k,
        &[
            "create",
            "priorityclass",
            "fallback",
            "--value=7",
            "--global-default",
        ],
    )
    .await;
    let err = fails(
        &k,
        &[
            "create",
            "priorityclass",
            "second",
            "--value=8",
            "--global-default",
        ],
    )
    .await;
    assert!(err.contains("priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass fallback is already marked as default. Only one default can exist"), "{err}");
    let (done, out) = apply(&k, &pod("prio33", "defaulted", "")).await;
    assert!(done, "{out}");
    let p = json(&k, &["get", "pod", "defaulted", "-n", "prio33"]).await;
    assert_eq!(p["spec"]["priority"], 7);
    assert_eq!(p["spec"]["priorityClassName"], "fallback");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_refuse_and_count() {
    let server = TestServer::start().await;
    for minor in [27, 30, 33] {
        let k = server.kubectl(minor);
        let ns = format!("quota{minor}");
        let n = ns.as_str();
        ok(&k, &["create", "namespace", n]).await;
        ok(
            &k,
            &[
                "create",
                "quota",
                "q",
                "--hard=pods=2,configmaps=3",
                "-n",
                n,
            ],
        )
        .await;
        ok(&k, &["run", "p1", "--image=busybox", "-n", n]).await;
        ok(&k, &["run", "p2", "--image=busybox", "-n", n]).await;
        let err = fails(&k, &["run", "p3", "--image=busybox", "-n", n]).await;
        assert!(
            err.contains("pods \"p3\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"),
            "{err}"
        );
        let described = ok(&k, &["describe", "quota", "q", "-n", n]).await;
        let pods_line = described
            .lines()
            .find(|l| l.starts_with("pods"))
            .unwrap_or_else(|| panic!("{described}"));
        assert_eq!(
            pods_line.split_whitespace().collect::<Vec<_>>(),
            ["pods", "2", "2"],
            "{described}"
        );
        assert!(described.contains("configmaps"), "{described}");
        let quota = json(&k, &["get", "quota", "q", "-n", n]).await;
        assert_eq!(quota["status"]["hard"]["pods"], "2");
        // Deleting a pod makes room at once.
        ok(
            &k,
            &[
                "delete",
                "pod",
                "p1",
                "-n",
                n,
                "--grace-period=0",
                "--force",
            ],
        )
        .await;
        let used = |q: &serde_json::Value| q["status"]["used"]["pods"].clone();
        assert_eq!(used(&json(&k, &["get", "quota", "q", "-n", n]).await), "1");
        // A dry run charges nothing.
        ok(
            &k,
            &["run", "dry", "--image=busybox", "-n", n, "--dry-run=server"],
        )
        .await;
        assert_eq!(used(&json(&k, &["get", "quota", "q", "-n", n]).await), "1");
        ok(&k, &["run", "p3", "--image=busybox", "-n", n]).await;
        // Compute quotas need every container to say what it uses.
        let cns = format!("{n}c");
        let c = cns.as_str();
        ok(&k, &["create", "namespace", c]).await;
        ok(
            &k,
            &[
                "create",
                "quota",
                "compute",
                "--hard=limits.cpu=1,limits.memory=1Gi,pods=5",
                "-n",
                c,
            ],
        )
        .await;
        let err = fails(&k, &["run", "p4", "--image=busybox", "-n", c]).await;
        assert!(
            err.contains("pods \"p4\" is forbidden: failed quota: compute: must specify limits.cpu for: p4; limits.memory for: p4"),
            "{err}"
        );
        let limited = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p5\n  namespace: {c}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      limits:\n        cpu: 100m\n        memory: 64Mi\n");
        let (done, out) = apply(&k, &limited).await;
        assert!(done, "{out}");
        let list = ok(&k, &["get", "quota", "-n", c]).await;
        let header = list.lines().next().unwrap();
        for col in ["NAME", "AGE", "REQUEST", "LIMIT"] {
            assert!(header.contains(col), "{list}");
        }
        assert!(list.contains("pods: 1/5"), "{list}");
        assert!(
            list.contains("limits.cpu: 100m/1, limits.memory: 64Mi/1Gi"),
            "{list}"
        );
    }
    // Over a cpu limit, in upstream's quantities.
    let k = server.kubectl(33);
    ok(&k, &["create", "namespace", "cpu"]).await;
    ok(
        &k,
        &[
            "create",
            "quota",
            "cpu",
            "--hard=requests.cpu=1",
            "-n",
            "cpu",
        ],
    )
    .await;
    let with_cpu = |name: &str, cpu: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: cpu\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests:\n        cpu: {cpu}\n")
    };
    let (done, out) = apply(&k, &with_cpu("a", "600m")).await;
    assert!(done, "{out}");
    let (done, out) = apply(&k, &with_cpu("b", "500m")).await;
    assert!(!done);
    assert!(
        out.contains("exceeded quota: cpu, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges_default_and_bound() {
    let server = TestServer::start().await;
    for minor in [27, 30, 33] {
        let k = server.kubectl(minor);
        let ns = format!("limits{minor}");
        let n = ns.as_str();
        ok(&k, &["create", "namespace", n]).await;
        let lr = format!("apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: lr\n  namespace: {n}\nspec:\n  limits:\n  - type: Container\n    max:\n      cpu: \"1\"\n    default:\n      cpu: 500m\n      memory: 128Mi\n    defaultRequest:\n      cpu: 100m\n");
        let (done, out) = apply(&k, &lr).await;
        assert!(done, "{out}");
        let stored = json(&k, &["get", "limits", "lr", "-n", n]).await;
        // The default request of memory comes from its default limit.
        assert_eq!(
            stored["spec"]["limits"][0]["defaultRequest"]["memory"],
            "128Mi"
        );
        ok(&k, &["run", "web", "--image=busybox", "-n", n]).await;
        let p = json(&k, &["get", "pod", "web", "-n", n]).await;
        let res = &p["spec"]["containers"][0]["resources"];
        assert_eq!(res["requests"]["cpu"], "100m", "{p}");
        assert_eq!(res["limits"]["cpu"], "500m", "{p}");
        assert_eq!(res["limits"]["memory"], "128Mi", "{p}");
        assert_eq!(
            p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
            "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"
        );
        let big = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  namespace: {n}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      limits:\n        cpu: \"2\"\n");
        let (done, out) = apply(&k, &big).await;
        assert!(!done);
        assert!(
            out.contains(
                "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
            ),
            "{out}"
        );
        let described = ok(&k, &["describe", "limitrange", "lr", "-n", n]).await;
        let cpu = described
            .lines()
            .find(|l| l.starts_with("Container") && l.contains(" cpu "))
            .unwrap_or_else(|| panic!("{described}"));
        assert_eq!(
            cpu.split_whitespace().collect::<Vec<_>>(),
            ["Container", "cpu", "-", "1", "100m", "500m", "-"],
            "{described}"
        );
        let bad = format!("apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: bad\n  namespace: {n}\nspec:\n  limits:\n  - type: Container\n    min:\n      cpu: \"2\"\n    max:\n      cpu: \"1\"\n");
        let (done, out) = apply(&k, &bad).await;
        assert!(!done);
        assert!(out.contains("spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1"), "{out}");
    }
}

/// Marks a pod Running and Ready, as its node agent would.
async fn make_ready(k: &Kubectl, ns: &str, name: &str) {
    ok(
        k,
        &[
            "patch",
            "pod",
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
        ],
    )
    .await;
}

/// Writes a budget's status, as the disruption controller would.
async fn budget_status(k: &Kubectl, ns: &str, name: &str, allowed: i64) {
    let patch = format!(
        r#"{{"status":{{"observedGeneration":1,"disruptionsAllowed":{allowed},"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}}}"#
    );
    ok(
        k,
        &[
            "patch",
            "pdb",
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_and_eviction() {
    let server = TestServer::start().await;
    let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n";
    let (done, out) = apply(&server.kubectl(33), node).await;
    assert!(done, "{out}");
    for minor in [27, 30, 33] {
        let k = server.kubectl(minor);
        let ns = format!("pdb{minor}");
        let n = ns.as_str();
        ok(&k, &["create", "namespace", n]).await;
        ok(
            &k,
            &[
                "create",
                "pdb",
                "b",
                "--selector=app=a",
                "--min-available=1",
                "-n",
                n,
            ],
        )
        .await;
        let list = ok(&k, &["get", "pdb", "-n", n]).await;
        let header = list.lines().next().unwrap();
        for col in [
            "NAME",
            "MIN AVAILABLE",
            "MAX UNAVAILABLE",
            "ALLOWED DISRUPTIONS",
            "AGE",
        ] {
            assert!(header.contains(col), "{list}");
        }
        let row: Vec<&str> = list.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[..4], ["b", "1", "N/A", "0"], "{list}");
        let both = format!("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: both\n  namespace: {n}\nspec:\n  minAvailable: 1\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app: a\n");
        let (done, out) = apply(&k, &both).await;
        assert!(!done);
        assert!(
            out.contains("minAvailable and maxUnavailable cannot be both set"),
            "{out}"
        );

        let (done, out) = apply(&k, &pod(n, "web", "  nodeName: n1\n")).await;
        assert!(done, "{out}");
        make_ready(&k, n, "web").await;
        let eviction = format!(
            r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"web","namespace":"{n}"}}}}"#
        );
        let file = server.dir.path().join(format!("eviction{minor}.json"));
        std::fs::write(&file, &eviction).unwrap();
        let path = format!("/api/v1/namespaces/{n}/pods/web/eviction");
        // Not seen by the disruption controller yet: 429, try later.
        let err = fails(
            &k,
            &["create", "--raw", &path, "-f", file.to_str().unwrap()],
        )
        .await;
        assert!(
            err.contains("TooManyRequests")
                && err
                    .contains("Cannot evict pod as it would violate the pod's disruption budget."),
            "{err}"
        );
        budget_status(&k, n, "b", 0).await;
        let err = fails(
            &k,
            &["create", "--raw", &path, "-f", file.to_str().unwrap()],
        )
        .await;
        assert!(
            err.contains("Cannot evict pod as it would violate the pod's disruption budget."),
            "{err}"
        );
        let out = fails(
            &k,
            &[
                "drain",
                "n1",
                "--force",
                "--ignore-daemonsets",
                "--pod-selector=app=a",
                "--timeout=3s",
            ],
        )
        .await;
        assert!(
            out.contains(&format!("error when evicting pods/\"web\" -n \"{n}\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.")),
            "{out}"
        );
        ok(&k, &["uncordon", "n1"]).await;
        // One disruption allowed: the eviction takes it.
        budget_status(&k, n, "b", 1).await;
        ok(
            &k,
            &["create", "--raw", &path, "-f", file.to_str().unwrap()],
        )
        .await;
        let p = json(&k, &["get", "pod", "web", "-n", n]).await;
        assert!(p["metadata"]["deletionTimestamp"].is_string(), "{p}");
        let target = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "DisruptionTarget")
            .cloned()
            .unwrap_or_else(|| panic!("{p}"));
        assert_eq!(target["reason"], "EvictionByEvictionAPI");
        let pdb = json(&k, &["get", "pdb", "b", "-n", n]).await;
        assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
        assert!(pdb["status"]["disruptedPods"]["web"].is_string(), "{pdb}");
        let cond = &pdb["status"]["conditions"][0];
        assert_eq!(cond["type"], "DisruptionAllowed");
        assert_eq!(cond["reason"], "InsufficientPods");
        // A Pending pod is evicted whatever the budget says.
        let (done, out) = apply(&k, &pod(n, "waiting", "")).await;
        assert!(done, "{out}");
        ok(
            &k,
            &[
                "drain",
                "n1",
                "--force",
                "--ignore-daemonsets",
                "--pod-selector=app=none",
                "--timeout=10s",
            ],
        )
        .await;
        ok(&k, &["uncordon", "n1"]).await;
        let pending = format!("/api/v1/namespaces/{n}/pods/waiting/eviction");
        let body = eviction.replace("\"web\"", "\"waiting\"");
        std::fs::write(&file, body).unwrap();
        ok(
            &k,
            &["create", "--raw", &pending, "-f", file.to_str().unwrap()],
        )
        .await;
        assert!(fails(&k, &["get", "pod", "waiting", "-n", n])
            .await
            .contains("NotFound"));
    }
}

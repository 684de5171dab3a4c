//! End to end, as root, on real containerd: `kubectl debug` in its three
//! forms with the real kubectl 1.27 and 1.33 (their debug commands PATCH
//! `pods/ephemeralcontainers` with a strategic merge patch made from the
//! pod they read; 1.33 also warns about profiles):
//!
//! - an ephemeral container in a running pod, with `--target` (it sees the
//!   target's processes) and without (it does not), in the pod's network
//!   and UTS namespaces, its status in `ephemeralContainerStatuses`, never
//!   restarted, with `kubectl logs -c`, `exec -c` and `debug -i` (attach)
//!   working on it, and the kubelet's events for it;
//! - invalid ephemeral-container updates refused with upstream's 422
//!   wording (a removal, a port, an unknown target, a taken name), and the
//!   subresource in discovery;
//! - `kubectl debug POD --copy-to=NEW` with an added container (the copy
//!   shares one process namespace) and with a changed command;
//! - `kubectl debug node/NAME`: a pod in the host's namespaces with the
//!   host's root at /host.
//!
//! One cluster for the file; each scenario has its own namespace and they
//! run at once (see cluster/).

mod cluster;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cluster::{wait_for, Cluster, Options};

/// The kubectl versions whose debug commands are exercised.
const VERSIONS: [&str; 2] = ["1.27", "1.33"];

/// How long a container may take to start on a loaded machine.
const START: Duration = Duration::from_secs(90);

/// The pull policy every debug container is given: busybox:latest is
/// imported by the agent, never pulled.
const PULL: &str = "--image-pull-policy=IfNotPresent";

#[test]
fn kubectl_debug_on_one_cluster() {
    let c = Cluster::start(Options::default());
    let scenarios: &[cluster::Scenario<Cluster>] = &[
        ("ephemeral containers", ephemeral),
        ("attach with -i", attach),
        ("invalid updates", invalid),
        ("copy-to", copy_to),
        ("node", node),
    ];
    cluster::run_scenarios(&c, scenarios);
    c.assert_no_component_refused();
}

/// kubectl `version` with the cluster's kubeconfig, its own discovery
/// cache and `stdin` as its input; it must end within `timeout`.
fn kubectl_in(
    c: &Cluster,
    version: &str,
    args: &[&str],
    stdin: &[u8],
    timeout: Duration,
) -> Output {
    let mut child = Command::new(format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}"))
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .arg("--cache-dir")
        .arg(c.dir.path().join(format!("cache-{version}")))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    // Written from a thread: a command that reads nothing must not block us.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(timeout) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let out = rx.recv().unwrap().unwrap();
            panic!(
                "kubectl {version} {args:?} did not end in {timeout:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let _ = writer.join();
    let _ = waiter.join();
    out
}

/// kubectl `version` talking to a shell in a container through an attach
/// (`debug -i`, `attach -i`): each `(line, answer)` is sent until stdout
/// shows `answer` (what is sent before the attach is hooked up may be
/// lost), then `exit`; kubectl must end by itself, successfully. Its
/// stdout.
fn converse(c: &Cluster, version: &str, args: &[&str], steps: &[(&str, &str)]) -> String {
    use std::io::Read;
    let mut child = Command::new(format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}"))
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .arg("--cache-dir")
        .arg(c.dir.path().join(format!("cache-{version}")))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let collect = |mut from: Box<dyn Read + Send>| {
        let into = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let to = into.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                to.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        (into, reader)
    };
    let (stdout, stdout_reader) = collect(Box::new(child.stdout.take().unwrap()));
    let (stderr, stderr_reader) = collect(Box::new(child.stderr.take().unwrap()));
    let text = |b: &std::sync::Arc<std::sync::Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&b.lock().unwrap()).into_owned()
    };
    let mut stdin = child.stdin.take().unwrap();
    let what = format!("kubectl {version} {args:?}");
    for (line, answer) in steps {
        let deadline = Instant::now() + START;
        while !text(&stdout).contains(answer) {
            if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
                let _ = child.kill();
                panic!(
                    "{what}: no {answer:?}\nstdout: {}\nstderr: {}",
                    text(&stdout),
                    text(&stderr)
                );
            }
            let _ = stdin.write_all(format!("{line}\n").as_bytes());
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let _ = stdin.write_all(b"exit\n");
    drop(stdin);
    let status = wait_for(&format!("{what} to end"), START, || {
        child.try_wait().unwrap()
    });
    // Its output read to the end (the pipes close with it).
    let _ = stdout_reader.join();
    let _ = stderr_reader.join();
    assert!(
        status.success(),
        "{what}: {status}\nstdout: {}\nstderr: {}",
        text(&stdout),
        text(&stderr)
    );
    text(&stdout)
}

/// kubectl `version` that must succeed; its stdout.
fn ok(c: &Cluster, version: &str, args: &[&str]) -> String {
    let out = kubectl_in(c, version, args, b"", Duration::from_secs(120));
    assert!(
        out.status.success(),
        "kubectl {version} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl `version` that must fail; its stderr.
fn refused(c: &Cluster, version: &str, args: &[&str]) -> String {
    let out = kubectl_in(c, version, args, b"", Duration::from_secs(120));
    assert!(
        !out.status.success(),
        "kubectl {version} {args:?} should have failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A jsonpath of pod `name` in `ns` (empty when absent).
fn field(c: &Cluster, ns: &str, name: &str, path: &str) -> String {
    let out = c.kubectl_output(&[
        "-n",
        ns,
        "get",
        "pod",
        name,
        "-o",
        &format!("jsonpath={path}"),
    ]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running pod `name` in a new namespace `ns` whose container `c` runs
/// `sleep SECONDS` (a number each scenario picks, to find it in `ps`).
fn running_pod(c: &Cluster, ns: &str, name: &str, sleep: u32) {
    c.kubectl(&["create", "namespace", ns]);
    c.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{app: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"{sleep}\"]\n"
    ));
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=Ready",
        &format!("pod/{name}"),
        "--timeout=90s",
    ]);
}

/// Waits until ephemeral container `container` of pod `name` is in
/// `state` (`running`, `terminated`); the pod's status then.
fn wait_ephemeral(c: &Cluster, ns: &str, name: &str, container: &str, state: &str) {
    let path =
        format!("{{.status.ephemeralContainerStatuses[?(@.name==\"{container}\")].state.{state}}}");
    wait_for(&format!("{ns}/{name} {container} {state}"), START, || {
        (!field(c, ns, name, &path).is_empty()).then_some(())
    });
}

/// Waits until `kubectl logs POD -c CONTAINER` contains `needle`; the log.
fn wait_log(c: &Cluster, ns: &str, pod: &str, container: &str, needle: &str) -> String {
    let deadline = Instant::now() + START;
    loop {
        let out = c.kubectl_output(&["-n", ns, "logs", pod, "-c", container]);
        let last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() && last.contains(needle) {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "{ns}/{pod} -c {container}: no {needle:?} in the log: {last}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `kubectl debug POD --image=busybox --target=c` with each kubectl (and
/// without a target): the container runs in the pod, sees the target's
/// processes only with a target, shares the pod's network and hostname,
/// reports its status, is never restarted, and `logs -c` and `exec -c`
/// reach it.
fn ephemeral(c: &Cluster) {
    let ns = "eph";
    running_pod(c, ns, "web", 3601);
    let pod_ip = field(c, ns, "web", "{.status.podIP}");
    for version in VERSIONS {
        let v = version.replace('.', "");
        let target = format!("target-{v}");
        ok(
            c,
            version,
            &[
                "-n",
                ns,
                "debug",
                "web",
                "--image=busybox",
                PULL,
                "--target=c",
                "-c",
                &target,
                "--",
                "sh",
                "-c",
                "ps; hostname; ip -4 addr; sleep 3600",
            ],
        );
        wait_ephemeral(c, ns, "web", &target, "running");
        let log = wait_log(c, ns, "web", &target, "sleep 3601");
        assert!(log.contains("\nweb\n"), "the pod's hostname: {log}");
        assert!(
            !pod_ip.is_empty() && log.contains(&format!("inet {pod_ip}/")),
            "the pod's IP {pod_ip}: {log}"
        );
        let plain = format!("plain-{v}");
        ok(
            c,
            version,
            &[
                "-n",
                ns,
                "debug",
                "web",
                "--image=busybox",
                PULL,
                "-c",
                &plain,
                "--",
                "sh",
                "-c",
                "ps; echo listed; sleep 3600",
            ],
        );
        let log = wait_log(c, ns, "web", &plain, "listed");
        assert!(
            !log.contains("sleep 3601"),
            "without --target the debugger has its own processes: {log}"
        );
        // exec reaches the ephemeral container, in the target's processes.
        let ps = c.kubectl(&["-n", ns, "exec", "web", "-c", &target, "--", "ps"]);
        assert!(ps.contains("sleep 3601"), "{ps}");
    }
    // The kubelet's events for it.
    let events = c.kubectl(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web",
        "-o",
        "jsonpath={range .items[*]}{.involvedObject.fieldPath} {.reason}: {.message}{\"\\n\"}{end}",
    ]);
    // With the container's fieldPath, as the kubelet's.
    for want in [
        "spec.ephemeralContainers{target-127} Created: Created container: target-127",
        "spec.ephemeralContainers{target-127} Started: Started container target-127",
        "spec.ephemeralContainers{target-133} Started: Started container target-133",
    ] {
        assert!(events.contains(want), "{want}: {events}");
    }
    // The pod stays Running and Ready with its debuggers.
    assert_eq!(field(c, ns, "web", "{.status.phase}"), "Running");
    let ready = field(
        c,
        ns,
        "web",
        "{.status.conditions[?(@.type==\"Ready\")].status}",
    );
    assert_eq!(ready, "True");
    // One that exits is not restarted.
    ok(
        c,
        "1.33",
        &[
            "-n",
            ns,
            "debug",
            "web",
            "--image=busybox",
            PULL,
            "-c",
            "once",
            "--",
            "sh",
            "-c",
            "echo once; exit 3",
        ],
    );
    wait_ephemeral(c, ns, "web", "once", "terminated");
    let code =
        "{.status.ephemeralContainerStatuses[?(@.name==\"once\")].state.terminated.exitCode}";
    assert_eq!(field(c, ns, "web", code), "3");
    let id = "{.status.ephemeralContainerStatuses[?(@.name==\"once\")].containerID}";
    let first = field(c, ns, "web", id);
    // An observation window for an absence (the agent syncs the pod more
    // than once in it and must not start the container again), not a
    // wait for a condition.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(field(c, ns, "web", id), first, "restarted");
    let restarts = "{.status.ephemeralContainerStatuses[?(@.name==\"once\")].restartCount}";
    assert_eq!(field(c, ns, "web", restarts), "0");
    wait_log(c, ns, "web", "once", "once");
}

/// `kubectl debug -i` waits for the container and attaches to it: a shell
/// fed on stdin answers through the attach.
fn attach(c: &Cluster) {
    let ns = "att";
    running_pod(c, ns, "app", 3602);
    for version in VERSIONS {
        let name = format!("shell-{}", version.replace('.', ""));
        converse(
            c,
            version,
            &[
                "-n",
                ns,
                "debug",
                "-i",
                "app",
                "--image=busybox",
                PULL,
                "--target=c",
                "-c",
                &name,
                "--",
                "sh",
            ],
            &[
                ("echo attached-$((6*7))", "attached-42"),
                ("ps", "sleep 3602"),
            ],
        );
        wait_ephemeral(c, ns, "app", &name, "terminated");
        // `kubectl attach` to a finished one is refused as upstream's.
        let out = kubectl_in(
            c,
            version,
            &["-n", ns, "attach", "app", "-c", &name],
            b"",
            Duration::from_secs(60),
        );
        assert!(!out.status.success(), "attach to a finished container");
    }
    // And `kubectl attach -i` to a running one: a shell waiting for input.
    ok(
        c,
        "1.33",
        &[
            "-n",
            ns,
            "debug",
            "app",
            "--image=busybox",
            PULL,
            "-i",
            "--attach=false",
            "-c",
            "waiting",
            "--",
            "sh",
        ],
    );
    wait_ephemeral(c, ns, "app", "waiting", "running");
    converse(
        c,
        "1.33",
        &["-n", ns, "attach", "-i", "app", "-c", "waiting"],
        &[("echo through-$((1+1))-attach", "through-2-attach")],
    );
}

/// The subresource in discovery and upstream's refusals: a removal or a
/// change through PUT, a port, an unknown target, a name taken by the
/// pod's container, and ephemeral containers on create.
fn invalid(c: &Cluster) {
    let ns = "inv";
    running_pod(c, ns, "web", 3603);
    let discovery: serde_json::Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", "/api/v1"])).unwrap();
    let listed = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/ephemeralcontainers")
        .cloned();
    assert_eq!(
        listed,
        Some(
            serde_json::json!({"name": "pods/ephemeralcontainers", "singularName": "",
            "namespaced": true, "kind": "Pod", "verbs": ["get", "patch", "update"]})
        ),
    );
    ok(
        c,
        "1.33",
        &[
            "-n",
            ns,
            "debug",
            "web",
            "--image=busybox",
            PULL,
            "-c",
            "dbg",
            "--",
            "sleep",
            "3600",
        ],
    );
    let url = format!("/api/v1/namespaces/{ns}/pods/web/ephemeralcontainers");
    let mut got: serde_json::Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", &url])).unwrap();
    assert_eq!(got["kind"], "Pod");
    assert_eq!(got["spec"]["ephemeralContainers"][0]["name"], "dbg");
    // Unpinned: the agent writes the pod's status meanwhile.
    got["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    // PUT without it: removed.
    let put = |body: &serde_json::Value| {
        let file = c.dir.path().join(format!("{ns}-body.json"));
        std::fs::write(&file, body.to_string()).unwrap();
        let out = c.kubectl_output(&["replace", "--raw", &url, "-f", file.to_str().unwrap()]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let mut removed = got.clone();
    removed["spec"]["ephemeralContainers"] = serde_json::json!([]);
    let said = put(&removed);
    assert!(
        said.contains(r#"The Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg" may not be removed"#),
        "{said}"
    );
    let mut changed = got.clone();
    changed["spec"]["ephemeralContainers"][0]["image"] = serde_json::json!("busybox:1");
    let said = put(&changed);
    assert!(
        said.contains(r#"Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg" may not be changed"#),
        "{said}"
    );
    let mut port = got.clone();
    port["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(
            serde_json::json!({"name": "p", "image": "busybox", "ports": [{"containerPort": 80}]}),
        );
    let said = put(&port);
    assert!(
        said.contains("spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container"),
        "{said}"
    );
    // A PUT that only adds is taken (and the rest of the body ignored).
    let mut added = got.clone();
    added["metadata"]["labels"] = serde_json::json!({"changed": "no"});
    added["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "put", "image": "busybox", "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}));
    let said = put(&added);
    assert!(said.contains(r#""name":"put""#), "{said}");
    assert_eq!(
        field(c, ns, "web", "{.metadata.labels}"),
        r#"{"app":"web"}"#
    );
    wait_ephemeral(c, ns, "web", "put", "running");
    // kubectl debug's own patch, refused: an unknown target, a taken name.
    for version in VERSIONS {
        let said = refused(
            c,
            version,
            &[
                "-n",
                ns,
                "debug",
                "web",
                "--image=busybox",
                PULL,
                "--target=nope",
                "-c",
                "t",
            ],
        );
        assert!(
            said.contains(r#"Pod "web" is invalid: spec.ephemeralContainers[2].targetContainerName: Not found: "nope""#),
            "{version}: {said}"
        );
        let said = refused(
            c,
            version,
            &["-n", ns, "debug", "web", "--image=busybox", PULL, "-c", "c"],
        );
        assert!(
            said.contains(
                r#"Pod "web" is invalid: spec.ephemeralContainers[2].name: Duplicate value: "c""#
            ),
            "{version}: {said}"
        );
    }
    // Not on create.
    let file = c.dir.path().join("with-ephemeral.yaml");
    std::fs::write(
        &file,
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: born\n  namespace: {ns}\nspec:\n  containers:\n  - name: c\n    image: busybox\n  ephemeralContainers:\n  - name: e\n    image: busybox\n"),
    )
    .unwrap();
    let said = refused(c, "1.33", &["create", "-f", file.to_str().unwrap()]);
    assert!(
        said.contains("spec.ephemeralContainers: Forbidden: cannot be set on create"),
        "{said}"
    );
}

/// `kubectl debug POD --copy-to=NEW`, both ways: with a new debugging
/// container (the copy shares one process namespace, so it sees the
/// copied container's processes) and with the command of `c` changed.
fn copy_to(c: &Cluster) {
    let ns = "cpy";
    running_pod(c, ns, "orig", 3604);
    for version in VERSIONS {
        let v = version.replace('.', "");
        let added = format!("added-{v}");
        ok(
            c,
            version,
            &[
                "-n",
                ns,
                "debug",
                "orig",
                &format!("--copy-to={added}"),
                // 1.27 shares by default, 1.33 only when asked.
                "--share-processes",
                "--image=busybox",
                PULL,
                "-c",
                "dbg",
                "--",
                "sh",
                "-c",
                "ps; echo copied; sleep 3600",
            ],
        );
        let log = wait_log(c, ns, &added, "dbg", "copied");
        assert!(
            log.contains("sleep 3604"),
            "the copy shares processes: {log}"
        );
        assert_eq!(
            field(c, ns, &added, "{.spec.shareProcessNamespace}"),
            "true"
        );
        let changed = format!("changed-{v}");
        ok(
            c,
            version,
            &[
                "-n",
                ns,
                "debug",
                "orig",
                &format!("--copy-to={changed}"),
                "--container=c",
                "--",
                "sh",
                "-c",
                "echo changed-command; sleep 3600",
            ],
        );
        wait_log(c, ns, &changed, "c", "changed-command");
        assert_eq!(field(c, ns, &changed, "{.spec.containers[*].name}"), "c");
    }
    // The original is untouched.
    assert_eq!(
        field(c, ns, "orig", "{.spec.containers[0].command}"),
        r#"["sleep","3604"]"#
    );
}

/// `kubectl debug node/NAME`: a pod on that node with the host's network
/// and processes, and the host's root at /host.
fn node(c: &Cluster) {
    let ns = "nod";
    c.kubectl(&["create", "namespace", ns]);
    let node = format!("node/{}", c.node());
    // What the host's root holds, as `ls` prints it.
    let mut host: Vec<String> = std::fs::read_dir("/")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    host.sort();
    for version in VERSIONS {
        let said = ok(
            c,
            version,
            &[
                "-n",
                ns,
                "debug",
                &node,
                "--image=busybox",
                PULL,
                "--",
                "sh",
                "-c",
                "ls -1 /host; echo ---; ps; echo done-listing; sleep 3600",
            ],
        );
        // "Creating debugging pod node-debugger-NODE-xxxxx with container
        // debugger on node NODE."
        let pod = said
            .split_whitespace()
            .find(|w| w.starts_with("node-debugger-"))
            .unwrap_or_else(|| panic!("kubectl {version}: {said}"))
            .to_string();
        let log = wait_log(c, ns, &pod, "debugger", "done-listing");
        let (listing, ps) = log.split_once("---").unwrap();
        let listed: Vec<&str> = listing
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        for name in &host {
            assert!(
                listed.contains(&name.as_str()),
                "{name} of the host's root not in /host: {listed:?}"
            );
        }
        assert!(ps.contains("containerd"), "the host's processes: {ps}");
        assert_eq!(field(c, ns, &pod, "{.spec.hostNetwork}"), "true");
        assert_eq!(field(c, ns, &pod, "{.status.podIP}"), "127.0.0.1");
    }
    // Interactively, through the attach.
    converse(
        c,
        "1.33",
        &[
            "-n",
            ns,
            "debug",
            "-i",
            &node,
            "--image=busybox",
            PULL,
            "--",
            "sh",
        ],
        &[(
            "test -d /host/proc && echo host-root-$((2*21))",
            "host-root-42",
        )],
    );
}

//! End to end, as root, on real containerd: exec, attach, cp and
//! port-forward through `skiff server`'s API server and node agent, with
//! the clients that speak each protocol path:
//!
//! - kubectl 1.30, 1.32 and 1.33 exec/attach/cp: WebSocket
//!   `v5.channel.k8s.io`, translated to SPDY by the API server; with
//!   `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`, SPDY/3.1 passed through;
//! - kubectl port-forward: 1.32 and 1.33 tunnel SPDY in a WebSocket
//!   (`SPDY/3.1+portforward.k8s.io`), 1.30 (and the others with
//!   `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`) plain SPDY/3.1;
//! - the Python client: exec over v5 (it offers v5 and v4), port-forward
//!   over `v4.channel.k8s.io` passed through to containerd;
//! - kube-rs `Api::<Pod>::exec` over v5;
//!
//! and the errors upstream gives before and after the upgrade. Each test
//! has its own cluster (see cluster/).

mod cluster;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::{free_port, http_get, wait_for, Cluster, Options};

const VERSIONS: [&str; 3] = ["1.30", "1.32", "1.33"];

fn kubectl_binary(version: &str) -> String {
    format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}")
}

/// kubectl `version` with the cluster's kubeconfig and its own discovery
/// cache.
fn kubectl(c: &Cluster, version: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(kubectl_binary(version));
    cmd.arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .arg("--cache-dir")
        .arg(c.dir.path().join(format!("cache-{version}")))
        .args(args);
    cmd
}

fn python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var("SKIFF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} not found: run scripts/deps.sh to create the venv",
        python.display()
    );
    python
}

/// What a finished command said.
#[derive(Debug)]
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// A running command whose output is collected as it comes; killed when
/// dropped.
struct Running {
    child: Child,
    what: String,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

fn collect(
    mut from: impl Read + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

impl Running {
    /// Starts `cmd` with a piped stdin (kept open until [`close_stdin`]).
    fn start(mut cmd: Command) -> Running {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), stdout.clone()),
            collect(child.stderr.take().unwrap(), stderr.clone()),
        ];
        Running {
            child,
            what,
            stdout,
            stderr,
            readers,
        }
    }

    fn write_stdin(&mut self, data: &[u8]) {
        let stdin = self.child.stdin.as_mut().expect("stdin open");
        stdin.write_all(data).unwrap();
        stdin.flush().unwrap();
    }

    fn close_stdin(&mut self) {
        self.child.stdin.take();
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until stdout (or stderr, `on_stderr`) contains `needle`.
    fn wait_output(&mut self, needle: &str, on_stderr: bool, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let text = if on_stderr {
                self.stderr()
            } else {
                self.stdout()
            };
            if text.contains(needle) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "{}: no {needle:?} after {timeout:?}\nstdout: {}\nstderr: {}",
                    self.what,
                    self.stdout(),
                    self.stderr()
                );
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Gone: what it printed is all there will be.
                for r in self.readers.drain(..) {
                    let _ = r.join();
                }
                let text = if on_stderr {
                    self.stderr()
                } else {
                    self.stdout()
                };
                assert!(
                    text.contains(needle),
                    "{} exited ({status}) without {needle:?}\nstdout: {}\nstderr: {}",
                    self.what,
                    self.stdout(),
                    self.stderr()
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for it to exit by itself.
    fn finish(mut self, timeout: Duration) -> Ran {
        self.close_stdin();
        let what = self.what.clone();
        let status = wait_for(&format!("{what} to exit"), timeout, || {
            self.child.try_wait().unwrap()
        });
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        Ran {
            status,
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `cmd` with `stdin` to its end (then closed), within `timeout`.
fn run(cmd: Command, stdin: &[u8], timeout: Duration) -> Ran {
    let mut r = Running::start(cmd);
    r.write_stdin(stdin);
    r.finish(timeout)
}

const T: Duration = Duration::from_secs(60);

/// A pod of busybox containers running `commands` (name, shell
/// command), with `extra` lines under the pod's spec.
fn pod(name: &str, annotations: &str, extra: &str, containers: &[(&str, &str)]) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{annotations}spec:\n  terminationGracePeriodSeconds: 1\n{extra}  containers:\n"
    );
    for (c, command) in containers {
        yaml.push_str(&format!(
            "  - name: {c}\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    env: [{{name: WHO, value: {c}}}]\n    command: [\"sh\", \"-c\", {command:?}]\n"
        ));
    }
    yaml
}

fn assert_ok(ran: &Ran, what: &str) {
    assert!(
        ran.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {}",
        ran.status,
        ran.stdout,
        ran.stderr
    );
}

/// exec (output, exit codes, stdin from a pipe closed at EOF, a tty with
/// its size), attach (output, stdin) and cp both ways, with each kubectl,
/// over WebSocket v5 and over SPDY.
#[test]
fn exec_attach_and_cp_with_each_kubectl() {
    let c = Cluster::start(Options::default());
    let ticker = "i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done";
    let echo = "while read l; do echo \"got $l\"; done";
    c.apply(
        &[
            pod("shell", "", "", &[("shell", "exec sleep 3600")]),
            pod("ticker", "", "", &[("ticker", ticker)]),
            pod("echo", "", "", &[("echo", echo)]).replace("    env:", "    stdin: true\n    env:"),
            pod(
                "two",
                "  annotations: {kubectl.kubernetes.io/default-container: b}\n",
                "",
                &[("a", "exec sleep 3600"), ("b", "exec sleep 3600")],
            ),
        ]
        .join("---\n"),
    );
    for p in ["shell", "ticker", "echo", "two"] {
        c.wait(&format!("pod/{p}"), "condition=Ready", 90);
    }

    for version in VERSIONS {
        for websockets in ["true", "false"] {
            let what = format!("kubectl {version} (websockets {websockets})");
            let k = |args: &[&str]| {
                let mut cmd = kubectl(&c, version, args);
                cmd.env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", websockets);
                cmd
            };
            let ran = run(k(&["exec", "-v=8", "shell", "--", "echo", "hi"]), b"", T);
            assert_ok(&ran, &what);
            assert_eq!(ran.stdout, "hi\n", "{what}");
            // The path taken: WebSocket v5 (translated here), or SPDY.
            let v5 = ran.stderr.contains("The subprotocol is v5.channel.k8s.io");
            assert_eq!(v5, websockets == "true", "{what}: {}", ran.stderr);
            if !v5 {
                assert!(
                    ran.stderr.contains("Upgrade: SPDY/3.1"),
                    "{what}: {}",
                    ran.stderr
                );
            }

            let ran = run(
                k(&[
                    "exec",
                    "shell",
                    "--",
                    "sh",
                    "-c",
                    "echo out; echo err >&2; exit 3",
                ]),
                b"",
                T,
            );
            assert_eq!(ran.code(), Some(3), "{what}: {ran:?}");
            assert_eq!(ran.stdout, "out\n", "{what}");
            assert!(ran.stderr.starts_with("err\n"), "{what}: {ran:?}");
            assert!(
                ran.stderr.contains("command terminated with exit code 3"),
                "{what}: {ran:?}"
            );

            // stdin from a pipe, closed at its end: cat ends.
            let ran = run(k(&["exec", "-i", "shell", "--", "cat"]), b"hi\nthere\n", T);
            assert_ok(&ran, &what);
            assert_eq!(ran.stdout, "hi\nthere\n", "{what}");

            // The annotation names the default container (kubectl reads
            // it and asks for it by name).
            let ran = run(k(&["exec", "two", "--", "sh", "-c", "echo $WHO"]), b"", T);
            assert_ok(&ran, &what);
            assert_eq!(ran.stdout, "b\n", "{what}");
            let ran = run(
                k(&["exec", "two", "-c", "a", "--", "sh", "-c", "echo $WHO"]),
                b"",
                T,
            );
            assert_eq!(ran.stdout, "a\n", "{what}: {ran:?}");

            // A tty, with the size of kubectl's terminal (script gives it
            // one; the size comes over the resize stream).
            let inner = format!(
                "stty rows 31 cols 97; KUBECTL_REMOTE_COMMAND_WEBSOCKETS={websockets} {} --kubeconfig {} --cache-dir {} exec -it shell -- sh -c 'for i in $(seq 100); do s=$(stty size); [ \"$s\" = \"31 97\" ] && break; sleep 0.1; done; echo size=$s; tty'",
                kubectl_binary(version),
                c.kubeconfig.display(),
                c.dir.path().join(format!("cache-{version}")).display(),
            );
            let mut script = Command::new("script");
            script.args(["-qec", &inner, "/dev/null"]);
            let ran = run(script, b"", T);
            assert_ok(&ran, &what);
            assert!(ran.stdout.contains("size=31 97"), "{what}: {ran:?}");
            assert!(ran.stdout.contains("/dev/pts/"), "{what}: {ran:?}");

            // attach: the container's output as it comes.
            let mut attach = Running::start(k(&["attach", "ticker"]));
            attach.wait_output("tick", false, T);
            drop(attach);
            // attach -i: our lines reach the container's stdin.
            let mut attach = Running::start(k(&["attach", "-i", "echo"]));
            let line = format!("hello {version} {websockets}");
            // The container may attach after the first line is sent:
            // repeat it until it is answered.
            let deadline = Instant::now() + T;
            loop {
                attach.write_stdin(format!("{line}\n").as_bytes());
                if attach.stdout().contains(&format!("got {line}")) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what}: attach -i never answered: {} {}",
                    attach.stdout(),
                    attach.stderr()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            drop(attach);

            // cp both ways (tar over exec, stdin for the copy in).
            let local = c.dir.path().join(format!("in-{version}-{websockets}"));
            let content: String = (0..2000).map(|i| format!("line {i}\n")).collect();
            std::fs::write(&local, &content).unwrap();
            let remote = format!("shell:/tmp/in-{version}-{websockets}");
            let ran = run(k(&["cp", local.to_str().unwrap(), &remote]), b"", T);
            assert_ok(&ran, &what);
            let back = c.dir.path().join(format!("back-{version}-{websockets}"));
            let ran = run(k(&["cp", &remote, back.to_str().unwrap()]), b"", T);
            assert_ok(&ran, &what);
            assert_eq!(std::fs::read_to_string(&back).unwrap(), content, "{what}");
        }
    }
}

/// port-forward with each kubectl (SPDY tunnelled in a WebSocket, and
/// plain SPDY): several connections at once through one forwarded port;
/// a forwarded port nothing listens on gets containerd's error, after
/// which kubectl (as upstream's) gives up the forward, and a new one
/// works. The Python client's port-forward (WebSocket v4, passed
/// through): an error on one port leaves the other working.
#[test]
fn port_forward_with_each_kubectl_and_the_python_client() {
    let c = Cluster::start(Options::default());
    c.apply(&pod(
        "web",
        "",
        "",
        &[(
            "web",
            "mkdir -p /www && echo hello-from-pod > /www/index.html && exec httpd -f -p 8080 -h /www",
        )],
    ));
    c.wait("pod/web", "condition=Ready", 90);
    let ip = c.pod_field("web", "{.status.podIP}");
    wait_for("httpd to answer", T, || {
        http_get(&format!("{ip}:8080"), "/").ok()
    });

    // 1.30's tunnelling is off unless asked for; 1.31+ have it on.
    let runs = [
        ("1.30", "false"),
        ("1.30", "true"),
        ("1.32", "true"),
        ("1.33", "true"),
        ("1.33", "false"),
    ];
    for (version, websockets) in runs {
        let what = format!("kubectl {version} port-forward (websockets {websockets})");
        let (good, bad) = (free_port(), free_port());
        let mut cmd = kubectl(
            &c,
            version,
            &[
                "port-forward",
                "-v=4",
                "--address",
                "127.0.0.1",
                "pod/web",
                &format!("{good}:8080"),
                &format!("{bad}:8081"),
            ],
        );
        cmd.env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets);
        let mut pf = Running::start(cmd);
        pf.wait_output(
            &format!("Forwarding from 127.0.0.1:{bad} -> 8081"),
            false,
            T,
        );
        // The path taken: SPDY tunnelled in a WebSocket, or plain SPDY.
        assert_eq!(
            pf.stderr()
                .contains("negotiated protocol: portforward.k8s.io"),
            websockets == "true",
            "{what}: {}",
            pf.stderr()
        );
        // Several connections at once.
        let addr = format!("127.0.0.1:{good}");
        let answers: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|_| s.spawn(|| http_get(&addr, "/index.html")))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap().unwrap_or_else(|e| format!("error {e}")))
                .collect()
        });
        for a in &answers {
            assert!(
                a.starts_with("HTTP/1.") && a.contains("hello-from-pod"),
                "{what}: {a}\n{}",
                pf.stderr()
            );
        }
        let again = http_get(&addr, "/index.html").unwrap();
        assert!(again.contains("hello-from-pod"), "{what}: {again}");

        // Nothing listens on 8081: the connection ends without an answer,
        // kubectl prints the runtime's error and (client-go since 1.23)
        // closes the session: "lost connection to pod".
        let answer = http_get(&format!("127.0.0.1:{bad}"), "/").unwrap_or_default();
        assert!(!answer.contains("hello-from-pod"), "{what}: {answer}");
        pf.wait_output("error forwarding port 8081", true, T);
        let ran = pf.finish(T);
        assert!(
            ran.stderr.contains("lost connection to pod"),
            "{what}: {ran:?}"
        );
        // The API server and agent are fine: a new forward works.
        let port = free_port();
        let mut cmd = kubectl(
            &c,
            version,
            &["port-forward", "pod/web", &format!("{port}:8080")],
        );
        cmd.env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets);
        let mut pf = Running::start(cmd);
        pf.wait_output(&format!("127.0.0.1:{port} -> 8080"), false, T);
        let answer = http_get(&format!("127.0.0.1:{port}"), "/index.html").unwrap();
        assert!(answer.contains("hello-from-pod"), "{what}: {answer}");
    }

    // The Python client: one WebSocket, a channel pair per port.
    let code = r#"
import json, sys
from kubernetes import client, config
from kubernetes.stream import portforward
config.load_kube_config(sys.argv[1])
api = client.CoreV1Api()
pf = portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports="8081,8080")
def fetch(port):
    s = pf.socket(port)
    s.setblocking(True)
    data = b""
    try:
        # A port that refuses may have closed its socket already.
        s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except ConnectionError:
        pass
    s.close()
    return data.decode(errors="replace")
bad = fetch(8081)
good = fetch(8080)
print(json.dumps({"bad": bad, "bad_error": pf.error(8081), "good": good, "good_error": pf.error(8080)}))
"#;
    let mut cmd = Command::new(python());
    cmd.args(["-c", code]).arg(&c.kubeconfig);
    let ran = run(cmd, b"", T);
    assert_ok(&ran, "python port-forward");
    let out: serde_json::Value =
        serde_json::from_str(ran.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {ran:?}"));
    assert!(
        out["good"].as_str().unwrap().contains("hello-from-pod"),
        "{out}"
    );
    assert!(out["good_error"].is_null(), "{out}");
    assert!(
        !out["bad"].as_str().unwrap().contains("hello-from-pod"),
        "{out}"
    );
    assert!(
        out["bad_error"]
            .as_str()
            .is_some_and(|e| e.contains("8081")),
        "{out}"
    );
}

/// A client certificate for `user` (no groups) signed by the cluster's
/// CA, in a kubeconfig of its own.
fn user_kubeconfig(c: &Cluster, user: &str) -> PathBuf {
    let pki = c.data_dir.join("pki");
    let dir = c.dir.path();
    let key = dir.join(format!("{user}.key"));
    let csr = dir.join(format!("{user}.csr"));
    let crt = dir.join(format!("{user}.crt"));
    let ext = dir.join(format!("{user}.ext"));
    std::fs::write(&ext, "extendedKeyUsage=clientAuth\n").unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        &format!("/CN={user}"),
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        csr.to_str().unwrap(),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        csr.to_str().unwrap(),
        "-CA",
        pki.join("ca.crt").to_str().unwrap(),
        "-CAkey",
        pki.join("ca.key").to_str().unwrap(),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        ext.to_str().unwrap(),
        "-out",
        crt.to_str().unwrap(),
    ]);
    let admin = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let server = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("server in the admin kubeconfig")
        .to_string();
    let path = dir.join(format!("{user}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
            pki.join("ca.crt").display(),
            crt.display(),
            key.display()
        ),
    )
    .unwrap();
    path
}

/// The Python client's and kube-rs's exec (both over v5), discovery, and
/// the errors: before the upgrade as the API server words them (a
/// missing pod, a pod on no node, a wrong or missing container name, no
/// upgrade, a forbidden user), after it as the node agent does (a
/// container that is not running: exec, attach, and `kubectl run -i`
/// falling back to the logs).
#[test]
fn clients_errors_and_discovery() {
    let c = Cluster::start(Options::default());
    c.apply(
        &[
            pod("shell", "", "", &[("shell", "exec sleep 3600")]),
            pod(
                "two",
                "",
                "",
                &[("a", "exec sleep 3600"), ("b", "exec sleep 3600")],
            ),
            pod(
                "pending",
                "",
                "  nodeSelector: {no-such-label: x}\n",
                &[("pending", "exec sleep 3600")],
            ),
            pod("crash", "", "", &[("crash", "exit 1")]),
        ]
        .join("---\n"),
    );
    c.wait("pod/shell", "condition=Ready", 90);
    c.wait("pod/two", "condition=Ready", 90);
    c.wait(
        "pod/crash",
        "jsonpath={.status.containerStatuses[0].state.waiting.reason}=CrashLoopBackOff",
        90,
    );

    // Discovery lists the subresources as upstream does.
    let list: serde_json::Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", "/api/v1"])).unwrap();
    for (name, kind) in [
        ("pods/exec", "PodExecOptions"),
        ("pods/attach", "PodAttachOptions"),
        ("pods/portforward", "PodPortForwardOptions"),
    ] {
        let r = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed"));
        assert_eq!(r["kind"], kind);
        assert_eq!(r["verbs"], serde_json::json!(["create", "get"]));
    }

    // The Python client (offers v5 and v4; v5 is chosen and translated).
    let code = r#"
import json, sys
from kubernetes import client, config
from kubernetes.stream import stream
config.load_kube_config(sys.argv[1])
api = client.CoreV1Api()
r = stream(api.connect_get_namespaced_pod_exec, "shell", "default",
           command=["sh", "-c", "echo out; echo err >&2; exit 3"],
           stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
r.run_forever(timeout=30)
out = {"stdout": r.read_stdout(), "stderr": r.read_stderr(), "code": r.returncode, "protocol": r.subprotocol}
r = stream(api.connect_get_namespaced_pod_exec, "shell", "default", command=["cat"],
           stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
r.write_stdin("from python\n")
r.close_channel(0)
r.run_forever(timeout=30)
out["cat"] = r.read_stdout()
out["cat_code"] = r.returncode
# Offering v4 alone: passed through to containerd, which speaks it.
from kubernetes.stream.ws_client import WSClient
c = client.Configuration.get_default_copy()
url = c.host.replace("https://", "wss://") + "/api/v1/namespaces/default/pods/shell/exec?command=sh&command=-c&command=echo+v4%3B+exit+5&stdout=true&stderr=true"
ws = WSClient(c, url, headers={"sec-websocket-protocol": "v4.channel.k8s.io"}, capture_all=True)
ws.run_forever(timeout=30)
out["v4"] = ws.read_stdout()
out["v4_code"] = ws.returncode
out["v4_protocol"] = ws.subprotocol
print(json.dumps(out))
"#;
    let mut cmd = Command::new(python());
    cmd.args(["-c", code]).arg(&c.kubeconfig);
    let ran = run(cmd, b"", T);
    assert_ok(&ran, "python exec");
    let out: serde_json::Value =
        serde_json::from_str(ran.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {ran:?}"));
    assert_eq!(out["stdout"], "out\n", "{out}");
    assert_eq!(out["stderr"], "err\n", "{out}");
    assert_eq!(out["code"], 3, "{out}");
    assert_eq!(out["protocol"], "v5.channel.k8s.io", "{out}");
    assert_eq!(out["cat"], "from python\n", "{out}");
    assert_eq!(out["cat_code"], 0, "{out}");
    assert_eq!(out["v4"], "v4\n", "{out}");
    assert_eq!(out["v4_code"], 5, "{out}");
    assert_eq!(out["v4_protocol"], "v4.channel.k8s.io", "{out}");

    // kube-rs.
    kube_exec(&c.kubeconfig);

    // Errors before the upgrade, with the oldest and newest kubectl.
    for version in ["1.30", "1.33"] {
        let fails = |args: &[&str]| {
            let ran = run(kubectl(&c, version, args), b"", T);
            assert!(!ran.status.success(), "kubectl {version} {args:?}: {ran:?}");
            ran.stderr.trim().to_string()
        };
        assert_eq!(
            fails(&["exec", "nothere", "--", "true"]),
            "Error from server (NotFound): pods \"nothere\" not found"
        );
        assert_eq!(
            fails(&["exec", "pending", "--", "true"]),
            "Error from server (BadRequest): pod pending does not have a host assigned"
        );
        // kubectl checks container names itself; the API server's own
        // answers, asked directly:
        let raw = |query: &str| format!("/api/v1/namespaces/default/pods/{query}");
        assert_eq!(
            fails(&[
                "get",
                "--raw",
                &raw("shell/exec?command=true&container=nope&stdout=1")
            ]),
            "Error from server (BadRequest): container nope is not valid for pod shell"
        );
        assert_eq!(
            fails(&["get", "--raw", &raw("two/exec?command=true&stdout=1")]),
            "Error from server (BadRequest): a container name must be specified for pod two, choose one of: [a b]"
        );
        assert_eq!(
            fails(&["get", "--raw", &raw("shell/exec?command=true&stdout=1")]),
            "Error from server (BadRequest): Upgrade request required"
        );
        assert_eq!(
            fails(&["get", "--raw", &raw("nothere/portforward?ports=80")]),
            "Error from server (NotFound): pods \"nothere\" not found"
        );
        assert_eq!(
            fails(&["get", "--raw", &raw("shell/portforward?ports=http")]),
            "Error from server (BadRequest): cannot convert to []int32: strconv.ParseUint: parsing \"http\": invalid syntax"
        );
        // After the upgrade, the agent's words: the container is not
        // running.
        let err = fails(&["exec", "crash", "--", "true"]);
        assert!(
            err.contains("container not found (\"crash\")"),
            "kubectl {version}: {err}"
        );
        // attach too, in the kubelet's GetAttach words.
        let err = fails(&["attach", "crash"]);
        assert!(
            err.contains(
                "unable to upgrade connection: container crash not found in pod crash_default"
            ),
            "kubectl {version}: {err}"
        );

        // `kubectl run -i --rm` of a command done before the attach: the
        // attach fails (the container is not running) and kubectl shows
        // the logs instead, over WebSocket v5 and over SPDY. Whether the
        // attach came while containerd still listed the exited container
        // as running (where its output was lost) is a matter of timing:
        // a few rounds each.
        for (websockets, round) in ["true", "false"]
            .into_iter()
            .flat_map(|w| (0..3).map(move |r| (w, r)))
        {
            let name = format!("quick-{}-{websockets}-{round}", version.replace('.', ""));
            let mut cmd = kubectl(
                &c,
                version,
                &[
                    "run",
                    "-i",
                    "--rm",
                    &name,
                    "--image=busybox",
                    "--image-pull-policy=IfNotPresent",
                    "--restart=Never",
                    "--",
                    "sh",
                    "-c",
                    "echo quick-hi",
                ],
            );
            cmd.env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", websockets);
            let ran = run(cmd, b"", T);
            let what = format!("kubectl {version} run -i --rm {name} (websockets {websockets})");
            assert_ok(&ran, &what);
            assert!(ran.stdout.contains("quick-hi"), "{what}: {ran:?}");
        }
    }

    // A user who may not exec is refused before any upgrade: GET is
    // verb get (kubectl's WebSocket), POST verb create (its SPDY).
    let viewer = user_kubeconfig(&c, "viewer");
    let as_viewer = |args: &[&str]| {
        let mut cmd = Command::new(kubectl_binary("1.33"));
        cmd.arg("--kubeconfig").arg(&viewer).args(args);
        let ran = run(cmd, b"", T);
        assert!(!ran.status.success(), "{args:?}: {ran:?}");
        ran.stderr.trim().to_string()
    };
    let forbidden = |verb: &str, sub: &str| {
        format!(
            "Error from server (Forbidden): pods \"shell\" is forbidden: User \"viewer\" cannot {verb} resource \"pods/{sub}\" in API group \"\" in the namespace \"default\""
        )
    };
    let base = "/api/v1/namespaces/default/pods/shell";
    for sub in ["exec", "attach", "portforward"] {
        assert_eq!(
            as_viewer(&["get", "--raw", &format!("{base}/{sub}?stdout=1")]),
            forbidden("get", sub)
        );
        assert_eq!(
            as_viewer(&[
                "create",
                "--raw",
                &format!("{base}/{sub}?stdout=1"),
                "-f",
                "/dev/null"
            ]),
            forbidden("create", sub)
        );
    }
    // kubectl exec reads the pod first, which the viewer may not either.
    assert!(
        as_viewer(&["exec", "shell", "--", "true"]).starts_with("Error from server (Forbidden)")
    );
    // A WebSocket upgrade is refused with the 403 itself.
    let code = r#"
import sys
from kubernetes import client, config
from kubernetes.stream import stream
config.load_kube_config(sys.argv[1])
try:
    stream(client.CoreV1Api().connect_get_namespaced_pod_exec, "shell", "default",
           command=["true"], stderr=True, stdin=False, stdout=True, tty=False)
    print("no error")
except Exception as e:
    print(e)
"#;
    let mut cmd = Command::new(python());
    cmd.args(["-c", code]).arg(&viewer);
    let ran = run(cmd, b"", T);
    assert!(ran.stdout.contains("403"), "{ran:?}");
}

/// kube-rs's `Api::<Pod>::exec`: stdout, stderr and the exit status.
fn kube_exec(kubeconfig: &Path) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, AttachParams};
    use tokio::io::AsyncReadExt as _;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let pods: Api<Pod> = Api::namespaced(client, "default");
        tokio::time::timeout(T, async {
            let mut process = pods
                .exec(
                    "shell",
                    ["sh", "-c", "echo from kube; echo oops >&2; exit 4"],
                    &AttachParams::default().stderr(true),
                )
                .await
                .unwrap();
            let mut stdout = process.stdout().unwrap();
            let mut stderr = process.stderr().unwrap();
            let status = process.take_status().unwrap();
            let (mut out, mut err) = (String::new(), String::new());
            let (a, b) = tokio::join!(
                stdout.read_to_string(&mut out),
                stderr.read_to_string(&mut err)
            );
            a.unwrap();
            b.unwrap();
            let status = status.await.expect("a status");
            assert_eq!(out, "from kube\n");
            assert_eq!(err, "oops\n");
            assert_eq!(
                status.reason.as_deref(),
                Some("NonZeroExitCode"),
                "{status:?}"
            );
            let code = status
                .details
                .and_then(|d| d.causes)
                .and_then(|c| {
                    c.into_iter()
                        .find(|c| c.reason.as_deref() == Some("ExitCode"))
                })
                .and_then(|c| c.message);
            assert_eq!(code.as_deref(), Some("4"));
            process.join().await.unwrap();
        })
        .await
        .expect("kube-rs exec finishes");
    });
}

/// The server's fds that are not files: sockets, pipes, eventfds, what a
/// session holds. Files are left out: a periodic job (the compactor, the
/// minutely flowcontrol check) may open one while a slow run goes on.
fn fd_count(pid: u32) -> usize {
    fd_targets(pid)
        .iter()
        .filter(|t| !t.starts_with('/'))
        .count()
}

/// What each of the process's fds points at.
fn fd_targets(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|t| t.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// 200 exec sessions through the API server (kube-rs, WebSocket v5
/// translated to SPDY, the path with the most moving parts), each opened,
/// used and closed, half of them by the client dropping its end early:
/// afterwards the server (API server and agent in one process) holds no
/// more file descriptors than before and no exec'd process is left in the
/// container.
#[test]
fn two_hundred_sessions_leave_nothing_behind() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, AttachParams};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let c = Cluster::start(Options::default());
    c.apply(&pod("shell", "", "", &[("main", "sleep 3600")]));
    c.wait("pod/shell", "condition=Ready", 90);
    let pid = c.child.as_ref().map(|ch| ch.id()).expect("the server runs");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&c.kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let pods: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
        let ps = || async {
            let mut p = pods
                .exec("shell", ["ps"], &AttachParams::default())
                .await
                .unwrap();
            let mut out = String::new();
            p.stdout().unwrap().read_to_string(&mut out).await.unwrap();
            p.join().await.unwrap();
            out
        };
        // Settled: no `cat` from an earlier session, and a stable fd count.
        let settled = || async {
            wait_for_async("the container to hold only its own process", || async {
                let out = ps().await;
                (!out.lines().any(|l| l.trim_end().ends_with("cat"))).then_some(out)
            })
            .await
        };
        settled().await;
        // The last `ps` session's connections close just after it
        // returns: count once two reads 100 ms apart agree.
        let last = std::cell::Cell::new(usize::MAX);
        let before = wait_for_async("the server's fd count to hold still", || {
            let now = fd_count(pid);
            let was = last.replace(now);
            async move { (now == was).then_some(now) }
        })
        .await;
        tokio::time::timeout(Duration::from_secs(300), async {
            for i in 0..200 {
                let mut p = pods
                    .exec(
                        "shell",
                        ["cat"],
                        &AttachParams::default().stdin(true).stderr(false),
                    )
                    .await
                    .unwrap();
                let line = format!("ping {i}\n");
                let mut stdin = p.stdin().unwrap();
                stdin.write_all(line.as_bytes()).await.unwrap();
                let mut stdout = p.stdout().unwrap();
                let mut got = vec![0u8; line.len()];
                stdout.read_exact(&mut got).await.unwrap();
                assert_eq!(String::from_utf8_lossy(&got), line);
                if i == 0 {
                    // The count is the right process's: an open session
                    // holds the client's connection and the agent's to
                    // containerd (the API server reaches the agent in its
                    // own process through a pipe, without a socket).
                    let busy = fd_count(pid);
                    assert!(
                        busy >= before + 2,
                        "{busy} fds with a session, {before} before"
                    );
                }
                if i % 2 == 0 {
                    // A clean end: stdin closed, cat exits, the status comes.
                    let status = p.take_status().unwrap();
                    stdin.shutdown().await.unwrap();
                    drop(stdin);
                    let status = status.await.expect("a status");
                    assert_eq!(status.status.as_deref(), Some("Success"), "{status:?}");
                    p.join().await.unwrap();
                } else {
                    // The client goes away mid-session.
                    p.abort();
                }
            }
        })
        .await
        .expect("200 sessions within 5 minutes");
        let out = settled().await;
        let procs: Vec<&str> = out.lines().skip(1).filter(|l| !l.contains(" ps")).collect();
        assert!(
            procs.len() == 1 && procs.iter().any(|l| l.contains("sleep 3600")),
            "processes left in the container: {out}"
        );
        let after = wait_for_async_explained(
            "the server's fds to settle",
            || async {
                let now = fd_count(pid);
                (now <= before).then_some(now)
            },
            || {
                format!(
                    "{} now, {before} before: {:?}",
                    fd_count(pid),
                    fd_targets(pid)
                )
            },
        )
        .await;
        eprintln!("server fds: {before} before 200 sessions, {after} after");
    });
}

/// Polls `f` every 100 ms until it gives a value, for at most 60 s.
async fn wait_for_async<T, F, Fut>(what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    wait_for_async_explained(what, f, String::new).await
}

/// [`wait_for_async`] whose timeout also says what `explain` finds then.
async fn wait_for_async_explained<T, F, Fut>(
    what: &str,
    mut f: F,
    explain: impl Fn() -> String,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + T;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} {}",
            explain()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

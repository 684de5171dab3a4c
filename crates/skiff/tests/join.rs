//! Joining a node with a token (issue [multinode] deliverable 1), end to
//! end on one machine: a `skiff server --disable-agent` writes
//! `<data-dir>/token` and prints the join command; `skiff agent` run with
//! that command checks the CA, gets `system:node:NAME`'s certificate
//! through an auto-approved CertificateSigningRequest, registers and runs
//! a pod. A wrong secret, a wrong CA hash, an expired token and a token
//! of the wrong form are each refused with a clear message and nothing
//! written. `skiff token create|list|delete` manage more tokens, and the
//! token cleaner deletes the expired one. A node deleted while its agent
//! is stopped registers again when the agent restarts, with the
//! kubeconfig it kept.
//!
//! One cluster for the whole file; the refusals run side by side.

mod cluster;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use cluster::{free_port, wait_for, Cluster, Options, SKIFF};

fn skiff(args: &[&str]) -> Output {
    Command::new(SKIFF)
        .args(args)
        .env("SKIFF_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = skiff(args);
    assert!(
        out.status.success(),
        "skiff {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A bootstrap token Secret that expired in 2020.
const EXPIRED_TOKEN: &str = r#"
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-zzzzzz
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: zzzzzz
  token-secret: 0123456789abcdef
  expiration: "2020-01-01T00:00:00Z"
  usage-bootstrap-authentication: "true"
"#;

/// A joining agent that must be refused: it exits with an error saying
/// `words`, and its data dir is never made.
fn refused(c: &Cluster, server: &str, token: &str, words: &str) {
    let dir = c.dir.path().join(format!("refused-{}", free_port()));
    let out = Command::new(SKIFF)
        .arg("agent")
        .args(["--server", server, "--token", token])
        .arg("--data-dir")
        .arg(&dir)
        .args(["--node-name", "never", "--node-ip", "127.0.0.1"])
        .args(["--kubelet-port", &free_port().to_string()])
        .env("SKIFF_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{token:?} was accepted: {stderr}");
    assert!(stderr.contains(words), "{token:?}: {stderr}");
    assert!(!dir.exists(), "{token:?}: {} was made", dir.display());
}

/// A running agent: stopped with SIGTERM on drop (SIGKILL after 40 s),
/// also when the test fails. Declared after its [`Reset`], so it stops
/// before the reset runs.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        cluster::stop_child(&mut self.0);
    }
}

struct Reset(PathBuf, String);

impl Drop for Reset {
    fn drop(&mut self) {
        let _ = Command::new(SKIFF)
            .arg("reset")
            .arg("--data-dir")
            .arg(&self.0)
            .args(["--bridge-name", &self.1])
            .output();
    }
}

fn token_args<'a>(c: &'a Cluster, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["token"];
    all.extend_from_slice(args);
    all.push("--data-dir");
    all.push(c.data_dir.to_str().unwrap());
    all
}

#[test]
fn a_node_joins_with_the_printed_command_and_bad_tokens_are_refused() {
    // No token cleaner here: the expired token must be refused for being
    // expired, not for being gone (the other test checks the cleaner).
    let c = Cluster::start(Options {
        disable_agent: true,
        extra: vec!["--controllers".into(), "*,-tokencleaner".into()],
        ..Options::default()
    });
    let (server, file) = c.printed_join();
    assert_eq!(file, c.data_dir.join("token"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o077, 0, "the token file is private");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
    let (head, secret) = token.split_once("::").unwrap();
    assert!(head.starts_with("K10") && head.len() == 67, "{token}");
    let id = &secret[..6];
    assert_eq!(
        c.kubectl(&[
            "-n",
            "kube-system",
            "get",
            "secret",
            &format!("bootstrap-token-{id}"),
            "-o",
            "jsonpath={.type}",
        ]),
        "bootstrap.kubernetes.io/token"
    );

    // The refusals, side by side.
    let wrong_secret = format!("{head}::{id}.0000000000000000");
    let wrong_hash = format!("K10{}::{secret}", "0".repeat(64));
    let expired = format!("{head}::zzzzzz.0123456789abcdef");
    c.apply(EXPIRED_TOKEN);
    std::thread::scope(|s| {
        let c = &c;
        let server = server.as_str();
        let wrong_secret = wrong_secret.as_str();
        s.spawn(move || refused(c, server, wrong_secret, "refused the join token"));
        s.spawn(move || {
            refused(
                c,
                server,
                &wrong_hash,
                "does not match the join token's hash",
            )
        });
        s.spawn(move || refused(c, server, &expired, "refused the join token"));
        s.spawn(move || refused(c, server, "abcdef.0123456789abcdef", "not of the form K10"));
    });

    // The good join, with the printed command.
    let agent_dir = c.dir.path().join("agent");
    let bridge = format!("{}j", c.bridge);
    let _reset = Reset(agent_dir.clone(), bridge.clone());
    let agent = Command::new(SKIFF)
        .arg("agent")
        .arg("--server")
        .arg(&server)
        .arg("--token-file")
        .arg(&file)
        .arg("--data-dir")
        .arg(&agent_dir)
        .args(["--node-name", "joined-1", "--node-ip", "127.0.0.1"])
        .args(["--bridge-name", &bridge])
        .args(["--kubelet-port", &free_port().to_string()])
        .env("SKIFF_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let agent = Running(agent);
    wait_for("the joined node", Duration::from_secs(60), || {
        c.kubectl_output(&["get", "node", "joined-1"])
            .status
            .success()
            .then_some(())
    });
    c.wait("node/joined-1", "condition=Ready", 60);
    // Its certificate came through an approved request of the token's user.
    let csrs = c.kubectl(&[
        "get",
        "csr",
        "-o",
        "jsonpath={range .items[*]}{.spec.username} {.status.conditions[0].type} {.status.conditions[0].reason}{\"\\n\"}{end}",
    ]);
    assert!(
        csrs.lines()
            .any(|l| l == format!("system:bootstrap:{id} Approved AutoApproved")),
        "{csrs}"
    );
    let kubeconfig = agent_dir.join("kubelet.kubeconfig");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&kubeconfig).unwrap().permissions(),
    );
    assert_eq!(mode & 0o077, 0, "the node's kubeconfig is private");
    let who = cluster::kubectl_as(
        &kubeconfig,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&who.stdout), "system:node:joined-1");
    c.kubectl(&[
        "run",
        "on-joined",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--overrides",
        r#"{"spec":{"nodeName":"joined-1"}}"#,
        "--",
        "sh",
        "-c",
        "echo joined && sleep 3600",
    ]);
    c.wait("pod/on-joined", "condition=Ready", 60);
    wait_for(
        "the pod's log through the joined agent",
        Duration::from_secs(30),
        || {
            let out = c.kubectl_output(&["logs", "on-joined"]);
            String::from_utf8_lossy(&out.stdout)
                .contains("joined")
                .then_some(())
        },
    );
    drop(agent);

    // The node is deleted while its agent is stopped (as `kubectl delete
    // node` after a drain); a restart with the same command uses the kept
    // kubeconfig (no new request, and the token is not even read: it is
    // a wrong one now) and registers the node again.
    c.kubectl(&["delete", "node", "joined-1"]);
    let before = c.kubectl(&["get", "csr", "-o", "name"]).lines().count();
    let again = Command::new(SKIFF)
        .arg("agent")
        .args(["--server", &server, "--token", &wrong_secret])
        .arg("--data-dir")
        .arg(&agent_dir)
        .args(["--node-name", "joined-1", "--node-ip", "127.0.0.1"])
        .args(["--bridge-name", &bridge])
        .args(["--kubelet-port", &free_port().to_string()])
        .env("SKIFF_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let again = Running(again);
    wait_for(
        "the node to be registered and Ready again",
        Duration::from_secs(60),
        || {
            let out = c.kubectl_output(&[
                "get",
                "node",
                "joined-1",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            (String::from_utf8_lossy(&out.stdout) == "True").then_some(())
        },
    );
    assert_eq!(
        c.kubectl(&["get", "csr", "-o", "name"]).lines().count(),
        before
    );
    drop(again);
    c.kubectl(&[
        "delete",
        "pod",
        "on-joined",
        "--ignore-not-found",
        "--grace-period=0",
        "--force",
    ]);
}

#[test]
fn tokens_are_created_listed_and_deleted() {
    let c = Cluster::start(Options {
        disable_agent: true,
        ..Options::default()
    });
    let made = ok(&token_args(
        &c,
        &[
            "create",
            "--ttl",
            "2h",
            "--description",
            "for worker 2",
            "--groups",
            "system:bootstrappers:workers",
        ],
    ));
    let made = made.trim();
    let server_token = std::fs::read_to_string(c.data_dir.join("token")).unwrap();
    // The same cluster CA hash as the server's own token.
    assert_eq!(
        made.split("::").next(),
        server_token.trim().split("::").next()
    );
    let id = &made.split("::").nth(1).unwrap()[..6];
    let listed = ok(&token_args(&c, &["list"]));
    let header = listed.lines().next().unwrap();
    for column in [
        "TOKEN",
        "TTL",
        "EXPIRES",
        "USAGES",
        "DESCRIPTION",
        "EXTRA GROUPS",
    ] {
        assert!(header.contains(column), "{listed}");
    }
    let row = listed
        .lines()
        .find(|l| l.starts_with(made))
        .unwrap_or_else(|| panic!("{made} not listed:\n{listed}"));
    assert!(row.contains(" 1h ") || row.contains(" 2h "), "{row}");
    assert!(row.contains("authentication,signing"), "{row}");
    assert!(row.contains("for worker 2"), "{row}");
    assert!(row.contains("system:bootstrappers:workers"), "{row}");
    // The server's own token never expires.
    let own = listed
        .lines()
        .find(|l| l.starts_with(server_token.trim()))
        .unwrap_or_else(|| panic!("the server's token is not listed:\n{listed}"));
    assert!(
        own.contains("<forever>") && own.contains("<never>"),
        "{own}"
    );
    // With --kubeconfig instead of --data-dir.
    let kubeconfig = c.kubeconfig.to_str().unwrap();
    assert!(ok(&["token", "list", "--kubeconfig", kubeconfig]).contains(made));

    let bad = skiff(&token_args(&c, &["create", "--groups", "system:masters"]));
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("system:bootstrappers:"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    // The token cleaner deletes an expired token's Secret.
    c.apply(EXPIRED_TOKEN);
    wait_for(
        "the expired token to be deleted",
        Duration::from_secs(30),
        || {
            (!c.kubectl_output(&[
                "-n",
                "kube-system",
                "get",
                "secret",
                "bootstrap-token-zzzzzz",
            ])
            .status
            .success())
            .then_some(())
        },
    );

    let deleted = ok(&token_args(&c, &["delete", id]));
    assert!(
        deleted.contains(&format!("bootstrap token \"{id}\" deleted")),
        "{deleted}"
    );
    assert!(!ok(&token_args(&c, &["list"])).contains(made));
    let again = skiff(&token_args(&c, &["delete", id]));
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("not found"));
}

//! The binary as a user runs it: help, version, and `skiff server` opening
//! its store and stopping cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const SKIFF: &str = env!("CARGO_BIN_EXE_skiff");

#[test]
fn help_and_version() {
    let help = Command::new(SKIFF).arg("--help").output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    assert!(text.contains("server"), "{text}");
    let version = Command::new(SKIFF).arg("version").output().unwrap();
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8(version.stdout).unwrap().trim(),
        format!("skiff {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn server_opens_its_store_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut child = Command::new(SKIFF)
        .args([
            "server",
            "--https-listen-port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--data-dir",
        ])
        .arg(&data_dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|line| line.contains("skiff server is running"));
    assert!(ready.is_some(), "the server never said it was running");
    assert!(data_dir.join("db/state.db").exists());
    assert!(data_dir.join("admin.kubeconfig").exists());
    assert!(data_dir.join("pki/ca.crt").exists());

    // `skiff kubeconfig` prints the admin kubeconfig the server wrote.
    let printed = Command::new(SKIFF)
        .args(["kubeconfig", "--data-dir"])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(printed.status.success());
    let text = String::from_utf8(printed.stdout).unwrap();
    assert_eq!(
        text,
        std::fs::read_to_string(data_dir.join("admin.kubeconfig")).unwrap()
    );
    assert!(
        text.contains("client-certificate-data:") && text.contains("server: https://127.0.0.1:"),
        "{text}"
    );

    // A second server on the same data dir is refused with a clear error.
    let second = Command::new(SKIFF)
        .args(["server", "--https-listen-port", "0", "--data-dir"])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("in use by another process"), "{err}");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "server exited with {status}");
}

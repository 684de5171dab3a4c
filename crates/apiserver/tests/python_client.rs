//! The Python `kubernetes` client (v37, from the venv scripts/deps.sh
//! makes) against an API server started in this process.

mod support;

use std::path::PathBuf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_list_watch_create_replace_delete() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var("SKIFF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} not found: run scripts/deps.sh to create the venv",
        python.display()
    );
    let server = support::TestServer::start().await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_checks.py");
    let kubeconfig = server.kubeconfig.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .env("KUBECONFIG", kubeconfig)
            .output()
            .expect("run python")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "python checks failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

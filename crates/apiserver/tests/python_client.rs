//! The Python `kubernetes` client (v37, from the venv scripts/deps.sh
//! makes) against an API server started in this process.

mod support;

use std::path::PathBuf;
use std::time::Instant;

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

/// Bearer tokens of the users `rbac_checks.py` acts as (none of them in
/// system:masters), added to the server's tokens.csv before it starts.
const RBAC_USERS: [(&str, &str); 4] = [
    ("jane", "py-jane-token-0123456789"),
    ("bob", "py-bob-token-0123456789"),
    ("ed", "py-ed-token-0123456789"),
    ("ada", "py-ada-token-0123456789"),
];

/// RBAC through the Python client: the admin writes Roles, RoleBindings,
/// ClusterRoles and ClusterRoleBindings; other users (bearer tokens) get
/// upstream's Forbidden, then what a binding grants (view in one
/// namespace, a resourceNames Role), self and subject access reviews, a
/// rules review, a non-resource URL rule, escalation refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_rbac() {
    let started = Instant::now();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var("SKIFF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} not found: run scripts/deps.sh to create the venv",
        python.display()
    );
    let server = support::TestServer::start_with(|config| {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(config.data_dir.join("tokens.csv"))
            .expect("the test server's token file");
        for (i, (user, token)) in RBAC_USERS.iter().enumerate() {
            writeln!(file, "{token},{user},py-{i}").expect("write token file");
        }
        config
    })
    .await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/rbac_checks.py");
    let tokens: serde_json::Map<String, serde_json::Value> = RBAC_USERS
        .iter()
        .map(|(user, token)| (user.to_string(), (*token).into()))
        .collect();
    let mut command = std::process::Command::new(python);
    command
        .arg(script)
        .env("KUBECONFIG", &server.kubeconfig)
        .env("SKIFF_URL", &server.url)
        .env("SKIFF_CA", server.dir.path().join("pki/ca.crt"))
        .env(
            "SKIFF_TOKENS",
            serde_json::Value::Object(tokens).to_string(),
        );
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::task::spawn_blocking(move || command.output().expect("run python")),
    )
    .await
    .expect("rbac_checks.py did not finish in 120 s")
    .unwrap();
    assert!(
        output.status.success(),
        "python RBAC checks failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "{}python RBAC checks passed in {:?}",
        String::from_utf8_lossy(&output.stdout),
        started.elapsed()
    );
}

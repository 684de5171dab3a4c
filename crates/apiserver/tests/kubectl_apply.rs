//! `kubectl apply` round-trips as it does against kube-apiserver: an
//! unchanged re-apply is `unchanged`, a list item removed from the
//! manifest is removed from the object (kubectl merges lists by the keys
//! the OpenAPI documents name), and `--server-side` takes over an object
//! made by client-side apply.

mod support;

use support::TestServer;

fn manifest(env: &[(&str, &str)]) -> String {
    let env: String = env
        .iter()
        .map(|(k, v)| format!("        - name: {k}\n          value: \"{v}\"\n"))
        .collect();
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{app: web}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: app
        image: registry.local/web:1
        ports:
        - containerPort: 8080
        env:
{env}"
    )
}

async fn apply(kubectl: &support::Kubectl, yaml: &str, extra: &[&str]) -> String {
    let mut args = vec!["apply", "-f", "-"];
    args.extend_from_slice(extra);
    let out = kubectl.run_stdin(&args, yaml).await;
    assert!(
        out.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
async fn apply_round_trips_with_kubectl_1_30_and_1_33() {
    for minor in [30, 33] {
        let server = TestServer::start().await;
        let kubectl = server.kubectl(minor);
        let two = manifest(&[("A", "1"), ("B", "2")]);
        assert_eq!(
            apply(&kubectl, &two, &[]).await,
            "deployment.apps/web created"
        );
        assert_eq!(
            apply(&kubectl, &two, &[]).await,
            "deployment.apps/web unchanged",
            "kubectl 1.{minor}"
        );
        let one = manifest(&[("A", "1")]);
        assert_eq!(
            apply(&kubectl, &one, &[]).await,
            "deployment.apps/web configured"
        );
        let env = kubectl
            .ok(&[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.template.spec.containers[0].env[*].name}",
            ])
            .await;
        assert_eq!(env, "A", "kubectl 1.{minor}: a removed env entry stays");
        // Client-side to server-side apply migration.
        let out = apply(&kubectl, &one, &["--server-side"]).await;
        assert_eq!(
            out, "deployment.apps/web serverside-applied",
            "kubectl 1.{minor}"
        );
    }
}

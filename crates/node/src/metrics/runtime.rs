//! [`Metered`]: a [`Runtime`] that times every CRI call it passes on, for
//! `kubelet_runtime_operations_duration_seconds`, `_total` and
//! `_errors_total` (labelled with upstream's `operation_type` names, as
//! its instrumented runtime service records them), and image pulls for
//! `kubelet_image_pull_duration_seconds` (and, per pod, for the pod start
//! SLI, which leaves pulls out). It changes nothing it passes on.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::NodeMetrics;
use crate::runtime::{api, Relisted, Result, Runtime};

/// A runtime whose calls are timed.
#[derive(Debug)]
pub struct Metered {
    inner: Arc<dyn Runtime>,
    metrics: Arc<NodeMetrics>,
}

impl Metered {
    pub fn new(inner: Arc<dyn Runtime>, metrics: Arc<NodeMetrics>) -> Self {
        Metered { inner, metrics }
    }

    async fn timed<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        let result = call.await;
        self.metrics
            .runtime_operation(operation, started.elapsed(), result.is_ok());
        result
    }
}

#[async_trait]
impl Runtime for Metered {
    fn generation(&self) -> Option<u64> {
        self.inner.generation()
    }

    async fn version(&self) -> Result<api::VersionResponse> {
        self.timed("version", self.inner.version()).await
    }

    async fn status(&self) -> Result<api::StatusResponse> {
        self.timed("status", self.inner.status()).await
    }

    async fn run_pod_sandbox(
        &self,
        config: api::PodSandboxConfig,
        runtime_handler: String,
    ) -> Result<String> {
        self.timed(
            "run_podsandbox",
            self.inner.run_pod_sandbox(config, runtime_handler),
        )
        .await
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        self.timed("stop_podsandbox", self.inner.stop_pod_sandbox(id))
            .await
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        self.timed("remove_podsandbox", self.inner.remove_pod_sandbox(id))
            .await
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<api::PodSandboxStatus> {
        self.timed("podsandbox_status", self.inner.pod_sandbox_status(id))
            .await
    }

    async fn list_pod_sandboxes(&self) -> Result<Vec<api::PodSandbox>> {
        self.timed("list_podsandbox", self.inner.list_pod_sandboxes())
            .await
    }

    async fn list_pod_sandboxes_of(&self, pod_uid: &str) -> Result<Vec<api::PodSandbox>> {
        self.timed("list_podsandbox", self.inner.list_pod_sandboxes_of(pod_uid))
            .await
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: api::ContainerConfig,
        sandbox_config: api::PodSandboxConfig,
    ) -> Result<String> {
        self.timed(
            "create_container",
            self.inner
                .create_container(sandbox_id, config, sandbox_config),
        )
        .await
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        self.timed("start_container", self.inner.start_container(id))
            .await
    }

    async fn stop_container(&self, id: &str, timeout_seconds: i64) -> Result<()> {
        self.timed(
            "stop_container",
            self.inner.stop_container(id, timeout_seconds),
        )
        .await
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        self.timed("remove_container", self.inner.remove_container(id))
            .await
    }

    async fn list_containers(&self) -> Result<Vec<api::Container>> {
        self.timed("list_containers", self.inner.list_containers())
            .await
    }

    async fn list_containers_of(&self, pod_uid: &str) -> Result<Vec<api::Container>> {
        self.timed("list_containers", self.inner.list_containers_of(pod_uid))
            .await
    }

    async fn container_status(&self, id: &str) -> Result<api::ContainerStatus> {
        self.timed("container_status", self.inner.container_status(id))
            .await
    }

    async fn container_pid(&self, id: &str) -> Result<Option<u32>> {
        self.timed("container_status", self.inner.container_pid(id))
            .await
    }

    async fn sandbox_pid(&self, id: &str) -> Result<Option<u32>> {
        self.timed("podsandbox_status", self.inner.sandbox_pid(id))
            .await
    }

    async fn relist(&self) -> Result<Relisted> {
        // Upstream's relist is a list of sandboxes and one of containers.
        self.timed("list_containers", self.inner.relist()).await
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        timeout_s: i64,
    ) -> Result<(i32, Vec<u8>, Vec<u8>)> {
        self.timed(
            "exec_sync",
            self.inner.exec_sync(container_id, cmd, timeout_s),
        )
        .await
    }

    async fn exec(&self, req: api::ExecRequest) -> Result<String> {
        self.timed("exec", self.inner.exec(req)).await
    }

    async fn attach(&self, req: api::AttachRequest) -> Result<String> {
        self.timed("attach", self.inner.attach(req)).await
    }

    async fn port_forward(&self, req: api::PortForwardRequest) -> Result<String> {
        self.timed("port_forward", self.inner.port_forward(req))
            .await
    }

    async fn image_status(&self, image: &str) -> Result<Option<api::Image>> {
        self.timed("image_status", self.inner.image_status(image))
            .await
    }

    async fn pull_image(
        &self,
        image: &str,
        sandbox_config: Option<api::PodSandboxConfig>,
    ) -> Result<String> {
        let pod_uid = sandbox_config
            .as_ref()
            .and_then(|c| c.metadata.as_ref())
            .map(|m| m.uid.clone());
        let started = Instant::now();
        let pulled = self
            .timed("pull_image", self.inner.pull_image(image, sandbox_config))
            .await?;
        let finished = Instant::now();
        if let Some(uid) = pod_uid.filter(|u| !u.is_empty()) {
            self.metrics.pulled(&uid, started, finished);
        }
        let size = match self.inner.image_status(image).await {
            Ok(Some(found)) => found.size,
            _ => 0,
        };
        self.metrics.image_pulled(size, finished - started);
        Ok(pulled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;

    #[tokio::test]
    async fn calls_are_timed_by_operation_and_failures_counted() {
        let metrics = Arc::new(NodeMetrics::new());
        let runtime = Metered::new(Arc::new(FakeRuntime::new()), metrics.clone());
        runtime.version().await.unwrap();
        runtime.list_containers().await.unwrap();
        assert!(runtime.start_container("no-such-container").await.is_err());
        let text = metrics.registry().encode();
        for line in [
            r#"kubelet_runtime_operations_total{operation_type="version"} 1"#,
            r#"kubelet_runtime_operations_total{operation_type="list_containers"} 1"#,
            r#"kubelet_runtime_operations_errors_total{operation_type="start_container"} 1"#,
            r#"kubelet_runtime_operations_duration_seconds_count{operation_type="version"} 1"#,
            r#"kubelet_runtime_operations_duration_seconds_bucket{operation_type="version",le="0.005"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}

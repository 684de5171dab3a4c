//! [`CriRuntime`]: the CRI v1 client over a unix socket (tonic), as the
//! kubelet's remote runtime service. One HTTP/2 connection, shared by clones;
//! it reconnects by itself when the runtime restarts.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::{Channel, Endpoint, Uri};

use super::{api, Error, Result, Runtime};

/// How long one CRI call may take, as the kubelet's
/// `--runtime-request-timeout` (2 minutes), except pulls, which may take
/// as long as they need.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// CRI over containerd's (or any CRI runtime's) unix socket.
#[derive(Debug, Clone)]
pub struct CriRuntime {
    endpoint: String,
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
}

impl CriRuntime {
    /// A client for the socket at `path`. Connects lazily: the runtime may
    /// not be up yet; calls fail with Unavailable until it is.
    pub fn new(path: PathBuf) -> Result<Self> {
        let endpoint = path.display().to_string();
        let channel = Endpoint::from_static("http://[::]:50051")
            .connect_timeout(Duration::from_secs(5))
            .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }));
        Ok(Self {
            endpoint,
            runtime: RuntimeServiceClient::new(channel.clone())
                .max_decoding_message_size(16 * 1024 * 1024),
            images: ImageServiceClient::new(channel).max_decoding_message_size(16 * 1024 * 1024),
        })
    }

    /// The socket this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

fn req<T>(message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.set_timeout(REQUEST_TIMEOUT);
    r
}

#[async_trait]
impl Runtime for CriRuntime {
    async fn version(&self) -> Result<api::VersionResponse> {
        let r = self
            .runtime
            .clone()
            .version(req(api::VersionRequest {
                version: "v1".into(),
            }))
            .await?;
        Ok(r.into_inner())
    }

    async fn status(&self) -> Result<api::StatusResponse> {
        let r = self
            .runtime
            .clone()
            .status(req(api::StatusRequest { verbose: false }))
            .await?;
        Ok(r.into_inner())
    }

    async fn run_pod_sandbox(
        &self,
        config: api::PodSandboxConfig,
        runtime_handler: String,
    ) -> Result<String> {
        let r = self
            .runtime
            .clone()
            .run_pod_sandbox(req(api::RunPodSandboxRequest {
                config: Some(config),
                runtime_handler,
            }))
            .await?;
        Ok(r.into_inner().pod_sandbox_id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        self.runtime
            .clone()
            .stop_pod_sandbox(req(api::StopPodSandboxRequest {
                pod_sandbox_id: id.into(),
            }))
            .await?;
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        self.runtime
            .clone()
            .remove_pod_sandbox(req(api::RemovePodSandboxRequest {
                pod_sandbox_id: id.into(),
            }))
            .await?;
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<api::PodSandboxStatus> {
        let r = self
            .runtime
            .clone()
            .pod_sandbox_status(req(api::PodSandboxStatusRequest {
                pod_sandbox_id: id.into(),
                verbose: false,
            }))
            .await?;
        r.into_inner().status.ok_or_else(|| Error::Status {
            code: tonic::Code::Internal,
            message: format!("runtime returned no status for sandbox {id}"),
        })
    }

    async fn sandbox_pid(&self, id: &str) -> Result<Option<u32>> {
        let r = self
            .runtime
            .clone()
            .pod_sandbox_status(req(api::PodSandboxStatusRequest {
                pod_sandbox_id: id.into(),
                verbose: true,
            }))
            .await?;
        Ok(verbose_pid(&r.into_inner().info))
    }

    async fn list_pod_sandboxes(&self) -> Result<Vec<api::PodSandbox>> {
        let r = self
            .runtime
            .clone()
            .list_pod_sandbox(req(api::ListPodSandboxRequest { filter: None }))
            .await?;
        Ok(r.into_inner().items)
    }

    async fn list_pod_sandboxes_of(&self, pod_uid: &str) -> Result<Vec<api::PodSandbox>> {
        let filter = api::PodSandboxFilter {
            label_selector: [(super::POD_UID_LABEL.to_string(), pod_uid.to_string())].into(),
            ..Default::default()
        };
        let r = self
            .runtime
            .clone()
            .list_pod_sandbox(req(api::ListPodSandboxRequest {
                filter: Some(filter),
            }))
            .await?;
        Ok(r.into_inner().items)
    }

    async fn list_containers_of(&self, pod_uid: &str) -> Result<Vec<api::Container>> {
        let filter = api::ContainerFilter {
            label_selector: [(super::POD_UID_LABEL.to_string(), pod_uid.to_string())].into(),
            ..Default::default()
        };
        let r = self
            .runtime
            .clone()
            .list_containers(req(api::ListContainersRequest {
                filter: Some(filter),
            }))
            .await?;
        Ok(r.into_inner().containers)
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: api::ContainerConfig,
        sandbox_config: api::PodSandboxConfig,
    ) -> Result<String> {
        let r = self
            .runtime
            .clone()
            .create_container(req(api::CreateContainerRequest {
                pod_sandbox_id: sandbox_id.into(),
                config: Some(config),
                sandbox_config: Some(sandbox_config),
            }))
            .await?;
        Ok(r.into_inner().container_id)
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        self.runtime
            .clone()
            .start_container(req(api::StartContainerRequest {
                container_id: id.into(),
            }))
            .await?;
        Ok(())
    }

    async fn stop_container(&self, id: &str, timeout_seconds: i64) -> Result<()> {
        let mut r = tonic::Request::new(api::StopContainerRequest {
            container_id: id.into(),
            timeout: timeout_seconds,
        });
        // The call lasts as long as the grace period, and then some.
        r.set_timeout(REQUEST_TIMEOUT + Duration::from_secs(timeout_seconds.max(0) as u64));
        self.runtime.clone().stop_container(r).await?;
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        self.runtime
            .clone()
            .remove_container(req(api::RemoveContainerRequest {
                container_id: id.into(),
            }))
            .await?;
        Ok(())
    }

    async fn list_containers(&self) -> Result<Vec<api::Container>> {
        let r = self
            .runtime
            .clone()
            .list_containers(req(api::ListContainersRequest { filter: None }))
            .await?;
        Ok(r.into_inner().containers)
    }

    async fn container_pid(&self, id: &str) -> Result<Option<u32>> {
        let r = self
            .runtime
            .clone()
            .container_status(req(api::ContainerStatusRequest {
                container_id: id.into(),
                verbose: true,
            }))
            .await?;
        Ok(verbose_pid(&r.into_inner().info))
    }

    async fn container_status(&self, id: &str) -> Result<api::ContainerStatus> {
        let r = self
            .runtime
            .clone()
            .container_status(req(api::ContainerStatusRequest {
                container_id: id.into(),
                verbose: false,
            }))
            .await?;
        r.into_inner().status.ok_or_else(|| Error::Status {
            code: tonic::Code::Internal,
            message: format!("runtime returned no status for container {id}"),
        })
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        timeout_s: i64,
    ) -> Result<(i32, Vec<u8>, Vec<u8>)> {
        let mut r = tonic::Request::new(api::ExecSyncRequest {
            container_id: container_id.into(),
            cmd,
            timeout: timeout_s,
        });
        r.set_timeout(Duration::from_secs(timeout_s.max(1) as u64 + 5));
        let out = self.runtime.clone().exec_sync(r).await?.into_inner();
        Ok((out.exit_code, out.stdout, out.stderr))
    }

    async fn exec(&self, r: api::ExecRequest) -> Result<String> {
        Ok(self.runtime.clone().exec(req(r)).await?.into_inner().url)
    }

    async fn attach(&self, r: api::AttachRequest) -> Result<String> {
        Ok(self.runtime.clone().attach(req(r)).await?.into_inner().url)
    }

    async fn port_forward(&self, r: api::PortForwardRequest) -> Result<String> {
        Ok(self
            .runtime
            .clone()
            .port_forward(req(r))
            .await?
            .into_inner()
            .url)
    }

    async fn image_status(&self, image: &str) -> Result<Option<api::Image>> {
        let r = self
            .images
            .clone()
            .image_status(req(api::ImageStatusRequest {
                image: Some(api::ImageSpec {
                    image: image.into(),
                    ..Default::default()
                }),
                verbose: false,
            }))
            .await?;
        Ok(r.into_inner().image)
    }

    async fn pull_image(
        &self,
        image: &str,
        sandbox_config: Option<api::PodSandboxConfig>,
    ) -> Result<String> {
        let r = self
            .images
            .clone()
            .pull_image(tonic::Request::new(api::PullImageRequest {
                image: Some(api::ImageSpec {
                    image: image.into(),
                    ..Default::default()
                }),
                auth: None,
                sandbox_config,
            }))
            .await?;
        Ok(r.into_inner().image_ref)
    }
}

/// The process ID in a verbose status's `info` (containerd puts a JSON
/// object with `pid` under the key `info`); none when absent or 0.
fn verbose_pid(info: &std::collections::HashMap<String, String>) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(info.get("info")?).ok()?;
    let pid = v.get("pid")?.as_u64()?;
    u32::try_from(pid).ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::verbose_pid;

    #[test]
    fn the_pid_of_a_verbose_status() {
        let info = |text: &str| [("info".to_string(), text.to_string())].into();
        assert_eq!(
            verbose_pid(&info(r#"{"sandboxID":"s","pid":4242,"removing":false}"#)),
            Some(4242)
        );
        // containerd's pid once the task is gone, and no info at all.
        assert_eq!(verbose_pid(&info(r#"{"pid":0}"#)), None);
        assert_eq!(verbose_pid(&Default::default()), None);
        assert_eq!(verbose_pid(&info("not json")), None);
    }
}

//! [`Agent::run`]: the node agent put together. It prepares the host,
//! starts (or connects to) containerd, imports the built-in images,
//! registers the Node and keeps its status and Lease fresh, writes the CNI
//! config once the node has a podCIDR, serves logs, and runs one
//! [`PodWorker`] per pod bound to this node, woken by the pod watch and by
//! a relist of the runtime every second (upstream's PLEG; a runtime that
//! reports its changes, as the fake does, is relisted only after one, as
//! upstream's evented PLEG).
//!
//! It talks to the cluster only through its kube client. Containers
//! outlive it unless `stop_pods_on_exit`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{watcher, WatchStreamExt as _};
use skiff_client::trimmed::{untrim, Broken, Trimmed};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::images;
use crate::network::{self, CniConfig};
use crate::pod_worker::sync::{Context, Outcome, PodWorker};
use crate::registration::{self, Health, Registration};
use crate::runtime::containerd::{self, Containerd};
use crate::runtime::cri::CriRuntime;
use crate::runtime::Runtime;
use crate::status::api::PodApi;

/// Errors that stop the agent before it runs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot find this node's IP address: {0}")]
    NodeIp(String),
    #[error("containerd: {0}")]
    Containerd(#[source] containerd::Error),
    #[error("runtime: {0}")]
    Runtime(#[source] crate::runtime::Error),
    #[error("images: {0}")]
    Images(#[source] images::Error),
    #[error("the agent's server: {0}")]
    Server(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to run the agent.
#[derive(Debug, Clone)]
pub struct Config {
    pub node_name: String,
    /// Everything of this node lives here: containerd, logs, CNI, PKI.
    pub data_dir: PathBuf,
    /// Use this CRI socket instead of starting containerd.
    pub container_runtime_endpoint: Option<PathBuf>,
    /// The containerd binary to start.
    pub containerd_binary: PathBuf,
    /// Image tarballs (OCI or docker-archive) imported at start, as k3s's
    /// airgap images (default `<data-dir>/images`).
    pub images_dir: PathBuf,
    /// Registries to pull from over plain HTTP (`host:port`).
    pub insecure_registries: Vec<String>,
    /// The agent's HTTPS port (logs); 0 picks one.
    pub port: u16,
    /// Address the agent's server listens on.
    pub bind_address: IpAddr,
    /// The node's IP (found from the default route when unset).
    pub node_ip: Option<IpAddr>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<k8s_openapi::api::core::v1::Taint>,
    /// The CNI bridge device.
    pub bridge: String,
    /// PEM of the CA whose client certificates (the API server's) the
    /// agent's server accepts.
    pub client_ca_pem: String,
    /// Stop every pod's containers when the agent stops.
    pub stop_pods_on_exit: bool,
    pub max_pods: u32,
    /// How often the Node's status and Lease are refreshed.
    pub status_update_frequency: Duration,
    /// Told the node name and the agent's endpoint as reached in-process
    /// once it is bound (`skiff server` hands it to its API
    /// server, which then reaches this node without TCP or TLS).
    pub on_local_endpoint: Option<LocalEndpointHook>,
}

/// See [`Config::on_local_endpoint`].
#[derive(Clone)]
pub struct LocalEndpointHook(pub Arc<LocalEndpointFn>);

/// What [`LocalEndpointHook`] calls: the node name and its endpoint.
pub type LocalEndpointFn = dyn Fn(&str, crate::server::LocalEndpoint) + Send + Sync;

impl std::fmt::Debug for LocalEndpointHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalEndpointHook")
    }
}

impl Config {
    pub fn new(node_name: &str, data_dir: PathBuf) -> Self {
        Self {
            images_dir: data_dir.join(images::import::AIRGAP_DIR),
            node_name: node_name.to_string(),
            data_dir,
            container_runtime_endpoint: None,
            containerd_binary: PathBuf::from("containerd"),
            insecure_registries: vec![],
            port: 10250,
            bind_address: IpAddr::from([0, 0, 0, 0]),
            node_ip: None,
            labels: BTreeMap::new(),
            taints: vec![],
            bridge: "skiff0".into(),
            client_ca_pem: String::new(),
            stop_pods_on_exit: false,
            max_pods: 110,
            status_update_frequency: Duration::from_secs(10),
            on_local_endpoint: None,
        }
    }

    pub fn log_root(&self) -> PathBuf {
        self.data_dir.join("pods")
    }
}

/// Status and deletion through the API.
#[derive(Clone)]
pub(crate) struct ApiPods(pub(crate) kube::Client);

impl std::fmt::Debug for ApiPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiPods")
    }
}

#[async_trait]
impl PodApi for ApiPods {
    async fn patch_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), String> {
        let body = serde_json::json!({
            "metadata": { "uid": pod.metadata.uid },
            "status": status,
        });
        let request = pods_request(pod)
            .patch_subresource(
                "status",
                pod.metadata.name.as_deref().unwrap_or_default(),
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .map_err(|e| e.to_string())?;
        // The answer (the whole pod) is not read: the pod watch brings it.
        self.0
            .request_text(request)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn delete(&self, pod: &Pod) -> Result<(), String> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let request = pods_request(pod)
            .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
            .map_err(|e| e.to_string())?;
        match self.0.request_text(request).await {
            Ok(_) => Ok(()),
            Err(e) if skiff_client::is_not_found(&e) || skiff_client::is_conflict(&e) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Requests about the pods of `pod`'s namespace. Status writes and
/// deletions go out as raw requests whose answers are not decoded into a
/// `Pod`: a decode of every answer was a few per cent of `skiff sim`.
fn pods_request(pod: &Pod) -> kube::core::Request {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
}

/// What the agent's server needs to know of pods: names to UIDs and
/// containers (from the pod watch), and which containers run (from the
/// relist). Cheap reads; written by `run_pods`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodIndex {
    pods: Arc<std::sync::RwLock<HashMap<(String, String), crate::server::PodLogInfo>>>,
    running: Arc<std::sync::RwLock<HashSet<(String, String)>>>,
}

impl PodIndex {
    fn lookup(&self, namespace: &str, name: &str) -> Option<crate::server::PodLogInfo> {
        let pods = self.pods.read().unwrap_or_else(|p| p.into_inner());
        pods.get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    fn is_running(&self, uid: &str, container: &str) -> bool {
        let running = self.running.read().unwrap_or_else(|p| p.into_inner());
        running.contains(&(uid.to_string(), container.to_string()))
    }

    fn set(&self, pod: &Pod) {
        let (Some(uid), Some(name)) = (pod.metadata.uid.clone(), pod.metadata.name.clone()) else {
            return;
        };
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let spec = pod.spec.as_ref();
        // (name, tty) of every container the spec names.
        let all: Vec<(String, bool)> = spec
            .into_iter()
            .flat_map(|s| {
                s.init_containers
                    .iter()
                    .flatten()
                    .map(|c| (c.name.clone(), c.tty == Some(true)))
                    .chain(
                        s.containers
                            .iter()
                            .map(|c| (c.name.clone(), c.tty == Some(true))),
                    )
                    .chain(
                        s.ephemeral_containers
                            .iter()
                            .flatten()
                            .map(|c| (c.name.clone(), c.tty == Some(true))),
                    )
            })
            .collect();
        let tty_containers = all
            .iter()
            .filter(|(_, tty)| *tty)
            .map(|(n, _)| n.clone())
            .collect();
        let containers = all.into_iter().map(|(n, _)| n).collect();
        let mut pods = self.pods.write().unwrap_or_else(|p| p.into_inner());
        pods.insert(
            (ns, name),
            crate::server::PodLogInfo {
                uid,
                containers,
                tty_containers,
            },
        );
    }

    fn remove(&self, pod: &Pod) {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut pods = self.pods.write().unwrap_or_else(|p| p.into_inner());
        if pods
            .get(&(ns.clone(), name.clone()))
            .map(|i| i.uid.as_str())
            == pod.metadata.uid.as_deref()
        {
            pods.remove(&(ns, name));
        }
    }

    fn set_running(&self, running: HashSet<(String, String)>) {
        *self.running.write().unwrap_or_else(|p| p.into_inner()) = running;
    }
}

/// ConfigMaps and Secrets read through the API when a container starts.
#[derive(Clone)]
pub(crate) struct ApiObjects(pub(crate) kube::Client);

impl std::fmt::Debug for ApiObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiObjects")
    }
}

#[async_trait]
impl crate::pod_worker::env::Objects for ApiObjects {
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, String> {
        let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(self.0.clone(), namespace);
        match api.get_opt(name).await {
            Ok(cm) => Ok(cm.map(|cm| cm.data.unwrap_or_default())),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.0.clone(), namespace);
        match api.get_opt(name).await {
            Ok(s) => Ok(s.map(|s| {
                let mut data: BTreeMap<String, Vec<u8>> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                // stringData is write-only upstream, folded into data on
                // write; read it too in case a store kept it.
                for (k, v) in s.string_data.unwrap_or_default() {
                    data.entry(k).or_insert_with(|| v.into_bytes());
                }
                data
            })),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn claim_path(&self, namespace: &str, name: &str) -> Result<String, String> {
        use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.0.clone(), namespace);
        let claim = match claims.get_opt(name).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(format!(
                "failed to fetch PVC from API server: persistentvolumeclaims \"{name}\" not found"
            ))
            }
            Err(e) => return Err(format!("failed to fetch PVC from API server: {e}")),
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!(
                "can't start pod because PVC {namespace}/{name} is being deleted"
            ));
        }
        let phase = claim
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let volume = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if phase != "Bound" || volume.is_empty() {
            return Err(format!(
                "PVC {namespace}/{name} has non-bound phase ({phase:?}) or empty pvc.Spec.VolumeName ({volume:?})"
            ));
        }
        let pvs: Api<PersistentVolume> = Api::all(self.0.clone());
        let pv = pvs
            .get(&volume)
            .await
            .map_err(|e| format!("failed to fetch PV {volume} from API server: {e}"))?;
        let spec = pv.spec.unwrap_or_default();
        spec.host_path
            .map(|h| h.path)
            .or(spec.local.map(|l| l.path))
            .ok_or_else(|| {
                format!("PV {volume}: only hostPath and local volumes can be mounted on this node")
            })
    }
}

/// The pods' cgroups under `skiff/NODE`, when the agent runs its own
/// containerd (cgroupfs driver); the root is recorded in the data dir for
/// `skiff reset`.
fn pod_cgroups(config: &Config) -> Option<crate::pod_worker::qos::PodCgroups> {
    if config.container_runtime_endpoint.is_some() {
        return None;
    }
    let cg = crate::pod_worker::qos::PodCgroups {
        fs: PathBuf::from("/sys/fs/cgroup"),
        root: format!("skiff/{}", config.node_name),
    };
    if let Err(e) = std::fs::write(config.data_dir.join(CGROUP_ROOT_FILE), &cg.root) {
        tracing::warn!(error = %e, "cannot record the node's cgroup root");
    }
    Some(cg)
}

/// The file in the data dir naming the node's cgroup root.
pub const CGROUP_ROOT_FILE: &str = "cgroup-root";

/// A running worker's handles.
#[derive(Debug)]
struct Handle {
    pod: watch::Sender<Option<Arc<Pod>>>,
    wake: Arc<Notify>,
}

/// The node agent.
pub struct Agent {
    config: Config,
    client: kube::Client,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Agent {
    pub fn new(config: Config, client: kube::Client) -> Self {
        Self { config, client }
    }

    /// Runs until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let config = self.config;
        let client = self.client;
        let log_root = config.log_root();
        for dir in [&config.data_dir, &log_root] {
            std::fs::create_dir_all(dir).map_err(|source| Error::DataDir {
                path: dir.clone(),
                source,
            })?;
        }
        let host_problems = network::prepare_host();
        for p in &host_problems {
            tracing::warn!(problem = %p, "host prerequisite");
        }
        let node_ip = match config.node_ip {
            Some(ip) => ip,
            None => registration::machine::node_ip().map_err(|e| Error::NodeIp(e.to_string()))?,
        };

        // The agent's HTTPS endpoint (logs), bound first: the Node
        // reports its port.
        let index = PodIndex::default();
        let server_runtime = crate::server::streaming::RuntimeSlot::default();
        let server = {
            let mut sc = crate::server::ServerConfig::new(
                config.node_name.clone(),
                std::net::SocketAddr::new(config.bind_address, config.port),
                config.data_dir.join("pki"),
                config.client_ca_pem.clone(),
                log_root.clone(),
            );
            sc.serving_ips = vec![node_ip];
            sc.runtime = server_runtime.clone();
            let pods = index.clone();
            sc.lookup = Some(Arc::new(move |ns: &str, name: &str| pods.lookup(ns, name)));
            let running = index.clone();
            sc.running = Some(Arc::new(move |uid: &str, c: &str| {
                running.is_running(uid, c)
            }));
            crate::server::bind(sc)
                .await
                .map_err(|e| Error::Server(e.to_string()))?
        };
        let port = server.local_addr().port();
        if let Some(hook) = &config.on_local_endpoint {
            (hook.0)(&config.node_name, server.local_endpoint(shutdown.clone()));
        }
        let server_task = tokio::spawn(server.run(shutdown.clone()));

        // Registration, status and Lease: first, so that a node whose
        // runtime cannot start is seen NotReady with the reason.
        let registration = Registration::new(
            client.clone(),
            registration::Config {
                node_name: config.node_name.clone(),
                labels: config.labels.clone(),
                taints: config.taints.clone(),
                kubelet_port: port,
                node_ip: Some(node_ip),
                max_pods: config.max_pods,
                root_dir: config.data_dir.clone(),
                annotations: BTreeMap::from([(
                    registration::LOCAL_PATH_DIR.to_string(),
                    crate::storage::local_path_dir(&config.data_dir)
                        .display()
                        .to_string(),
                )]),
                status_update_frequency: config.status_update_frequency,
                ..registration::Config::new(&config.node_name, &config.data_dir)
            },
        );
        let mut pod_cidr = registration.pod_cidr();
        let network_down = network::plugin_not_ready();
        let (health_tx, health_rx) = watch::channel(Health {
            runtime_version: None,
            runtime_problem: Some(registration::RUNTIME_DOWN.into()),
            network_problem: Some(network_down.clone()),
            host_problems: host_problems.clone(),
        });
        let registration_task = tokio::spawn(registration.run(health_rx, shutdown.clone()));

        // The runtime: our own containerd unless told otherwise, retried
        // (the node NotReady meanwhile) until it starts.
        let cni_conf_dir = config.data_dir.join("cni").join("net.d");
        let (up_tx, up_rx) = watch::channel(true);
        let mut retry = Duration::from_secs(1);
        // containerd outlives the pod workers, so that --stop-pods-on-exit
        // can still stop them.
        let containerd_stop = CancellationToken::new();
        let (socket, containerd_task) = loop {
            let started = match &config.container_runtime_endpoint {
                Some(endpoint) => Ok((endpoint.clone(), None)),
                None => {
                    let mut cfg =
                        containerd::Config::new(&config.data_dir, images::builtin::PAUSE_IMAGE);
                    cfg.binary = config.containerd_binary.clone();
                    cfg.cni_conf_dir = cni_conf_dir.clone();
                    cfg.insecure_registries = config.insecure_registries.clone();
                    Containerd::start(cfg).await.map(|c| {
                        let socket = c.socket();
                        (
                            socket,
                            Some(tokio::spawn(c.run(up_tx.clone(), containerd_stop.clone()))),
                        )
                    })
                }
            };
            let problem = match started {
                Ok((socket, task)) => match CriRuntime::new(socket.clone()) {
                    Ok(cri) => match cri.version().await {
                        Ok(_) => break (socket, task),
                        Err(e) => {
                            if let Some(t) = task {
                                t.abort();
                            }
                            e.go_text()
                        }
                    },
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            tracing::error!(error = %problem, retry_in = ?retry, "the container runtime cannot start; the node stays NotReady");
            health_tx.send_modify(|h| {
                h.runtime_problem = Some(format!("{}: {problem}", registration::RUNTIME_DOWN))
            });
            tokio::select! {
                _ = shutdown.cancelled() => {
                    let _ = registration_task.await;
                    let _ = server_task.await;
                    return Ok(());
                }
                _ = tokio::time::sleep(retry) => {}
            }
            retry = (retry * 2).min(Duration::from_secs(30));
        };
        let runtime: Arc<dyn Runtime> =
            Arc::new(CriRuntime::new(socket.clone()).map_err(Error::Runtime)?);
        // exec, attach and port-forward on the endpoint from now on.
        let _ = server_runtime.set(runtime.clone());
        let version = runtime.version().await.map_err(Error::Runtime)?;
        tracing::info!(runtime = %version.runtime_name, version = %version.runtime_version, "container runtime is up");
        let runtime_version = format!("{}://{}", version.runtime_name, version.runtime_version);
        health_tx.send_modify(|h| {
            h.runtime_version = Some(runtime_version.clone());
            h.runtime_problem = None;
        });

        let mut present = HashSet::new();
        for name in [images::builtin::PAUSE_IMAGE, images::builtin::BUSYBOX_IMAGE] {
            if runtime.image_status(name).await.ok().flatten().is_some() {
                present.insert(name.to_string());
            }
        }
        let imported = images::import::ensure_builtin(
            std::path::Path::new("ctr"),
            &socket,
            &config.images_dir,
            None,
            |name: &str| present.contains(name),
        )
        .await
        .map_err(Error::Images)?;
        for (what, e) in &imported.failed {
            tracing::warn!(image = %what, error = %e, "image not imported");
        }

        // The network, once the node has a podCIDR.
        let network_ready = Arc::new(AtomicBool::new(false));
        let network_task = {
            let network_ready = network_ready.clone();
            let shutdown = shutdown.clone();
            let cni = CniConfig {
                bridge: config.bridge.clone(),
                pod_cidr: String::new(),
                ipam_dir: config.data_dir.join("cni").join("ipam"),
            };
            let runtime = runtime.clone();
            let health_tx = health_tx.clone();
            let host_problems = host_problems.clone();
            let runtime_version = runtime_version.clone();
            let mut up_rx = up_rx.clone();
            tokio::spawn(async move {
                let mut written: Option<String> = None;
                loop {
                    let cidr = pod_cidr.borrow_and_update().clone();
                    if let Some(cidr) = cidr.filter(|c| written.as_ref() != Some(c)) {
                        let cni = CniConfig {
                            pod_cidr: cidr.clone(),
                            ..cni.clone()
                        };
                        match cni.write(&cni_conf_dir) {
                            Ok(path) => {
                                tracing::info!(pod_cidr = %cidr, conflist = %path.display(), "CNI config written");
                                written = Some(cidr);
                            }
                            Err(e) => tracing::warn!(error = %e, "cannot write the CNI config"),
                        }
                    }
                    // What the runtime says of itself decides the health.
                    let up = *up_rx.borrow_and_update();
                    let health =
                        health_of(runtime.as_ref(), up, &runtime_version, &host_problems).await;
                    network_ready.store(health.network_problem.is_none(), Ordering::SeqCst);
                    health_tx.send_if_modified(|h| {
                        if *h != health {
                            *h = health;
                            true
                        } else {
                            false
                        }
                    });
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        r = pod_cidr.changed() => { if r.is_err() { return } }
                        _ = up_rx.changed() => {}
                        _ = tokio::time::sleep(if network_ready.load(Ordering::SeqCst) { Duration::from_secs(5) } else { Duration::from_millis(200) }) => {}
                    }
                }
            })
        };

        // Pods.
        let recorder =
            skiff_client::recorder::Recorder::new(client.clone(), "kubelet", &config.node_name)
                .with_host(&config.node_name);
        let ctx = Arc::new(Context {
            runtime: runtime.clone(),
            events: Arc::new(recorder.clone()),
            api: Arc::new(crate::status::manager::StatusManager::start(
                Arc::new(ApiPods(client.clone())),
                shutdown.clone(),
            )),
            node_ip: node_ip.to_string(),
            log_root: log_root.clone(),
            network_ready: network_ready.clone(),
            objects: Arc::new(ApiObjects(client.clone())),
            node_name: config.node_name.clone(),
            node_cpu_milli: std::thread::available_parallelism()
                .map(|n| n.get() as i64 * 1000)
                .unwrap_or(1000),
            node_memory: std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|m| registration::machine::mem_total_bytes(&m))
                .map(|b| b as i64)
                .unwrap_or(0),
            volumes_root: config.data_dir.join("volumes"),
            cluster_dns: Vec::new(),
            cgroups: pod_cgroups(&config),
        });
        let cleaner = tokio::spawn(
            crate::storage::LocalPathCleaner {
                client: client.clone(),
                node: config.node_name.clone(),
                dir: crate::storage::local_path_dir(&config.data_dir),
            }
            .run(shutdown.clone()),
        );
        let pods = run_pods(
            node_pod_events(client.clone(), &config.node_name),
            ctx,
            index,
            shutdown.clone(),
        );
        pods.await;
        let _ = cleaner.await;
        let _ = server_task.await;

        let _ = network_task.await;
        if let Ok(Err(e)) = registration_task.await {
            tracing::warn!(error = %e, "node registration stopped with an error");
        }
        if config.stop_pods_on_exit {
            stop_everything(runtime.as_ref()).await;
        }
        recorder.flush().await;
        containerd_stop.cancel();
        if let Some(task) = containerd_task {
            let _ = task.await;
        }
        Ok(())
    }
}

async fn health_of(runtime: &dyn Runtime, up: bool, version: &str, host: &[String]) -> Health {
    let mut health = Health {
        runtime_version: Some(version.to_string()),
        runtime_problem: None,
        network_problem: None,
        host_problems: host.to_vec(),
    };
    if !up {
        health.runtime_problem = Some(registration::RUNTIME_DOWN.into());
        return health;
    }
    match runtime.status().await {
        Err(e) => {
            health.runtime_problem =
                Some(format!("{}: {}", registration::RUNTIME_DOWN, e.go_text()))
        }
        Ok(status) => {
            let conditions = status.status.map(|s| s.conditions).unwrap_or_default();
            for c in conditions.iter().filter(|c| !c.status) {
                if c.r#type == "NetworkReady" {
                    health.network_problem =
                        Some(registration::network_not_ready(&c.reason, &c.message));
                } else {
                    health.runtime_problem =
                        Some(registration::runtime_not_ready(&c.reason, &c.message));
                }
            }
        }
    }
    health
}

async fn stop_everything(runtime: &dyn Runtime) {
    if let Ok(containers) = runtime.list_containers().await {
        for c in containers {
            let _ = runtime.stop_container(&c.id, 10).await;
        }
    }
    if let Ok(sandboxes) = runtime.list_pod_sandboxes().await {
        for s in sandboxes {
            let _ = runtime.stop_pod_sandbox(&s.id).await;
            let _ = runtime.remove_pod_sandbox(&s.id).await;
        }
    }
}

/// Resolves once the pod changes in a way that must not wait for the
/// sync in progress: it is deleted, gone, or its grace period shrank.
///
/// It watches a clone of the worker's receiver, so changes it passes over
/// still wake the worker afterwards.
async fn more_urgent(mut rx: watch::Receiver<Option<Arc<Pod>>>, current: Option<&Pod>) {
    let deleting = current.is_some_and(|p| p.metadata.deletion_timestamp.is_some());
    let grace = current.and_then(|p| p.metadata.deletion_grace_period_seconds);
    loop {
        if rx.changed().await.is_err() {
            return;
        }
        let urgent = match rx.borrow().as_deref() {
            None => true,
            Some(p) => {
                let now_deleting = p.metadata.deletion_timestamp.is_some();
                let shorter = match (grace, p.metadata.deletion_grace_period_seconds) {
                    (Some(old), Some(new)) => new < old,
                    _ => false,
                };
                (now_deleting && !deleting) || shorter
            }
        };
        if urgent {
            return;
        }
    }
}

/// Spawns a worker task for `uid`.
fn spawn_worker(
    ctx: Arc<Context>,
    uid: String,
    pod: Option<Arc<Pod>>,
    shutdown: CancellationToken,
) -> Handle {
    let (tx, mut rx) = watch::channel(pod);
    let wake = Arc::new(Notify::new());
    let notify = wake.clone();
    tokio::spawn(async move {
        let mut worker = PodWorker::new(ctx, uid).with_wake(notify.clone());
        let mut gone = false;
        loop {
            let pod = if gone {
                None
            } else {
                rx.borrow_and_update().clone()
            };
            // A deletion (or a shorter grace period) arriving during a
            // long sync (a pull, a stop) cuts it short: the next pass
            // acts on it, as upstream's pod workers cancel the sync.
            let outcome = tokio::select! {
                // Boxed: the sync's future (kilobytes) is then held only
                // while it runs, not by every idle worker.
                o = Box::pin(worker.sync(pod.as_deref())) => o,
                () = more_urgent(rx.clone(), pod.as_deref()), if !gone => Outcome::Continue(Some(Instant::now())),
                _ = shutdown.cancelled() => return,
            };
            let deadline = match outcome {
                Outcome::Done => return,
                Outcome::Continue(at) => {
                    at.unwrap_or_else(|| Instant::now() + Duration::from_secs(10))
                }
            };
            // Wait for a reason to sync again. The echo of the worker's own
            // status write is not one (it would cost a CRI read per write).
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = rx.changed(), if !gone => {
                        if r.is_err() {
                            gone = true;
                            break;
                        }
                        let echo = rx.borrow().as_deref().is_some_and(|p| worker.is_echo(p));
                        if !echo {
                            break;
                        }
                    }
                    _ = notify.notified() => break,
                    _ = tokio::time::sleep_until(deadline.into()) => break,
                }
            }
        }
    });
    Handle { pod: tx, wake }
}

/// The pod watch (this node's pods only), the workers, and the relist.
///
/// A worker keeps its handle until its task ends, so a UID never has two
/// workers; a pod gone from the API is told so (`None`) and tears itself
/// down. The relist runs in its own task: a runtime that hangs delays
/// only the relist, never the watch.
/// The watch events of one node's pods (from its own watch, or from a
/// watch shared by simulated nodes).
pub(crate) type PodEvents =
    futures::stream::BoxStream<'static, Result<watcher::Event<Pod>, watcher::Error>>;

/// The node's pods from the API: a watch of `spec.nodeName=NODE`.
fn node_pod_events(client: kube::Client, node: &str) -> PodEvents {
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    pod_watch(client, config, "pods")
}

/// Pods from a watch, decoded without managedFields ([`Trimmed`]): no pod
/// worker reads them, and they were the larger part of each decoded pod.
/// A change that does not decode as a Pod is skipped with a warning, and
/// the version last seen is kept (a pod the agent cannot read is not a
/// pod to stop).
pub(crate) fn pod_watch(
    client: kube::Client,
    config: watcher::Config,
    what: &'static str,
) -> PodEvents {
    let api: Api<Trimmed<Pod>> = Api::all(client);
    watcher(api, config)
        .default_backoff()
        .filter_map(move |r| async move {
            match r {
                Ok(e) => untrim(e, what, Broken::Keep).map(Ok),
                Err(e) => Some(Err(e)),
            }
        })
        .boxed()
}

/// Runs a worker per pod of `stream` until `shutdown`: the node's pod
/// dispatcher (upstream's pod workers plus the PLEG relist).
pub(crate) async fn run_pods(
    mut stream: PodEvents,
    ctx: Arc<Context>,
    index: PodIndex,
    shutdown: CancellationToken,
) {
    let mut workers: HashMap<String, Handle> = HashMap::new();
    // UIDs seen in the current (re)list, between Init and InitDone.
    let mut listing: Option<HashSet<String>> = None;
    let mut synced = false;
    let (relist_tx, mut relists) = tokio::sync::mpsc::channel(1);
    let relist_task = {
        let runtime = ctx.runtime.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RELIST_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut listed: Option<(u64, tokio::time::Instant)> = None;
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                // Read before the relist, so a change during it is seen
                // by the next one.
                let generation = runtime.generation();
                if let (Some(g), Some((last, at))) = (generation, listed) {
                    if g == last && at.elapsed() < EVENTED_RELIST_PERIOD {
                        continue;
                    }
                }
                match relist_fingerprints(runtime.as_ref()).await {
                    Ok(found) => {
                        listed = generation.map(|g| (g, tokio::time::Instant::now()));
                        if relist_tx.send(found).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "relist failed"),
                }
            }
        })
    };
    let mut fingerprints: Fingerprints = BTreeMap::new();
    let mut swept = tokio::time::Instant::now();
    loop {
        // Workers whose task ended (their pod is gone, or torn down).
        workers.retain(|_, h| !h.pod.is_closed());
        tokio::select! {
            _ = shutdown.cancelled() => break,
            event = stream.next() => {
                let Some(event) = event else { break };
                match event {
                    Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => {
                        let Some(uid) = pod.metadata.uid.clone() else { continue };
                        index.set(&pod);
                        if let Some(seen) = listing.as_mut() {
                            seen.insert(uid.clone());
                        }
                        let pod = Arc::new(pod);
                        match workers.get(&uid) {
                            Some(h) if !h.pod.is_closed() => { h.pod.send_replace(Some(pod)); }
                            _ => {
                                let h = spawn_worker(ctx.clone(), uid.clone(), Some(pod), shutdown.clone());
                                workers.insert(uid, h);
                            }
                        }
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        index.remove(&pod);
                        if let Some(h) = pod.metadata.uid.as_deref().and_then(|uid| workers.get(uid)) {
                            h.pod.send_replace(None);
                        }
                    }
                    Ok(watcher::Event::Init) => {
                        listing = Some(HashSet::new());
                    }
                    Ok(watcher::Event::InitDone) => {
                        // Pods that vanished while the watch was away.
                        if let Some(seen) = listing.take() {
                            for (uid, h) in &workers {
                                if !seen.contains(uid) {
                                    h.pod.send_replace(None);
                                }
                            }
                        }
                        synced = true;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "pod watch failed; retrying");
                    }
                }
            }
            Some((now, running)) = relists.recv() => {
                index.set_running(running);
                for (uid, fp) in &now {
                    match workers.get(uid) {
                        Some(h) if fingerprints.get(uid) != Some(fp) => h.wake.notify_one(),
                        Some(_) => {}
                        // Runtime objects of a pod the API does not have
                        // (deleted while the agent was away, say).
                        None if synced => {
                            tracing::info!(%uid, "removing containers of a pod that is not in the API");
                            let h = spawn_worker(ctx.clone(), uid.clone(), None, shutdown.clone());
                            workers.insert(uid.clone(), h);
                        }
                        None => {}
                    }
                }
                fingerprints = now;
                if synced && swept.elapsed() >= LOG_SWEEP_PERIOD {
                    swept = tokio::time::Instant::now();
                    remove_stale_log_dirs(&ctx.log_root, |uid| {
                        workers.contains_key(uid) || fingerprints.contains_key(uid)
                    });
                }
            }
        }
    }
    relist_task.abort();
}

/// How often the runtime is relisted (upstream's PLEG relist period).
const RELIST_PERIOD: Duration = Duration::from_secs(1);

/// How often a runtime that reports its changes ([`Runtime::generation`])
/// is relisted when nothing changed (upstream's evented PLEG period).
const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(300);

/// How often pod log dirs nobody knows are looked for, at a relist.
const LOG_SWEEP_PERIOD: Duration = Duration::from_secs(30);

/// Per pod UID, its sandboxes' and containers' (ID, state): what changes
/// when something happens in the runtime.
async fn relist_fingerprints(
    runtime: &dyn Runtime,
) -> crate::runtime::Result<(Fingerprints, HashSet<(String, String)>)> {
    let mut out: Fingerprints = BTreeMap::new();
    let mut running = HashSet::new();
    let listed = runtime.relist().await?;
    for s in listed.sandboxes {
        if let Some(uid) = s.pod_uid {
            out.entry(uid).or_default().push((s.id, s.state));
        }
    }
    for c in listed.containers {
        if let Some(uid) = c.pod_uid {
            if c.state == crate::runtime::api::ContainerState::ContainerRunning as i32 {
                if let Some(name) = c.container_name {
                    running.insert((uid.clone(), name));
                }
            }
            out.entry(uid).or_default().push((c.id, c.state + 10));
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    Ok((out, running))
}

type Fingerprints = BTreeMap<String, Vec<(String, i32)>>;

/// Removes pod log dirs (`<ns>_<name>_<uid>`) of pods that neither the
/// API nor the runtime has any more (deleted while the agent was away).
fn remove_stale_log_dirs(log_root: &std::path::Path, known: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(log_root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((_, uid)) = name.rsplit_once('_') else {
            continue;
        };
        if !known(uid) {
            tracing::info!(dir = %e.path().display(), "removing the logs of a pod that is gone");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

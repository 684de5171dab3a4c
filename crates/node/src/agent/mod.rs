//! [`Agent::run`]: the node agent put together. It prepares the host,
//! starts (or connects to) containerd, imports the built-in images,
//! registers the Node and keeps its status and Lease fresh, writes the CNI
//! config once the node has a podCIDR, serves logs, and runs one
//! [`crate::pod_worker::sync::PodWorker`] per pod bound to this node,
//! woken by the pod watch and by a relist of the runtime every second.
//!
//! This file only wires the parts: [`config`] says how to run,
//! [`dispatch`] keeps the pod workers, [`relist`] is upstream's PLEG,
//! [`api`] adapts the kube client to the workers' API seams, and
//! [`pod_index`] tells the agent's server about pods.
//!
//! It talks to the cluster only through its kube client. Containers
//! outlive it unless `stop_pods_on_exit`.

pub(crate) mod api;
pub mod config;
pub(crate) mod dispatch;
pub(crate) mod pod_index;
mod relist;
pub mod services;

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::api::{ApiObjects, ApiPods};
use self::config::Config;
use self::dispatch::{node_pod_events, run_pods};
use self::pod_index::PodIndex;
use crate::images;
use crate::network::{self, CniConfig};
use crate::pod_worker::sync::Context;
use crate::registration::{self, Health, Registration};
use crate::runtime::containerd::{self, Containerd};
use crate::runtime::cri::CriRuntime;
use crate::runtime::Runtime;

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
        // The kubelet's metrics, served on the endpoint; the pods' cgroups
        // are read under the node's own cgroup when the agent keeps them.
        // Metrics off: none are kept, and the endpoint has no routes for
        // them.
        let metrics = config
            .metrics
            .then(|| Arc::new(crate::metrics::NodeMetrics::new()));
        let metrics_endpoint = metrics.clone().map(|metrics| {
            Arc::new(crate::metrics::Endpoint::new(
                metrics,
                config
                    .container_runtime_endpoint
                    .is_none()
                    .then(|| format!("skiff/{}", config.node_name)),
            ))
        });
        let index = match &metrics {
            Some(metrics) => PodIndex::default().with_metrics(metrics.clone()),
            None => PodIndex::default(),
        };
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
            sc.metrics = metrics_endpoint.clone();
            // Callers from the network are judged by the API server
            // (SubjectAccessReview), as the kubelet's webhook authorizer.
            sc.authorizer = Some(Arc::new(crate::server::authz::Authorizer::new(
                config.node_name.clone(),
                Arc::new(crate::server::authz::ApiReview(client.clone())),
            )));
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

        // The kubelet's events (about pods and about this node), and its
        // first: Starting.
        let recorder =
            skiff_client::recorder::Recorder::new(client.clone(), "kubelet", &config.node_name)
                .with_host(&config.node_name);
        registration::events::NodeEvents::new(recorder.clone(), &config.node_name).starting();

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
        )
        .with_events(recorder.clone());
        let mut pod_cidr = registration.pod_cidr();
        // Services (container environments, the proxy, DNS) through one
        // shared informer per kind.
        let informers = skiff_client::informer::Informers::new(client.clone(), shutdown.clone());
        let service_informer = informers.get::<k8s_openapi::api::core::v1::Service>();
        let service_tasks = services::start(
            &config,
            client.clone(),
            &informers,
            node_ip,
            registration.pod_cidr(),
            &shutdown,
        );
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
                    for task in service_tasks {
                        let _ = task.await;
                    }
                    return Ok(());
                }
                _ = tokio::time::sleep(retry) => {}
            }
            retry = (retry * 2).min(Duration::from_secs(30));
        };
        // Every CRI call timed for kubelet_runtime_operations_* (when
        // metrics are on).
        let cri: Arc<dyn Runtime> =
            Arc::new(CriRuntime::new(socket.clone()).map_err(Error::Runtime)?);
        let runtime: Arc<dyn Runtime> = match &metrics {
            Some(metrics) => Arc::new(crate::metrics::runtime::Metered::new(cri, metrics.clone())),
            None => cri,
        };
        if let Some(endpoint) = &metrics_endpoint {
            let _ = endpoint.runtime.set(runtime.clone());
        }
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

        // Pod traffic across nodes: the overlay follows the Node watch and
        // hands the peers' podCIDRs to the masquerade rules below.
        let (peers_tx, mut peers_rx) = watch::channel(Vec::<String>::new());
        let overlay_links: Arc<dyn network::overlay::links::Links> =
            Arc::new(network::overlay::links::IpCommand);
        let overlay = match node_ip {
            IpAddr::V4(public_ip) => Some(network::overlay::Settings {
                backend: config.overlay,
                node_name: config.node_name.clone(),
                public_ip,
                device: network::overlay::plan::device_for_bridge(&config.bridge),
                vni: config.vxlan_vni,
                port: config.vxlan_port,
                cluster_cidr: config
                    .cluster_cidr
                    .as_deref()
                    .and_then(network::overlay::plan::Cidr::parse),
                resync: Duration::from_secs(30),
            }),
            IpAddr::V6(_) => None,
        };
        let pod_mtu = overlay
            .as_ref()
            .and_then(|settings| network::overlay::pod_mtu(settings, overlay_links.as_ref()));
        let overlay_task = overlay
            .filter(|settings| settings.backend != network::overlay::plan::Backend::None)
            .map(|settings| {
                tokio::spawn(network::overlay::run(
                    settings,
                    overlay_links.clone(),
                    informers.get::<k8s_openapi::api::core::v1::Node>(),
                    kube::Api::all(client.clone()),
                    peers_tx,
                    shutdown.clone(),
                ))
            });

        // The network, once the node has a podCIDR.
        let network_ready = Arc::new(AtomicBool::new(false));
        let network_task = {
            let network_ready = network_ready.clone();
            let shutdown = shutdown.clone();
            let cni = CniConfig {
                bridge: config.bridge.clone(),
                pod_cidr: String::new(),
                ipam_dir: config.data_dir.join("cni").join("ipam"),
                mtu: pod_mtu,
                peer_cidrs: vec![],
            };
            let runtime = runtime.clone();
            let health_tx = health_tx.clone();
            let host_problems = host_problems.clone();
            let runtime_version = runtime_version.clone();
            let mut up_rx = up_rx.clone();
            tokio::spawn(async move {
                let mut written: Option<(String, Vec<String>)> = None;
                loop {
                    let cidr = pod_cidr.borrow_and_update().clone();
                    let peers = peers_rx.borrow_and_update().clone();
                    if let Some(cidr) =
                        cidr.filter(|c| written.as_ref() != Some(&(c.clone(), peers.clone())))
                    {
                        let cni = CniConfig {
                            pod_cidr: cidr.clone(),
                            peer_cidrs: peers.clone(),
                            ..cni.clone()
                        };
                        match cni.write(&cni_conf_dir) {
                            Ok(path) => {
                                tracing::info!(pod_cidr = %cidr, peers = ?peers, conflist = %path.display(), "CNI config written");
                                written = Some((cidr, peers));
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
                        _ = peers_rx.changed() => {}
                        _ = up_rx.changed() => {}
                        _ = tokio::time::sleep(if network_ready.load(Ordering::SeqCst) { Duration::from_secs(5) } else { Duration::from_millis(200) }) => {}
                    }
                }
            })
        };

        // Pods.
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
            objects: Arc::new(ApiObjects(
                client.clone(),
                Some(service_informer),
                Arc::default(),
            )),
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
            cluster_dns: config.cluster_dns.iter().map(|ip| ip.to_string()).collect(),
            resolv_conf: config.resolv_conf.clone(),
            cluster_domain: config.cluster_domain.clone(),
            cgroups: pod_cgroups(&config),
            timelines: config.timelines.clone(),
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
        if let Some(task) = overlay_task {
            let _ = task.await;
        }
        for task in service_tasks {
            let _ = task.await;
        }
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

//! How to run the agent: [`Config`] (names, directories, the runtime
//! endpoint, the agent's server, labels and taints, limits) with its
//! defaults, and the hook that hands `skiff server` the agent's
//! in-process endpoint.
//!
//! Plain data: nothing here starts, reads or writes anything.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::images;

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
    /// The cluster DNS servers ClusterFirst pods use (kubelet's
    /// --cluster-dns).
    pub cluster_dns: Vec<std::net::Ipv4Addr>,
    /// The node's resolv.conf (kubelet's --resolv-conf): what Default pods
    /// get and where the DNS server forwards names outside the cluster.
    pub resolv_conf: PathBuf,
    /// The cluster's DNS domain (kubelet's --cluster-domain).
    pub cluster_domain: String,
    /// Run the service proxy.
    pub service_proxy: bool,
    /// Run the DNS server (on the pod bridge's gateway, port 53) and
    /// publish it as this node's endpoint of the cluster DNS Service.
    pub dns_server: bool,
    /// How pod traffic crosses nodes (k3s's `--flannel-backend`).
    pub overlay: crate::network::overlay::plan::Backend,
    /// The VXLAN network identifier and UDP port all nodes share.
    pub vxlan_vni: u32,
    pub vxlan_port: u16,
    /// The pod network and Service range the proxy needs.
    pub cluster_cidr: Option<String>,
    pub service_cidr: Option<String>,
    /// Told the node name and the agent's endpoint as reached in-process
    /// once it is bound (`skiff server` hands it to its API
    /// server, which then reaches this node without TCP or TLS).
    pub on_local_endpoint: Option<LocalEndpointHook>,
    /// Where pods' finished startup timelines are kept (readers in the
    /// process share it); `None` records none and writes no
    /// `StartupTimeline` events.
    pub timelines: Option<crate::timeline::Store>,
    /// Whether the agent records and serves its metrics (default on).
    /// Off: no pod worker, pod start or runtime operation figures are
    /// kept (the runtime is not wrapped in the timing layer), and
    /// `/metrics` and `/metrics/resource` are 404.
    pub metrics: bool,
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
            cluster_dns: vec![],
            cluster_domain: "cluster.local".into(),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            service_proxy: false,
            dns_server: false,
            overlay: crate::network::overlay::plan::Backend::Vxlan,
            vxlan_vni: 1,
            vxlan_port: 8472,
            cluster_cidr: None,
            service_cidr: None,
            on_local_endpoint: None,
            timelines: Some(crate::timeline::Store::new()),
            metrics: true,
        }
    }

    pub fn log_root(&self) -> PathBuf {
        self.data_dir.join("pods")
    }
}

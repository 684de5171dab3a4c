//! The node's part in Service traffic and names: it starts the service
//! proxy (`skiff-proxy`, one nftables table per node, recorded in the data
//! dir for `skiff reset`) and the DNS server (`skiff-dns`, on the pod
//! bridge's gateway address, port 53, once the node has a podCIDR), and
//! publishes that address as this node's endpoint of the cluster DNS
//! Service (an EndpointSlice owned by the Node, so it goes with it).
//!
//! Both follow the agent's shared informers; nothing here reads the API
//! per packet or per query.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams};
use skiff_client::informer::{Change, Informers};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::Config;

/// The file in the data dir naming the proxy's nftables table.
pub const PROXY_TABLE_FILE: &str = "proxy-table";

/// The cluster DNS Service the node's endpoint is published for.
const DNS_NAMESPACE: &str = "kube-system";
const DNS_SERVICE: &str = "kube-dns";

/// Starts what `config` asks for; the tasks end after `shutdown` (the
/// proxy's once its table is removed).
pub(crate) fn start(
    config: &Config,
    client: kube::Client,
    informers: &Informers,
    node_ip: IpAddr,
    pod_cidr: watch::Receiver<Option<String>>,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![];
    if config.service_proxy {
        let table = skiff_proxy::Config::table_for_bridge(&config.bridge);
        if let Err(e) = std::fs::write(config.data_dir.join(PROXY_TABLE_FILE), &table) {
            tracing::warn!(error = %e, "cannot record the proxy's table");
        }
        let proxy = skiff_proxy::Config {
            node_name: config.node_name.clone(),
            table,
            node_ips: match node_ip {
                IpAddr::V4(ip) => vec![ip],
                IpAddr::V6(_) => vec![],
            },
            cluster_cidr: config.cluster_cidr.clone(),
            service_cidr: config.service_cidr.clone(),
        };
        tasks.push(tokio::spawn(skiff_proxy::run(
            proxy,
            informers.clone(),
            Arc::new(skiff_proxy::NftCommand::default()),
            shutdown.clone(),
        )));
    }
    if config.dns_server {
        tasks.push(tokio::spawn(run_dns(
            config.clone(),
            client,
            informers.clone(),
            pod_cidr,
            shutdown.clone(),
        )));
    }
    tasks
}

/// The first host address of `cidr` (the bridge plugin's gateway).
pub fn gateway_of(cidr: &str) -> Option<Ipv4Addr> {
    let (ip, bits) = cidr.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok().filter(|b| *b <= 30)?;
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    Some(Ipv4Addr::from((u32::from(ip) & mask) + 1))
}

async fn run_dns(
    config: Config,
    client: kube::Client,
    informers: Informers,
    mut pod_cidr: watch::Receiver<Option<String>>,
    shutdown: CancellationToken,
) {
    let gateway = loop {
        if let Some(gw) = pod_cidr.borrow_and_update().as_deref().and_then(gateway_of) {
            break gw;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = pod_cidr.changed() => if changed.is_err() { return },
        }
    };
    let resolv = std::fs::read_to_string(&config.resolv_conf).unwrap_or_default();
    let mut dns = skiff_dns::Config::new(
        vec![SocketAddr::new(IpAddr::V4(gateway), 53)],
        &config.cluster_domain,
    );
    dns.upstreams = skiff_dns::upstreams_from_resolv_conf(&resolv, &[IpAddr::V4(gateway)]);
    let publish = tokio::spawn(publish_endpoint(
        client,
        informers.clone(),
        config.node_name.clone(),
        gateway,
        shutdown.clone(),
    ));
    tracing::info!(listen = %gateway, upstreams = ?dns.upstreams, "cluster DNS");
    if let Err(e) = skiff_dns::run(dns, informers, shutdown).await {
        tracing::error!(error = %e, "the cluster DNS server stopped");
    }
    let _ = publish.await;
}

/// The EndpointSlice of this node's DNS server: the slice's name is cut
/// to a valid length.
fn slice_name(node: &str) -> String {
    let name = format!("{DNS_SERVICE}-{node}");
    let mut cut: String = name.chars().take(63).collect();
    while cut.ends_with(['-', '.']) {
        cut.pop();
    }
    cut
}

/// The slice of this node's DNS endpoint, owned by the Node.
pub fn dns_slice(node: &Node, gateway: Ipv4Addr) -> EndpointSlice {
    let node_name = node.metadata.name.clone().unwrap_or_default();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": slice_name(&node_name),
            "namespace": DNS_NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": DNS_SERVICE,
                "endpointslice.kubernetes.io/managed-by": "skiff-agent",
                "k8s-app": "kube-dns",
            },
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": node_name,
                "uid": node.metadata.uid.clone().unwrap_or_default(),
            }],
        },
        "addressType": "IPv4",
        "endpoints": [{
            "addresses": [gateway.to_string()],
            "conditions": {"ready": true, "serving": true, "terminating": false},
            "nodeName": node_name,
        }],
        "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "metrics", "port": 9153, "protocol": "TCP"},
        ],
    }))
    .unwrap_or_default()
}

/// Applies the node's DNS slice once the Node exists (retrying while the
/// API or the Node is not there).
async fn publish_endpoint(
    client: kube::Client,
    informers: Informers,
    node_name: String,
    gateway: Ipv4Addr,
    shutdown: CancellationToken,
) {
    // Deleted (by hand, or with a Node that was deleted and came back):
    // published again.
    let name = slice_name(&node_name);
    let mut changes = Box::pin(informers.get::<EndpointSlice>().changes());
    let nodes: Api<Node> = Api::all(client.clone());
    let slices: Api<EndpointSlice> = Api::namespaced(client, DNS_NAMESPACE);
    let mut retry = Duration::from_millis(200);
    loop {
        let done = match nodes.get_opt(&node_name).await {
            Ok(Some(node)) => {
                let slice = dns_slice(&node, gateway);
                let params = PatchParams::apply("skiff-agent").force();
                match slices
                    .patch(&slice_name(&node_name), &params, &Patch::Apply(&slice))
                    .await
                {
                    Ok(_) => true,
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot publish the DNS endpoint yet");
                        false
                    }
                }
            }
            Ok(None) => false,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the Node yet");
                false
            }
        };
        if done {
            retry = Duration::from_millis(200);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    change = changes.next() => match change {
                        None => return,
                        Some(Change::Deleted(s)) if s.metadata.name.as_deref() == Some(name.as_str())
                            && s.metadata.namespace.as_deref() == Some(DNS_NAMESPACE) => break,
                        Some(_) => {}
                    },
                }
            }
            tracing::info!(slice = %name, "the node's DNS endpoint was deleted; publishing it again");
            continue;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(Duration::from_secs(10));
    }
}

/// The nftables table recorded in `data_dir`, for `skiff reset`.
pub fn recorded_table(data_dir: &Path) -> Option<String> {
    std::fs::read_to_string(data_dir.join(PROXY_TABLE_FILE))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_and_slice() {
        assert_eq!(
            gateway_of("10.42.3.0/24"),
            Some("10.42.3.1".parse().unwrap())
        );
        assert_eq!(
            gateway_of("10.42.3.7/24"),
            Some("10.42.3.1".parse().unwrap())
        );
        assert_eq!(gateway_of("bad"), None);
        let node: Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n1", "uid": "u1"}}))
                .unwrap();
        let s = dns_slice(&node, "10.42.3.1".parse().unwrap());
        assert_eq!(s.metadata.name.as_deref(), Some("kube-dns-n1"));
        assert_eq!(s.endpoints[0].addresses, ["10.42.3.1"]);
        assert_eq!(s.metadata.owner_references.unwrap()[0].uid, "u1");
        assert_eq!(slice_name(&"x".repeat(80)).len(), 63);
    }
}

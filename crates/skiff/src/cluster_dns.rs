//! The cluster DNS Service `skiff server` makes at startup, as k3s ships
//! CoreDNS's manifest: `kube-system/kube-dns` (label `k8s-app: kube-dns`,
//! where tools look for it) on the cluster DNS address with ports 53/UDP,
//! 53/TCP and 9153/TCP. It has no selector: each node agent answers DNS
//! itself and publishes its own endpoint, and `internalTrafficPolicy:
//! Local` keeps every node's queries on that node.
//!
//! This module owns only that object: created through the API when absent
//! at every start, never overwritten.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};

/// The Service's namespace and name.
pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "kube-dns";

/// The Service as created.
pub fn service(ip: std::net::Ipv4Addr) -> Service {
    let port = |name: &str, port: i32, protocol: &str| ServicePort {
        name: Some(name.into()),
        port,
        protocol: Some(protocol.into()),
        target_port: Some(IntOrString::Int(port)),
        ..ServicePort::default()
    };
    Service {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NAMESPACE.into()),
            labels: Some(
                [
                    ("k8s-app", "kube-dns"),
                    ("kubernetes.io/cluster-service", "true"),
                    ("kubernetes.io/name", "KubeDNS"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some(ip.to_string()),
            cluster_ips: Some(vec![ip.to_string()]),
            internal_traffic_policy: Some("Local".into()),
            ports: Some(vec![
                port("dns", 53, "UDP"),
                port("dns-tcp", 53, "TCP"),
                port("metrics", 9153, "TCP"),
            ]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Creates the Service unless it exists; true when created.
pub async fn ensure(client: kube::Client, ip: std::net::Ipv4Addr) -> Result<bool, kube::Error> {
    let api: Api<Service> = Api::namespaced(client, NAMESPACE);
    // Looked up first: another server of the cluster may have made it, and
    // a create would then fail on its ClusterIP (422) before its name.
    if api
        .get_opt(&service(ip).metadata.name.unwrap_or_default())
        .await?
        .is_some()
    {
        return Ok(false);
    }
    let params = PostParams {
        field_manager: Some("skiff-server".into()),
        ..PostParams::default()
    };
    match api.create(&params, &service(ip)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => Ok(false),
        Err(e) => Err(e),
    }
}

/// [`ensure`], logging the outcome: the server runs on without it.
pub async fn ensure_logged(client: kube::Client, ip: std::net::Ipv4Addr) {
    match ensure(client, ip).await {
        Ok(true) => tracing::info!(%ip, "created the cluster DNS Service kube-system/kube-dns"),
        Ok(false) => {}
        Err(e) => tracing::warn!(%ip, error = %e, "cannot create the cluster DNS Service"),
    }
}

//! What the proxy must route, as upstream's ServicePort and endpoint
//! categorization: from one Service and its EndpointSlices, one
//! [`ServicePort`] per port with the endpoints each kind of traffic may
//! use (cluster traffic under internalTrafficPolicy, external traffic
//! under externalTrafficPolicy; ready endpoints first, serving-terminating
//! ones only when no ready one exists).
//!
//! Pure: no I/O, no nftables syntax (that is [`crate::rules`]).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Upstream's default ClientIP affinity timeout (3 hours).
pub const DEFAULT_AFFINITY_SECONDS: i32 = 10_800;

/// A transport protocol as nftables names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    fn parse(p: Option<&str>) -> Option<Self> {
        match p.unwrap_or("TCP") {
            "TCP" => Some(Self::Tcp),
            "UDP" => Some(Self::Udp),
            "SCTP" => Some(Self::Sctp),
            _ => None,
        }
    }

    /// `tcp`, `udp`, `sctp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        }
    }
}

/// One endpoint of a service port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub port: u16,
    /// On this node.
    pub local: bool,
}

/// One port of a Service, with what the proxy needs of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub namespace: String,
    pub name: String,
    /// The port's name, or its number when unnamed.
    pub port_name: String,
    pub protocol: Protocol,
    pub port: u16,
    pub cluster_ips: Vec<Ipv4Addr>,
    pub node_port: Option<u16>,
    /// Where else the port answers as external traffic: the load
    /// balancer's ingress IPs and spec.externalIPs.
    pub external_ips: Vec<Ipv4Addr>,
    /// ClientIP affinity timeout, when sessionAffinity is ClientIP.
    pub affinity_seconds: Option<i32>,
    pub external_local: bool,
    pub internal_local: bool,
    /// Endpoints for traffic to the ClusterIP (under
    /// internalTrafficPolicy).
    pub cluster_endpoints: Vec<Endpoint>,
    /// Every usable endpoint, whatever the node: external traffic under
    /// externalTrafficPolicy Cluster, and pods' and the node's own
    /// external traffic under Local (upstream's cluster policy chain).
    pub all_endpoints: Vec<Endpoint>,
    /// Endpoints for external traffic (NodePort, load balancer,
    /// external IPs) under externalTrafficPolicy: Local.
    pub local_endpoints: Vec<Endpoint>,
    /// Some endpoint exists anywhere (ready or not): with none, traffic
    /// is rejected; with only unusable ones, dropped.
    pub has_any_endpoint: bool,
}

impl ServicePort {
    /// `ns/name/proto/port`, unique per service port.
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.namespace,
            self.name,
            self.protocol.as_str(),
            self.port_name
        )
    }

    /// Answers on node ports, load balancer or external IPs.
    pub fn has_external(&self) -> bool {
        self.node_port.is_some() || !self.external_ips.is_empty()
    }
}

/// The `ns/name` of a Service, and of the Service an EndpointSlice serves.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceKey {
    pub namespace: String,
    pub name: String,
}

impl ServiceKey {
    pub fn of_service(svc: &Service) -> Option<Self> {
        Some(Self {
            namespace: svc.metadata.namespace.clone()?,
            name: svc.metadata.name.clone()?,
        })
    }

    pub fn of_slice(slice: &EndpointSlice) -> Option<Self> {
        Some(Self {
            namespace: slice.metadata.namespace.clone()?,
            name: slice
                .metadata
                .labels
                .as_ref()?
                .get(SERVICE_NAME_LABEL)?
                .clone(),
        })
    }
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// An endpoint of a slice as the categorization sees it.
#[derive(Debug, Clone)]
struct Candidate {
    endpoint: Endpoint,
    ready: bool,
    serving: bool,
    terminating: bool,
}

/// The endpoints to use from `all`: the ready ones, else the serving
/// terminating ones (upstream's ProxyTerminatingEndpoints).
fn usable(all: &[&Candidate]) -> Vec<Endpoint> {
    let ready: BTreeSet<Endpoint> = all
        .iter()
        .filter(|c| c.ready)
        .map(|c| c.endpoint.clone())
        .collect();
    if !ready.is_empty() {
        return ready.into_iter().collect();
    }
    all.iter()
        .filter(|c| c.serving && c.terminating)
        .map(|c| c.endpoint.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn ipv4s<'a>(ips: impl IntoIterator<Item = &'a String>) -> Vec<Ipv4Addr> {
    ips.into_iter()
        .filter_map(|s| s.parse::<Ipv4Addr>().ok())
        .collect()
}

/// The ports the proxy routes for `svc` with `slices` on `node`; none for
/// a headless or ExternalName Service.
pub fn service_ports(svc: &Service, slices: &[&EndpointSlice], node: &str) -> Vec<ServicePort> {
    let Some(key) = ServiceKey::of_service(svc) else {
        return vec![];
    };
    let Some(spec) = svc.spec.as_ref() else {
        return vec![];
    };
    if spec.type_.as_deref() == Some("ExternalName") {
        return vec![];
    }
    let mut cluster_ips = match &spec.cluster_ips {
        Some(ips) if !ips.is_empty() => ipv4s(ips),
        _ => ipv4s(spec.cluster_ip.iter()),
    };
    cluster_ips.dedup();
    if cluster_ips.is_empty() {
        return vec![];
    }
    let mut external_ips = ipv4s(spec.external_ips.iter().flatten());
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref());
    external_ips.extend(ipv4s(
        ingress.into_iter().flatten().filter_map(|i| i.ip.as_ref()),
    ));
    external_ips.sort();
    external_ips.dedup();
    let typed_external = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
    let affinity_seconds = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .unwrap_or(DEFAULT_AFFINITY_SECONDS)
    });
    let external_local = spec.external_traffic_policy.as_deref() == Some("Local")
        && (typed_external || !external_ips.is_empty());
    let internal_local = spec.internal_traffic_policy.as_deref() == Some("Local");

    let mut out = vec![];
    for port in spec.ports.iter().flatten() {
        let Some(protocol) = Protocol::parse(port.protocol.as_deref()) else {
            continue;
        };
        let Ok(number) = u16::try_from(port.port) else {
            continue;
        };
        let port_name = port.name.clone().filter(|n| !n.is_empty());
        // The slices' endpoints for this port: a slice port matches by
        // name (unnamed ports match the unnamed slice port).
        let mut candidates = vec![];
        for slice in slices {
            if slice.address_type != "IPv4" {
                continue;
            }
            let Some(target) = slice.ports.iter().flatten().find(|p| {
                p.name.clone().filter(|n| !n.is_empty()) == port_name
                    && Protocol::parse(p.protocol.as_deref()) == Some(protocol)
            }) else {
                continue;
            };
            let Some(target_port) = target.port.and_then(|p| u16::try_from(p).ok()) else {
                continue;
            };
            for ep in &slice.endpoints {
                let cond = ep.conditions.as_ref();
                let ready = cond.and_then(|c| c.ready).unwrap_or(true);
                let serving = cond.and_then(|c| c.serving).unwrap_or(ready);
                let terminating = cond.and_then(|c| c.terminating).unwrap_or(false);
                let local = ep.node_name.as_deref() == Some(node);
                for ip in ipv4s(ep.addresses.iter()) {
                    candidates.push(Candidate {
                        endpoint: Endpoint {
                            ip,
                            port: target_port,
                            local,
                        },
                        ready,
                        serving,
                        terminating,
                    });
                }
            }
        }
        let all: Vec<&Candidate> = candidates.iter().collect();
        let local: Vec<&Candidate> = candidates.iter().filter(|c| c.endpoint.local).collect();
        let all_endpoints = usable(&all);
        let cluster_endpoints = if internal_local {
            usable(&local)
        } else {
            all_endpoints.clone()
        };
        let local_endpoints = if external_local {
            usable(&local)
        } else {
            vec![]
        };
        out.push(ServicePort {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            port_name: port_name.unwrap_or_else(|| number.to_string()),
            protocol,
            port: number,
            cluster_ips: cluster_ips.clone(),
            node_port: port
                .node_port
                .filter(|_| typed_external)
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0),
            external_ips: external_ips.clone(),
            affinity_seconds,
            external_local,
            internal_local,
            cluster_endpoints,
            all_endpoints,
            local_endpoints,
            has_any_endpoint: !candidates.is_empty(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn svc(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": spec,
        }))
        .unwrap()
    }

    pub(crate) fn slice(
        name: &str,
        ports: serde_json::Value,
        eps: serde_json::Value,
    ) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop",
                         "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": eps,
        }))
        .unwrap()
    }

    fn ep(
        ip: &str,
        node: &str,
        ready: bool,
        serving: bool,
        terminating: bool,
    ) -> serde_json::Value {
        json!({"addresses": [ip], "nodeName": node,
               "conditions": {"ready": ready, "serving": serving, "terminating": terminating}})
    }

    #[test]
    fn ready_endpoints_first_terminating_only_without_them() {
        let s = svc(json!({"clusterIP": "10.43.0.5", "ports": [{"name": "http", "port": 80}]}));
        let sl = slice(
            "web-1",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
            json!([
                ep("10.42.0.5", "n1", true, true, false),
                ep("10.42.0.6", "n2", false, true, true)
            ]),
        );
        let ports = service_ports(&s, &[&sl], "n1");
        assert_eq!(ports.len(), 1);
        let p = &ports[0];
        assert_eq!(p.id(), "shop/web/tcp/http");
        assert_eq!(p.cluster_ips, ["10.43.0.5".parse::<Ipv4Addr>().unwrap()]);
        let ips: Vec<String> = p
            .cluster_endpoints
            .iter()
            .map(|e| format!("{}:{}", e.ip, e.port))
            .collect();
        assert_eq!(ips, ["10.42.0.5:8080"]);
        assert!(p.cluster_endpoints[0].local);

        let sl = slice(
            "web-1",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
            json!([
                ep("10.42.0.5", "n1", false, false, true),
                ep("10.42.0.6", "n2", false, true, true)
            ]),
        );
        let p = &service_ports(&s, &[&sl], "n1")[0];
        let ips: Vec<String> = p
            .cluster_endpoints
            .iter()
            .map(|e| e.ip.to_string())
            .collect();
        assert_eq!(ips, ["10.42.0.6"], "only the serving terminating one");
        assert!(p.has_any_endpoint);
    }

    #[test]
    fn traffic_policies_local_keep_local_endpoints() {
        let s = svc(json!({"clusterIP": "10.43.0.5", "type": "NodePort",
            "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "UDP"}]}));
        let sl = slice(
            "web-1",
            json!([{"port": 8080, "protocol": "UDP"}]),
            json!([
                ep("10.42.0.5", "n1", true, true, false),
                ep("10.42.1.6", "n2", true, true, false)
            ]),
        );
        let p = &service_ports(&s, &[&sl], "n2")[0];
        assert_eq!(p.port_name, "80");
        assert_eq!(p.protocol, Protocol::Udp);
        assert_eq!(p.node_port, Some(30080));
        assert!(p.external_local && p.internal_local);
        assert_eq!(p.cluster_endpoints.len(), 1);
        assert_eq!(p.cluster_endpoints[0].ip.to_string(), "10.42.1.6");
        assert_eq!(p.local_endpoints, p.cluster_endpoints);
        assert_eq!(
            p.all_endpoints.len(),
            2,
            "external traffic of pods may go anywhere"
        );
        let p = &service_ports(&s, &[&sl], "n3")[0];
        assert!(p.cluster_endpoints.is_empty() && p.has_any_endpoint);

        // internalTrafficPolicy Local with externalTrafficPolicy Cluster:
        // ClusterIP traffic stays on the node, NodePort traffic does not.
        let s = svc(json!({"clusterIP": "10.43.0.5", "type": "NodePort",
            "internalTrafficPolicy": "Local",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "UDP"}]}));
        let p = &service_ports(&s, &[&sl], "n2")[0];
        assert!(!p.external_local && p.internal_local);
        assert_eq!(p.cluster_endpoints.len(), 1);
        assert_eq!(p.all_endpoints.len(), 2);
        assert!(p.local_endpoints.is_empty());
    }

    #[test]
    fn headless_external_name_and_unmatched_ports() {
        assert!(service_ports(
            &svc(json!({"clusterIP": "None", "ports": [{"port": 80}]})),
            &[],
            "n"
        )
        .is_empty());
        assert!(service_ports(
            &svc(json!({"type": "ExternalName", "externalName": "x.example"})),
            &[],
            "n"
        )
        .is_empty());
        let s = svc(
            json!({"clusterIP": "10.43.0.5", "sessionAffinity": "ClientIP",
            "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}),
        );
        let sl = slice(
            "web-1",
            json!([{"name": "a", "port": 8080}]),
            json!([ep("10.42.0.5", "n1", true, true, false)]),
        );
        let ports = service_ports(&s, &[&sl], "n1");
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].cluster_endpoints.len(), 1);
        assert!(ports[1].cluster_endpoints.is_empty() && !ports[1].has_any_endpoint);
        assert_eq!(ports[0].affinity_seconds, Some(DEFAULT_AFFINITY_SECONDS));
        assert_eq!(ports[0].node_port, None);
    }

    #[test]
    fn load_balancer_ingress_is_external() {
        let mut s = svc(json!({"clusterIP": "10.43.0.5", "type": "LoadBalancer",
            "ports": [{"port": 80, "nodePort": 31000}]}));
        s.status = Some(
            serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}))
                .unwrap(),
        );
        let p = &service_ports(&s, &[], "n1")[0];
        assert_eq!(p.external_ips, ["192.0.2.7".parse::<Ipv4Addr>().unwrap()]);
        assert!(p.has_external() && !p.external_local);
    }
}

//! What a Service's Endpoints should hold, computed from the Service and
//! its pods as upstream's endpoint controller does: one address per pod
//! with an IP of the Service's family, ready pods (all of them with
//! `publishNotReadyAddresses`) in `addresses` and the others in
//! `notReadyAddresses`, terminating pods left out (unless publishing not
//! ready ones), ports resolved per pod, addresses grouped into subsets
//! by the ports they serve (upstream's `RepackSubsets`), and more than
//! [`MAX_CAPACITY`] addresses truncated.
//!
//! Pure functions; no I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, ObjectReference, Pod, Service,
};

use crate::endpointutil::{
    find_port, is_cluster_ip_none, is_ipv6, pod_ips, publishes_not_ready, service_ports,
    should_be_in_endpoints, should_set_hostname,
};
use crate::workload::pods::is_ready;

/// The most addresses an Endpoints object holds.
pub const MAX_CAPACITY: usize = 1000;

/// The IP of `pod` in the Service's (first) family.
fn address_for(svc: &Service, pod: &Pod) -> Option<String> {
    let spec = svc.spec.as_ref();
    let want_v6 = match spec
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|f| f.first())
    {
        Some(family) => family == "IPv6",
        None => match spec.and_then(|s| s.cluster_ip.as_deref()) {
            Some(ip) if !ip.is_empty() && ip != "None" => is_ipv6(ip),
            _ => pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .is_some_and(is_ipv6),
        },
    };
    pod_ips(pod).into_iter().find(|ip| is_ipv6(ip) == want_v6)
}

fn address(svc: &Service, pod: &Pod, ip: String) -> EndpointAddress {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    EndpointAddress {
        ip,
        hostname: should_set_hostname(pod, svc)
            .then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone()))
            .flatten(),
        node_name: node.filter(|n| !n.is_empty()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
    }
}

/// Orders ports the same way every time.
fn port_key(p: &EndpointPort) -> (Option<String>, i32, Option<String>, Option<String>) {
    (
        p.name.clone(),
        p.port,
        p.protocol.clone(),
        p.app_protocol.clone(),
    )
}

/// The subsets of the Service's Endpoints for these pods (sorted, so the
/// same inputs give the same subsets).
pub fn desired(svc: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let tolerate = publishes_not_ready(svc);
    let ports = service_ports(svc);
    // For each set of ports, the addresses serving exactly that set.
    type PortsKey = Vec<(Option<String>, i32, Option<String>, Option<String>)>;
    type Group = (Vec<EndpointPort>, Vec<(EndpointAddress, bool)>);
    let mut groups: BTreeMap<PortsKey, Group> = BTreeMap::new();
    for pod in pods {
        if !should_be_in_endpoints(pod, tolerate) {
            continue;
        }
        let Some(ip) = address_for(svc, pod) else {
            continue;
        };
        let served: Vec<EndpointPort> = if ports.is_empty() {
            if !is_cluster_ip_none(svc) {
                continue;
            }
            Vec::new()
        } else {
            let found: Vec<EndpointPort> = ports
                .iter()
                .filter_map(|p| {
                    find_port(pod, p).map(|n| EndpointPort {
                        name: p.name.clone(),
                        port: n,
                        protocol: p.protocol.clone(),
                        app_protocol: p.app_protocol.clone(),
                    })
                })
                .collect();
            if found.is_empty() {
                continue;
            }
            found
        };
        let mut served = served;
        served.sort_by_key(port_key);
        let key: PortsKey = served.iter().map(port_key).collect();
        let ready = tolerate || is_ready(pod);
        groups
            .entry(key)
            .or_insert_with(|| (served, Vec::new()))
            .1
            .push((address(svc, pod, ip), ready));
    }
    groups
        .into_values()
        .map(|(ports, addrs)| {
            let mut ready: Vec<EndpointAddress> = Vec::new();
            let mut not_ready: Vec<EndpointAddress> = Vec::new();
            for (a, r) in addrs {
                if r {
                    ready.push(a);
                } else {
                    not_ready.push(a);
                }
            }
            let by_ip = |a: &EndpointAddress, b: &EndpointAddress| {
                let uid = |x: &EndpointAddress| x.target_ref.as_ref().and_then(|t| t.uid.clone());
                (&a.ip, uid(a)).cmp(&(&b.ip, uid(b)))
            };
            ready.sort_by(by_ip);
            not_ready.sort_by(by_ip);
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect()
}

fn count(list: &Option<Vec<EndpointAddress>>) -> usize {
    list.as_ref().map_or(0, Vec::len)
}

/// Cuts `subsets` down to [`MAX_CAPACITY`] addresses (upstream's
/// `truncateEndpoints`): not-ready addresses go first, then ready ones,
/// each subset keeping its share. Returns whether anything was cut.
pub fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let ready: usize = subsets.iter().map(|s| count(&s.addresses)).sum();
    let not_ready: usize = subsets.iter().map(|s| count(&s.not_ready_addresses)).sum();
    if ready + not_ready <= MAX_CAPACITY {
        return false;
    }
    let cut_ready = ready > MAX_CAPACITY;
    let (max, total) = if cut_ready {
        (MAX_CAPACITY, ready)
    } else {
        (MAX_CAPACITY - ready, not_ready)
    };
    let mut room = max;
    for subset in subsets.iter_mut() {
        let list = if cut_ready {
            subset.not_ready_addresses = None;
            &mut subset.addresses
        } else {
            &mut subset.not_ready_addresses
        };
        let here = count(list);
        // This subset's share, rounded up; the last ones take what is left.
        let share = (here * max).div_ceil(total).min(room);
        if let Some(l) = list.as_mut() {
            l.truncate(share);
        }
        if list.as_ref().is_some_and(Vec::is_empty) {
            *list = None;
        }
        room -= count(list);
    }
    true
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus, ServicePort, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn service(ports: Vec<ServicePort>, cluster_ip: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([("app".into(), "web".into())])),
                cluster_ip: Some(cluster_ip.into()),
                ports: Some(ports),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn named_port(name: &str, target: &str) -> ServicePort {
        ServicePort {
            name: Some(name.into()),
            port: 80,
            protocol: Some("TCP".into()),
            target_port: Some(IntOrString::String(target.into())),
            ..Default::default()
        }
    }

    fn pod(name: &str, ip: &str, ready: bool, http: Option<i32>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                containers: vec![Container {
                    name: "c".into(),
                    ports: http.map(|p| {
                        vec![ContainerPort {
                            name: Some("http".into()),
                            container_port: p,
                            ..Default::default()
                        }]
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(ip.into()),
                pod_ips: Some(vec![PodIP { ip: ip.into() }]),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
    }

    fn ips(list: &Option<Vec<EndpointAddress>>) -> Vec<&str> {
        list.iter().flatten().map(|a| a.ip.as_str()).collect()
    }

    #[test]
    fn ready_and_not_ready_pods_share_a_subset_by_port() {
        let svc = service(vec![named_port("http", "http")], "10.96.0.10");
        let pods = vec![
            pod("b", "10.0.0.2", false, Some(8080)),
            pod("a", "10.0.0.1", true, Some(8080)),
        ];
        let subsets = desired(&svc, &pods);
        assert_eq!(subsets.len(), 1);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1"]);
        assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.0.0.2"]);
        let port = &subsets[0].ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("http"), 8080));
        let a = &subsets[0].addresses.as_ref().unwrap()[0];
        assert_eq!(a.node_name.as_deref(), Some("node-1"));
        let target = a.target_ref.as_ref().unwrap();
        assert_eq!(target.kind.as_deref(), Some("Pod"));
        assert_eq!(target.uid.as_deref(), Some("uid-a"));
    }

    #[test]
    fn pods_with_different_ports_make_different_subsets_and_portless_pods_none() {
        let svc = service(vec![named_port("http", "http")], "10.96.0.10");
        let pods = vec![
            pod("a", "10.0.0.1", true, Some(8080)),
            pod("b", "10.0.0.2", true, Some(9090)),
            pod("c", "10.0.0.3", true, None),
        ];
        let subsets = desired(&svc, &pods);
        assert_eq!(subsets.len(), 2);
        let all: Vec<&str> = subsets.iter().flat_map(|s| ips(&s.addresses)).collect();
        assert_eq!(all.len(), 2);
        assert!(!all.contains(&"10.0.0.3"));
    }

    #[test]
    fn terminating_pods_leave_unless_not_ready_ones_are_published() {
        let mut svc = service(vec![named_port("http", "http")], "10.96.0.10");
        let mut gone = (*pod("a", "10.0.0.1", true, Some(8080))).clone();
        gone.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        let pods = vec![Arc::new(gone), pod("b", "10.0.0.2", false, Some(8080))];
        let subsets = desired(&svc, &pods);
        assert_eq!(ips(&subsets[0].addresses), Vec::<&str>::new());
        assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.0.0.2"]);
        svc.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
        let subsets = desired(&svc, &pods);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1", "10.0.0.2"]);
        assert!(subsets[0].not_ready_addresses.is_none());
    }

    #[test]
    fn headless_services_without_ports_list_pods_with_their_hostnames() {
        let svc = service(vec![], "None");
        let mut named = (*pod("a", "10.0.0.1", true, None)).clone();
        let spec = named.spec.as_mut().unwrap();
        spec.hostname = Some("a-host".into());
        spec.subdomain = Some("web".into());
        let subsets = desired(&svc, &[Arc::new(named)]);
        assert_eq!(subsets.len(), 1);
        assert!(subsets[0].ports.is_none());
        let a = &subsets[0].addresses.as_ref().unwrap()[0];
        assert_eq!(a.hostname.as_deref(), Some("a-host"));
        // A Service with a cluster IP and no ports has no endpoints.
        let headful = service(vec![], "10.96.0.10");
        assert!(desired(&headful, &[pod("a", "10.0.0.1", true, None)]).is_empty());
    }

    #[test]
    fn over_capacity_keeps_ready_addresses_first() {
        let svc = service(vec![named_port("http", "http")], "10.96.0.10");
        let pods: Vec<Arc<Pod>> = (0..1200)
            .map(|i| {
                let ip = format!("10.0.{}.{}", i / 250, i % 250);
                pod(&format!("p{i:04}"), &ip, i < 900, Some(8080))
            })
            .collect();
        let mut subsets = desired(&svc, &pods);
        assert!(truncate(&mut subsets));
        assert_eq!(count(&subsets[0].addresses), 900);
        assert_eq!(count(&subsets[0].not_ready_addresses), 100);
        let mut few = desired(&svc, &pods[..10]);
        assert!(!truncate(&mut few));
        // More ready addresses than fit: only ready ones, cut to the cap.
        let all_ready: Vec<Arc<Pod>> = (0..1100)
            .map(|i| {
                pod(
                    &format!("r{i:04}"),
                    &format!("10.1.{}.{}", i / 250, i % 250),
                    true,
                    Some(8080),
                )
            })
            .collect();
        let mut subsets = desired(&svc, &all_ready);
        assert!(truncate(&mut subsets));
        assert_eq!(count(&subsets[0].addresses), MAX_CAPACITY);
    }
}

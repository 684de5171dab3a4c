//! What the Endpoints and EndpointSlice controllers read the same way (as
//! upstream's `k8s.io/endpointslice/util`): which Services select a pod,
//! which pods belong in a Service's endpoints, a named target port found
//! among a pod's container ports, the hostname of a headless Service's
//! pods, the `endpoints.kubernetes.io/last-change-trigger-time` tracker,
//! and which Services a pod change concerns (its old and new ones).
//!
//! Pure functions and small per-controller state; no I/O.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::{ObjectRef, Store};

/// The annotation with the time of the change that led to this state.
pub const LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// The label marking the endpoints of a headless Service.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";

/// The Service's selector when this controller gives it endpoints: not
/// for `ExternalName` Services, nor for those without a selector (their
/// endpoints are written by someone else, as the `kubernetes` Service's
/// are by the API server). An empty selector is no selector, as it is
/// once upstream's API server has stored it.
pub fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    let spec = svc.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    spec.selector.as_ref().filter(|s| !s.is_empty())
}

/// Whether `selector` matches `labels`.
pub fn selects(
    selector: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The Service's pods in its namespace from the shared store, by name.
pub fn pods_of(svc: &Service, pods: &Store<Pod>) -> Vec<Arc<Pod>> {
    let Some(sel) = selector(svc) else {
        return Vec::new();
    };
    let ns = svc.metadata.namespace.as_deref();
    let mut found: Vec<Arc<Pod>> = pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == ns)
        .filter(|p| selects(sel, p.metadata.labels.as_ref()))
        .collect();
    found.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    found
}

/// The Services of `namespace` whose selector matches `labels`.
pub fn services_selecting(
    services: &Store<Service>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> HashSet<ObjectRef<Service>> {
    services
        .state()
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
        .filter(|s| selector(s).is_some_and(|sel| selects(sel, labels)))
        .map(|s| ObjectRef::from_obj(&**s))
        .collect()
}

/// Whether a pod belongs in a Service's endpoints (upstream's
/// `ShouldPodBeInEndpoints`): not Succeeded or Failed, has an IP, and is
/// not being deleted unless `include_terminating`.
pub fn should_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        return false;
    }
    if pod_ips(pod).is_empty() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// The pod's IPs (`status.podIPs`, else `status.podIP`).
pub fn pod_ips(pod: &Pod) -> Vec<String> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let listed: Vec<String> = status
        .pod_ips
        .iter()
        .flatten()
        .map(|ip| ip.ip.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    status
        .pod_ip
        .iter()
        .filter(|ip| !ip.is_empty())
        .cloned()
        .collect()
}

/// Whether `ip` is an IPv6 address.
pub fn is_ipv6(ip: &str) -> bool {
    ip.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_ipv6())
}

/// The Service has a cluster IP (upstream's `IsServiceIPSet`); without
/// one it is headless.
pub fn is_ip_set(svc: &Service) -> bool {
    let ip = svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
    !matches!(ip, None | Some("") | Some("None"))
}

/// `clusterIP: None`.
pub fn is_cluster_ip_none(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// Whether a pod's endpoint carries its hostname (upstream's
/// `ShouldSetHostname`): the pod names a hostname and the Service as its
/// subdomain, in the Service's namespace.
pub fn should_set_hostname(pod: &Pod, svc: &Service) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.hostname.as_deref().is_some_and(|h| !h.is_empty())
        && spec.subdomain.as_deref() == svc.metadata.name.as_deref()
        && pod.metadata.namespace == svc.metadata.namespace
}

/// `publishNotReadyAddresses`.
pub fn publishes_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// The Service's ports.
pub fn service_ports(svc: &Service) -> &[ServicePort] {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default()
}

fn protocol(p: Option<&str>) -> &str {
    p.unwrap_or("TCP")
}

/// The pod's port for a Service port (upstream's `FindPort`): a number
/// as is; a name looked up among the containers' ports, then the
/// sidecars' (init containers that restart always), of the same protocol.
/// An unset target port is the Service port itself (the API server's
/// default).
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let want = protocol(port.protocol.as_deref());
    let name = match &port.target_port {
        None => return Some(port.port),
        Some(IntOrString::Int(n)) => return Some(*n),
        Some(IntOrString::String(s)) => match s.parse::<i32>() {
            Ok(n) => return Some(n),
            Err(_) => s,
        },
    };
    let spec = pod.spec.as_ref()?;
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(name) && protocol(p.protocol.as_deref()) == want)
        .map(|p| p.container_port)
}

/// When a pod's `Ready` condition last changed.
fn pod_trigger_time(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

#[derive(Debug, Default)]
struct ServiceTimes {
    service: Option<Timestamp>,
    pods: HashMap<String, Timestamp>,
}

/// Upstream's `TriggerTimeTracker`: the earliest change (a pod's `Ready`
/// transition, the Service's creation) not yet reflected in the
/// Service's endpoints, for the `last-change-trigger-time` annotation.
#[derive(Debug, Default)]
pub struct TriggerTimes(Mutex<HashMap<(String, String), ServiceTimes>>);

impl TriggerTimes {
    /// Records what this sync sees of `svc` and `pods`; returns the
    /// time to export (`None`: clear the annotation). A Service seen for
    /// the first time reports its creation.
    pub fn compute(&self, svc: &Service, pods: &[Arc<Pod>]) -> Option<Timestamp> {
        let key = (
            svc.metadata.namespace.clone().unwrap_or_default(),
            svc.metadata.name.clone().unwrap_or_default(),
        );
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let known = all.contains_key(&key);
        let state = all.entry(key).or_default();
        let mut earliest: Option<Timestamp> = None;
        let mut seen = HashMap::new();
        for pod in pods {
            let Some(t) = pod_trigger_time(pod) else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if state.pods.get(&name).is_none_or(|last| t > *last) {
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
            }
            seen.insert(name, t);
        }
        let created = svc.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(c) = created {
            if state.service.is_none_or(|last| c > last) {
                earliest = Some(earliest.map_or(c, |e| e.min(c)));
            }
        }
        state.pods = seen;
        state.service = created;
        if known {
            earliest
        } else {
            created
        }
    }

    /// Forgets a deleted Service.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(namespace.to_string(), name.to_string()));
    }
}

/// Which Services each pod was last found in, so that a pod whose labels
/// changed also wakes the Services it left (upstream compares the old
/// and new pod of an update; a watch stream only has the new one).
#[derive(Debug, Default)]
pub struct Memberships(Mutex<HashMap<(String, String), ServiceSet>>);

type ServiceSet = HashSet<ObjectRef<Service>>;

impl Memberships {
    /// The Services to sync for this state of `pod`: those selecting it
    /// now and those that did before. A pod no longer in `pods` (deleted)
    /// is forgotten.
    pub fn services_for(
        &self,
        pod: &Pod,
        services: &Store<Service>,
        pods: &Store<Pod>,
    ) -> Vec<ObjectRef<Service>> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let now = services_selecting(services, &ns, pod.metadata.labels.as_ref());
        let exists = pods.get(&ObjectRef::new(&name).within(&ns)).is_some();
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let before = if exists {
            all.insert((ns, name), now.clone())
        } else {
            all.remove(&(ns, name))
        };
        let mut wake: HashSet<ObjectRef<Service>> = now;
        wake.extend(before.into_iter().flatten());
        wake.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn pod_with_port(name: &str, port: i32, protocol: Option<&str>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some(name.into()),
                        container_port: port,
                        protocol: protocol.map(Into::into),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn svc_port(target: IntOrString, protocol: &str) -> ServicePort {
        ServicePort {
            port: 80,
            target_port: Some(target),
            protocol: Some(protocol.into()),
            ..Default::default()
        }
    }

    #[test]
    fn named_target_ports_are_found_by_name_and_protocol() {
        let pod = pod_with_port("http", 8080, None);
        let named = svc_port(IntOrString::String("http".into()), "TCP");
        assert_eq!(find_port(&pod, &named), Some(8080));
        let udp = svc_port(IntOrString::String("http".into()), "UDP");
        assert_eq!(find_port(&pod, &udp), None);
        let other = svc_port(IntOrString::String("metrics".into()), "TCP");
        assert_eq!(find_port(&pod, &other), None);
        let number = svc_port(IntOrString::Int(9000), "TCP");
        assert_eq!(find_port(&pod, &number), Some(9000));
    }

    #[test]
    fn terminal_terminating_and_addressless_pods_are_left_out() {
        let mut pod = Pod {
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ips: Some(vec![PodIP {
                    ip: "10.0.0.1".into(),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(should_be_in_endpoints(&pod, false));
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert!(!should_be_in_endpoints(&pod, false));
        assert!(should_be_in_endpoints(&pod, true));
        pod.metadata.deletion_timestamp = None;
        pod.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(!should_be_in_endpoints(&pod, true));
        pod.status.as_mut().unwrap().phase = Some("Running".into());
        pod.status.as_mut().unwrap().pod_ips = None;
        assert!(!should_be_in_endpoints(&pod, true));
    }

    #[test]
    fn empty_selectors_and_external_names_get_no_endpoints() {
        let mut svc = Service {
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(selector(&svc).is_some());
        svc.spec.as_mut().unwrap().type_ = Some("ExternalName".into());
        assert!(selector(&svc).is_none());
        svc.spec.as_mut().unwrap().type_ = None;
        svc.spec.as_mut().unwrap().selector = Some(BTreeMap::new());
        assert!(selector(&svc).is_none());
    }

    #[test]
    fn trigger_time_is_the_creation_first_then_the_earliest_new_change() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let svc = Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                creation_timestamp: Some(Time(created)),
                ..Default::default()
            },
            ..Default::default()
        };
        let ready_at = |name: &str, t: &str| {
            Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                status: Some(PodStatus {
                    conditions: Some(vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(t.parse().unwrap())),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let tracker = TriggerTimes::default();
        let a = ready_at("a", "2026-01-01T00:01:00Z");
        assert_eq!(
            tracker.compute(&svc, std::slice::from_ref(&a)),
            Some(created)
        );
        assert_eq!(tracker.compute(&svc, std::slice::from_ref(&a)), None);
        let b = ready_at("b", "2026-01-01T00:02:00Z");
        let c = ready_at("c", "2026-01-01T00:03:00Z");
        assert_eq!(
            tracker.compute(&svc, &[a, b, c]),
            Some("2026-01-01T00:02:00Z".parse().unwrap())
        );
    }
}

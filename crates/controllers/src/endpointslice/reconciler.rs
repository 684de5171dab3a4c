//! What to create, update and delete so a Service's EndpointSlices list
//! its pods (upstream's `k8s.io/endpointslice` reconciler): per address
//! type and per set of ports, endpoints already in a slice stay there
//! (updated in place when changed), slices left empty are deleted,
//! slices being updated are filled first, then the unchanged slice that
//! the rest fits best, then new slices of at most `max` endpoints; a
//! Service with no endpoints keeps one empty placeholder slice; and a
//! slice about to be deleted is reused instead of creating another.
//!
//! Pure functions; no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use kube::api::ObjectMeta;

use crate::endpointutil::{
    find_port, is_cluster_ip_none, is_ip_set, is_ipv6, pod_ips, publishes_not_ready, service_ports,
    should_be_in_endpoints, should_set_hostname, HEADLESS_LABEL,
};
use crate::workload::ownership::controller_ref;
use crate::workload::pods::is_ready;

/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`].
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// The zone label of Nodes, copied to their endpoints.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The writes that bring a Service's slices to what its pods say.
#[derive(Debug, Default)]
pub struct Plan {
    /// New slices (named by the server from `generateName`).
    pub create: Vec<EndpointSlice>,
    /// Existing slices, changed.
    pub update: Vec<EndpointSlice>,
    /// Existing slices no longer needed.
    pub delete: Vec<EndpointSlice>,
    /// Pods left out because their Node is not known (retried later).
    pub missing_nodes: Vec<String>,
}

/// What is known of a pod's Node: `None` when there is no such Node,
/// else its zone if labelled.
pub type NodeZone<'a> = &'a dyn Fn(&str) -> Option<Option<String>>;

type PortKey = Vec<(Option<String>, Option<i32>, Option<String>, Option<String>)>;
type EndpointKey = (Vec<String>, Option<String>, Option<String>);

fn port_key(ports: Option<&[EndpointPort]>) -> PortKey {
    let mut key: PortKey = ports
        .unwrap_or_default()
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.port,
                p.protocol.clone(),
                p.app_protocol.clone(),
            )
        })
        .collect();
    key.sort();
    key
}

fn endpoint_key(ep: &Endpoint) -> EndpointKey {
    let mut addresses = ep.addresses.clone();
    addresses.sort();
    let target = ep.target_ref.as_ref();
    (
        addresses,
        target.and_then(|t| t.namespace.clone()),
        target.and_then(|t| t.name.clone()),
    )
}

/// Equal but for the target's resourceVersion.
fn same_endpoint(a: &Endpoint, b: &Endpoint) -> bool {
    let strip = |e: &Endpoint| {
        let mut e = e.clone();
        if let Some(t) = e.target_ref.as_mut() {
            t.resource_version = None;
        }
        e
    };
    strip(a) == strip(b)
}

/// The address types the Service's slices have: its IP families; before
/// they are set, its cluster IP's family, or both for a headless one.
pub fn address_types(svc: &Service) -> BTreeSet<&'static str> {
    let spec = svc.spec.as_ref();
    let mut types: BTreeSet<&'static str> = spec
        .and_then(|s| s.ip_families.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some("IPv4"),
            "IPv6" => Some("IPv6"),
            _ => None,
        })
        .collect();
    if types.is_empty() {
        match spec.and_then(|s| s.cluster_ip.as_deref()) {
            Some(ip) if !ip.is_empty() && ip != "None" => {
                types.insert(if is_ipv6(ip) { "IPv6" } else { "IPv4" });
            }
            _ => {
                types.insert("IPv4");
                types.insert("IPv6");
            }
        }
    }
    types
}

/// A slice's labels: the Service's (but the reserved ones), the headless
/// mark, the Service's name and this controller as manager.
pub fn labels_for(svc: &Service) -> BTreeMap<String, String> {
    let reserved = [SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL];
    let mut labels: BTreeMap<String, String> = svc
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !reserved.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !is_ip_set(svc) {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels.insert(
        SERVICE_NAME_LABEL.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(MANAGED_BY_LABEL.into(), CONTROLLER_NAME.into());
    labels
}

/// Whether the slice is owned by the Service (any owner reference).
pub fn owned_by(slice: &EndpointSlice, svc: &Service) -> bool {
    slice.metadata.owner_references.iter().flatten().any(|o| {
        Some(&o.uid) == svc.metadata.uid.as_ref() && o.kind == "Service" && o.api_version == "v1"
    })
}

fn new_slice(svc: &Service, ports: Vec<EndpointPort>, address_type: &str) -> EndpointSlice {
    let name = svc.metadata.name.clone().unwrap_or_default();
    // A DNS subdomain is at most 253 characters.
    let prefix = if name.len() < 253 {
        format!("{name}-")
    } else {
        name
    };
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(prefix),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(labels_for(svc)),
            owner_references: Some(vec![controller_ref(svc)]),
            ..Default::default()
        },
        address_type: address_type.into(),
        endpoints: Vec::new(),
        ports: (!ports.is_empty()).then_some(ports),
    }
}

/// The ports a pod serves for the Service (none for a headless Service
/// without ports; a port whose target the pod lacks is left out).
fn endpoint_ports(svc: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let ports = service_ports(svc);
    if ports.is_empty() && is_cluster_ip_none(svc) {
        return Vec::new();
    }
    ports
        .iter()
        .filter_map(|p| {
            find_port(pod, p).map(|n| EndpointPort {
                name: Some(p.name.clone().unwrap_or_default()),
                port: Some(n),
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: p.app_protocol.clone(),
            })
        })
        .collect()
}

/// The pod as an endpoint of the Service (upstream's `podToEndpoint`):
/// serving when ready, ready only when also not terminating (or when the
/// Service publishes not-ready addresses).
pub fn endpoint_for(
    pod: &Pod,
    zone: Option<String>,
    svc: &Service,
    address_type: &str,
) -> Endpoint {
    let serving = is_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let ready = publishes_not_ready(svc) || (serving && !terminating);
    let v6 = address_type == "IPv6";
    let spec = pod.spec.as_ref();
    Endpoint {
        addresses: pod_ips(pod)
            .into_iter()
            .filter(|ip| is_ipv6(ip) == v6)
            .collect(),
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
        node_name: spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        zone,
        hostname: should_set_hostname(pod, svc)
            .then(|| spec.and_then(|s| s.hostname.clone()))
            .flatten(),
        ..Default::default()
    }
}

/// The plan for `svc` given its pods and its existing slices (those
/// labelled with its name and managed by this controller, not being
/// deleted).
pub fn plan(
    svc: &Service,
    pods: &[Arc<Pod>],
    node_zone: NodeZone<'_>,
    existing: &[Arc<EndpointSlice>],
    max: usize,
) -> Plan {
    let max = max.max(1);
    let types = address_types(svc);
    let mut out = Plan::default();
    let mut by_type: BTreeMap<&str, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        match types.get(slice.address_type.as_str()) {
            Some(t) => by_type.entry(t).or_default().push(slice),
            None => out.delete.push((**slice).clone()),
        }
    }
    for address_type in &types {
        let slices = by_type.remove(address_type).unwrap_or_default();
        by_address_type(svc, pods, node_zone, &slices, address_type, max, &mut out);
    }
    out.missing_nodes.sort();
    out.missing_nodes.dedup();
    recycle(svc, &mut out);
    out
}

fn by_address_type(
    svc: &Service,
    pods: &[Arc<Pod>],
    node_zone: NodeZone<'_>,
    existing: &[&EndpointSlice],
    address_type: &str,
    max: usize,
    out: &mut Plan,
) {
    let mut delete: Vec<EndpointSlice> = Vec::new();
    let mut create: Vec<EndpointSlice> = Vec::new();
    let mut existing_by_ports: BTreeMap<PortKey, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        if owned_by(slice, svc) {
            existing_by_ports
                .entry(port_key(slice.ports.as_deref()))
                .or_default()
                .push(slice);
        } else {
            delete.push((*slice).clone());
        }
    }
    type Wanted = (Vec<EndpointPort>, BTreeMap<EndpointKey, Endpoint>);
    let mut desired: BTreeMap<PortKey, Wanted> = BTreeMap::new();
    for pod in pods {
        if !should_be_in_endpoints(pod, true) {
            continue;
        }
        let ports = endpoint_ports(svc, pod);
        let key = port_key(Some(&ports));
        let entry = desired
            .entry(key)
            .or_insert_with(|| (ports, BTreeMap::new()));
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or_default();
        let zone = match node_zone(node) {
            Some(zone) => zone,
            None if publishes_not_ready(svc) => None,
            None => {
                out.missing_nodes.push(node.to_string());
                continue;
            }
        };
        let ep = endpoint_for(pod, zone, svc, address_type);
        if !ep.addresses.is_empty() {
            entry.1.insert(endpoint_key(&ep), ep);
        }
    }
    for (key, (ports, wanted)) in desired.iter_mut() {
        let slices = existing_by_ports.get(key).cloned().unwrap_or_default();
        let wanted = std::mem::take(wanted);
        by_ports(
            svc,
            &slices,
            wanted,
            ports,
            address_type,
            max,
            out,
            &mut create,
            &mut delete,
        );
    }
    for (key, slices) in &existing_by_ports {
        if !desired.contains_key(key) {
            delete.extend(slices.iter().map(|s| (*s).clone()));
        }
    }
    // A Service without endpoints keeps one empty slice.
    if existing.len() == delete.len() && create.is_empty() {
        let placeholder = new_slice(svc, Vec::new(), address_type);
        if delete.len() == 1 && same_placeholder(&delete[0], &placeholder) {
            delete.clear();
        } else {
            create.push(placeholder);
        }
    }
    out.create.extend(create);
    out.delete.extend(delete);
}

fn same_placeholder(a: &EndpointSlice, b: &EndpointSlice) -> bool {
    a.metadata.namespace == b.metadata.namespace
        && a.metadata.labels.clone().unwrap_or_default()
            == b.metadata.labels.clone().unwrap_or_default()
        && a.metadata.owner_references.clone().unwrap_or_default()
            == b.metadata.owner_references.clone().unwrap_or_default()
        && a.address_type == b.address_type
        && a.endpoints == b.endpoints
        && port_key(a.ports.as_deref()) == port_key(b.ports.as_deref())
}

/// The unchanged slice that `n` more endpoints fill most (upstream's
/// `getSliceToFill`), if any has room.
fn slice_to_fill(unchanged: &[EndpointSlice], n: usize, max: usize) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, slice) in unchanged.iter().enumerate() {
        let Some(diff) = max.checked_sub(n + slice.endpoints.len()) else {
            continue;
        };
        if best.is_none_or(|(_, d)| diff < d) {
            best = Some((i, diff));
        }
    }
    best.map(|(i, _)| i)
}

#[allow(clippy::too_many_arguments)]
fn by_ports(
    svc: &Service,
    existing: &[&EndpointSlice],
    mut wanted: BTreeMap<EndpointKey, Endpoint>,
    ports: &[EndpointPort],
    address_type: &str,
    max: usize,
    out: &mut Plan,
    create: &mut Vec<EndpointSlice>,
    delete: &mut Vec<EndpointSlice>,
) {
    let labels = labels_for(svc);
    let mut update: Vec<EndpointSlice> = Vec::new();
    let mut unchanged: Vec<EndpointSlice> = Vec::new();
    let mut sorted: Vec<&&EndpointSlice> = existing.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    // 1. Keep the wanted endpoints where they are, updated; drop the rest.
    for slice in sorted {
        let mut kept = Vec::new();
        let mut changed = false;
        for ep in &slice.endpoints {
            if let Some(want) = wanted.remove(&endpoint_key(ep)) {
                changed |= !same_endpoint(&want, ep);
                kept.push(want);
            }
        }
        let relabel = slice.metadata.labels.as_ref() != Some(&labels);
        if changed || kept.len() != slice.endpoints.len() {
            if kept.is_empty() {
                delete.push((*slice).clone());
            } else {
                let mut s = (*slice).clone();
                s.endpoints = kept;
                s.metadata.labels = Some(labels.clone());
                update.push(s);
            }
        } else if relabel {
            let mut s = (*slice).clone();
            s.metadata.labels = Some(labels.clone());
            update.push(s);
        } else {
            unchanged.push((*slice).clone());
        }
    }
    let mut rest = wanted.into_values();
    let mut next = rest.next();
    // 2. Fill the slices being updated, fullest first.
    update.sort_by_key(|s| std::cmp::Reverse(s.endpoints.len()));
    for slice in &mut update {
        while slice.endpoints.len() < max {
            let Some(ep) = next.take() else { break };
            slice.endpoints.push(ep);
            next = rest.next();
        }
    }
    let mut left: Vec<Endpoint> = next.into_iter().chain(rest).collect();
    // 3. The rest into the unchanged slice it fits best, else new slices.
    while !left.is_empty() {
        let mut fill = None;
        if left.len() < max {
            fill = slice_to_fill(&unchanged, left.len(), max).map(|i| unchanged.remove(i));
        }
        let mut slice = fill.unwrap_or_else(|| new_slice(svc, ports.to_vec(), address_type));
        let room = max.saturating_sub(slice.endpoints.len()).min(left.len());
        slice.endpoints.extend(left.drain(..room));
        if slice.metadata.name.is_some() {
            update.push(slice);
        } else {
            create.push(slice);
        }
    }
    out.update.extend(update);
}

/// Turns creates into updates of slices that would be deleted (upstream's
/// `finalize`): only slices owned by the Service, of the same type.
fn recycle(svc: &Service, plan: &mut Plan) {
    let mut i = 0;
    while i < plan.delete.len() {
        let Some(last) = plan.create.last() else {
            break;
        };
        let old = &plan.delete[i];
        if old.address_type == last.address_type && owned_by(old, svc) {
            let old = plan.delete.remove(i);
            let mut slice = plan.create.pop().unwrap_or_else(|| unreachable!());
            slice.metadata.name = old.metadata.name;
            slice.metadata.resource_version = old.metadata.resource_version;
            slice.metadata.uid = old.metadata.uid;
            slice.metadata.generate_name = old.metadata.generate_name;
            slice.metadata.annotations = old.metadata.annotations;
            plan.update.push(slice);
        } else {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus, ServicePort, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn service() -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("svc-uid".into()),
                labels: Some(BTreeMap::from([("tier".into(), "front".into())])),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([("app".into(), "web".into())])),
                cluster_ip: Some("10.96.0.10".into()),
                ip_families: Some(vec!["IPv4".into()]),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    protocol: Some("TCP".into()),
                    target_port: Some(IntOrString::String("http".into())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(i: usize, ready: bool) -> Arc<Pod> {
        let name = format!("p{i:04}");
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some("http".into()),
                        container_port: 8080,
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ips: Some(vec![PodIP {
                    ip: format!("10.1.{}.{}", i / 250, i % 250),
                }]),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
    }

    fn pods(n: usize) -> Vec<Arc<Pod>> {
        (0..n).map(|i| pod(i, true)).collect()
    }

    fn known(_: &str) -> Option<Option<String>> {
        Some(Some("zone-a".into()))
    }

    /// Applies a plan as the server would, naming new slices.
    fn apply(existing: &[Arc<EndpointSlice>], plan: Plan) -> Vec<Arc<EndpointSlice>> {
        let mut by_name: BTreeMap<String, EndpointSlice> = existing
            .iter()
            .map(|s| (s.metadata.name.clone().unwrap(), (**s).clone()))
            .collect();
        for s in plan.delete {
            by_name.remove(s.metadata.name.as_deref().unwrap());
        }
        for s in plan.update {
            by_name.insert(s.metadata.name.clone().unwrap(), s);
        }
        for (i, mut s) in plan.create.into_iter().enumerate() {
            let name = format!("web-new{}-{i}", by_name.len());
            s.metadata.name = Some(name.clone());
            by_name.insert(name, s);
        }
        by_name.into_values().map(Arc::new).collect()
    }

    #[test]
    fn two_hundred_fifty_pods_make_three_slices_of_at_most_a_hundred() {
        let plan = plan(&service(), &pods(250), &known, &[], 100);
        assert_eq!(plan.create.len(), 3);
        let mut sizes: Vec<usize> = plan.create.iter().map(|s| s.endpoints.len()).collect();
        sizes.sort();
        assert_eq!(sizes, [50, 100, 100]);
        let s = &plan.create[0];
        assert_eq!(s.address_type, "IPv4");
        assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
        let labels = s.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "web");
        assert_eq!(labels[MANAGED_BY_LABEL], CONTROLLER_NAME);
        assert_eq!(labels["tier"], "front");
        let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Service", "svc-uid")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
        let port = &s.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("http"), Some(8080))
        );
        let ep = &s.endpoints[0];
        assert_eq!(ep.zone.as_deref(), Some("zone-a"));
        assert_eq!(ep.node_name.as_deref(), Some("node-1"));
    }

    #[test]
    fn a_steady_state_writes_nothing_and_a_change_touches_one_slice() {
        let svc = service();
        let mut all = pods(250);
        let slices = apply(&[], plan(&svc, &all, &known, &[], 100));
        let again = plan(&svc, &all, &known, &slices, 100);
        assert!(again.create.is_empty() && again.update.is_empty() && again.delete.is_empty());
        // One pod turns not ready: only its slice is rewritten, in place.
        all[7] = pod(7, false);
        let changed = plan(&svc, &all, &known, &slices, 100);
        assert!(changed.create.is_empty() && changed.delete.is_empty());
        assert_eq!(changed.update.len(), 1);
        let ep = changed.update[0]
            .endpoints
            .iter()
            .find(|e| e.target_ref.as_ref().unwrap().name.as_deref() == Some("p0007"))
            .unwrap();
        let c = ep.conditions.as_ref().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(false), Some(false))
        );
    }

    #[test]
    fn new_endpoints_fill_the_slice_they_fit_best_before_a_new_one() {
        let svc = service();
        let slices = apply(&[], plan(&svc, &pods(250), &known, &[], 100));
        // Ten more pods fit in the slice of fifty.
        let more = plan(&svc, &pods(260), &known, &slices, 100);
        assert!(more.create.is_empty());
        assert_eq!(more.update.len(), 1);
        assert_eq!(more.update[0].endpoints.len(), 60);
        // Only the pods of one slice left: the others are deleted, it is kept.
        let full = slices.iter().find(|s| s.endpoints.len() == 100).unwrap();
        let names: Vec<&str> = full
            .endpoints
            .iter()
            .map(|e| e.target_ref.as_ref().unwrap().name.as_deref().unwrap())
            .collect();
        let all = pods(250);
        let kept: Vec<Arc<Pod>> = all
            .into_iter()
            .filter(|p| names.contains(&p.metadata.name.as_deref().unwrap()))
            .collect();
        let fewer = plan(&svc, &kept, &known, &slices, 100);
        assert!(fewer.create.is_empty() && fewer.update.is_empty());
        assert_eq!(fewer.delete.len(), 2);
        assert!(fewer
            .delete
            .iter()
            .all(|s| s.metadata.name != full.metadata.name));
    }

    #[test]
    fn terminating_pods_stay_as_terminating_endpoints() {
        let svc = service();
        let mut gone = (*pod(0, true)).clone();
        gone.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        let plan = plan(&svc, &[Arc::new(gone)], &known, &[], 100);
        let c = plan.create[0].endpoints[0].conditions.clone().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(true), Some(true))
        );
    }

    #[test]
    fn no_pods_leave_one_placeholder_which_is_kept() {
        let svc = service();
        let first = plan(&svc, &[], &known, &[], 100);
        assert_eq!(first.create.len(), 1);
        assert!(first.create[0].endpoints.is_empty());
        assert!(first.create[0].ports.is_none());
        let slices = apply(&[], first);
        let again = plan(&svc, &[], &known, &slices, 100);
        assert!(again.create.is_empty() && again.update.is_empty() && again.delete.is_empty());
        // Pods arrive: the placeholder is reused rather than replaced.
        let filled = plan(&svc, &pods(3), &known, &slices, 100);
        assert!(filled.create.is_empty() && filled.delete.is_empty());
        assert_eq!(filled.update.len(), 1);
        assert_eq!(filled.update[0].metadata.name, slices[0].metadata.name);
        assert_eq!(filled.update[0].endpoints.len(), 3);
        assert!(filled.update[0].ports.is_some());
    }

    #[test]
    fn pods_on_unknown_nodes_are_left_out_and_reported() {
        let unknown = |_: &str| None;
        let plan = plan(&service(), &pods(2), &unknown, &[], 100);
        assert_eq!(plan.missing_nodes, ["node-1"]);
        assert!(plan.create[0].endpoints.is_empty());
    }

    #[test]
    fn slices_of_another_service_with_the_same_name_are_replaced() {
        let svc = service();
        let mut old_owner = svc.clone();
        old_owner.metadata.uid = Some("old-uid".into());
        let stale = apply(&[], plan(&old_owner, &pods(3), &known, &[], 100));
        let plan = plan(&svc, &pods(3), &known, &stale, 100);
        assert_eq!(plan.delete.len(), 1);
        assert_eq!(plan.create.len(), 1);
    }
}

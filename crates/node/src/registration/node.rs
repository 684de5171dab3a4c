//! The Node object this agent registers and the status it reports, as
//! pure functions of the machine's facts, the agent's health and the
//! status the API server holds (upstream's `initialNode` and
//! `nodestatus` setters):
//!
//! - [`node_labels`], [`initial_node`]: labels, taints and first status;
//! - [`desired_status`]: capacity and allocatable, addresses, nodeInfo,
//!   daemonEndpoints and the four conditions with kubelet's reasons and
//!   messages; a quiet call changes only `lastHeartbeatTime`;
//! - [`status_patch`]: the strategic merge patch from the held status to
//!   the desired one (conditions merged by type, nobody else's touched);
//! - [`label_patch`]: re-registration's label reconciliation;
//! - [`parse_taints`]: `--register-with-taints`, worded as kubelet.
//!
//! Nothing here does I/O or reads the clock; callers pass `now`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Map, Value};

use super::machine::Machine;
use super::Health;

/// What `kubectl get nodes` shows as VERSION: the Kubernetes release the
/// agent speaks, with skiff's version as the API server's gitVersion has.
pub const KUBELET_VERSION: &str = concat!("v1.33.0-skiff.", env!("CARGO_PKG_VERSION"));

/// kubelet's default `--max-pods`.
pub const DEFAULT_MAX_PODS: u32 = 110;

/// The label keys kubelet sets and keeps on re-registration.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// `kubernetes.io/os`.
pub const LABEL_OS: &str = "kubernetes.io/os";
/// `kubernetes.io/arch`.
pub const LABEL_ARCH: &str = "kubernetes.io/arch";

/// kubelet's default hard eviction threshold `memory.available<100Mi`,
/// which allocatable memory leaves out.
const EVICTION_HARD_MEMORY_BYTES: u64 = 100 * 1024 * 1024;
/// kubelet's default `nodefs.available<10%`, which allocatable
/// ephemeral-storage leaves out. Upstream keeps the percentage as a
/// float32, so the reservation is computed with 0.1 as float32.
const EVICTION_HARD_NODEFS: f32 = 0.1;

/// The condition types this module owns, in the order kubelet adds them.
pub const CONDITION_TYPES: [&str; 4] = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

/// Why a `--register-with-taints` entry was refused (kubelet's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Malformed, or an invalid key or value.
    #[error("invalid taint spec: {spec}{}", detail.as_ref().map(|d| format!(", {d}")).unwrap_or_default())]
    InvalidTaintSpec {
        /// The entry.
        spec: String,
        /// What the key or value checks said.
        detail: Option<String>,
    },
    /// Not NoSchedule, PreferNoSchedule or NoExecute.
    #[error("invalid taint effect: {effect}, unsupported taint effect")]
    InvalidTaintEffect {
        /// The effect given.
        effect: String,
    },
    /// `key` or `key=value` without an effect: kubelet's parser takes it,
    /// but the API server refuses a Node with such a taint, so it is
    /// refused here rather than on every registration attempt.
    #[error("invalid taint spec: {spec}, a taint to register with needs an effect (NoSchedule, PreferNoSchedule or NoExecute)")]
    MissingTaintEffect {
        /// The entry.
        spec: String,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything [`desired_status`] reports that does not change while the
/// agent runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The Node's name (also its Hostname address and hostname label, as
    /// with kubelet's `--hostname-override`).
    pub node_name: String,
    /// This machine.
    pub machine: Machine,
    /// The InternalIP address.
    pub node_ip: IpAddr,
    /// Capacity `pods`.
    pub max_pods: u32,
    /// `daemonEndpoints.kubeletEndpoint.Port`.
    pub kubelet_port: u16,
    /// The annotations the agent owns.
    pub annotations: BTreeMap<String, String>,
    /// spec.podCIDR to register with (`None`: the node IPAM controller's).
    pub pod_cidr: Option<String>,
}

/// The labels kubelet registers with: hostname, os and arch, then the
/// configured ones (which win, as `--node-labels` does).
pub fn node_labels(facts: &Facts, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut labels = default_labels(facts);
    labels.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels
}

fn default_labels(facts: &Facts) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_HOSTNAME.to_string(), facts.node_name.clone()),
        (LABEL_OS.to_string(), "linux".to_string()),
        (LABEL_ARCH.to_string(), facts.machine.architecture.clone()),
    ])
}

/// The Node to create: labels, taints, and its first status.
pub fn initial_node(
    facts: &Facts,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    health: &Health,
    now: Timestamp,
) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(facts.node_name.clone()),
            labels: Some(node_labels(facts, labels)),
            annotations: (!facts.annotations.is_empty()).then(|| facts.annotations.clone()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: (!taints.is_empty()).then(|| taints.to_vec()),
            pod_cidr: facts.pod_cidr.clone(),
            pod_cidrs: facts.pod_cidr.clone().map(|c| vec![c]),
            ..Default::default()
        }),
        status: Some(desired_status(facts, health, None, now)),
    }
}

/// On re-registration (the Node exists), the merge patch of labels (and
/// the agent's annotations) that brings the existing Node's in line: the default labels as
/// kubelet's `updateDefaultLabels`, and the configured ones too. Labels
/// nobody configured are left alone. `None` when nothing differs.
pub fn label_patch(
    facts: &Facts,
    extra: &BTreeMap<String, String>,
    existing: &Node,
) -> Option<Value> {
    let empty = BTreeMap::new();
    let have = existing.metadata.labels.as_ref().unwrap_or(&empty);
    let mut changes = Map::new();
    for (k, v) in node_labels(facts, extra) {
        if have.get(&k) != Some(&v) {
            changes.insert(k, Value::String(v));
        }
    }
    let have = existing.metadata.annotations.as_ref().unwrap_or(&empty);
    let mut notes = Map::new();
    for (k, v) in &facts.annotations {
        if have.get(k) != Some(v) {
            notes.insert(k.clone(), Value::String(v.clone()));
        }
    }
    let mut meta = Map::new();
    if !changes.is_empty() {
        meta.insert("labels".into(), Value::Object(changes));
    }
    if !notes.is_empty() {
        meta.insert("annotations".into(), Value::Object(notes));
    }
    (!meta.is_empty()).then(|| json!({ "metadata": meta }))
}

/// The status to report: `previous` (the API server's copy, `None` at
/// registration) with the fields this agent owns set from `facts` and
/// `health` at `now`. Fields and conditions others own are kept; a
/// condition's `lastTransitionTime` moves only when its status changes.
pub fn desired_status(
    facts: &Facts,
    health: &Health,
    previous: Option<&NodeStatus>,
    now: Timestamp,
) -> NodeStatus {
    // The API keeps times to the second; so does the comparison.
    let now = Time(Timestamp::from_second(now.as_second()).unwrap_or(now));
    let mut status = previous.cloned().unwrap_or_default();

    let m = &facts.machine;
    let ours = [
        ("cpu", u64::from(m.cpus), Format::Decimal),
        ("memory", m.memory_bytes, Format::Binary),
        (
            "ephemeral-storage",
            m.ephemeral_storage_bytes,
            Format::Binary,
        ),
        ("hugepages-1Gi", m.hugepages_1gi_bytes, Format::Binary),
        ("hugepages-2Mi", m.hugepages_2mi_bytes, Format::Binary),
        ("pods", u64::from(facts.max_pods), Format::Decimal),
    ];
    let capacity = status.capacity.get_or_insert_with(BTreeMap::new);
    for (name, value, format) in ours {
        capacity.insert(name.to_string(), Quantity(format.render(value)));
    }
    // Allocatable: capacity less kubelet's default eviction reservations,
    // and less hugepages for memory; resources others advertise (extended
    // resources patched into capacity) are copied as kubelet does.
    let nodefs_reserved =
        (m.ephemeral_storage_bytes as f64 * f64::from(EVICTION_HARD_NODEFS)) as u64;
    let memory = m
        .memory_bytes
        .saturating_sub(EVICTION_HARD_MEMORY_BYTES)
        .saturating_sub(m.hugepages_1gi_bytes)
        .saturating_sub(m.hugepages_2mi_bytes);
    let mut allocatable = capacity.clone();
    for (name, value, format) in [
        ("memory", memory, Format::Binary),
        (
            "ephemeral-storage",
            m.ephemeral_storage_bytes.saturating_sub(nodefs_reserved),
            Format::Binary,
        ),
    ] {
        allocatable.insert(name.to_string(), Quantity(format.render(value)));
    }
    status.allocatable = Some(allocatable);

    status.addresses = Some(vec![
        NodeAddress {
            type_: "InternalIP".into(),
            address: facts.node_ip.to_string(),
        },
        NodeAddress {
            type_: "Hostname".into(),
            address: facts.node_name.clone(),
        },
    ]);

    let previous_runtime = status
        .node_info
        .as_ref()
        .map(|i| i.container_runtime_version.clone())
        .unwrap_or_default();
    let swap = status.node_info.as_ref().and_then(|i| i.swap.clone());
    status.node_info = Some(NodeSystemInfo {
        architecture: m.architecture.clone(),
        boot_id: m.boot_id.clone(),
        container_runtime_version: health.runtime_version.clone().unwrap_or(previous_runtime),
        kernel_version: m.kernel_version.clone(),
        // Deprecated; kubelet leaves it empty since 1.31.
        kube_proxy_version: String::new(),
        kubelet_version: KUBELET_VERSION.to_string(),
        machine_id: m.machine_id.clone(),
        operating_system: "linux".into(),
        os_image: m.os_image.clone(),
        swap,
        system_uuid: m.system_uuid.clone(),
    });
    status.daemon_endpoints = Some(NodeDaemonEndpoints {
        kubelet_endpoint: Some(DaemonEndpoint {
            port: i32::from(facts.kubelet_port),
        }),
    });

    let conditions = status.conditions.get_or_insert_with(Vec::new);
    // No eviction manager measures pressure yet: never under pressure.
    for kind in PRESSURE {
        set_pressure(conditions, kind, false, &now);
    }
    set_ready(conditions, not_ready_message(health), &now);
    status
}

/// How a quantity is written: kubelet builds cpu and pods as DecimalSI,
/// byte counts as BinarySI.
#[derive(Debug, Clone, Copy)]
enum Format {
    Decimal,
    Binary,
}

impl Format {
    fn render(self, value: u64) -> String {
        match self {
            Format::Decimal => value.to_string(),
            Format::Binary => binary_si(value),
        }
    }
}

/// A byte count as Go's canonical BinarySI quantity: the largest of Ki,
/// Mi, Gi, Ti, Pi, Ei that divides it exactly (`16384000Ki`,
/// `100Mi`), plain digits when none does or it is under 1024.
pub fn binary_si(bytes: u64) -> String {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if bytes < 1024 {
        return bytes.to_string();
    }
    let mut value = bytes;
    let mut exponent = 0;
    while value.is_multiple_of(1024) && exponent < SUFFIXES.len() {
        value /= 1024;
        exponent += 1;
    }
    match exponent.checked_sub(1).and_then(|i| SUFFIXES.get(i)) {
        Some(suffix) => format!("{value}{suffix}"),
        None => value.to_string(),
    }
}

/// The pressure conditions: type, then (reason, message) when under
/// pressure and when not.
type Pressure = (
    &'static str,
    (&'static str, &'static str),
    (&'static str, &'static str),
);

const PRESSURE: [Pressure; 3] = [
    (
        "MemoryPressure",
        (
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
        ),
        (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
    ),
    (
        "DiskPressure",
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    (
        "PIDPressure",
        (
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
        ),
        (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
    ),
];

/// upstream's `MemoryPressureCondition` (and its disk and PID twins):
/// the heartbeat always moves; status, reason, message and transition
/// time only when the pressure flips.
fn set_pressure(conditions: &mut Vec<NodeCondition>, kind: Pressure, pressure: bool, now: &Time) {
    let (type_, on, off) = kind;
    let at = match conditions.iter().position(|c| c.type_ == type_) {
        Some(at) => at,
        None => {
            conditions.push(NodeCondition {
                type_: type_.to_string(),
                status: "Unknown".into(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let Some(c) = conditions.get_mut(at) else {
        return;
    };
    c.last_heartbeat_time = Some(now.clone());
    let (want, (reason, message)) = if pressure {
        ("True", on)
    } else {
        ("False", off)
    };
    if c.status != want {
        c.status = want.to_string();
        c.reason = Some(reason.to_string());
        c.message = Some(message.to_string());
        c.last_transition_time = Some(now.clone());
    }
}

/// upstream's `ReadyCondition`: rebuilt every time, its transition time
/// kept while the status stays.
fn set_ready(conditions: &mut Vec<NodeCondition>, problem: Option<String>, now: &Time) {
    let mut ready = match problem {
        None => NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("kubelet is posting ready status".into()),
            ..Default::default()
        },
        Some(message) => NodeCondition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: Some("KubeletNotReady".into()),
            message: Some(message),
            ..Default::default()
        },
    };
    ready.last_heartbeat_time = Some(now.clone());
    match conditions.iter_mut().find(|c| c.type_ == "Ready") {
        Some(c) => {
            ready.last_transition_time = if c.status == ready.status {
                c.last_transition_time.clone()
            } else {
                Some(now.clone())
            };
            *c = ready;
        }
        None => {
            ready.last_transition_time = Some(now.clone());
            conditions.push(ready);
        }
    }
}

/// What keeps the node from Ready, as upstream aggregates its runtime,
/// network and other errors: one message alone, several deduplicated,
/// comma-separated and in brackets.
pub fn not_ready_message(health: &Health) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    let problems = health
        .runtime_problem
        .iter()
        .chain(health.network_problem.iter())
        .chain(health.host_problems.iter());
    for p in problems {
        if !seen.contains(&p.as_str()) {
            seen.push(p);
        }
    }
    match seen.as_slice() {
        [] => None,
        [one] => Some((*one).to_string()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

/// The strategic merge patch for nodes/NAME/status from `previous` (the
/// API server's) to `desired`, like upstream's two-way merge of the two:
/// this agent's conditions always (the heartbeat moves), the other owned
/// fields when they differ; addresses are replaced whole so a changed
/// address leaves no stale entry behind.
pub fn status_patch(previous: &NodeStatus, desired: &NodeStatus) -> Value {
    let mut status = Map::new();
    let ours: Vec<&NodeCondition> = desired
        .conditions
        .iter()
        .flatten()
        .filter(|c| CONDITION_TYPES.contains(&c.type_.as_str()))
        .collect();
    status.insert("conditions".into(), to_value(&ours));
    for (field, before, after) in [
        ("capacity", &previous.capacity, &desired.capacity),
        ("allocatable", &previous.allocatable, &desired.allocatable),
    ] {
        let before = before.clone().unwrap_or_default();
        let changed: BTreeMap<&String, &Quantity> = after
            .iter()
            .flatten()
            .filter(|(k, v)| before.get(*k) != Some(*v))
            .collect();
        if !changed.is_empty() {
            status.insert(field.into(), to_value(&changed));
        }
    }
    if previous.addresses != desired.addresses {
        let mut list = vec![json!({ "$patch": "replace" })];
        list.extend(desired.addresses.iter().flatten().map(to_value));
        status.insert("addresses".into(), Value::Array(list));
    }
    if previous.node_info != desired.node_info {
        status.insert("nodeInfo".into(), to_value(&desired.node_info));
    }
    if previous.daemon_endpoints != desired.daemon_endpoints {
        status.insert(
            "daemonEndpoints".into(),
            to_value(&desired.daemon_endpoints),
        );
    }
    json!({ "status": status })
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    // Serializing k8s-openapi types to a Value does not fail (no maps with
    // non-string keys, no custom serializers that error on valid data).
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `--register-with-taints`: comma-separated `key=value:Effect` or
/// `key:Effect`; empty means none.
pub fn parse_taints(spec: &str) -> Result<Vec<Taint>> {
    if spec.is_empty() {
        return Ok(Vec::new());
    }
    spec.split(',').map(parse_taint).collect()
}

/// One taint, checked as upstream's `parseTaint`.
pub fn parse_taint(spec: &str) -> Result<Taint> {
    let invalid = |detail: Option<String>| Error::InvalidTaintSpec {
        spec: spec.to_string(),
        detail,
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (key, value, effect) = match parts.as_slice() {
        [key_value, effect] => {
            if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(effect) {
                return Err(Error::InvalidTaintEffect {
                    effect: (*effect).to_string(),
                });
            }
            let kv: Vec<&str> = key_value.split('=').collect();
            match kv.as_slice() {
                [key] => (*key, None, *effect),
                [key, value] => {
                    let errs = skiff_api::validation::names::label_value(value);
                    if !errs.is_empty() {
                        return Err(invalid(Some(errs.join("; "))));
                    }
                    (*key, Some(*value), *effect)
                }
                _ => return Err(invalid(None)),
            }
        }
        [_] => {
            return Err(Error::MissingTaintEffect {
                spec: spec.to_string(),
            })
        }
        _ => return Err(invalid(None)),
    };
    let errs = skiff_api::validation::names::qualified_name(key);
    if !errs.is_empty() {
        return Err(invalid(Some(errs.join("; "))));
    }
    Ok(Taint {
        key: key.to_string(),
        value: value.filter(|v| !v.is_empty()).map(str::to_string),
        effect: effect.to_string(),
        time_added: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn facts() -> Facts {
        Facts {
            annotations: BTreeMap::new(),
            pod_cidr: None,
            node_name: "n1".into(),
            machine: Machine {
                cpus: 4,
                memory_bytes: 16_384_123 * 1024,
                hugepages_2mi_bytes: 0,
                hugepages_1gi_bytes: 0,
                ephemeral_storage_bytes: 100 * 1024 * 1024 * 1024,
                kernel_version: "6.1.0-18-amd64".into(),
                os_image: "Debian GNU/Linux 12 (bookworm)".into(),
                architecture: "amd64".into(),
                hostname: "host-a".into(),
                machine_id: "3d1219c7c4c5404aaa1f6d2a48adfda4".into(),
                system_uuid: "ec2a0000-1111-2222-3333-444455556666".into(),
                boot_id: "7081f66f-1ff4-42e6-8468-d8e256d75d32".into(),
            },
            node_ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
            max_pods: DEFAULT_MAX_PODS,
            kubelet_port: 10250,
        }
    }

    fn healthy() -> Health {
        Health {
            runtime_version: Some("containerd://1.6.20".into()),
            ..Health::default()
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).expect("timestamp")
    }

    fn time(second: i64) -> Option<Time> {
        Some(Time(at(second)))
    }

    fn condition<'a>(s: &'a NodeStatus, type_: &str) -> &'a NodeCondition {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .expect("condition")
    }

    fn q(s: &NodeStatus, field: &str, name: &str) -> String {
        let map = match field {
            "capacity" => s.capacity.as_ref(),
            _ => s.allocatable.as_ref(),
        };
        map.and_then(|m| m.get(name)).expect("quantity").0.clone()
    }

    #[test]
    fn binary_si_is_go_canonical() {
        assert_eq!(binary_si(0), "0");
        assert_eq!(binary_si(1000), "1000");
        assert_eq!(binary_si(16_393_380 * 1024), "16393380Ki");
        assert_eq!(binary_si(16_384_000 * 1024), "16000Mi");
        assert_eq!(binary_si(100 * 1024 * 1024), "100Mi");
        assert_eq!(binary_si(94_580_335_255), "94580335255");
        assert_eq!(binary_si(1 << 30), "1Gi");
    }

    #[test]
    fn first_status_reports_the_machine() {
        let s = desired_status(&facts(), &healthy(), None, at(0));
        assert_eq!(q(&s, "capacity", "cpu"), "4");
        assert_eq!(q(&s, "capacity", "memory"), "16384123Ki");
        assert_eq!(q(&s, "capacity", "ephemeral-storage"), "100Gi");
        assert_eq!(q(&s, "capacity", "pods"), "110");
        assert_eq!(q(&s, "capacity", "hugepages-1Gi"), "0");
        assert_eq!(q(&s, "capacity", "hugepages-2Mi"), "0");
        // Allocatable leaves out the default hard eviction thresholds.
        assert_eq!(q(&s, "allocatable", "memory"), "16281723Ki");
        // 100Gi less 10% as float32 (0.10000000149...): 96636764160 with
        // an exact tenth, 96636764000 as kubelet computes it.
        assert_eq!(q(&s, "allocatable", "ephemeral-storage"), "96636764000");
        assert_eq!(q(&s, "allocatable", "cpu"), "4");
        assert_eq!(q(&s, "allocatable", "pods"), "110");
        let addresses: Vec<(String, String)> = s
            .addresses
            .iter()
            .flatten()
            .map(|a| (a.type_.clone(), a.address.clone()))
            .collect();
        assert_eq!(
            addresses,
            [
                ("InternalIP".to_string(), "192.0.2.2".to_string()),
                ("Hostname".to_string(), "n1".to_string())
            ]
        );
        let info = s.node_info.as_ref().expect("nodeInfo");
        assert_eq!(info.container_runtime_version, "containerd://1.6.20");
        assert_eq!(info.kubelet_version, KUBELET_VERSION);
        assert_eq!(info.kube_proxy_version, "");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(info.architecture, "amd64");
        assert_eq!(info.machine_id, "3d1219c7c4c5404aaa1f6d2a48adfda4");
        assert_eq!(info.boot_id, "7081f66f-1ff4-42e6-8468-d8e256d75d32");
        assert_eq!(info.system_uuid, "ec2a0000-1111-2222-3333-444455556666");
        assert_eq!(
            s.daemon_endpoints
                .as_ref()
                .and_then(|d| d.kubelet_endpoint.as_ref())
                .map(|e| e.port),
            Some(10250)
        );
        let types: Vec<&str> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, CONDITION_TYPES);
        let ready = condition(&s, "Ready");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("kubelet is posting ready status")
        );
        assert_eq!(ready.last_transition_time, time(0));
        let memory = condition(&s, "MemoryPressure");
        assert_eq!(memory.status, "False");
        assert_eq!(memory.reason.as_deref(), Some("KubeletHasSufficientMemory"));
        assert_eq!(
            memory.message.as_deref(),
            Some("kubelet has sufficient memory available")
        );
        let disk = condition(&s, "DiskPressure");
        assert_eq!(disk.reason.as_deref(), Some("KubeletHasNoDiskPressure"));
        assert_eq!(
            disk.message.as_deref(),
            Some("kubelet has no disk pressure")
        );
        let pid = condition(&s, "PIDPressure");
        assert_eq!(pid.reason.as_deref(), Some("KubeletHasSufficientPID"));
        assert_eq!(
            pid.message.as_deref(),
            Some("kubelet has sufficient PID available")
        );
    }

    #[test]
    fn a_quiet_tick_moves_only_the_heartbeats() {
        let first = desired_status(&facts(), &healthy(), None, at(0));
        let second = desired_status(&facts(), &healthy(), Some(&first), at(10));
        let mut expected = first.clone();
        for c in expected.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = time(10);
        }
        assert_eq!(second, expected);
        // The patch carries the conditions and nothing else.
        let patch = status_patch(&first, &second);
        let keys: Vec<&String> = patch["status"]
            .as_object()
            .expect("status")
            .keys()
            .collect();
        assert_eq!(keys, ["conditions"]);
        assert_eq!(
            patch["status"]["conditions"][3]["lastHeartbeatTime"],
            "2023-11-14T22:13:30Z"
        );
        assert_eq!(
            patch["status"]["conditions"][3]["lastTransitionTime"],
            "2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn runtime_problems_make_the_node_not_ready() {
        let first = desired_status(&facts(), &healthy(), None, at(0));
        let down = Health {
            runtime_problem: Some("container runtime is down".into()),
            ..healthy()
        };
        let second = desired_status(&facts(), &down, Some(&first), at(10));
        let ready = condition(&second, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
        assert_eq!(ready.message.as_deref(), Some("container runtime is down"));
        assert_eq!(ready.last_transition_time, time(10));
        // Still down, another reason: the message follows, the
        // transition time stays.
        let network = Health {
            network_problem: Some(super::super::network_not_ready(
                "NetworkPluginNotReady",
                "Network plugin returns error: cni plugin not initialized",
            )),
            ..down.clone()
        };
        let third = desired_status(&facts(), &network, Some(&second), at(20));
        let ready = condition(&third, "Ready");
        assert_eq!(
            ready.message.as_deref(),
            Some(
                "[container runtime is down, container runtime network not ready: \
                 NetworkReady=false reason:NetworkPluginNotReady message:Network plugin \
                 returns error: cni plugin not initialized]"
            )
        );
        assert_eq!(ready.last_transition_time, time(10));
        assert_eq!(ready.last_heartbeat_time, time(20));
        // Healthy again.
        let fourth = desired_status(&facts(), &healthy(), Some(&third), at(30));
        assert_eq!(condition(&fourth, "Ready").status, "True");
        assert_eq!(condition(&fourth, "Ready").last_transition_time, time(30));
        // Pressure conditions never flipped.
        assert_eq!(
            condition(&fourth, "MemoryPressure").last_transition_time,
            time(0)
        );
    }

    #[test]
    fn problems_are_deduplicated_in_order() {
        let h = Health {
            runtime_problem: Some("a".into()),
            network_problem: Some("b".into()),
            host_problems: vec!["a".into(), "c".into()],
            ..Health::default()
        };
        assert_eq!(not_ready_message(&h).as_deref(), Some("[a, b, c]"));
        assert_eq!(not_ready_message(&Health::default()), None);
    }

    #[test]
    fn others_fields_and_conditions_are_kept() {
        let mut held = desired_status(&facts(), &healthy(), None, at(0));
        held.conditions.get_or_insert_with(Vec::new).insert(
            0,
            NodeCondition {
                type_: "NetworkUnavailable".into(),
                status: "False".into(),
                reason: Some("RouteCreated".into()),
                ..Default::default()
            },
        );
        held.capacity
            .get_or_insert_with(BTreeMap::new)
            .insert("example.com/dongle".into(), Quantity("4".into()));
        // Someone else set Ready to Unknown (the node lifecycle controller
        // does when heartbeats stop).
        for c in held.conditions.iter_mut().flatten() {
            if c.type_ == "Ready" {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
            }
        }
        held.runtime_handlers = Some(Vec::new());
        let next = desired_status(&facts(), &Health::default(), Some(&held), at(40));
        assert_eq!(
            condition(&next, "NetworkUnavailable").reason.as_deref(),
            Some("RouteCreated")
        );
        assert_eq!(condition(&next, "Ready").status, "True");
        assert_eq!(condition(&next, "Ready").last_transition_time, time(40));
        assert_eq!(q(&next, "allocatable", "example.com/dongle"), "4");
        assert_eq!(next.runtime_handlers, Some(Vec::new()));
        // No runtime version reported: the last one stays.
        assert_eq!(
            next.node_info
                .as_ref()
                .map(|i| i.container_runtime_version.as_str()),
            Some("containerd://1.6.20")
        );
        // The patch names only our conditions and the new allocatable.
        let patch = status_patch(&held, &next);
        let types: Vec<&str> = patch["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, CONDITION_TYPES);
        assert_eq!(
            patch["status"]["allocatable"],
            json!({ "example.com/dongle": "4" })
        );
        assert!(patch["status"].get("capacity").is_none());
    }

    #[test]
    fn changed_addresses_replace_the_list() {
        let first = desired_status(&facts(), &healthy(), None, at(0));
        let moved = Facts {
            node_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)),
            ..facts()
        };
        let second = desired_status(&moved, &healthy(), Some(&first), at(10));
        let patch = status_patch(&first, &second);
        assert_eq!(
            patch["status"]["addresses"],
            json!([
                { "$patch": "replace" },
                { "type": "InternalIP", "address": "10.0.0.7" },
                { "type": "Hostname", "address": "n1" }
            ])
        );
        let fresh = status_patch(&NodeStatus::default(), &first);
        for field in [
            "capacity",
            "allocatable",
            "addresses",
            "nodeInfo",
            "daemonEndpoints",
        ] {
            assert!(fresh["status"].get(field).is_some(), "{field}");
        }
    }

    #[test]
    fn labels_and_the_initial_node() {
        let extra = BTreeMap::from([
            ("tier".to_string(), "edge".to_string()),
            (LABEL_HOSTNAME.to_string(), "override".to_string()),
        ]);
        let taints = parse_taints("dedicated=gpu:NoSchedule").expect("taints");
        let node = initial_node(&facts(), &extra, &taints, &healthy(), at(0));
        let labels = node.metadata.labels.clone().expect("labels");
        assert_eq!(labels.get(LABEL_OS).map(String::as_str), Some("linux"));
        assert_eq!(labels.get(LABEL_ARCH).map(String::as_str), Some("amd64"));
        assert_eq!(labels.get("tier").map(String::as_str), Some("edge"));
        assert_eq!(
            labels.get(LABEL_HOSTNAME).map(String::as_str),
            Some("override")
        );
        let spec = node.spec.clone().expect("spec");
        assert_eq!(spec.taints, Some(taints));
        assert_eq!(spec.pod_cidr, None, "left to the node IPAM controller");
        assert!(node.status.is_some());
        let own = Facts {
            pod_cidr: Some("10.250.3.0/24".into()),
            ..facts()
        };
        let spec = initial_node(&own, &extra, &[], &healthy(), at(0))
            .spec
            .expect("spec");
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.250.3.0/24"));
        assert_eq!(spec.pod_cidrs, Some(vec!["10.250.3.0/24".to_string()]));

        // Re-registration: only what differs from what we own.
        let mut existing = Node::default();
        existing.metadata.labels = Some(BTreeMap::from([
            (LABEL_OS.to_string(), "linux".to_string()),
            (LABEL_ARCH.to_string(), "arm64".to_string()),
            ("someone/else".to_string(), "x".to_string()),
        ]));
        let patch = label_patch(&facts(), &BTreeMap::new(), &existing).expect("patch");
        assert_eq!(
            patch,
            json!({ "metadata": { "labels": { LABEL_ARCH: "amd64", LABEL_HOSTNAME: "n1" } } })
        );
        existing.metadata.labels = Some(node_labels(&facts(), &BTreeMap::new()));
        assert_eq!(label_patch(&facts(), &BTreeMap::new(), &existing), None);
    }

    #[test]
    fn taints_parse_as_kubelet_does() {
        let t = parse_taints("a=b:NoSchedule,example.com/c:NoExecute").expect("taints");
        assert_eq!(t.len(), 2);
        assert_eq!(
            (
                t[0].key.as_str(),
                t[0].value.as_deref(),
                t[0].effect.as_str()
            ),
            ("a", Some("b"), "NoSchedule")
        );
        assert_eq!(
            (
                t[1].key.as_str(),
                t[1].value.as_deref(),
                t[1].effect.as_str()
            ),
            ("example.com/c", None, "NoExecute")
        );
        assert_eq!(parse_taints(""), Ok(Vec::new()));
        assert_eq!(
            parse_taint("a=b:Sometimes").map_err(|e| e.to_string()),
            Err("invalid taint effect: Sometimes, unsupported taint effect".to_string())
        );
        assert_eq!(
            parse_taint("a=b=c:NoSchedule").map_err(|e| e.to_string()),
            Err("invalid taint spec: a=b=c:NoSchedule".to_string())
        );
        assert_eq!(
            parse_taint("a:b:NoSchedule").map_err(|e| e.to_string()),
            Err("invalid taint spec: a:b:NoSchedule".to_string())
        );
        let bad_key = parse_taint("-a=b:NoSchedule").map_err(|e| e.to_string());
        assert!(
            bad_key
                .as_ref()
                .is_err_and(|e| e
                    .starts_with("invalid taint spec: -a=b:NoSchedule, name part must consist of")),
            "{bad_key:?}"
        );
        let bad_value = parse_taint("a=-b:NoSchedule").map_err(|e| e.to_string());
        assert!(
            bad_value.as_ref().is_err_and(
                |e| e.starts_with("invalid taint spec: a=-b:NoSchedule, a valid label must be")
            ),
            "{bad_value:?}"
        );
        assert!(matches!(
            parse_taint("a=b"),
            Err(Error::MissingTaintEffect { .. })
        ));
    }
}

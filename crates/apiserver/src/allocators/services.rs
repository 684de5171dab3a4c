//! Allocation for Services on the write path, as upstream's service REST
//! storage (`pkg/registry/core/service/storage/alloc.go`) does it: the IP
//! family fields, the ClusterIP (asked for or picked; `None` for headless,
//! none for ExternalName) and the NodePorts of NodePort and LoadBalancer
//! Services, with upstream's errors; on update the values a client left
//! out are kept, the ones a type change no longer needs are dropped, and
//! what the old object held but the new one does not is released once the
//! update is stored; a deleted Service releases everything. Each
//! allocation is a [`Reservation`] that the write path finishes after the
//! store answered. The Services' storage hooks
//! (`crate::resources::services`) call it. It owns no validation beyond
//! that.

use std::net::Ipv4Addr;

use serde_json::{json, Map, Value};

use skiff_store::Store;

use super::ipaddresses::{delete_ip_address, put_ip_address};
use super::{random, Allocators};
use crate::status::{ApiError, ApiResult, Cause};

/// What one write took and what it gives back once stored.
#[derive(Debug, Default)]
#[must_use = "finish it once the store answered"]
pub struct Reservation {
    /// Namespace and name of the Service.
    owner: Option<(String, String)>,
    new_ips: Vec<Ipv4Addr>,
    new_ports: Vec<u16>,
    old_ips: Vec<Ipv4Addr>,
    old_ports: Vec<u16>,
    /// Whether the new values are held (not for dry runs).
    held: bool,
}

impl Reservation {
    /// Nothing reserved (other kinds, dry runs).
    pub fn none() -> Self {
        Reservation::default()
    }

    /// After the store answered: a stored write keeps what it took and
    /// gives back what the old object held; a failed one gives back what
    /// it took.
    pub async fn finish(self, store: &dyn Store, allocators: &Allocators, stored: bool) {
        if !self.held {
            return;
        }
        let Some((ns, name)) = &self.owner else {
            return;
        };
        if stored {
            for ip in &self.old_ips {
                delete_ip_address(store, *ip, ns, name).await;
            }
            allocators.with(|ips, ports| {
                self.old_ips.iter().for_each(|ip| ips.release(*ip));
                self.old_ports.iter().for_each(|p| ports.release(*p));
            });
            for ip in &self.new_ips {
                put_ip_address(store, *ip, ns, name).await;
            }
        } else {
            allocators.with(|ips, ports| {
                self.new_ips.iter().for_each(|ip| ips.release(*ip));
                self.new_ports.iter().for_each(|p| ports.release(*p));
            });
        }
    }
}

fn spec_type(svc: &Value) -> &str {
    svc.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

/// Every type but ExternalName gets a ClusterIP (or is headless).
pub fn needs_cluster_ip(svc: &Value) -> bool {
    spec_type(svc) != "ExternalName"
}

/// NodePort Services, and LoadBalancers unless they turned them off.
pub fn needs_node_ports(svc: &Value) -> bool {
    match spec_type(svc) {
        "NodePort" => true,
        "LoadBalancer" => svc
            .pointer("/spec/allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => false,
    }
}

/// LoadBalancers with externalTrafficPolicy Local get a health check port.
pub fn needs_health_check_port(svc: &Value) -> bool {
    spec_type(svc) == "LoadBalancer"
        && svc
            .pointer("/spec/externalTrafficPolicy")
            .and_then(Value::as_str)
            == Some("Local")
}

/// The first ClusterIP the client asked for ("" and absent: none).
fn requested(svc: &Value) -> Option<&str> {
    svc.pointer("/spec/clusterIPs/0")
        .and_then(Value::as_str)
        .or_else(|| svc.pointer("/spec/clusterIP").and_then(Value::as_str))
        .filter(|ip| !ip.is_empty())
}

fn headless(svc: &Value) -> bool {
    requested(svc) == Some("None")
}

/// The ClusterIPs a stored Service holds.
pub fn ips_of(svc: &Value) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = svc
        .pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter_map(|s| s.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if let Some(ip) = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
    {
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

/// The NodePorts a stored Service holds.
pub fn node_ports_of(svc: &Value) -> Vec<u16> {
    let mut out = Vec::new();
    for port in ports(svc) {
        if let Some(p) = port
            .get("nodePort")
            .and_then(Value::as_i64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
        {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    if let Some(p) = svc
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
    {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

fn ports(svc: &Value) -> &[Value] {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn spec_mut(svc: &mut Value) -> Option<&mut Map<String, Value>> {
    svc.get_mut("spec").and_then(Value::as_object_mut)
}

fn invalid_cause(field: String, shown: String, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field,
        message: format!("Invalid value: {shown}: {detail}"),
    }
}

/// `[]string{"a", "b"}`, as Go's `%#v` prints a string slice.
fn go_strings(values: &[Value]) -> String {
    let inner = values
        .iter()
        .map(|v| match v {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!("[]string{{{inner}}}")
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// Sets the IP family fields and the traffic policies upstream sets on a
/// Service that gets (or may get) a ClusterIP; `causes` gets what a
/// single-stack IPv4 cluster refuses.
fn family_fields(svc: &mut Value, causes: &mut Vec<Cause>) {
    if !needs_cluster_ip(svc) {
        return;
    }
    let selectorless = svc
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    let headless_selectorless = headless(svc) && selectorless;
    let externally = matches!(spec_type(svc), "NodePort" | "LoadBalancer");
    let is_lb = spec_type(svc) == "LoadBalancer";
    let Some(spec) = spec_mut(svc) else { return };
    let families: Vec<String> = spec
        .get("ipFamilies")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let policy = spec
        .get("ipFamilyPolicy")
        .and_then(Value::as_str)
        .map(String::from);
    if headless_selectorless {
        if policy.is_none() && families.is_empty() {
            spec.insert("ipFamilyPolicy".into(), json!("RequireDualStack"));
        }
    } else {
        match policy.as_deref() {
            None => {
                spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
            }
            Some("RequireDualStack") => causes.push(invalid_cause(
                "spec.ipFamilyPolicy".into(),
                quoted("RequireDualStack"),
                "this cluster is not configured for dual-stack services",
            )),
            Some(_) => {}
        }
        for (i, f) in families.iter().enumerate() {
            if f != "IPv4" {
                causes.push(invalid_cause(
                    format!("spec.ipFamilies[{i}]"),
                    quoted(f),
                    "not configured on this cluster",
                ));
            }
        }
    }
    if families.is_empty() {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
    if !spec.contains_key("internalTrafficPolicy") {
        spec.insert("internalTrafficPolicy".into(), json!("Cluster"));
    }
    if externally && !spec.contains_key("externalTrafficPolicy") {
        spec.insert("externalTrafficPolicy".into(), json!("Cluster"));
    }
    if is_lb && !spec.contains_key("allocateLoadBalancerNodePorts") {
        spec.insert("allocateLoadBalancerNodePorts".into(), json!(true));
    }
}

/// Sets clusterIP and clusterIPs to `ip`.
fn set_ip(svc: &mut Value, ip: &str) {
    if let Some(spec) = spec_mut(svc) {
        spec.insert("clusterIP".into(), json!(ip));
        spec.insert("clusterIPs".into(), json!([ip]));
    }
}

/// What one allocation step decided, before it is applied.
struct Plan {
    ip: Option<Ipv4Addr>,
    /// (port index, nodePort) to write back.
    node_ports: Vec<(usize, u16)>,
    /// A picked healthCheckNodePort.
    health: Option<u16>,
    new_ips: Vec<Ipv4Addr>,
    new_ports: Vec<u16>,
}

/// Works out (and, unless `dry_run`, takes) the ClusterIP and NodePorts of
/// `svc`, keeping what `keep_ips`/`keep_ports` (the old object's) already
/// hold. A failure takes nothing.
fn plan(
    allocators: &Allocators,
    svc: &Value,
    keep_ips: &[Ipv4Addr],
    keep_ports: &[u16],
    dry_run: bool,
) -> Result<Plan, ApiError> {
    let mut causes = Vec::new();
    let mut internal = None;
    let plan = allocators.with(|ips, ports_set| {
        let mut plan = Plan {
            ip: None,
            node_ports: Vec::new(),
            health: None,
            new_ips: Vec::new(),
            new_ports: Vec::new(),
        };
        if needs_cluster_ip(svc) && !headless(svc) {
            let shown = || {
                svc.pointer("/spec/clusterIPs")
                    .and_then(Value::as_array)
                    .filter(|a| !a.is_empty())
                    .map_or_else(
                        || go_strings(&[json!(requested(svc).unwrap_or(""))]),
                        |a| go_strings(a),
                    )
            };
            match requested(svc) {
                Some(text) => match text.parse::<Ipv4Addr>() {
                    Ok(ip) if keep_ips.contains(&ip) => plan.ip = Some(ip),
                    Ok(ip) => match ips.check(ip) {
                        Ok(()) => {
                            plan.ip = Some(ip);
                            plan.new_ips.push(ip);
                        }
                        Err(e) => causes.push(invalid_cause(
                            "spec.clusterIPs".into(),
                            shown(),
                            &format!("failed to allocate IP {ip}: {e}"),
                        )),
                    },
                    Err(_) if text.parse::<std::net::Ipv6Addr>().is_ok() => {
                        causes.push(invalid_cause(
                            "spec.clusterIPs".into(),
                            shown(),
                            &format!(
                                "failed to allocate IP {text}: not configured on this cluster"
                            ),
                        ))
                    }
                    Err(_) => causes.push(invalid_cause(
                        "spec.clusterIPs[0]".into(),
                        quoted(text),
                        "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                    )),
                },
                None => match ips.pick(random()) {
                    Ok(ip) => {
                        plan.ip = Some(ip);
                        plan.new_ips.push(ip);
                    }
                    Err(e) => internal = Some(format!("failed to allocate a serviceIP: {e}")),
                },
            }
        }
        let mut used: Vec<u16> = Vec::new();
        if needs_node_ports(svc) {
            for (i, port) in ports(svc).iter().enumerate() {
                let given = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
                if given != 0 {
                    let same_service = u16::try_from(given).is_ok_and(|p| used.contains(&p));
                    let kept = u16::try_from(given).is_ok_and(|p| keep_ports.contains(&p));
                    if same_service || kept {
                        if let Ok(p) = u16::try_from(given) {
                            used.push(p);
                        }
                        continue;
                    }
                    match ports_set.check(given) {
                        Ok(p) => {
                            used.push(p);
                            plan.new_ports.push(p);
                        }
                        Err(e) => causes.push(invalid_cause(
                            format!("spec.ports[{i}].nodePort"),
                            given.to_string(),
                            &e.to_string(),
                        )),
                    }
                    continue;
                }
                // Pick one nobody (this Service included) holds.
                let mut picked = None;
                for attempt in 0..64u64 {
                    match ports_set.pick(random().wrapping_add(attempt)) {
                        Ok(p) if used.contains(&p) => continue,
                        Ok(p) => {
                            picked = Some(p);
                            break;
                        }
                        Err(e) => {
                            internal = Some(format!("failed to allocate a nodePort: {e}"));
                            break;
                        }
                    }
                }
                if let Some(p) = picked {
                    used.push(p);
                    plan.new_ports.push(p);
                    plan.node_ports.push((i, p));
                }
            }
        }
        if needs_health_check_port(svc) {
            let field = "spec.healthCheckNodePort";
            let given = svc
                .pointer("/spec/healthCheckNodePort")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let kept = u16::try_from(given).is_ok_and(|p| keep_ports.contains(&p));
            if given != 0 && !kept {
                match ports_set.check(given) {
                    Ok(p) if !used.contains(&p) => plan.new_ports.push(p),
                    Ok(_) => causes.push(invalid_cause(
                        field.into(),
                        given.to_string(),
                        "provided port is already allocated",
                    )),
                    Err(e) => causes.push(invalid_cause(
                        field.into(),
                        given.to_string(),
                        &e.to_string(),
                    )),
                }
            } else if given == 0 {
                for attempt in 0..64u64 {
                    match ports_set.pick(random().wrapping_add(attempt)) {
                        Ok(p) if used.contains(&p) => continue,
                        Ok(p) => {
                            plan.health = Some(p);
                            plan.new_ports.push(p);
                            break;
                        }
                        Err(e) => {
                            internal = Some(format!("failed to allocate a nodePort: {e}"));
                            break;
                        }
                    }
                }
            }
        }
        if causes.is_empty() && internal.is_none() && !dry_run {
            for ip in &plan.new_ips {
                // Checked above, under the same lock.
                let _ = ips.allocate(*ip);
            }
            for p in &plan.new_ports {
                let _ = ports_set.allocate(i64::from(*p));
            }
        }
        plan
    });
    if let Some(message) = internal {
        return Err(ApiError::internal(message));
    }
    if !causes.is_empty() {
        let name = crate::object::name_of(svc).unwrap_or_default();
        return Err(ApiError::invalid("", "Service", name, causes));
    }
    Ok(plan)
}

/// Writes a plan's values into the Service.
fn apply(svc: &mut Value, plan: &Plan) {
    if let (Some(p), Some(spec)) = (plan.health, spec_mut(svc)) {
        spec.insert("healthCheckNodePort".into(), json!(p));
    }
    if let Some(ip) = plan.ip {
        set_ip(svc, &ip.to_string());
    } else if headless(svc) {
        set_ip(svc, "None");
    }
    if let Some(list) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
        for (i, p) in &plan.node_ports {
            if let Some(port) = list.get_mut(*i).and_then(Value::as_object_mut) {
                port.insert("nodePort".into(), json!(p));
            }
        }
    }
}

fn owner(svc: &Value) -> Option<(String, String)> {
    let ns = svc.pointer("/metadata/namespace").and_then(Value::as_str)?;
    let name = crate::object::name_of(svc)?;
    Some((ns.to_string(), name.to_string()))
}

fn family_errors(svc: &mut Value) -> ApiResult<()> {
    let mut causes = Vec::new();
    family_fields(svc, &mut causes);
    if causes.is_empty() {
        return Ok(());
    }
    let name = crate::object::name_of(svc).unwrap_or_default().to_string();
    Err(ApiError::invalid("", "Service", &name, causes))
}

/// A new Service (stored form, validated): sets what upstream allocates.
pub fn on_create(
    allocators: &Allocators,
    svc: &mut Value,
    dry_run: bool,
) -> ApiResult<Reservation> {
    family_errors(svc)?;
    let plan = plan(allocators, svc, &[], &[], dry_run)?;
    apply(svc, &plan);
    Ok(Reservation {
        owner: owner(svc),
        new_ips: plan.new_ips,
        new_ports: plan.new_ports,
        old_ips: Vec::new(),
        old_ports: Vec::new(),
        held: !dry_run,
    })
}

/// Before an update is validated: drops what the new type no longer needs
/// when the client left it as it was (upstream `dropTypeDependentFields`)
/// and keeps the allocated values the client left out
/// (`patchAllocatedValues`).
pub fn patch_allocated(old: &Value, new: &mut Value) {
    let same = |new: &Value, path: &str| old.pointer(path) == new.pointer(path);
    if needs_cluster_ip(old) && !needs_cluster_ip(new) {
        let drop_ips = same(new, "/spec/clusterIP") && same(new, "/spec/clusterIPs");
        let drop_families = same(new, "/spec/ipFamilies");
        let drop_policy = same(new, "/spec/ipFamilyPolicy");
        if let Some(spec) = spec_mut(new) {
            if drop_ips {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
            if drop_families {
                spec.remove("ipFamilies");
            }
            if drop_policy {
                spec.remove("ipFamilyPolicy");
            }
        }
    }
    if needs_node_ports(old) && !needs_node_ports(new) {
        let old_ports: Vec<Option<&Value>> = ports(old).iter().map(|p| p.get("nodePort")).collect();
        let new_ports: Vec<Option<&Value>> = ports(new).iter().map(|p| p.get("nodePort")).collect();
        if old_ports == new_ports {
            if let Some(list) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                for p in list.iter_mut().filter_map(Value::as_object_mut) {
                    p.remove("nodePort");
                }
            }
        }
    }
    let externally = |svc: &Value| {
        matches!(spec_type(svc), "NodePort" | "LoadBalancer")
            || svc
                .pointer("/spec/externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
    };
    if !externally(new) && same(new, "/spec/externalTrafficPolicy") {
        if let Some(spec) = spec_mut(new) {
            spec.remove("externalTrafficPolicy");
        }
    }
    if spec_type(new) != "LoadBalancer" && same(new, "/spec/allocateLoadBalancerNodePorts") {
        if let Some(spec) = spec_mut(new) {
            spec.remove("allocateLoadBalancerNodePorts");
        }
    }
    if needs_health_check_port(old) {
        let keep = needs_health_check_port(new);
        let unset = new
            .pointer("/spec/healthCheckNodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0;
        let unchanged = same(new, "/spec/healthCheckNodePort");
        let old_port = old.pointer("/spec/healthCheckNodePort").cloned();
        if let Some(spec) = spec_mut(new) {
            match (keep, old_port) {
                (true, Some(p)) if unset => {
                    spec.insert("healthCheckNodePort".into(), p);
                }
                (false, _) if unchanged => {
                    spec.remove("healthCheckNodePort");
                }
                _ => {}
            }
        }
    }
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        let old_spec = old.get("spec").cloned().unwrap_or_default();
        if let Some(spec) = spec_mut(new) {
            let empty = |v: Option<&Value>| {
                v.is_none_or(|v| v.is_null() || v == "" || v.as_array().is_some_and(Vec::is_empty))
            };
            for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                if empty(spec.get(field)) {
                    if let Some(v) = old_spec.get(field) {
                        spec.insert(field.into(), v.clone());
                    }
                }
            }
        }
    }
    if needs_node_ports(old) && needs_node_ports(new) {
        let by_name: Vec<(String, Value)> = ports(old)
            .iter()
            .filter_map(|p| {
                let name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                p.get("nodePort").cloned().map(|n| (name, n))
            })
            .collect();
        if let Some(list) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in list.iter_mut().filter_map(Value::as_object_mut) {
                let unset = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0;
                let name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if unset {
                    if let Some((_, n)) = by_name.iter().find(|(n, _)| *n == name) {
                        p.insert("nodePort".into(), n.clone());
                    }
                }
            }
        }
    }
}

/// An update about to be stored: takes what the new object needs beyond
/// what the old one held; releases (on finish) what it no longer holds.
pub fn on_update(
    allocators: &Allocators,
    old: &Value,
    new: &mut Value,
    dry_run: bool,
) -> ApiResult<Reservation> {
    family_errors(new)?;
    let keep_ips = ips_of(old);
    let keep_ports = node_ports_of(old);
    let plan = plan(allocators, new, &keep_ips, &keep_ports, dry_run)?;
    apply(new, &plan);
    let now_ips = ips_of(new);
    let now_ports = if needs_node_ports(new) || needs_health_check_port(new) {
        node_ports_of(new)
    } else {
        Vec::new()
    };
    Ok(Reservation {
        owner: owner(new),
        new_ips: plan.new_ips,
        new_ports: plan.new_ports,
        old_ips: keep_ips
            .into_iter()
            .filter(|ip| !now_ips.contains(ip))
            .collect(),
        old_ports: keep_ports
            .into_iter()
            .filter(|p| !now_ports.contains(p))
            .collect(),
        held: !dry_run,
    })
}

/// After a Service left the store: gives back everything it held.
pub async fn on_deleted(store: &dyn Store, allocators: &Allocators, svc: &Value) {
    let Some((ns, name)) = owner(svc) else { return };
    let ips = ips_of(svc);
    for ip in &ips {
        delete_ip_address(store, *ip, &ns, &name).await;
    }
    let ports = node_ports_of(svc);
    allocators.with(|ip_set, port_set| {
        ips.iter().for_each(|ip| ip_set.release(*ip));
        ports.iter().for_each(|p| port_set.release(*p));
    });
}

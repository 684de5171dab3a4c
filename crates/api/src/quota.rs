//! Resource quota arithmetic shared by the API server's ResourceQuota and
//! LimitRanger admission plugins and the resource quota controller
//! (upstream `pkg/quota/v1` and its evaluators): quantities as exact
//! milli-units that print in upstream's canonical form, the usage one
//! object charges (pods, services, configmaps, secrets, claims and
//! `count/<resource>.<group>` for any kind), upstream's `prettyPrint` of a
//! resource list, and the pod constraint (`must specify ...`). Pure: no
//! I/O.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::quantity::ParsedQuantity;

/// A quantity: milli-units and whether it prints with binary suffixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    pub milli: i128,
    pub binary: bool,
}

impl Amount {
    pub const ZERO: Amount = Amount {
        milli: 0,
        binary: false,
    };

    /// A whole number of units (counts).
    pub fn count(n: i64) -> Amount {
        Amount {
            milli: i128::from(n) * 1000,
            binary: false,
        }
    }

    /// Parses a quantity string; none when it does not parse or overflows.
    pub fn parse(s: &str) -> Option<Amount> {
        let q = ParsedQuantity::parse(s).ok()?;
        let milli = q.scaled_ceil(3)?;
        let binary = s.ends_with('i');
        Some(Amount {
            milli: i128::from(milli),
            binary,
        })
    }

    /// Upstream's `Quantity.Add`: the sum in the receiver's format (a
    /// zero receiver takes the other's).
    pub fn plus(self, other: Amount) -> Amount {
        Amount {
            milli: self.milli.saturating_add(other.milli),
            binary: if self.milli == 0 {
                other.binary
            } else {
                self.binary
            },
        }
    }

    /// Upstream's canonical `Quantity.String()`.
    pub fn format(&self) -> String {
        let m = self.milli;
        if m == 0 {
            return "0".into();
        }
        let sign = if m < 0 { "-" } else { "" };
        let m = m.unsigned_abs();
        if !m.is_multiple_of(1000) {
            return format!("{sign}{m}m");
        }
        let v = m / 1000;
        if self.binary {
            for (suffix, power) in [
                ("Ei", 60u32),
                ("Pi", 50),
                ("Ti", 40),
                ("Gi", 30),
                ("Mi", 20),
                ("Ki", 10),
            ] {
                let unit = 1u128 << power;
                if v >= unit && v.is_multiple_of(unit) {
                    return format!("{sign}{}{suffix}", v / unit);
                }
            }
            return format!("{sign}{v}");
        }
        for (suffix, power) in [
            ("E", 18u32),
            ("P", 15),
            ("T", 12),
            ("G", 9),
            ("M", 6),
            ("k", 3),
        ] {
            let unit = 10u128.pow(power);
            if v >= unit && v.is_multiple_of(unit) {
                return format!("{sign}{}{suffix}", v / unit);
            }
        }
        format!("{sign}{v}")
    }
}

/// A resource list: resource name to amount, sorted.
pub type Usage = BTreeMap<String, Amount>;

/// Parses a `{name: quantity}` map (unparsable entries are left out).
pub fn parse_list(v: Option<&Value>) -> Usage {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, q)| q.as_str().and_then(Amount::parse).map(|a| (k.clone(), a)))
                .collect()
        })
        .unwrap_or_default()
}

/// A resource list as JSON quantities.
pub fn to_json(usage: &Usage) -> Value {
    Value::Object(
        usage
            .iter()
            .map(|(k, a)| (k.clone(), Value::String(a.format())))
            .collect(),
    )
}

/// `a + b`, each key in `a`'s format when both have it.
pub fn add(a: &Usage, b: &Usage) -> Usage {
    let mut out = a.clone();
    for (k, v) in b {
        let sum = match out.get(k) {
            Some(have) => have.plus(*v),
            None => *v,
        };
        out.insert(k.clone(), sum);
    }
    out
}

/// Only the keys of `usage` named in `names`.
pub fn mask(usage: &Usage, names: &BTreeSet<String>) -> Usage {
    usage
        .iter()
        .filter(|(k, _)| names.contains(*k))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// Upstream's `prettyPrint`: `a=1,b=2`, sorted by name.
pub fn pretty(usage: &Usage) -> String {
    usage
        .iter()
        .map(|(k, v)| format!("{k}={}", v.format()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The names in `hard` that `usage` exceeds.
pub fn exceeded(usage: &Usage, hard: &Usage) -> BTreeSet<String> {
    usage
        .iter()
        .filter(|(k, v)| hard.get(*k).is_some_and(|h| v.milli > h.milli))
        .map(|(k, _)| k.clone())
        .collect()
}

fn add_to(usage: &mut Usage, name: &str, amount: Amount) {
    let sum = match usage.get(name) {
        Some(have) => have.plus(amount),
        None => amount,
    };
    usage.insert(name.to_string(), sum);
}

/// `count/<plural>` for core, `count/<plural>.<group>` otherwise.
pub fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// Whether a pod no longer counts (Succeeded or Failed).
pub fn pod_terminal(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

/// A container's usage in quota names (upstream `podComputeUsageHelper`
/// without the pod count).
fn container_usage(c: &Value) -> Usage {
    let mut out = Usage::new();
    let requests = parse_list(c.pointer("/resources/requests"));
    let limits = parse_list(c.pointer("/resources/limits"));
    for (name, amount) in &requests {
        match name.as_str() {
            "cpu" | "memory" | "ephemeral-storage" => {
                add_to(&mut out, name, *amount);
                add_to(&mut out, &format!("requests.{name}"), *amount);
            }
            other if other.contains('/') || other.starts_with("hugepages-") => {
                add_to(&mut out, &format!("requests.{other}"), *amount);
            }
            _ => {}
        }
    }
    for (name, amount) in &limits {
        if matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage") {
            add_to(&mut out, &format!("limits.{name}"), *amount);
        }
    }
    out
}

/// A pod's compute usage: its containers' sum, or an init container's
/// when larger (upstream `PodRequests`/`PodLimits`).
fn pod_compute(pod: &Value) -> Usage {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut sum = Usage::new();
    for c in containers {
        sum = add(&sum, &container_usage(c));
    }
    if let Some(inits) = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
    {
        for c in inits {
            for (k, v) in container_usage(c) {
                if sum.get(&k).is_none_or(|have| have.milli < v.milli) {
                    sum.insert(k, v);
                }
            }
        }
    }
    sum
}

/// What one object of `group`/`plural` charges against a quota.
pub fn object_usage(group: &str, plural: &str, obj: &Value) -> Usage {
    let mut out = Usage::new();
    if group.is_empty() && plural == "pods" && pod_terminal(obj) {
        return out;
    }
    add_to(&mut out, &count_name(group, plural), Amount::count(1));
    if !group.is_empty() {
        return out;
    }
    match plural {
        "pods" => {
            add_to(&mut out, "pods", Amount::count(1));
            out = add(&out, &pod_compute(obj));
        }
        "services" => {
            add_to(&mut out, "services", Amount::count(1));
            let ty = obj
                .pointer("/spec/type")
                .and_then(Value::as_str)
                .unwrap_or("ClusterIP");
            let ports = obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            match ty {
                "NodePort" => {
                    add_to(&mut out, "services.nodeports", Amount::count(ports as i64));
                }
                "LoadBalancer" => {
                    add_to(&mut out, "services.loadbalancers", Amount::count(1));
                    add_to(&mut out, "services.nodeports", Amount::count(ports as i64));
                }
                _ => {
                    add_to(&mut out, "services.nodeports", Amount::count(0));
                    add_to(&mut out, "services.loadbalancers", Amount::count(0));
                }
            }
        }
        "persistentvolumeclaims" => {
            add_to(&mut out, "persistentvolumeclaims", Amount::count(1));
            let storage = obj
                .pointer("/spec/resources/requests/storage")
                .and_then(Value::as_str)
                .and_then(Amount::parse);
            if let Some(s) = storage {
                add_to(&mut out, "requests.storage", s);
            }
            if let Some(class) = obj
                .pointer("/spec/storageClassName")
                .and_then(Value::as_str)
            {
                let prefix = format!("{class}.storageclass.storage.k8s.io/");
                add_to(
                    &mut out,
                    &format!("{prefix}persistentvolumeclaims"),
                    Amount::count(1),
                );
                if let Some(s) = storage {
                    add_to(&mut out, &format!("{prefix}requests.storage"), s);
                }
            }
        }
        "configmaps" | "secrets" | "replicationcontrollers" | "resourcequotas" => {
            add_to(&mut out, plural, Amount::count(1));
        }
        _ => {}
    }
    out
}

/// The (group, plural) whose objects a quota name counts.
pub fn counted_kind(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        return Some(match rest.split_once('.') {
            Some((plural, group)) => (group.to_string(), plural.to_string()),
            None => (String::new(), rest.to_string()),
        });
    }
    let core = |p: &str| Some((String::new(), p.to_string()));
    match name {
        "pods" | "cpu" | "memory" | "ephemeral-storage" => core("pods"),
        n if n.starts_with("requests.") && n != "requests.storage" => core("pods"),
        n if n.starts_with("limits.") => core("pods"),
        "services" | "services.nodeports" | "services.loadbalancers" => core("services"),
        "requests.storage" | "persistentvolumeclaims" => core("persistentvolumeclaims"),
        n if n.contains(".storageclass.storage.k8s.io/") => core("persistentvolumeclaims"),
        "configmaps" | "secrets" | "replicationcontrollers" | "resourcequotas" => core(name),
        _ => None,
    }
}

/// The compute resources whose quota makes every container state them.
const CONSTRAINED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// Upstream's pod evaluator `Constraints`: with `required` (the quota's
/// hard names) naming cpu or memory, every container must state them;
/// the message (`must specify limits.cpu for: c; ...`) when one does not.
pub fn pod_constraints(required: &BTreeSet<String>, pod: &Value) -> Option<String> {
    let wanted: BTreeSet<&str> = CONSTRAINED
        .iter()
        .copied()
        .filter(|r| required.contains(*r))
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for list in ["containers", "initContainers"] {
        let Some(cs) = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for c in cs {
            let has = container_usage(c);
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            for r in &wanted {
                if !has.contains_key(*r) {
                    missing.entry(r).or_default().insert(name.to_string());
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_map_to_kinds() {
        assert_eq!(
            counted_kind("requests.cpu"),
            Some((String::new(), "pods".into()))
        );
        assert_eq!(
            counted_kind("count/deployments.apps"),
            Some(("apps".into(), "deployments".into()))
        );
        assert_eq!(
            counted_kind("requests.storage"),
            Some((String::new(), "persistentvolumeclaims".into()))
        );
        assert_eq!(counted_kind("bogus"), None);
    }

    #[test]
    fn formats_like_upstream() {
        let f = |s: &str| Amount::parse(s).unwrap().format();
        assert_eq!(f("500m"), "500m");
        assert_eq!(f("1000m"), "1");
        assert_eq!(f("2000"), "2k");
        assert_eq!(f("1500"), "1500");
        assert_eq!(f("64Mi"), "64Mi");
        assert_eq!(f("1536Mi"), "1536Mi");
        assert_eq!(f("1Gi"), "1Gi");
        let sum = Amount::parse("500m")
            .unwrap()
            .plus(Amount::parse("500m").unwrap());
        assert_eq!(sum.format(), "1");
        let mem = Amount::parse("64Mi")
            .unwrap()
            .plus(Amount::parse("64Mi").unwrap());
        assert_eq!(mem.format(), "128Mi");
        assert_eq!(
            Amount::ZERO.plus(Amount::parse("64Mi").unwrap()).format(),
            "64Mi"
        );
        assert_eq!(Amount::ZERO.format(), "0");
    }

    #[test]
    fn pod_usage_and_constraints() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}}},
            {"name": "b"}
        ]}});
        let u = object_usage("", "pods", &pod);
        assert_eq!(u["pods"].format(), "1");
        assert_eq!(u["count/pods"].format(), "1");
        assert_eq!(u["requests.cpu"].format(), "100m");
        assert_eq!(u["limits.cpu"].format(), "200m");
        let required: BTreeSet<String> = [
            "limits.cpu".to_string(),
            "limits.memory".to_string(),
            "pods".to_string(),
        ]
        .into();
        assert_eq!(
            pod_constraints(&required, &pod).unwrap(),
            "must specify limits.cpu for: b; limits.memory for: a,b"
        );
        assert!(object_usage("", "pods", &json!({"status": {"phase": "Failed"}})).is_empty());
        assert_eq!(
            pretty(&object_usage("apps", "deployments", &json!({}))),
            "count/deployments.apps=1"
        );
    }
}

//! networking.k8s.io/v1 and discovery.k8s.io/v1 defaults, as upstream's
//! `SetDefaults_*` in pkg/apis/networking/v1 and pkg/apis/discovery/v1
//! fill them: a NetworkPolicy's policyTypes (Ingress, plus Egress when it
//! has egress rules) and port protocols (TCP); an IngressClass's
//! parameters scope (Cluster); an EndpointSlice's port names ("") and
//! protocols (TCP). Fills only what is absent.

use serde_json::{json, Value};

/// A NetworkPolicy.
pub fn network_policy(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for (rules, _) in [("ingress", "from"), ("egress", "to")] {
        let Some(list) = spec.get_mut(rules).and_then(Value::as_array_mut) else {
            continue;
        };
        for rule in list {
            let Some(ports) = rule.get_mut("ports").and_then(Value::as_array_mut) else {
                continue;
            };
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if p.get("protocol").is_none_or(Value::is_null) {
                    p.insert("protocol".into(), json!("TCP"));
                }
            }
        }
    }
    let empty = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}

/// An IngressClass: parameters without a scope are cluster-scoped.
pub fn ingress_class(obj: &mut Value) {
    if let Some(p) = obj
        .pointer_mut("/spec/parameters")
        .and_then(Value::as_object_mut)
    {
        if p.get("scope").is_none_or(Value::is_null) {
            p.insert("scope".into(), json!("Cluster"));
        }
    }
}

/// An EndpointSlice.
pub fn endpoint_slice(obj: &mut Value) {
    let Some(ports) = obj.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
        if p.get("name").is_none_or(Value::is_null) {
            p.insert("name".into(), json!(""));
        }
        if p.get("protocol").is_none_or(Value::is_null) {
            p.insert("protocol".into(), json!("TCP"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_types_and_protocols() {
        let mut np = json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}});
        network_policy(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let mut es = json!({"ports": [{"port": 80}]});
        endpoint_slice(&mut es);
        assert_eq!(
            es["ports"][0],
            json!({"port": 80, "name": "", "protocol": "TCP"})
        );
    }
}

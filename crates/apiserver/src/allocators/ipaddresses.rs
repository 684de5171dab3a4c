//! The IPAddress objects that mirror the ClusterIPs taken (one per
//! address, its parentRef the Service, as upstream 1.33's
//! MultiCIDRServiceAllocator keeps them): written beside a Service's
//! write, repaired at start (`crate::bootstrap`). Errors are logged: the
//! Services are the truth.

use std::net::Ipv4Addr;

use serde_json::{json, Value};
use skiff_store::Store;

use crate::object;

/// The managed-by label of the IPAddresses this allocator writes.
pub(crate) const MANAGED_BY: &str = "ipallocator.k8s.io";

/// Where the IPAddress of `ip` is stored (cluster-scoped, storage name
/// `ipaddresses`; the test below checks it against the kind's entry).
fn key(ip: Ipv4Addr) -> String {
    format!("/registry/ipaddresses/{ip}")
}

pub(crate) fn ip_address_object(ip: Ipv4Addr, ns: &str, name: &str) -> Value {
    json!({
        "kind": "IPAddress",
        "apiVersion": "networking.k8s.io/v1",
        "metadata": {
            "name": ip.to_string(),
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": object::now(),
            "labels": {
                "ipaddress.kubernetes.io/ip-family": "IPv4",
                "ipaddress.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": ns, "name": name}},
    })
}

pub(crate) fn parent_is(obj: &Value, ns: &str, name: &str) -> bool {
    obj.pointer("/spec/parentRef/namespace")
        .and_then(Value::as_str)
        == Some(ns)
        && obj.pointer("/spec/parentRef/name").and_then(Value::as_str) == Some(name)
        && obj
            .pointer("/spec/parentRef/resource")
            .and_then(Value::as_str)
            == Some("services")
}

/// Records that `ip` belongs to Service `ns`/`name` (errors are logged:
/// the Service is the truth, the next start repairs the mirror).
pub async fn put_ip_address(store: &dyn Store, ip: Ipv4Addr, ns: &str, name: &str) {
    let key = key(ip);
    let body = ip_address_object(ip, ns, name);
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    match store.create(&key, bytes.clone().into()).await {
        Ok(_) => {}
        Err(skiff_store::Error::AlreadyExists { .. }) => {
            if let Ok(kv) = store.get(&key).await {
                let current: Value = serde_json::from_slice(&kv.value).unwrap_or_default();
                if !parent_is(&current, ns, name) {
                    if let Err(e) = store.update(&key, bytes.into(), kv.mod_revision).await {
                        tracing::warn!(%ip, error = %e, "cannot record the IPAddress");
                    }
                }
            }
        }
        Err(e) => tracing::warn!(%ip, error = %e, "cannot record the IPAddress"),
    }
}

/// Removes the IPAddress of `ip` if it is Service `ns`/`name`'s.
pub async fn delete_ip_address(store: &dyn Store, ip: Ipv4Addr, ns: &str, name: &str) {
    let key = key(ip);
    let Ok(kv) = store.get(&key).await else {
        return;
    };
    let current: Value = serde_json::from_slice(&kv.value).unwrap_or_default();
    if parent_is(&current, ns, name) {
        match store.delete(&key, Some(kv.mod_revision)).await {
            Ok(_) | Err(skiff_store::Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!(%ip, error = %e, "cannot remove the IPAddress"),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_key_is_the_ipaddress_kind_s() {
        let r = crate::resources::find_builtin("networking.k8s.io", "v1", "ipaddresses").unwrap();
        let ip = "10.43.0.7".parse().unwrap();
        assert_eq!(super::key(ip), crate::object::key(r, None, "10.43.0.7"));
    }
}

//! What the allocators do at start and the objects that mirror them:
//! the taken sets rebuilt from the stored Services, the IPAddress objects
//! repaired to match (one per ClusterIP, its parentRef the Service, as
//! upstream 1.33's MultiCIDRServiceAllocator keeps them), the default
//! ServiceCIDR `kubernetes`, and the `kubernetes` Service in `default`
//! (upstream's bootstrap controller). Its Endpoints and EndpointSlices,
//! listing every live API server, are [`super::endpoint_reconciler`]'s.

use std::net::Ipv4Addr;

use serde_json::{json, Value};
use skiff_store::{ListOptions, Store};

use crate::allocators::ipaddresses::{parent_is, put_ip_address, MANAGED_BY};
use crate::allocators::services::{
    ips_of, needs_health_check_port, needs_node_ports, node_ports_of,
};
use crate::allocators::{Allocators, Cidr, PortRange};
use crate::catalog::Resource;
use crate::object;
use crate::resources;

type StoreResult<T> = Result<T, skiff_store::Error>;

fn ip_addresses() -> Option<&'static Resource> {
    resources::find_builtin("networking.k8s.io", "v1", "ipaddresses")
}

fn services() -> Option<&'static Resource> {
    resources::find_builtin("", "v1", "services")
}

async fn list_all(store: &dyn Store, r: &Resource) -> StoreResult<Vec<(String, i64, Value)>> {
    let mut out = Vec::new();
    let mut opts = ListOptions::default();
    loop {
        let page = store.list(&object::prefix(r, None), opts.clone()).await?;
        for kv in page.items {
            if let Ok(v) = serde_json::from_slice::<Value>(&kv.value) {
                out.push((kv.key, kv.mod_revision, v));
            }
        }
        match page.continue_token {
            Some(token) => {
                opts.continue_token = Some(token);
                opts.revision = Some(page.revision);
            }
            None => return Ok(out),
        }
    }
}

fn owner(svc: &Value) -> (String, String) {
    (
        svc.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        object::name_of(svc).unwrap_or_default().to_string(),
    )
}

/// The allocators for `cidr` and `node_ports` with every stored Service's
/// values taken, and the IPAddress objects repaired to match.
pub async fn load(store: &dyn Store, cidr: Cidr, node_ports: PortRange) -> StoreResult<Allocators> {
    let alloc = Allocators::new(cidr, node_ports);
    let Some(svc_resource) = services() else {
        return Ok(alloc);
    };
    let stored = list_all(store, svc_resource).await?;
    let mut holders: Vec<(Ipv4Addr, String, String)> = Vec::new();
    alloc.with(|ips, ports| {
        for (_, _, svc) in &stored {
            let (ns, name) = owner(svc);
            for ip in ips_of(svc) {
                if ips.mark(ip) {
                    holders.push((ip, ns.clone(), name.clone()));
                } else {
                    tracing::warn!(%ip, service = %format!("{ns}/{name}"), "stored ClusterIP is outside the service CIDR");
                }
            }
            if needs_node_ports(svc) || needs_health_check_port(svc) {
                for p in node_ports_of(svc) {
                    if !ports.mark(i64::from(p)) {
                        tracing::warn!(port = p, service = %format!("{ns}/{name}"), "stored NodePort is outside the node-port range");
                    }
                }
            }
        }
    });
    if let Some(ipr) = ip_addresses() {
        for (key, revision, obj) in list_all(store, ipr).await? {
            let managed = obj
                .pointer("/metadata/labels/ipaddress.kubernetes.io~1managed-by")
                .and_then(Value::as_str)
                == Some(MANAGED_BY);
            let ip: Option<Ipv4Addr> = object::name_of(&obj).and_then(|n| n.parse().ok());
            let held = ip.is_some_and(|ip| {
                holders
                    .iter()
                    .any(|(h, ns, name)| *h == ip && parent_is(&obj, ns, name))
            });
            if managed && !held {
                match store.delete(&key, Some(revision)).await {
                    Ok(_) | Err(skiff_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    for (ip, ns, name) in &holders {
        put_ip_address(store, *ip, ns, name).await;
    }
    Ok(alloc)
}

/// Creates `key` with `body`, or replaces it when `differs` says the
/// stored one is out of date.
pub(super) async fn ensure(
    store: &dyn Store,
    key: &str,
    body: Value,
    differs: impl Fn(&Value) -> bool,
) -> StoreResult<()> {
    match store.get(key).await {
        Ok(kv) => {
            let current: Value = serde_json::from_slice(&kv.value).unwrap_or_default();
            if differs(&current) {
                let mut body = body;
                // Keep the identity of the existing object.
                for field in ["uid", "creationTimestamp"] {
                    if let Some(v) = current.pointer(&format!("/metadata/{field}")) {
                        object::meta(&mut body).insert(field.into(), v.clone());
                    }
                }
                let bytes = serde_json::to_vec(&body).unwrap_or_default();
                match store.update(key, bytes.into(), kv.mod_revision).await {
                    Ok(_) | Err(skiff_store::Error::Conflict { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
        Err(skiff_store::Error::NotFound { .. }) => {
            let bytes = serde_json::to_vec(&body).unwrap_or_default();
            match store.create(key, bytes.into()).await {
                Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

pub(super) fn meta(name: &str, ns: Option<&str>, labels: Value) -> Value {
    let mut m = json!({
        "name": name,
        "uid": uuid::Uuid::new_v4().to_string(),
        "creationTimestamp": object::now(),
    });
    if let Some(ns) = ns {
        m["namespace"] = json!(ns);
    }
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        m["labels"] = labels;
    }
    m
}

/// The default ServiceCIDR, named `kubernetes`, Ready.
pub async fn service_cidr(store: &dyn Store, cidr: Cidr) -> StoreResult<()> {
    let Some(r) = resources::find_builtin("networking.k8s.io", "v1", "servicecidrs") else {
        return Ok(());
    };
    let mut m = meta("kubernetes", None, json!({}));
    m["finalizers"] = json!(["networking.k8s.io/service-cidr-finalizer"]);
    let body = json!({
        "kind": "ServiceCIDR",
        "apiVersion": "networking.k8s.io/v1",
        "metadata": m,
        "spec": {"cidrs": [cidr.to_string()]},
        "status": {"conditions": [{
            "type": "Ready",
            "status": "True",
            "lastTransitionTime": object::now(),
            "reason": "",
            "message": "Kubernetes default Service CIDR is ready",
        }]},
    });
    let want = json!([cidr.to_string()]);
    ensure(store, &object::key(r, None, "kubernetes"), body, |cur| {
        cur.pointer("/spec/cidrs") != Some(&want)
    })
    .await
}

/// An API server's advertised `host:port` split (6443 when the port is
/// missing or not a number).
pub(super) fn split_advertise(advertise: &str) -> (String, u16) {
    advertise
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.parse::<u16>().unwrap_or(6443)))
        .unwrap_or_else(|| (advertise.to_string(), 6443))
}

/// The `kubernetes` Service in `default` (the range's first address, 443
/// to the API server's port at `advertise`, `host:port`); its endpoints
/// are [`super::endpoint_reconciler`]'s.
pub async fn kubernetes_service(
    store: &dyn Store,
    alloc: &Allocators,
    advertise: &str,
) -> StoreResult<()> {
    let Some(svc_r) = services() else {
        return Ok(());
    };
    let port = split_advertise(advertise).1;
    let key = object::key(svc_r, Some("default"), "kubernetes");
    let existing = match store.get(&key).await {
        Ok(kv) => Some(serde_json::from_slice::<Value>(&kv.value).unwrap_or_default()),
        Err(skiff_store::Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let ip = match existing.as_ref().map(ips_of).and_then(|v| v.first().copied()) {
        Some(ip) => Some(ip),
        None => alloc.first_ip().filter(|ip| {
            alloc.with(|ips, _| match ips.allocate(*ip) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(%ip, error = %e, "cannot give the kubernetes Service its address");
                    false
                }
            })
        }),
    };
    if let Some(ip) = ip {
        let labels = json!({"component": "apiserver", "provider": "kubernetes"});
        let ports = json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]);
        let body = json!({
            "kind": "Service",
            "apiVersion": "v1",
            "metadata": meta("kubernetes", Some("default"), labels),
            "spec": {
                "clusterIP": ip.to_string(),
                "clusterIPs": [ip.to_string()],
                "internalTrafficPolicy": "Cluster",
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "ports": ports.clone(),
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
            "status": {"loadBalancer": {}},
        });
        let want = ports.clone();
        ensure(store, &key, body, |cur| {
            cur.pointer("/spec/ports") != Some(&want) || ips_of(cur).first() != Some(&ip)
        })
        .await?;
        put_ip_address(store, ip, "default", "kubernetes").await;
    }
    Ok(())
}

/// Creates each object of `objects` of resource `r` that is absent.
async fn create_absent(store: &dyn Store, r: &Resource, objects: Vec<Value>) -> StoreResult<()> {
    for obj in objects {
        let name = object::name_of(&obj).unwrap_or_default().to_string();
        let bytes = serde_json::to_vec(&obj).unwrap_or_default();
        match store
            .create(&object::key(r, None, &name), bytes.into())
            .await
        {
            Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// At start: the ranges parsed, the taken sets rebuilt, the `kubernetes`
/// ServiceCIDR and Service written, and the system PriorityClasses
/// created when absent.
pub async fn start(
    store: &dyn Store,
    cidr: &str,
    node_ports: &str,
    advertise: &str,
) -> Result<Allocators, crate::Error> {
    let cidr: Cidr = cidr
        .parse()
        .map_err(|e| crate::Error::Allocators(format!("--service-cidr: {e}")))?;
    let node_ports: PortRange = node_ports
        .parse()
        .map_err(|e| crate::Error::Allocators(format!("--service-node-port-range: {e}")))?;
    let failed =
        |what: &str, e: skiff_store::Error| crate::Error::Allocators(format!("{what}: {e}"));
    let alloc = load(store, cidr, node_ports)
        .await
        .map_err(|e| failed("rebuilding from stored Services", e))?;
    service_cidr(store, cidr)
        .await
        .map_err(|e| failed("the kubernetes ServiceCIDR", e))?;
    kubernetes_service(store, &alloc, advertise)
        .await
        .map_err(|e| failed("the kubernetes Service", e))?;
    if let Some(r) = resources::find_builtin("scheduling.k8s.io", "v1", "priorityclasses") {
        create_absent(store, r, resources::system_priority_classes())
            .await
            .map_err(|e| failed("the system PriorityClasses", e))?;
    }
    Ok(alloc)
}

//! The built-in service load balancer, as k3s's ServiceLB: a Service of
//! type LoadBalancer (without a `loadBalancerClass`, which names someone
//! else's) gets the addresses of the cluster's Ready nodes as its
//! `status.loadBalancer.ingress` (each node's ExternalIP, else its
//! InternalIP); every node's service proxy then answers the Service's
//! ports there. A Service that stops being a LoadBalancer loses them.
//!
//! This module owns only that status. It routes nothing itself (the
//! proxy does) and runs only when the manager's `service-lb-controller`
//! is on (`skiff server --disable-service-lb` turns it off).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing the load balancer status of service {namespace}/{name}")]
    Write {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

struct State {
    context: Context,
    nodes: Store<Node>,
    failures: Failures,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let services = context.informers.get::<Service>();
        let nodes = context.informers.get::<Node>();
        let service_store = services.store();
        let controller = Controller::for_stream(services.objects(), services.store())
            // A node's addresses or readiness changed: every load
            // balancer looks again.
            .watches_stream(nodes.objects(), move |_: Node| {
                service_store
                    .state()
                    .iter()
                    .filter(|s| wants_ingress(s) || has_ingress(s))
                    .map(|s| ObjectRef::from_obj(&**s))
                    .collect::<Vec<_>>()
            });
        let state = Arc::new(State {
            nodes: nodes.store(),
            context,
            failures: Failures::default(),
        });
        nodes.ready().await;
        runner::run(
            "service-lb-controller",
            &services,
            controller,
            2,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
    })
}

/// A LoadBalancer Service this controller serves.
fn wants_ingress(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|s| {
        s.type_.as_deref() == Some("LoadBalancer") && s.load_balancer_class.is_none()
    })
}

fn ingress_ips(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

fn has_ingress(svc: &Service) -> bool {
    !ingress_ips(svc).is_empty()
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The load balancer addresses: each Ready node's ExternalIP, else its
/// InternalIP, sorted.
pub fn node_addresses<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Vec<String> {
    let mut ips: Vec<String> = nodes
        .into_iter()
        .filter(|n| ready(n))
        .filter_map(|n| {
            let addresses = n.status.as_ref()?.addresses.as_ref()?;
            let of = |t: &str| {
                addresses
                    .iter()
                    .find(|a| a.type_ == t)
                    .map(|a| a.address.clone())
            };
            of("ExternalIP").or_else(|| of("InternalIP"))
        })
        // Loopback answers nothing from outside (node ports skip it too).
        .filter(|ip| {
            ip.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

async fn reconcile(svc: Arc<Service>, state: Arc<State>) -> Result<Action, Error> {
    let namespace = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let want: Vec<String> = if wants_ingress(&svc) && svc.metadata.deletion_timestamp.is_none() {
        node_addresses(state.nodes.state().iter().map(|n| &**n))
    } else {
        vec![]
    };
    if ingress_ips(&svc) != want {
        let ingress: Vec<serde_json::Value> = want
            .iter()
            .map(|ip| serde_json::json!({"ip": ip, "ipMode": "VIP"}))
            .collect();
        let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": ingress}}});
        let api: Api<Service> = Api::namespaced(state.context.client.clone(), &namespace);
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if skiff_client::is_not_found(&e) => {}
            Err(source) => {
                return Err(Error::Write {
                    namespace,
                    name,
                    source,
                })
            }
        }
    }
    state.failures.forget(&format!("{namespace}/{name}"));
    Ok(Action::await_change())
}

fn error_policy(svc: Arc<Service>, _: &Error, state: Arc<State>) -> Action {
    let key = format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    );
    Action::requeue(state.failures.next_delay(&key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, ready: bool, addresses: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "addresses": addresses,
            }
        }))
        .unwrap()
    }

    #[test]
    fn ready_nodes_external_ip_first() {
        let nodes = [
            node(
                "b",
                true,
                json!([{"type": "InternalIP", "address": "10.0.0.2"}]),
            ),
            node(
                "a",
                true,
                json!([{"type": "InternalIP", "address": "10.0.0.1"},
                                   {"type": "ExternalIP", "address": "192.0.2.1"}]),
            ),
            node(
                "c",
                false,
                json!([{"type": "InternalIP", "address": "10.0.0.3"}]),
            ),
        ];
        assert_eq!(node_addresses(nodes.iter()), ["10.0.0.2", "192.0.2.1"]);
    }

    #[test]
    fn only_classless_load_balancers() {
        let svc = |spec: serde_json::Value| -> Service {
            serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec})).unwrap()
        };
        assert!(wants_ingress(&svc(json!({"type": "LoadBalancer"}))));
        assert!(!wants_ingress(&svc(
            json!({"type": "LoadBalancer", "loadBalancerClass": "x/y"})
        )));
        assert!(!wants_ingress(&svc(json!({"type": "NodePort"}))));
    }
}

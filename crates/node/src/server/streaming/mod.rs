//! exec, attach and port-forward on the agent's endpoint, as the
//! kubelet serves them: the agent asks the runtime (CRI Exec, Attach,
//! PortForward) for a URL on containerd's streaming server and proxies
//! the client's HTTP upgrade there, so SPDY/3.1 and the WebSocket
//! protocols containerd speaks (`v4.channel.k8s.io`, `channel.k8s.io`,
//! base64 ones, port-forward's) pass through unchanged.
//!
//! - [`routes`]: the routes, the query (streams, command, ports), the pod
//!   from the agent's index and its running container or ready sandbox
//!   from the runtime, the CRI call, and the kubelet's refusals;
//! - [`proxy`]: the generic upgrade proxy and the splice of the two
//!   upgraded connections (`copy_bidirectional`, nothing per byte).
//!
//! It reaches the runtime only through [`Runtime`] (set into a
//! [`RuntimeSlot`] once the runtime is up; the endpoint serves before),
//! and pods only through the server's lookup; it must not reach into the
//! pod workers (it shares only their label names), and it never speaks
//! the streaming protocols itself.

pub mod proxy;
pub mod routes;

use std::sync::{Arc, OnceLock};

use axum::routing::get;
use axum::Router;

use super::Shared;
use crate::runtime::Runtime;

/// Where the endpoint finds the runtime once the agent has one.
pub type RuntimeSlot = Arc<OnceLock<Arc<dyn Runtime>>>;

/// The routes, as the kubelet's debugging handlers register them (GET
/// and POST; with and without the pod's UID).
pub(super) fn routes() -> Router<Arc<Shared>> {
    let exec = get(routes::exec).post(routes::exec);
    let attach = get(routes::attach).post(routes::attach);
    let port_forward = get(routes::port_forward).post(routes::port_forward);
    Router::new()
        .route("/exec/{namespace}/{pod}/{container}", exec.clone())
        .route("/exec/{namespace}/{pod}/{uid}/{container}", exec)
        .route("/attach/{namespace}/{pod}/{container}", attach.clone())
        .route("/attach/{namespace}/{pod}/{uid}/{container}", attach)
        .route("/portForward/{namespace}/{pod}", port_forward.clone())
        .route("/portForward/{namespace}/{pod}/{uid}", port_forward)
}

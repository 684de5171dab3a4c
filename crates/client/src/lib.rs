//! skiff-client: what every component that talks to the API server shares
//! (kube-rs calls this its runtime layer) — the scheduler now, the node
//! agent, the controllers and the simulator next. Each part talks to the
//! API only through a kube client (HTTP, or the in-process loopback):
//!
//! - [`certificate`]: a CA that signs certificate requests and re-signs
//!   certificates, and the client certificate of a kubeconfig;
//! - [`clock`]: time as a trait, with a fake for tests;
//! - [`leader`]: Lease leader election;
//! - [`recorder`]: an event recorder with upstream's aggregation and spam
//!   filter ([`correlator`]);
//! - [`trimmed`]: pods and nodes decoded without managedFields, tolerant of
//!   objects that do not decode as their type;
//! - [`http`]: the HTTP/2 kube client client-go's transport resembles;
//! - [`loadbalancer`]: the agent's local TCP proxy over the API servers,
//!   failing over between them (k3s's agent load balancer);
//! - [`ratelimit`]: client-go's client-side token bucket (QPS, burst);
//! - [`informer`]: shared informers, one watch per kind per process, with
//!   a store every controller reads and a change stream for kube-runtime's
//!   `Controller`;
//! - [`selectors`]: label selectors and node affinity over typed objects
//!   (label matching is skiff-api's);
//! - [`testing`]: builders for test objects (`pod("web").node_name("n1")`);
//! - [`tls`]: the verifier of TLS clients that accept any server
//!   certificate (HTTPS probes, connections to agents).
//!
//! It knows no component's logic and never reaches into the API server.

mod api_error;
pub mod certificate;
pub mod clock;
pub mod correlator;
pub mod http;
pub mod informer;
pub mod join;
pub mod leader;
pub mod loadbalancer;
pub mod ratelimit;
pub mod recorder;
pub mod selectors;
pub mod testing;
pub mod tls;
pub mod trimmed;

pub use api_error::{is_conflict, is_not_found, status_code};

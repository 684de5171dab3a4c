//! skiff-node: the node agent (upstream's kubelet), talking to the cluster
//! only through the API (a kube client: HTTP, or `skiff server`'s
//! in-process loopback) and to containers only through CRI.
//!
//! - [`registration`]: the Node object from the machine, its status
//!   heartbeat and its Lease in kube-node-lease;
//! - [`runtime`]: the [`runtime::Runtime`] trait (CRI v1), its containerd
//!   client, the containerd supervisor, and a fake for unit tests;
//! - [`images`]: the built-in images (pause, busybox) and airgap imports;
//! - [`network`]: the CNI config written from the node's podCIDR and the
//!   host prerequisites;
//! - [`podspec`]: pure helpers over a pod's spec several modules share
//!   (its name in messages, grace period, init containers and sidecars,
//!   a container's hash, resource quantities);
//! - [`events`]: where events about pods go (the kubelet's reasons);
//! - [`observed`]: what the runtime has for one pod, read back from the
//!   labels the agent puts on everything it creates;
//! - [`pod_worker`]: one worker per pod UID: compute actions (pure), then
//!   carry them out;
//! - [`prober`]: startup, liveness and readiness probes on their timers;
//! - [`timeline`]: each pod start's timeline (what the worker and the
//!   prober recorded, turned into phases when the pod is first Ready);
//! - [`status`]: pod status from what the runtime reports, and the
//!   [`status::api::PodApi`] seam through which it is written;
//! - [`storage`]: this node's part of local-path volumes (removing a
//!   deleted volume's directory);
//! - [`metrics`]: the kubelet's metrics and resource metrics (cgroups),
//!   served on the endpoint;
//! - [`logs`]: CRI log files; [`server`]: the agent's HTTPS endpoint
//!   (logs; exec, attach and port-forward proxied to the runtime's
//!   streaming server);
//! - [`api_error`]: why a request to the cluster API failed, as the
//!   node's seams report it;
//! - [`agent`]: wires them into [`agent::Agent::run`];
//! - [`sim`]: many simulated nodes in one process on the fake runtime
//!   (`skiff sim`).
//!
//! It never reaches into the API server's internals.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod agent;
pub mod api_error;
pub mod backoff;
pub mod events;
pub mod images;
pub mod logs;
pub mod metrics;
pub mod network;
pub mod observed;
pub mod pod_worker;
pub mod podspec;
pub mod prober;
pub mod registration;
pub mod runtime;
pub mod server;
pub mod sim;
pub mod status;
pub mod storage;
pub mod timeline;

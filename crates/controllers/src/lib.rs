//! skiff-controllers: the controllers of kube-controller-manager, each a
//! loop over the API server's watch (kube-runtime) writing back through
//! the API, never reaching into the API server's internals.
//!
//! - [`nodeipam`]: gives each Node a podCIDR from the cluster CIDR
//!   (upstream's range allocator);
//! - `events`: Events about Nodes, worded and named as upstream's
//!   recorders write them.
//!
//! The workload controllers (ReplicaSet, Deployment, Job, ...) come next,
//! one module each.

mod events;
pub mod nodeipam;

pub use nodeipam::NodeIpam;

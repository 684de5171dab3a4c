//! skiff-controllers: the controllers of kube-controller-manager, each a
//! loop over the API server's watch (kube-runtime) writing back through
//! the API, never reaching into the API server's internals.
//!
//! - [`nodeipam`]: gives each Node a podCIDR from the cluster CIDR
//!   (upstream's range allocator);
//! - [`persistentvolume`]: binds PersistentVolumeClaims to
//!   PersistentVolumes, provisions volumes for the built-in local-path
//!   provisioner (`skiff.dev/local-path`) and reclaims released ones
//!   (upstream's persistentvolume-binder with k3s' local-path-provisioner);
//! - [`resourcequota`]: keeps ResourceQuota status (hard and used);
//! - [`disruption`]: computes PodDisruptionBudget status;
//! - [`clusterroleaggregation`]: fills aggregated ClusterRoles' rules;
//! - `events`: Events about Nodes, claims and volumes, worded and named as
//!   upstream's recorders write them;
//! - [`testing`]: builders of storage objects for tests.
//!
//! The workload controllers (ReplicaSet, Deployment, Job, ...) come next,
//! one module each.

pub mod clusterroleaggregation;
pub mod disruption;
mod events;
pub mod nodeipam;
mod nswatch;
pub mod persistentvolume;
pub mod resourcequota;
pub mod testing;

pub use clusterroleaggregation::ClusterRoleAggregation;
pub use disruption::DisruptionController;
pub use nodeipam::NodeIpam;
pub use persistentvolume::PersistentVolumeController;
pub use resourcequota::ResourceQuotaController;

//! skiff-controllers: the controller manager (kube-controller-manager).
//! Each controller is a module on kube-runtime's `Controller` (reconcile →
//! `Action`, an error policy with back-off), fed by the shared informers
//! of skiff-client (each kind watched once per process), writing back
//! through the API and never reaching into the API server's internals.
//!
//! - [`manager`]: the list of controllers, leader election on the Lease
//!   `kube-system/kube-controller-manager`, the client-side rate limit;
//! - [`context`]: what every controller is given (client, informers,
//!   settings, an event recorder under its own name);
//! - `runner`: running a `Controller` until the manager stops it, the
//!   per-object back-off of error policies;
//! - [`nodeipam`]: gives each Node a podCIDR from the cluster CIDR
//!   (upstream's range allocator);
//! - [`nodelifecycle`]: marks nodes whose heartbeat stopped Unknown,
//!   taints nodes by their conditions (NoSchedule, and NoExecute
//!   `not-ready`/`unreachable` at a per-zone rate) and marks their pods
//!   not ready;
//! - [`tainteviction`]: deletes pods from nodes with NoExecute taints they
//!   do not tolerate, at once or when their tolerationSeconds run out;
//! - [`persistentvolume`]: binds PersistentVolumeClaims to
//!   PersistentVolumes, provisions volumes for the built-in local-path
//!   provisioner (`skiff.dev/local-path`) and reclaims released ones
//!   (upstream's persistentvolume-binder with k3s' local-path-provisioner);
//! - [`resourcequota`]: keeps ResourceQuota status (hard and used);
//! - [`statefulset`]: pods with stable names and their own claims, made,
//!   removed and updated in order, with ControllerRevisions;
//! - [`daemonset`]: one pod per eligible node, rolled over with
//!   maxUnavailable/maxSurge, with ControllerRevisions;
//! - [`disruption`]: computes PodDisruptionBudget status;
//! - [`clusterroleaggregation`]: fills aggregated ClusterRoles' rules;
//! - [`deployment`]: Deployments roll (RollingUpdate, Recreate) between
//!   their ReplicaSets, with revisions, pause and progress conditions;
//! - [`replicaset`]: ReplicaSets and ReplicationControllers keep their
//!   replicas (one logic for both kinds);
//! - [`serviceaccounts`]: the `default` ServiceAccount in every namespace;
//! - [`certificates`]: signs approved CertificateSigningRequests with the
//!   cluster CA (`csrsigning`) and approves kubelets' client requests
//!   after a SubjectAccessReview (`csrapproving`);
//! - [`rootcacert`]: the `kube-root-ca.crt` ConfigMap in every namespace;
//! - `events`: Events about Nodes, claims and volumes, worded and named as
//!   upstream's recorders write them;
//! - [`endpoints`]: each selecting Service's Endpoints (upstream's
//!   endpoint controller);
//! - [`endpointslice`]: each selecting Service's EndpointSlices
//!   (upstream's endpointslice controller);
//! - `endpointutil`: what those two read the same way (selectors, ports,
//!   trigger times);
//! - [`job`]: runs Jobs' pods to completion or failure (upstream's
//!   job controller, with finalizer-based pod tracking);
//! - [`cronjob`]: creates Jobs on CronJobs' schedules (upstream's v2
//!   cronjob controller);
//! - [`tokencleaner`]: deletes expired bootstrap token Secrets.
//! - [`ttlafterfinished`]: deletes finished Jobs after their
//!   `ttlSecondsAfterFinished`;
//! - [`workload`]: what the workload controllers share (pod facts,
//!   controller references and adoption, expectations);
//! - [`garbagecollector`]: deletes objects whose owners are all gone,
//!   dependents first for foreground deletion, and orphans dependents
//!   (upstream's garbage-collector-controller, over every served kind);
//! - [`namespace`]: deletes the content of namespaces being deleted,
//!   then finalizes them (upstream's namespace-controller);
//! - [`podautoscaler`]: scales the targets of
//!   HorizontalPodAutoscalers on their pods' metrics from
//!   metrics.k8s.io (upstream's horizontal-pod-autoscaler);
//! - [`podgc`]: deletes terminated pods beyond a threshold and pods of
//!   nodes that are gone (upstream's pod-garbage-collector);
//! - [`metrics`]: the work-queue metrics every controller's runner
//!   reports to;
//! - [`testing`]: builders of storage objects for tests.

pub mod certificates;
pub mod clusterroleaggregation;
pub mod context;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
mod endpointutil;
mod events;
pub mod garbagecollector;
pub mod job;
pub mod manager;
pub mod metrics;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod persistentvolume;
pub mod podautoscaler;
pub mod podgc;
pub mod replicaset;
pub mod resourcequota;
pub mod rootcacert;
mod runner;
pub mod serviceaccounts;
pub mod serviceaccounttokens;
pub mod servicelb;
pub mod statefulset;
pub mod tainteviction;
pub mod testing;
pub mod tokencleaner;
pub mod ttlafterfinished;
pub mod workload;

pub use clusterroleaggregation::ClusterRoleAggregation;
pub use context::Context;
pub use disruption::DisruptionController;
pub use manager::{Config, ControllerManager};
pub use nodeipam::NodeIpam;
pub use persistentvolume::PersistentVolumeController;
pub use resourcequota::ResourceQuotaController;

//! What the workload controllers (ReplicaSet, Deployment, StatefulSet,
//! DaemonSet, Job) share, after upstream's `pkg/controller` helpers:
//!
//! - [`pods`]: a pod's readiness and availability, active or finished,
//!   and a pod made from a template for an owner;
//! - [`ownership`]: controller references, adopting orphans that match a
//!   selector and releasing pods that no longer match (upstream's
//!   `ControllerRefManager`);
//! - [`expectations`]: the creates and deletes a controller has sent and
//!   not yet seen in its informer, so a slow watch never makes it act
//!   twice (upstream's `ControllerExpectations`);
//! - [`history`]: ControllerRevisions of a pod template (StatefulSet,
//!   DaemonSet), upstream's `pkg/controller/history`.
//!
//! Nothing here decides how many pods there should be.

pub mod expectations;
pub mod history;
pub mod ownership;
pub mod pods;

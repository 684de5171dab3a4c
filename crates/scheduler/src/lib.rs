//! skiff-scheduler: decides which node each pod runs on.
//!
//! The pure part, modelled on kube-scheduler's framework: [`framework`]
//! (extension-point traits, statuses, node snapshots, the scheduling
//! algorithm and the upstream FailedScheduling message), [`plugins`] (one
//! file per default plugin, registered in one list), [`resources`]
//! (quantity parsing and pod request arithmetic), `skiff_client::selectors` (label
//! and node selector matching), [`cluster_event`] (which events may help which
//! rejected pod), [`queue`] (active/backoff/unschedulable sub-queues) and
//! [`cache`] (nodes, assigned and assumed pods as a [`framework::Snapshot`]).
//! These do no I/O; time comes from a `skiff_client::clock::Clock`.
//!
//! The control loop around it talks to the API server through kube-rs:
//! [`Scheduler::run`] watches pods and nodes (decoded without managedFields:
//! `skiff_client::trimmed`) and the claims, volumes and classes
//! VolumeBinding reads, schedules one pod at a time, binds concurrently
//! after the plugins' PreBind work ([`binder`]), reports failures as a pod condition and
//! events ([`report`], with `skiff_client::recorder`), and acts only while
//! it holds the leader Lease (`skiff_client::leader`); [`Config`] carries
//! its settings; [`metrics`] records attempts, latencies and the queue. Object builders are in `skiff_client::testing`.

pub mod cache;
pub mod cluster_event;
pub mod framework;
pub mod plugins;
pub mod queue;
pub mod resources;

pub mod binder;
pub mod config;
pub mod metrics;
pub mod report;
mod run;
mod scheduler_loop;
mod watch;

pub use config::Config;
pub use run::{Error, Result, Scheduler};

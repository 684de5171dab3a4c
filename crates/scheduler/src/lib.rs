//! skiff-scheduler: decides which node each pod runs on.
//!
//! This crate owns the pure part of Skiff's scheduler, modelled on
//! kube-scheduler's framework: [`framework`] (extension-point traits,
//! statuses, node snapshots, the scheduling algorithm and the upstream
//! FailedScheduling message), [`plugins`] (one file per default plugin,
//! registered in one list), [`resources`] (quantity parsing and pod request
//! arithmetic) and [`selectors`] (label and node selector matching).
//! [`testing`] holds object builders for tests.
//!
//! It must not do I/O: no API client, no async, no clock or randomness.
//! The queue, the informer-fed cache and the binder wire this crate to the
//! API server elsewhere.

pub mod framework;
pub mod plugins;
pub mod resources;
pub mod selectors;
pub mod testing;

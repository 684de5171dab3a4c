//! The scheduling framework: extension points, results, node snapshots and
//! the algorithm that runs plugins over them.
//!
//! This module owns the plugin traits ([`PreFilterPlugin`], [`FilterPlugin`],
//! [`PostFilterPlugin`], [`ScorePlugin`], [`ReservePlugin`],
//! [`PreBindPlugin`]), their results ([`Status`], [`PreFilterResult`],
//! [`NodeScore`], [`PreBind`]), per-attempt
//! [`CycleState`], the [`NodeInfo`]/[`Snapshot`] view of the cluster, the
//! [`Registry`] of plugins and [`Framework::schedule_one`]. It is pure: no
//! I/O, no clock, no randomness; the queue, the cache that builds snapshots
//! and the binder live elsewhere. Plugin logic lives in [`crate::plugins`].

mod cycle_state;
mod fit_error;
mod interface;
mod node_info;
mod registry;
mod run_plugins;
mod runtime;
mod snapshot;
mod status;

pub use cycle_state::CycleState;
pub use fit_error::{Diagnosis, FitError, NodeToStatus};
pub use interface::{
    default_normalize_score, ClaimRef, FilterPlugin, NodeScore, Plugin, PostFilterPlugin, PreBind,
    PreBindPlugin, PreFilterPlugin, PreFilterResult, ReservePlugin, ScorePlugin, VolumeBindings,
    MAX_NODE_SCORE, MIN_NODE_SCORE,
};
pub use node_info::{
    has_required_anti_affinity, host_ports, pod_key, HostPortInfo, ImageStateSummary, NodeInfo,
    PodInfo, BIND_ALL_HOST_IP,
};
pub use registry::{Registered, Registry};
pub use runtime::{
    num_feasible_nodes_to_find, Framework, ScheduleError, ScheduleResult,
    MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, MIN_FEASIBLE_NODES_TO_FIND,
};
pub use snapshot::{Snapshot, SnapshotError, StorageInfo};
pub use status::{Code, Status};

//! Per-attempt scratch space shared by the plugins of one scheduling cycle.
//!
//! This module owns [`CycleState`]: typed values plugins write in PreFilter
//! or PreScore and read back in Filter or Score, plus the sets of plugins
//! whose Filter or Score step is skipped for this pod. It lives for one
//! attempt of one pod and is never shared between pods.

use std::any::Any;
use std::collections::BTreeSet;
use std::fmt;

use super::{NodeInfo, Status};

/// Scratch data for one scheduling attempt of one pod.
#[derive(Default)]
pub struct CycleState {
    /// A handful of entries read for every node: a vector scanned by key
    /// beats hashing the key each time.
    data: Vec<(&'static str, Box<dyn Any + Send + Sync>)>,
    pub(crate) skip_filter_plugins: BTreeSet<&'static str>,
    pub(crate) skip_score_plugins: BTreeSet<&'static str>,
}

impl fmt::Debug for CycleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut keys: Vec<_> = self.data.iter().map(|(k, _)| k).collect();
        keys.sort();
        f.debug_struct("CycleState")
            .field("keys", &keys)
            .field("skip_filter_plugins", &self.skip_filter_plugins)
            .field("skip_score_plugins", &self.skip_score_plugins)
            .finish()
    }
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, value: T) {
        match self.data.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = Box::new(value),
            None => self.data.push((key, Box::new(value))),
        }
    }

    /// The value under `key`, if present and of type `T`.
    pub fn read<T: Any>(&self, key: &'static str) -> Option<&T> {
        self.data
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }

    /// Like [`CycleState::read`], but a missing value is an `Error` status
    /// in upstream wording (the PreX step did not run).
    pub fn require<T: Any>(&self, key: &'static str) -> Result<&T, Status> {
        self.read(key).ok_or_else(|| {
            Status::error(format!("error reading {key:?} from cycleState: not found"))
        })
    }

    /// Scores each of `nodes` into `out` with `score`, given the value a
    /// PreScore step stored under `key` (read once, not per node).
    pub fn score_each<T: Any>(
        &self,
        key: &'static str,
        nodes: &[&NodeInfo],
        out: &mut [i64],
        score: impl Fn(&T, &NodeInfo) -> i64,
    ) -> Result<(), Status> {
        let value: &T = self.require(key)?;
        for (node, slot) in nodes.iter().zip(out.iter_mut()) {
            *slot = score(value, node);
        }
        Ok(())
    }

    /// Whether the plugin's Filter is skipped for this pod.
    pub fn skips_filter(&self, plugin: &str) -> bool {
        self.skip_filter_plugins.contains(plugin)
    }

    /// Whether the plugin's Score is skipped for this pod.
    pub fn skips_score(&self, plugin: &str) -> bool {
        self.skip_score_plugins.contains(plugin)
    }
}

//! The one ordered list of plugins a framework runs.
//!
//! This module owns [`Registry`]: plugins in the order they run at every
//! extension point (upstream's `MultiPoint` list) with their score weights.
//! The default list lives in [`crate::plugins::default_registry`].

use super::Plugin;

/// A registered plugin and its score weight.
#[derive(Debug)]
pub struct Registered {
    /// The plugin.
    pub plugin: Box<dyn Plugin>,
    /// Multiplier of its normalized scores (only used at Score).
    pub weight: i64,
}

/// Plugins in run order.
#[derive(Debug, Default)]
pub struct Registry {
    entries: Vec<Registered>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a plugin; `weight` matters only if it scores (upstream
    /// treats an unset weight as 1).
    pub fn register(mut self, plugin: impl Plugin + 'static, weight: i64) -> Self {
        self.entries.push(Registered {
            plugin: Box::new(plugin),
            weight,
        });
        self
    }

    /// Removes the named plugin, if present (a profile's `disabled`).
    pub fn without(mut self, name: &str) -> Self {
        self.entries.retain(|e| e.plugin.name() != name);
        self
    }

    /// The plugin names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.plugin.name()).collect()
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[Registered] {
        &self.entries
    }
}

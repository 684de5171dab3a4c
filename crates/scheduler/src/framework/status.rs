//! The result of running one plugin at one extension point.
//!
//! This module owns [`Status`] and its [`Code`], mirroring upstream
//! `framework.Status`: a code, human-readable reasons (which end up, counted,
//! in the FailedScheduling event) and the plugin that produced it.

use std::fmt;

/// What a plugin decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Code {
    /// The plugin is fine with the pod (on this node).
    #[default]
    Success,
    /// Unexpected internal failure: the scheduling attempt is aborted and
    /// the pod is retried with backoff.
    Error,
    /// The pod does not fit now, but preemption or cluster changes might
    /// help; the queue waits for a relevant event.
    Unschedulable,
    /// The pod does not fit and preemption cannot help on this node.
    UnschedulableAndUnresolvable,
    /// PreFilter/PreScore only: the plugin has nothing to do for this pod,
    /// so its Filter/Score step is skipped.
    Skip,
}

/// A plugin's result: a code, reasons, and which plugin said so.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    /// The decision.
    pub code: Code,
    /// Reasons in upstream wording, e.g. `Insufficient cpu`.
    pub reasons: Vec<String>,
    /// The plugin that produced the status, once the framework knows it.
    pub plugin: Option<&'static str>,
}

impl Status {
    /// A success without reasons.
    pub fn success() -> Self {
        Self::default()
    }

    /// A status with one reason.
    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        Self {
            code,
            reasons: vec![reason.into()],
            plugin: None,
        }
    }

    /// A status with several reasons (or none).
    pub fn with_reasons(code: Code, reasons: Vec<String>) -> Self {
        Self {
            code,
            reasons,
            plugin: None,
        }
    }

    /// `Unschedulable` with one reason.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }

    /// `UnschedulableAndUnresolvable` with one reason.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// `Error` with a message.
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(Code::Error, message)
    }

    /// `Skip` without reasons.
    pub fn skip() -> Self {
        Self::with_reasons(Code::Skip, Vec::new())
    }

    /// Records the plugin that produced the status.
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = Some(plugin);
        self
    }

    /// True for `Success`.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// True for `Skip`.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// True for `Unschedulable` and `UnschedulableAndUnresolvable`.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }

    /// The reasons joined by `, ` (upstream `Status.Message()`).
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

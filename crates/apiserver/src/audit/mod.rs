//! Auditing (upstream's `--audit-log-path` and `--audit-policy-file`):
//! who did what, when, and with what outcome, one `audit.k8s.io/v1`
//! `Event` JSON line per request stage, so that who changed what can be
//! answered after the fact.
//!
//! - [`policy`]: the `audit.k8s.io/v1` Policy file, and which level and
//!   stages a request gets;
//! - [`event`]: the Event and what fills it;
//! - [`log`]: the file (or standard output) and its rotation;
//! - [`record`]: one request's record through the request filters
//!   (`crate::serve::filters` calls its steps in order).
//!
//! With `--audit-log-path` but no policy file every request is logged at
//! Metadata level, one line each (upstream logs nothing without a policy;
//! see [`Policy::metadata_for_everything`]). This module owns what is
//! recorded and where it goes; it must not change a request or its answer
//! beyond the `Audit-ID` response header, and with auditing off it costs a
//! request one branch per step and no allocation.

pub mod event;
pub mod log;
pub mod policy;
pub mod record;

use std::path::PathBuf;
use std::sync::Arc;

pub use event::Event;
pub use policy::{Level, Policy, Stage};
pub use record::{authenticated, authorized, handling, impersonated, panicked, respond, Record};

/// Why auditing could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Policy(#[from] policy::Error),
    #[error(transparent)]
    Log(#[from] log::Error),
}

/// The audit flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--audit-log-path`: the log file, `-` for standard output; none
    /// turns auditing off.
    pub log_path: Option<PathBuf>,
    /// `--audit-policy-file`: none logs every request at Metadata.
    pub policy_file: Option<PathBuf>,
    /// `--audit-log-maxsize`: megabytes before the file is rotated (0:
    /// 100, as upstream's lumberjack).
    pub max_size_mb: u64,
    /// `--audit-log-maxbackup`: rotated files kept (0: all).
    pub max_backups: usize,
    /// `--audit-log-maxage`: days rotated files are kept (0: no limit).
    pub max_age_days: u32,
}

/// The client's address, as a request extension (for `sourceIPs`): the
/// listener (`crate::serve::serve`) adds it when auditing is on; the
/// in-process loopback has none.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// lumberjack's size limit when none is given.
const DEFAULT_MAX_SIZE_MB: u64 = 100;

/// The policy and the log, shared by every request.
#[derive(Debug)]
pub struct Auditor {
    policy: Policy,
    log: log::Log,
}

impl Auditor {
    /// Reads the policy and opens the log; none when `--audit-log-path`
    /// is not given (a policy file given alone is still checked, as a
    /// mistake in it should not wait for the day the log is turned on).
    pub fn start(options: &Options) -> Result<Option<Arc<Auditor>>, Error> {
        let policy = match &options.policy_file {
            Some(path) => Policy::load(path)?,
            None => Policy::metadata_for_everything(),
        };
        let Some(path) = &options.log_path else {
            if let Some(file) = &options.policy_file {
                tracing::warn!(policy = %file.display(), "--audit-policy-file without --audit-log-path: nothing is audited");
            }
            return Ok(None);
        };
        let max_size_mb = match options.max_size_mb {
            0 => DEFAULT_MAX_SIZE_MB,
            mb => mb,
        };
        let log = log::Log::open(&log::Options {
            path: path.clone(),
            max_size: max_size_mb.saturating_mul(1024 * 1024),
            max_backups: options.max_backups,
            max_age_days: options.max_age_days,
        })?;
        tracing::info!(path = %path.display(), policy = ?options.policy_file, "audit log on");
        Ok(Some(Arc::new(Auditor { policy, log })))
    }

    /// An auditor over `policy` writing to `log` (tests).
    pub fn new(policy: Policy, log: log::Log) -> Auditor {
        Auditor { policy, log }
    }
}

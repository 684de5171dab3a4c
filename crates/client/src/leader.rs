//! Leader election through a coordination.k8s.io/v1 Lease, like
//! client-go's `leaderelection` (the scheduler's defaults: lease 15 s,
//! renew deadline 10 s, retry every 2 s).
//!
//! This module owns [`LeaderElector`]: acquiring the lease (create it, or
//! replace an expired or released one with a resourceVersion
//! compare-and-swap), renewing it every retry period, declaring it lost
//! when no renewal succeeded within the renew deadline or another holder
//! appears, and releasing it on shutdown. Expiry is judged as upstream
//! does, by *local* observation: a lease is expired when its record has not
//! changed for a whole lease duration on this candidate's clock, so clock
//! skew between machines does not matter. It does not schedule anything;
//! the caller stops acting when told the lease is lost.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api_error::is_conflict;

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The durations are inconsistent.
    #[error("invalid leader election config: {0}")]
    Config(&'static str),
    /// An API call failed.
    #[error("{action} lease {lease}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// `namespace/name`.
        lease: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// `Result` with [`LeaderError`].
pub type Result<T, E = LeaderError> = std::result::Result<T, E>;

/// Where the lease lives and how it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// The lease's namespace (`kube-system`).
    pub namespace: String,
    /// The lease's name (`kube-scheduler`).
    pub name: String,
    /// How long a silent lease stays valid for other candidates (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up (10 s).
    pub renew_deadline: Duration,
    /// Time between attempts (2 s).
    pub retry_period: Duration,
    /// Clear the holder on shutdown so another candidate takes over at once.
    pub release_on_cancel: bool,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        Self {
            namespace: "kube-system".into(),
            name: "kube-scheduler".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

impl LeaderElectionConfig {
    /// Checks the durations as client-go does.
    pub fn validate(&self) -> Result<()> {
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaderError::Config(
                "lease duration must be greater than the renew deadline",
            ));
        }
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err(LeaderError::Config(
                "renew deadline must be greater than 1.2 × the retry period",
            ));
        }
        if self.retry_period.is_zero() {
            return Err(LeaderError::Config("retry period must be positive"));
        }
        Ok(())
    }
}

/// `<hostname>_<16 hex digits>`, unique per process like upstream's
/// `hostname_uuid`: a candidate's identity.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "skiff".into());
    format!("{host}_{:016x}", rand::random::<u64>())
}

/// Why holding the lease ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The stop token was cancelled.
    Stopped,
    /// Renewal failed for the renew deadline, or someone else holds it.
    Lost,
}

/// The last lease record seen and when it last changed (local clock).
#[derive(Debug, Clone)]
struct Observation {
    resource_version: Option<String>,
    holder: Option<String>,
    at: Instant,
}

/// One candidate for one lease.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    identity: String,
    observed: Option<Observation>,
}

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

impl LeaderElector {
    /// A candidate named `identity`.
    pub fn new(client: Client, config: LeaderElectionConfig, identity: &str) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            identity: identity.to_string(),
            observed: None,
        }
    }

    fn lease_ref(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn api_error(&self, action: &'static str, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            action,
            lease: self.lease_ref(),
            source,
        }
    }

    fn observe(&mut self, lease: &Lease, now: Instant) {
        let rv = lease.metadata.resource_version.clone();
        if self.observed.as_ref().map(|o| &o.resource_version) != Some(&rv) {
            self.observed = Some(Observation {
                resource_version: rv,
                holder: holder(lease),
                at: now,
            });
        }
    }

    /// Whether another candidate's lease still counts as held at `now`.
    fn held_by_other(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|o| {
            o.holder.as_ref().is_some_and(|h| *h != self.identity)
                && o.at + self.config.lease_duration > now
        })
    }

    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        let secs = self.config.lease_duration.as_secs_f64().ceil().max(1.0);
        let mine = previous
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| h == self.identity);
        let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(secs as i32),
            acquire_time: match (mine, previous) {
                (true, Some(p)) => p.acquire_time.clone(),
                _ => Some(now.clone()),
            },
            renew_time: Some(now),
            lease_transitions: Some(if mine || previous.is_none() {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..Default::default()
        }
    }

    /// One attempt to acquire or renew (client-go `tryAcquireOrRenew`).
    /// `Ok(false)`: someone else holds it, or a concurrent write won.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool> {
        let now = Instant::now();
        let current = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.api_error("reading", e))?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created, now);
                    Ok(true)
                }
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(self.api_error("creating", e)),
            };
        };
        self.observe(&lease, now);
        if self.held_by_other(now) {
            return Ok(false);
        }
        // Replace with the resourceVersion we read: compare-and-swap.
        lease.spec = Some(self.spec(lease.spec.as_ref()));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(&written, Instant::now());
                Ok(true)
            }
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(self.api_error("updating", e)),
        }
    }

    fn jittered_retry(&self) -> Duration {
        let jitter = rand::rng().random_range(0.0..0.2);
        self.config.retry_period.mul_f64(1.0 + jitter)
    }

    /// Tries every retry period until the lease is ours (`true`) or
    /// `stop` is cancelled (`false`).
    pub async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.lease_ref(), identity = %self.identity, "acquired lease");
                    return true;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "leader election"),
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(self.jittered_retry()) => {}
            }
        }
    }

    /// Renews every retry period until `stop` is cancelled or the lease is
    /// lost: no successful renewal within the renew deadline, or another
    /// holder observed.
    pub async fn hold(&mut self, stop: &CancellationToken) -> Held {
        let mut last_renew = Instant::now();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Held::Stopped,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            let deadline = last_renew + self.config.renew_deadline;
            let attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew());
            let renewed = tokio::select! {
                _ = stop.cancelled() => return Held::Stopped,
                r = attempt => r,
            };
            match renewed {
                Ok(Ok(true)) => last_renew = Instant::now(),
                Ok(Ok(false)) if self.held_by_other(Instant::now()) => {
                    tracing::warn!(lease = %self.lease_ref(), "lease taken by another holder");
                    return Held::Lost;
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "renewing lease"),
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                tracing::warn!(lease = %self.lease_ref(), "failed to renew lease within the renew deadline");
                return Held::Lost;
            }
        }
    }

    /// Clears the holder if it is still us, so others need not wait for
    /// expiry.
    pub async fn release(&mut self) -> Result<()> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.api_error("reading", e))?
        else {
            return Ok(());
        };
        if holder(&lease).as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                tracing::info!(lease = %self.lease_ref(), "released lease");
                Ok(())
            }
            // Someone wrote meanwhile: it is not ours to release any more.
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(self.api_error("releasing", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams_and_validated() {
        let c = LeaderElectionConfig::default();
        assert_eq!(
            (c.lease_duration, c.renew_deadline, c.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        assert!(c.validate().is_ok());
        let bad = LeaderElectionConfig {
            renew_deadline: Duration::from_secs(15),
            ..c.clone()
        };
        assert!(bad.validate().is_err());
        let bad = LeaderElectionConfig {
            retry_period: Duration::from_secs(9),
            ..c
        };
        assert!(bad.validate().is_err());
    }
}

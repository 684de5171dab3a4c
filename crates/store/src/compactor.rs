//! Background compaction, the same for every backend: every `interval` it
//! compacts history that is older than `keep_for` or more than
//! `keep_revisions` behind the current revision, whichever point is newer.
//! So history is kept for at most 5 minutes and at most 10,000 revisions by
//! default; a watcher further behind than that gets Compacted (410 Gone)
//! and re-lists, as with Kubernetes' own compaction of etcd.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::{Error, Store};

/// How much history to keep.
#[derive(Debug, Clone)]
pub struct CompactionPolicy {
    pub interval: Duration,
    pub keep_for: Duration,
    pub keep_revisions: i64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            interval: Duration::from_secs(10),
            keep_for: Duration::from_secs(5 * 60),
            keep_revisions: 10_000,
        }
    }
}

/// Runs the policy against one store.
#[derive(Debug)]
pub struct Compactor {
    store: Arc<dyn Store>,
    policy: CompactionPolicy,
    /// (when, current revision then), oldest first.
    samples: VecDeque<(Instant, i64)>,
    compacted: i64,
}

impl Compactor {
    pub fn new(store: Arc<dyn Store>, policy: CompactionPolicy) -> Self {
        Compactor {
            store,
            policy,
            samples: VecDeque::new(),
            compacted: 0,
        }
    }

    /// Compacts on every tick until `shutdown` is cancelled.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.policy.interval.max(Duration::from_millis(10)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.tick(Instant::now()).await {
                tracing::warn!(error = %e, "compaction failed");
            }
        }
    }

    /// One round: sample the revision and compact if the policy says so.
    pub async fn tick(&mut self, now: Instant) -> crate::Result<Option<i64>> {
        let current = self.store.current_revision().await?;
        self.samples.push_back((now, current));
        let target = compaction_target(&mut self.samples, now, current, &self.policy);
        match target {
            Some(target) if target > self.compacted => match self.store.compact(target).await {
                Ok(()) | Err(Error::Compacted { .. }) => {
                    self.compacted = target;
                    tracing::debug!(revision = target, "compacted store history");
                    Ok(Some(target))
                }
                Err(e) => Err(e),
            },
            _ => Ok(None),
        }
    }
}

/// The revision to compact to, if any: the newer of "the revision current
/// `keep_for` ago" and "`keep_revisions` behind now". Drops samples that
/// are no longer needed.
pub fn compaction_target(
    samples: &mut VecDeque<(Instant, i64)>,
    now: Instant,
    current: i64,
    policy: &CompactionPolicy,
) -> Option<i64> {
    let mut by_age = None;
    while let Some(&(at, rev)) = samples.front() {
        if now.duration_since(at) >= policy.keep_for {
            by_age = Some(rev);
            samples.pop_front();
        } else {
            break;
        }
    }
    if let Some(rev) = by_age {
        // Keep the newest expired sample: it is the next candidate too.
        samples.push_front((now - policy.keep_for, rev));
    }
    let by_count = current - policy.keep_revisions;
    let target = by_age.unwrap_or(0).max(by_count);
    (target > 0).then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CompactionPolicy {
        CompactionPolicy {
            interval: Duration::from_secs(10),
            keep_for: Duration::from_secs(300),
            keep_revisions: 10_000,
        }
    }

    #[test]
    fn nothing_to_compact_while_young_and_small() {
        let t0 = Instant::now();
        let mut samples = VecDeque::from([(t0, 100)]);
        let target = compaction_target(&mut samples, t0 + Duration::from_secs(60), 500, &policy());
        assert_eq!(target, None);
    }

    #[test]
    fn compacts_by_age() {
        let t0 = Instant::now();
        let mut samples = VecDeque::from([(t0, 100), (t0 + Duration::from_secs(200), 300)]);
        let target = compaction_target(&mut samples, t0 + Duration::from_secs(301), 400, &policy());
        assert_eq!(target, Some(100));
        assert_eq!(
            samples.len(),
            2,
            "the expired sample stays as the next candidate"
        );
    }

    #[test]
    fn compacts_by_count_when_newer() {
        let t0 = Instant::now();
        let mut samples = VecDeque::from([(t0, 100)]);
        let target = compaction_target(
            &mut samples,
            t0 + Duration::from_secs(301),
            50_000,
            &policy(),
        );
        assert_eq!(target, Some(40_000));
    }
}

//! Following one watch cache from inside the server: the in-memory indexes
//! that must not read the store per request (the RBAC policy, the Node
//! authorizer's graph) are kept current by [`follow`], which hands them
//! the cache's objects once and then every change, resuming after a slow
//! spell and starting over when the history it needs was compacted.
//!
//! It owns only the subscription loop; what a change means is the
//! caller's.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{CachedEvent, Error, WatchCache};

/// What the follower is handed.
#[derive(Debug)]
pub enum Change<'a> {
    /// Events read at once: with `reset`, every object under the prefix
    /// (forget what came before); without, the changes missed while the
    /// follower was dropped as slow.
    Batch {
        reset: bool,
        events: &'a [CachedEvent],
    },
    /// One live change.
    Event(&'a CachedEvent),
}

/// Calls `apply` with the objects under `prefix`, then with each change,
/// until `shutdown`.
pub async fn follow(
    cache: Arc<WatchCache>,
    prefix: String,
    shutdown: CancellationToken,
    mut apply: impl FnMut(Change<'_>),
) {
    let mut after: Option<i64> = None;
    while !shutdown.is_cancelled() {
        if !cache.wait_for(0, Duration::from_secs(1)).await {
            continue;
        }
        let sub = match cache.subscribe(&prefix, after, None, None) {
            Ok(sub) => sub,
            Err(Error::TooOld { .. }) => {
                after = None;
                continue;
            }
            Err(Error::NotReady) => {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            }
        };
        apply(Change::Batch {
            reset: after.is_none(),
            events: &sub.initial,
        });
        let mut last = sub.revision;
        let mut live = sub.live;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                event = live.recv() => match event {
                    Some(event) => {
                        last = last.max(event.revision);
                        apply(Change::Event(&event));
                    }
                    // Dropped as a slow watcher: pick up from `last`.
                    None => break,
                }
            }
        }
        after = Some(last);
    }
}

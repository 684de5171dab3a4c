//! Running a kube-runtime `Controller` the way every controller of the
//! manager does: stopped by the manager's token (letting reconciles in
//! flight finish), with a number of workers, and its errors logged with
//! the controller's name.
//!
//! This module owns only that plumbing, the error policy's back-off
//! ([`backoff`]) and reporting the queue's traffic to the work-queue
//! metrics ([`crate::metrics`]); what a controller watches and how it
//! reconciles are its own module's.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::runtime::controller::{self, Action, Controller};
use skiff_client::informer::{Change, Informer, Watched};
use tokio_util::sync::CancellationToken;

/// Runs `controller` (made over `informer`) with `workers` concurrent
/// reconciles until `shutdown`, once `informer` has listed: kube-runtime's
/// `Store::wait_until_ready`, which `Controller` awaits, wakes only the
/// last of several waiters, so controllers sharing an informer must not
/// start waiting on it before it is ready.
#[allow(clippy::too_many_arguments)]
pub async fn run<K, E, Fut, Ctx>(
    name: &'static str,
    informer: &Informer<K>,
    controller: Controller<K>,
    workers: u16,
    reconcile: impl FnMut(Arc<K>, Arc<Ctx>) -> Fut,
    error_policy: impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action,
    context: Arc<Ctx>,
    shutdown: CancellationToken,
) where
    K: Watched,
    E: std::error::Error + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    Ctx: Send + Sync + 'static,
{
    tokio::select! {
        _ = informer.ready() => {}
        _ = shutdown.cancelled() => return,
    }
    tracing::info!(controller = name, "starting");
    let queue = crate::metrics::queue(name);
    let adds = queue
        .clone()
        .map(|q| tokio::spawn(count_adds(q, informer.changes(), shutdown.clone())));
    let (reconcile, error_policy) = metered(queue, reconcile, error_policy);
    controller
        .graceful_shutdown_on(async move { shutdown.cancelled_owned().await })
        .with_config(controller::Config::default().concurrency(workers))
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                // The object went away between the trigger and the reconcile.
                Err(controller::Error::ObjectNotFound(_)) => {}
                Err(controller::Error::ReconcilerFailed(e, object)) => {
                    tracing::debug!(controller = name, object = %object, error = %Chain(&e), "reconcile failed; retrying");
                }
                Err(e) => tracing::debug!(controller = name, error = %e, "controller"),
            }
        })
        .await;
    if let Some(adds) = adds {
        adds.abort();
    }
    tracing::info!(controller = name, "stopped");
}

/// Reports each change of the primary objects to `queue` as an add.
async fn count_adds<K: Watched>(
    queue: Arc<crate::metrics::Queue>,
    changes: impl futures::Stream<Item = Change<K>>,
    shutdown: CancellationToken,
) {
    let mut changes = std::pin::pin!(changes.take_until(shutdown.cancelled_owned()));
    while let Some(change) = changes.next().await {
        match change {
            Change::Applied(obj) => queue.added(crate::metrics::key_of(obj.as_ref())),
            Change::Deleted(obj) => queue.forget(&crate::metrics::key_of(obj.as_ref())),
            Change::Resync => {}
        }
    }
}

/// `reconcile` and `error_policy`, reporting to `queue` (when metrics are
/// on) when an object is taken, how long its reconcile took, and retries.
#[allow(clippy::type_complexity)] // two closures, spelled out once here
fn metered<K, E, Fut, Ctx>(
    queue: Option<Arc<crate::metrics::Queue>>,
    mut reconcile: impl FnMut(Arc<K>, Arc<Ctx>) -> Fut,
    error_policy: impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action,
) -> (
    impl FnMut(Arc<K>, Arc<Ctx>) -> std::pin::Pin<Box<dyn Future<Output = Result<Action, E>> + Send>>,
    impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action,
)
where
    K: Watched,
    E: Send + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let failures = queue.clone();
    let reconcile = move |obj: Arc<K>, ctx: Arc<Ctx>| {
        let queue = queue.clone();
        if let Some(q) = &queue {
            q.taken(&crate::metrics::key_of(obj.as_ref()));
        }
        let work = reconcile(obj, ctx);
        Box::pin(async move {
            let started = std::time::Instant::now();
            let result = work.await;
            if let Some(q) = &queue {
                q.done(started.elapsed());
            }
            result
        }) as std::pin::Pin<Box<dyn Future<Output = Result<Action, E>> + Send>>
    };
    let error_policy = move |obj: Arc<K>, e: &E, ctx: Arc<Ctx>| {
        if let Some(q) = &failures {
            q.retried();
        }
        error_policy(obj, e, ctx)
    };
    (reconcile, error_policy)
}

/// Calls `forget` with each object `changes` reports deleted, until
/// `shutdown`: for what a controller keeps per object beside the
/// informer's store (health, planned deletions, trackers).
pub async fn on_deleted<K>(
    changes: impl futures::Stream<Item = Change<K>>,
    shutdown: CancellationToken,
    mut forget: impl FnMut(&K),
) {
    let mut changes = std::pin::pin!(changes.take_until(shutdown.cancelled_owned()));
    while let Some(change) = changes.next().await {
        if let Change::Deleted(obj) = change {
            forget(&obj);
        }
    }
}

/// The retry delay after the `failures`-th failure in a row: 5 ms doubling,
/// capped at 1000 s, as client-go's default controller rate limiter.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(20);
    Duration::from_millis(5u64.saturating_mul(1 << exp)).min(Duration::from_secs(1000))
}

/// Failures in a row per object, for an error policy that backs off
/// per object ([`backoff`]) and forgets an object once it reconciles.
#[derive(Debug, Default)]
pub struct Failures(std::sync::Mutex<std::collections::HashMap<String, u32>>);

impl Failures {
    /// Counts a failure of `key`: how long to wait before retrying.
    pub fn next_delay(&self, key: &str) -> Duration {
        let mut failures = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(key.to_string()).or_default();
        *n = n.saturating_add(1);
        backoff(*n)
    }

    /// `key` reconciled: its next failure starts the back-off again.
    pub fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

/// An error with its sources, for logs.
pub struct Chain<'a>(pub &'a dyn std::error::Error);

impl Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_five_milliseconds_to_a_cap() {
        assert_eq!(backoff(1), Duration::from_millis(5));
        assert_eq!(backoff(2), Duration::from_millis(10));
        assert_eq!(backoff(4), Duration::from_millis(40));
        assert_eq!(backoff(30), Duration::from_secs(1000));
    }
}

//! Keeps the shared index in step with the Service and EndpointSlice
//! informers: waits for both first lists, builds the index from their
//! stores, then applies changes in small batches under the write lock; a
//! resync (ours at the start, or a lagging subscriber's) rebuilds the
//! index from the stores outside the lock and swaps it in.
//!
//! It must not answer queries, and never writes to the API.

use futures::{FutureExt as _, Stream, StreamExt as _};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_client::informer::{Change, Informer, Informers};
use tokio_util::sync::CancellationToken;

use crate::{Records, SharedRecords};

/// Changes applied under one hold of the write lock.
const BATCH: usize = 64;

/// One change of either kind.
enum Event {
    Service(Change<Service>),
    Slice(Change<EndpointSlice>),
}

/// Follows the informers until `shutdown` (or they stop).
pub(crate) async fn follow(
    informers: Informers,
    records: SharedRecords,
    cluster_domain: String,
    ttl: u32,
    shutdown: CancellationToken,
) {
    let services = informers.get::<Service>();
    let slices = informers.get::<EndpointSlice>();
    let mut service_changes = services.changes().boxed();
    let mut slice_changes = slices.changes().boxed();
    tokio::select! {
        _ = shutdown.cancelled() => return,
        _ = futures::future::join(services.ready(), slices.ready()) => {}
    }
    // Rebuilt off the runtime's threads: a big cluster takes a while.
    let rebuild = || {
        let (domain, services, slices) = (cluster_domain.clone(), services.clone(), slices.clone());
        let records = records.clone();
        async move {
            let built =
                tokio::task::spawn_blocking(move || rebuild(&domain, ttl, &services, &slices))
                    .await;
            match built {
                Ok(fresh) => {
                    tracing::debug!(records = ?fresh, "cluster DNS index rebuilt");
                    records.replace(fresh);
                }
                Err(e) => tracing::warn!(error = %e, "rebuilding the cluster DNS index failed"),
            }
        }
    };
    rebuild().await;
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => return,
            change = service_changes.next() => change.map(Event::Service),
            change = slice_changes.next() => change.map(Event::Slice),
        };
        let Some(first) = first else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match next_ready(&mut service_changes, &mut slice_changes) {
                Some(event) => batch.push(event),
                None => break,
            }
        }
        let resync = batch.iter().any(|e| {
            matches!(
                e,
                Event::Service(Change::Resync) | Event::Slice(Change::Resync)
            )
        });
        if resync {
            // The stores hold every change the batch carried.
            rebuild().await;
            continue;
        }
        let mut index = records.write();
        for event in batch {
            match event {
                Event::Service(Change::Applied(svc)) => index.apply_service(&svc),
                Event::Service(Change::Deleted(svc)) => index.delete_service(&svc),
                Event::Slice(Change::Applied(slice)) => index.apply_slice(&slice),
                Event::Slice(Change::Deleted(slice)) => index.delete_slice(&slice),
                Event::Service(Change::Resync) | Event::Slice(Change::Resync) => {}
            }
        }
    }
}

/// A change already waiting on either stream, without waiting.
fn next_ready(
    services: &mut (impl Stream<Item = Change<Service>> + Unpin),
    slices: &mut (impl Stream<Item = Change<EndpointSlice>> + Unpin),
) -> Option<Event> {
    if let Some(Some(change)) = services.next().now_or_never() {
        return Some(Event::Service(change));
    }
    if let Some(Some(change)) = slices.next().now_or_never() {
        return Some(Event::Slice(change));
    }
    None
}

/// A ready index of everything in the stores.
fn rebuild(
    cluster_domain: &str,
    ttl: u32,
    services: &Informer<Service>,
    slices: &Informer<EndpointSlice>,
) -> Records {
    let services = services.store().state();
    let slices = slices.store().state();
    Records::from_objects(
        cluster_domain,
        ttl,
        services.iter().map(|s| &**s),
        slices.iter().map(|s| &**s),
    )
}

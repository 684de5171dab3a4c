//! WATCH: from the watch cache, with selectors (objects entering and leaving), bookmarks, sendInitialEvents, timeouts and Tables, as a chunked stream.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{json, Value};
use skiff_store::EventKind;

use crate::catalog::{Kind, Resource};
use crate::object::{self, with_revision};
use crate::status::{ApiError, ApiResult};
use crate::watchcache::filter::Filter;
use crate::AppState;

use super::{is_true, Output, CONSISTENT_WAIT};

/// `{"type":KIND,"object":…}\n` for an object built as a tree (an object
/// leaving a selector, Tables, conversions, bookmarks, errors), `type`
/// first like every cached line: serializing a `json!` map instead sorted
/// `object` first, and kube-rs could not decode those lines for types that
/// keep raw parts, so the scheduler missed every pod that finished.
pub(super) fn watch_line(kind: &str, object: &Value) -> Bytes {
    let object = serde_json::to_vec(object).unwrap_or_else(|_| b"null".to_vec());
    crate::watchcache::named_watch_line(kind, &object)
}

/// Most bytes of queued watch events sent in one chunk. Kept under the
/// allocator's medium size: larger chunks each took fresh (huge) pages that
/// the kernel had to zero, which cost more CPU than the batching saved.
pub(super) const MAX_WATCH_BATCH: usize = 64 * 1024;

/// A BOOKMARK event: an object of the kind with only a resourceVersion
/// (and, after the initial events, the initial-events-end annotation).
pub(super) fn bookmark_line(r: &Resource, revision: i64, initial_end: bool) -> Bytes {
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if initial_end {
        crate::object::set(
            &mut metadata,
            "annotations",
            json!({ "k8s.io/initial-events-end": "true" }),
        );
    }
    watch_line(
        "BOOKMARK",
        &json!({ "kind": r.kind, "apiVersion": r.group_version(), "metadata": metadata }),
    )
}

pub(super) fn stream_response(body: Body) -> ApiResult<Response> {
    // A streamed body: hyper sends it chunked on HTTP/1.1, as frames on h2.
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))
}

pub(super) async fn watch(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
) -> ApiResult<Response> {
    let r = kind.resource;
    let prefix = object::prefix(r, ns);
    let filter = Filter::parse(r, state.catalog.selectable_fields(r), q)?;
    let plain = out.table.is_none() && !crate::registry::convert::needed(kind);
    // Owned, for the stream below. A custom resource is resolved again for
    // each event, so a changed CRD (defaults, columns) applies at once.
    let served = kind.clone();
    let catalog = kind.custom().is_some().then(|| state.catalog.clone());
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    // No resourceVersion (or 0): start with the current state as ADDED.
    let after = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let cache = state.cache(r);
    if !cache.wait_for(0, CONSISTENT_WAIT).await {
        return Err(ApiError::unavailable("the watch cache is not ready yet"));
    }
    let interest: Option<crate::watchcache::Interest> = (!filter.is_everything()).then(|| {
        let filter = filter.clone();
        Arc::new(move |e: &crate::watchcache::CachedEvent| {
            e.item.selectable().is_some_and(|s| filter.matches(s))
                || e.prev
                    .as_ref()
                    .and_then(|p| p.selectable())
                    .is_some_and(|s| filter.matches(s))
        }) as crate::watchcache::Interest
    });
    // Streaming lists: the full current state first, whatever the
    // resourceVersion, then the initial-events-end bookmark.
    let send_initial = is_true(q.get("sendInitialEvents"));
    if send_initial {
        let current = state.store.current_revision().await?;
        let target = current.max(after.unwrap_or(0));
        if !cache.wait_for(target, CONSISTENT_WAIT).await {
            return Err(ApiError::unavailable("the watch cache is not ready yet"));
        }
    }
    let after = if send_initial { None } else { after };
    let subscription = match cache.subscribe(&prefix, after, interest, filter.index_key()) {
        Ok(s) => s,
        Err(crate::watchcache::Error::TooOld { requested, oldest }) => {
            let status =
                ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
                    .status_body();
            return stream_response(Body::from(watch_line("ERROR", &status)));
        }
        Err(e) => return Err(ApiError::unavailable(e.to_string())),
    };
    let after = after.unwrap_or(0);
    let to_line = move |e: crate::watchcache::CachedEvent| -> Option<Bytes> {
        if e.revision <= after {
            return None;
        }
        // None for an object whose stored bytes do not parse: not sent.
        let line = |kind: EventKind| {
            // An object leaving the selector is reported as its previous
            // state, at the revision of the change (as upstream does).
            let leaving = kind == EventKind::Deleted && e.kind == EventKind::Modified;
            if plain && !leaving {
                // The common case: the line built once for every watcher.
                return e.item.line(kind);
            }
            let object = match (&e.prev, leaving) {
                (Some(prev), true) => with_revision(prev.object()?, e.revision),
                _ => e.item.object()?,
            };
            let fresh;
            let current = match &catalog {
                Some(catalog) => {
                    fresh = catalog.resolve(served.resource);
                    &fresh
                }
                None => &served,
            };
            Some(watch_line(
                crate::watchcache::kind_name(kind),
                &out.object(current, object),
            ))
        };
        if filter.is_everything() {
            return line(e.kind);
        }
        // With a selector, an object entering it is ADDED and one leaving
        // it is DELETED, as upstream's cacher reports them.
        let now = e.item.selectable().is_some_and(|s| filter.matches(s));
        let before = e
            .prev
            .as_ref()
            .and_then(|p| p.selectable())
            .is_some_and(|s| filter.matches(s));
        let kind = match (e.kind, before, now) {
            (EventKind::Modified, true, true) => EventKind::Modified,
            (EventKind::Modified, false, true) => EventKind::Added,
            (EventKind::Modified, true, false) => EventKind::Deleted,
            (kind, _, true) if kind != EventKind::Modified => kind,
            _ => return None,
        };
        line(kind)
    };
    // Each event sent counts in apiserver_watch_events_total (when
    // metrics are on).
    let to_line =
        crate::metrics::counting(to_line, state.metrics.as_ref().map(|m| m.watch_events(r)));
    let to_line_live = to_line.clone();
    let bookmarks = is_true(q.get("allowWatchBookmarks"));
    let initial_end =
        is_true(q.get("sendInitialEvents")).then(|| bookmark_line(r, subscription.revision, true));
    let initial = futures::stream::iter(
        subscription
            .initial
            .into_iter()
            .filter_map(to_line)
            .chain(initial_end),
    );
    // The live feed, with a BOOKMARK every `bookmark_every` when asked for.
    // A bookmark names the newest revision this stream has fully handled,
    // so resuming from it can never skip an event still queued here.
    let every = state.bookmark_every;
    let ticker =
        bookmarks.then(|| tokio::time::interval_at(tokio::time::Instant::now() + every, every));
    let live_state = (subscription.live, subscription.revision, ticker);
    let cache_for_bookmarks = cache.clone();
    let resource = kind.resource;
    let live = futures::stream::unfold(live_state, move |(mut rx, mut seen, mut ticker)| {
        let to_line = to_line_live.clone();
        let cache_for_bookmarks = cache_for_bookmarks.clone();
        async move {
            loop {
                let event = match ticker.as_mut() {
                    Some(t) => tokio::select! {
                        e = rx.recv() => e,
                        _ = t.tick() => {
                            // Events this watcher did not want never reach
                            // its queue; with the queue empty, everything up
                            // to the cache's revision has been handled.
                            if rx.is_empty() {
                                seen = seen.max(cache_for_bookmarks.revision());
                            }
                            return Some((bookmark_line(resource, seen, false), (rx, seen, ticker)));
                        }
                    },
                    None => rx.recv().await,
                };
                let event = event?;
                seen = seen.max(event.revision);
                let Some(first) = to_line(event) else {
                    continue;
                };
                // Send whatever else is already queued in the same write:
                // under load, one TLS record and syscall carry many events.
                let mut batch: Option<Vec<u8>> = None;
                while let Ok(event) = rx.try_recv() {
                    seen = seen.max(event.revision);
                    if let Some(line) = to_line(event) {
                        batch
                            .get_or_insert_with(|| {
                                // Sized once for what is queued (lines of
                                // one resource are of similar size).
                                let queued = first.len() * (rx.len() + 2);
                                let mut b = Vec::with_capacity(
                                    queued.min(MAX_WATCH_BATCH + 2 * first.len()),
                                );
                                b.extend_from_slice(&first);
                                b
                            })
                            .extend_from_slice(&line);
                        if batch.as_ref().is_some_and(|b| b.len() >= MAX_WATCH_BATCH) {
                            break;
                        }
                    }
                }
                let out = batch.map(Bytes::from).unwrap_or(first);
                return Some((out, (rx, seen, ticker)));
            }
        }
    });
    let lines = initial
        .chain(live)
        .map(Ok::<_, Infallible>)
        .take_until(tokio::time::sleep(timeout));
    stream_response(Body::from_stream(lines))
}

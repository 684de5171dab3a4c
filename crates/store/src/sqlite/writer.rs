//! The single writer thread: group commit and compaction.
//!
//! Requests from any number of tasks queue on a channel. The writer takes
//! every request waiting (up to `max_batch`), applies them in one
//! transaction, commits (one fsync for the whole group), publishes the
//! events to the watch hub and only then answers each caller. Throughput
//! therefore grows with the number of concurrent writers. When the last
//! commit carried several requests, the writer waits a little (at most
//! `commit_delay`, only while requests keep arriving about as often as
//! they have lately) so a stream of writes shares fsyncs; a lone writer
//! never waits, nor does the first write after an idle spell.
//!
//! Physical compaction (deleting superseded rows) runs here too, a slice at
//! a time between write batches, so it never holds writes up for long.

use std::sync::Arc;

use bytes::Bytes;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::{mpsc, oneshot};

use super::hub::Hub;
use super::schema::{self, META_COMPACT, META_CURRENT, META_PHYSICAL};
use crate::{Deleted, Error, Event, EventKind, KeyValue, Result};

/// Revisions deleted per physical-compaction slice.
const COMPACTION_SLICE: i64 = 2_000;

/// How long the writer sleeps between looks for more requests to commit
/// with the ones it holds.
const GATHER_SLICE: std::time::Duration = std::time::Duration::from_micros(100);

/// How many times the previous batch a gathered batch may grow to, when
/// requests come spaced out.
const GROWTH: usize = 4;

/// A request this long after the previous commit ended starts afresh: the
/// stream that batch belonged to is over, so it is taken for a lone
/// writer and not held back to gather (a pod created on an idle server,
/// after the last pod's events went in one batch, waited `commit_delay`).
const STREAM_GAP: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether a batch whose first request came `since_last` after the
/// previous commit ended waits for more: only inside a stream of writes
/// (the previous batch carried several, and not long ago).
fn gathers(last_batch: usize, since_last: std::time::Duration) -> bool {
    last_batch > 1 && since_last < STREAM_GAP
}

/// A write request.
#[derive(Debug)]
pub(super) enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: i64,
    },
    Delete {
        key: String,
        expected: Option<i64>,
    },
    Compact {
        revision: i64,
    },
}

/// A successful write.
#[derive(Debug)]
pub(super) enum Done {
    Put(KeyValue),
    Deleted(Deleted),
    Compacted,
}

#[derive(Debug)]
pub(super) struct Request {
    pub(super) op: Op,
    pub(super) reply: oneshot::Sender<Result<Done>>,
}

/// State the writer thread owns.
#[derive(Debug)]
pub(super) struct Writer {
    conn: Connection,
    hub: Arc<Hub>,
    /// Revision of the last committed write.
    revision: i64,
    /// Logical compaction point.
    compacted: i64,
    /// How far rows have been deleted.
    physical: i64,
    max_batch: usize,
    commit_delay: std::time::Duration,
    /// Requests in the previous commit.
    last_batch: usize,
    /// Recent mean time between requests (a moving average over batches).
    arrival_gap: std::time::Duration,
    /// When the previous batch's first request was taken.
    last_start: std::time::Instant,
    /// When the previous commit ended.
    last_end: std::time::Instant,
    /// Set when a compaction slice failed; cleared by the next commit, so a
    /// failing disk does not make the writer spin.
    compaction_stalled: bool,
}

/// Row of the newest version of a key.
struct Latest {
    rev: i64,
    create_rev: i64,
    deleted: bool,
}

impl Writer {
    pub(super) fn new(
        conn: Connection,
        hub: Arc<Hub>,
        max_batch: usize,
        commit_delay: std::time::Duration,
    ) -> rusqlite::Result<Self> {
        let stored: i64 = schema::meta(&conn, META_CURRENT)?;
        let max_row: i64 =
            conn.query_row("SELECT COALESCE(MAX(rev), 0) FROM log", [], |r| r.get(0))?;
        let compacted = schema::meta(&conn, META_COMPACT)?;
        let physical = schema::meta(&conn, META_PHYSICAL)?;
        Ok(Writer {
            conn,
            hub,
            revision: stored.max(max_row),
            compacted,
            physical,
            max_batch: max_batch.max(1),
            commit_delay,
            last_batch: 0,
            arrival_gap: std::time::Duration::ZERO,
            last_start: std::time::Instant::now(),
            last_end: std::time::Instant::now(),
            compaction_stalled: false,
        })
    }

    pub(super) fn revision(&self) -> i64 {
        self.revision
    }

    pub(super) fn compacted(&self) -> i64 {
        self.compacted
    }

    fn compaction_pending(&self) -> bool {
        self.physical < self.compacted && !self.compaction_stalled
    }

    /// Runs until every sender is gone.
    pub(super) fn run(mut self, mut rx: mpsc::UnboundedReceiver<Request>) {
        loop {
            let first = if self.compaction_pending() {
                match rx.try_recv() {
                    Ok(req) => Some(req),
                    Err(mpsc::error::TryRecvError::Empty) => None,
                    Err(mpsc::error::TryRecvError::Disconnected) => break,
                }
            } else {
                match rx.blocking_recv() {
                    Some(req) => Some(req),
                    None => break,
                }
            };
            if let Some(first) = first {
                let start = std::time::Instant::now();
                let mut batch = vec![first];
                self.drain(&mut rx, &mut batch);
                if gathers(self.last_batch, start.duration_since(self.last_end)) {
                    self.gather(&mut rx, &mut batch);
                }
                self.note_arrivals(batch.len(), start.duration_since(self.last_start));
                self.last_start = start;
                self.last_batch = batch.len();
                self.commit_batch(batch);
                self.last_end = std::time::Instant::now();
            }
            if self.compaction_pending() {
                if let Err(e) = self.compact_slice() {
                    tracing::warn!(error = %e, "physical compaction slice failed; will retry");
                    self.compaction_stalled = true;
                }
            }
        }
        tracing::debug!("store writer stopped");
    }

    /// When the previous commit carried several requests, waits (in short
    /// slices, at most `commit_delay`) for more to join this one, so that
    /// a stream of writes pays one fsync per group rather than per few
    /// writes.
    ///
    /// When requests have lately come faster than a slice apart (writers
    /// in a closed loop, all soon waiting on this commit), it stops at the
    /// first slice that brings nothing, or once the batch is as large as
    /// the previous one. When they come further apart (a busy server's
    /// handlers, each write after some work), it waits for up to twice
    /// that gap for the next one, and lets the batch grow to [`GROWTH`]
    /// times the previous: stopping at the first quiet slice there left
    /// most commits at a handful of writes.
    fn gather(&self, rx: &mut mpsc::UnboundedReceiver<Request>, batch: &mut Vec<Request>) {
        if self.commit_delay.is_zero() {
            return;
        }
        let slice = self.commit_delay.min(GATHER_SLICE);
        let spaced = self.arrival_gap > slice;
        let (quiet, growth) = if spaced {
            (self.arrival_gap * 2, GROWTH)
        } else {
            (slice, 1)
        };
        let most = self.max_batch.min(self.last_batch.saturating_mul(growth));
        let start = std::time::Instant::now();
        let until = start + self.commit_delay;
        let mut last_arrival = start;
        while batch.len() < most {
            let now = std::time::Instant::now();
            if now >= until || now.duration_since(last_arrival) >= quiet {
                break;
            }
            std::thread::sleep(slice);
            let before = batch.len();
            self.drain(rx, batch);
            if batch.len() > before {
                last_arrival = std::time::Instant::now();
            }
        }
    }

    /// Updates the recent gap between requests from a batch of `n` that
    /// took `cycle` from the previous batch's first request to this one's.
    fn note_arrivals(&mut self, n: usize, cycle: std::time::Duration) {
        let gap = cycle / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        // An idle spell says nothing about the gap under load.
        let gap = gap.min(self.commit_delay);
        self.arrival_gap = (self.arrival_gap * 7 + gap) / 8;
    }

    /// Moves waiting requests into `batch`, up to `max_batch`.
    fn drain(&self, rx: &mut mpsc::UnboundedReceiver<Request>, batch: &mut Vec<Request>) {
        while batch.len() < self.max_batch {
            match rx.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
    }

    /// Applies a batch in one transaction and answers every request.
    fn commit_batch(&mut self, batch: Vec<Request>) {
        let start_revision = self.revision;
        let start_compacted = self.compacted;
        let mut events = Vec::with_capacity(batch.len());
        let mut results = Vec::with_capacity(batch.len());
        let outcome = (|| -> rusqlite::Result<()> {
            schema::control(&self.conn, "BEGIN IMMEDIATE")?;
            for req in &batch {
                results.push(self.apply(&req.op, &mut events)?);
            }
            if self.revision != start_revision {
                schema::set_meta(&self.conn, META_CURRENT, self.revision)?;
            }
            if self.compacted != start_compacted {
                schema::set_meta(&self.conn, META_COMPACT, self.compacted)?;
            }
            schema::control(&self.conn, "COMMIT")
        })();
        if let Err(e) = outcome {
            // Nothing in the batch happened: roll back, and fail every caller.
            let _ = schema::control(&self.conn, "ROLLBACK");
            self.revision = start_revision;
            self.compacted = start_compacted;
            tracing::error!(error = %e, "store commit failed");
            let message = format!("commit failed: {e}");
            for req in batch {
                let _ = req.reply.send(Err(Error::Unavailable {
                    message: message.clone(),
                    source: None,
                }));
            }
            return;
        }
        self.compaction_stalled = false;
        self.hub.publish(&events, self.revision);
        for (req, result) in batch.into_iter().zip(results) {
            let _ = req.reply.send(result);
        }
    }

    /// Applies one request inside the open transaction. The outer error is
    /// a database failure (the batch aborts); the inner one is the
    /// request's own answer (AlreadyExists, Conflict, ...).
    fn apply(&mut self, op: &Op, events: &mut Vec<Event>) -> rusqlite::Result<Result<Done>> {
        match op {
            Op::Create { key, value } => {
                if let Some(latest) = self.latest(key)? {
                    if !latest.deleted {
                        return Ok(Err(Error::AlreadyExists { key: key.clone() }));
                    }
                }
                let rev = self.revision + 1;
                self.insert(rev, key, rev, 0, false, value)?;
                self.revision = rev;
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: rev,
                    mod_revision: rev,
                };
                events.push(Event {
                    kind: EventKind::Added,
                    revision: rev,
                    kv: kv.clone(),
                });
                Ok(Ok(Done::Put(kv)))
            }
            Op::Update {
                key,
                value,
                expected,
            } => {
                let latest = match self.latest(key)? {
                    Some(l) if !l.deleted => l,
                    _ => return Ok(Err(Error::NotFound { key: key.clone() })),
                };
                if latest.rev != *expected {
                    return Ok(Err(Error::Conflict {
                        key: key.clone(),
                        expected: *expected,
                        actual: latest.rev,
                    }));
                }
                let rev = self.revision + 1;
                self.insert(rev, key, latest.create_rev, latest.rev, false, value)?;
                self.revision = rev;
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: latest.create_rev,
                    mod_revision: rev,
                };
                events.push(Event {
                    kind: EventKind::Modified,
                    revision: rev,
                    kv: kv.clone(),
                });
                Ok(Ok(Done::Put(kv)))
            }
            Op::Delete { key, expected } => {
                let latest = match self.latest(key)? {
                    Some(l) if !l.deleted => l,
                    _ => return Ok(Err(Error::NotFound { key: key.clone() })),
                };
                if let Some(expected) = expected {
                    if latest.rev != *expected {
                        return Ok(Err(Error::Conflict {
                            key: key.clone(),
                            expected: *expected,
                            actual: latest.rev,
                        }));
                    }
                }
                let value: Vec<u8> = self
                    .conn
                    .prepare_cached("SELECT value FROM log WHERE rev = ?1")?
                    .query_row([latest.rev], |r| r.get(0))?;
                let value = Bytes::from(value);
                let rev = self.revision + 1;
                self.insert(rev, key, latest.create_rev, latest.rev, true, &value)?;
                self.revision = rev;
                let prev = KeyValue {
                    key: key.clone(),
                    value,
                    create_revision: latest.create_rev,
                    mod_revision: latest.rev,
                };
                events.push(Event {
                    kind: EventKind::Deleted,
                    revision: rev,
                    kv: prev.clone(),
                });
                Ok(Ok(Done::Deleted(Deleted {
                    prev,
                    revision: rev,
                })))
            }
            Op::Compact { revision } => {
                if *revision <= self.compacted {
                    return Ok(Err(Error::Compacted {
                        requested: *revision,
                        compacted: self.compacted,
                    }));
                }
                if *revision > self.revision {
                    return Ok(Err(Error::FutureRevision {
                        requested: *revision,
                        current: self.revision,
                    }));
                }
                self.compacted = *revision;
                Ok(Ok(Done::Compacted))
            }
        }
    }

    fn latest(&self, key: &str) -> rusqlite::Result<Option<Latest>> {
        self.conn
            .prepare_cached(
                "SELECT rev, create_rev, deleted FROM log WHERE key = ?1 ORDER BY rev DESC LIMIT 1",
            )?
            .query_row([key.as_bytes()], |r| {
                Ok(Latest {
                    rev: r.get(0)?,
                    create_rev: r.get(1)?,
                    deleted: r.get(2)?,
                })
            })
            .optional()
    }

    fn insert(
        &self,
        rev: i64,
        key: &str,
        create_rev: i64,
        prev_rev: i64,
        deleted: bool,
        value: &[u8],
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO log (rev, key, create_rev, prev_rev, deleted, value)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                rev,
                key.as_bytes(),
                create_rev,
                prev_rev,
                deleted,
                value
            ])?;
        Ok(())
    }

    /// Deletes the rows made obsolete by the next slice of compacted
    /// history: for every row in the slice, all older rows of its key; and
    /// the slice's tombstones. The state at the compaction point and every
    /// revision after it stays intact.
    fn compact_slice(&mut self) -> rusqlite::Result<()> {
        let lo = self.physical;
        let hi = (lo + COMPACTION_SLICE).min(self.compacted);
        schema::control(&self.conn, "BEGIN IMMEDIATE")?;
        let result = (|| {
            self.conn.execute(
                "DELETE FROM log WHERE rev IN (
                     SELECT older.rev FROM (
                         SELECT key, MAX(rev) AS newest FROM log
                         WHERE rev > ?1 AND rev <= ?2 GROUP BY key
                     ) AS slice
                     JOIN log AS older ON older.key = slice.key AND older.rev < slice.newest)",
                params![lo, hi],
            )?;
            self.conn.execute(
                "DELETE FROM log WHERE deleted = 1 AND rev > ?1 AND rev <= ?2",
                params![lo, hi],
            )?;
            schema::set_meta(&self.conn, META_PHYSICAL, hi)?;
            schema::control(&self.conn, "COMMIT")
        })();
        match result {
            Ok(()) => {
                self.physical = hi;
                Ok(())
            }
            Err(e) => {
                let _ = schema::control(&self.conn, "ROLLBACK");
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_a_stream_of_writes_waits_to_gather() {
        // Inside a stream: the last commit carried several.
        assert!(gathers(5, Duration::from_micros(300)));
        // A lone writer never waits.
        assert!(!gathers(1, Duration::from_micros(300)));
        assert!(!gathers(0, Duration::ZERO));
        // A write after an idle spell is alone, whatever the last batch was.
        assert!(!gathers(5, STREAM_GAP));
        assert!(!gathers(5, Duration::from_millis(300)));
    }
}

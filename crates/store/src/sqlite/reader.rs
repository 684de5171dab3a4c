//! Reads: a small pool of read-only connections, each query run on the
//! blocking pool inside one read transaction, so a list (or a slice of
//! watch history) is one consistent snapshot.

use std::path::PathBuf;
use std::sync::Mutex;

use bytes::Bytes;
use rusqlite::{params, Connection, OptionalExtension};

use super::schema::{self, META_COMPACT, META_CURRENT};
use crate::{prefix_end, Error, Event, EventKind, KeyValue, Result};

/// Connections kept idle in the pool; more are opened under load.
const POOL_IDLE: usize = 8;

/// A pool of read-only connections to one database file.
#[derive(Debug)]
pub(super) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// One page read at a fixed revision.
pub(super) struct Page {
    pub(super) items: Vec<KeyValue>,
    pub(super) revision: i64,
    pub(super) more: bool,
}

fn db_error(e: rusqlite::Error) -> Error {
    Error::unavailable("sqlite read failed", e)
}

impl Readers {
    pub(super) fn new(path: PathBuf) -> Self {
        Readers {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` with a pooled connection on the blocking thread pool.
    pub(super) async fn with<T: Send + 'static>(
        self: &std::sync::Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = this.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let conn = match pooled {
                Some(c) => c,
                None => schema::open_reader(&this.path).map_err(db_error)?,
            };
            let result = f(&conn);
            let mut idle = this.idle.lock().unwrap_or_else(|e| e.into_inner());
            // A connection left inside a transaction would pin an old
            // snapshot (and the WAL); drop it instead of pooling it.
            if idle.len() < POOL_IDLE && conn.is_autocommit() {
                idle.push(conn);
            }
            result
        })
        .await
        .map_err(|e| Error::unavailable("read task failed", e))?
    }
}

/// Runs `f` inside one read transaction (a consistent snapshot).
fn in_snapshot<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    schema::control(conn, "BEGIN DEFERRED").map_err(db_error)?;
    let result = f(conn);
    if schema::control(conn, "COMMIT").is_err() {
        let _ = schema::control(conn, "ROLLBACK");
    }
    result
}

/// The newest version of `key`.
pub(super) fn get(conn: &Connection, key: &str) -> Result<KeyValue> {
    let row = conn
        .prepare_cached(
            "SELECT create_rev, rev, deleted, value FROM log
             WHERE key = ?1 ORDER BY rev DESC LIMIT 1",
        )
        .map_err(db_error)?
        .query_row([key.as_bytes()], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, bool>(2)?,
                r.get::<_, Vec<u8>>(3)?,
            ))
        })
        .optional()
        .map_err(db_error)?;
    match row {
        Some((create_revision, mod_revision, false, value)) => Ok(KeyValue {
            key: key.to_string(),
            value: Bytes::from(value),
            create_revision,
            mod_revision,
        }),
        _ => Err(Error::NotFound {
            key: key.to_string(),
        }),
    }
}

/// The exclusive end of the key range under `prefix`. Keys are UTF-8, so
/// they never contain 0xff bytes and a run of them bounds "everything".
fn range_end(prefix: &str) -> Vec<u8> {
    let end = prefix_end(prefix.as_bytes());
    if end.is_empty() {
        vec![0xff; 8]
    } else {
        end
    }
}

/// Checks that `revision` can be read: not compacted, not in the future.
fn check_readable(conn: &Connection, revision: i64) -> Result<i64> {
    let current = schema::meta(conn, META_CURRENT).map_err(db_error)?;
    let compacted = schema::meta(conn, META_COMPACT).map_err(db_error)?;
    if revision < compacted {
        return Err(Error::Compacted {
            requested: revision,
            compacted,
        });
    }
    if revision > current {
        return Err(Error::FutureRevision {
            requested: revision,
            current,
        });
    }
    Ok(current)
}

/// Up to `limit` live keys in `[start, prefix_end(prefix))` as of
/// `revision` (the current one when `None`).
pub(super) fn list(
    conn: &Connection,
    prefix: &str,
    start: &str,
    revision: Option<i64>,
    limit: Option<usize>,
) -> Result<Page> {
    in_snapshot(conn, |conn| {
        let revision = match revision {
            Some(r) => {
                check_readable(conn, r)?;
                r
            }
            None => schema::meta(conn, META_CURRENT).map_err(db_error)?,
        };
        let end = range_end(prefix);
        // SQLite returns the bare columns from the row holding MAX(rev):
        // the newest version of each key at `revision`.
        let fetch = limit
            .and_then(|l| i64::try_from(l).ok())
            .and_then(|l| l.checked_add(1))
            .unwrap_or(-1);
        let mut stmt = conn
            .prepare_cached(
                "SELECT key, create_rev, MAX(rev), deleted, value FROM log
                 WHERE key >= ?1 AND key < ?2 AND rev <= ?3
                 GROUP BY key HAVING deleted = 0 ORDER BY key LIMIT ?4",
            )
            .map_err(db_error)?;
        let mut items = stmt
            .query_map(params![start.as_bytes(), end, revision, fetch], |r| {
                let key: Vec<u8> = r.get(0)?;
                Ok(KeyValue {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    create_revision: r.get(1)?,
                    mod_revision: r.get(2)?,
                    value: Bytes::from(r.get::<_, Vec<u8>>(4)?),
                })
            })
            .map_err(db_error)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_error)?;
        let more = limit.is_some_and(|l| items.len() > l);
        if let Some(l) = limit {
            items.truncate(l);
        }
        Ok(Page {
            items,
            revision,
            more,
        })
    })
}

/// Events on `prefix` with `after < revision <= until`, oldest first, at
/// most `limit`. Fails with Compacted when `after` is before the
/// compaction point.
pub(super) fn history(
    conn: &Connection,
    prefix: &str,
    after: i64,
    until: i64,
    limit: usize,
) -> Result<Vec<Event>> {
    in_snapshot(conn, |conn| {
        let compacted = schema::meta(conn, META_COMPACT).map_err(db_error)?;
        if after < compacted {
            return Err(Error::Compacted {
                requested: after,
                compacted,
            });
        }
        let mut stmt = conn
            .prepare_cached(
                "SELECT rev, key, create_rev, prev_rev, deleted, value FROM log
                 WHERE rev > ?1 AND rev <= ?2 AND key >= ?3 AND key < ?4
                 ORDER BY rev LIMIT ?5",
            )
            .map_err(db_error)?;
        let end = range_end(prefix);
        let rows = stmt
            .query_map(
                params![after, until, prefix.as_bytes(), end, limit as i64],
                |r| {
                    let key: Vec<u8> = r.get(1)?;
                    Ok((
                        r.get::<_, i64>(0)?,
                        key,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, bool>(4)?,
                        r.get::<_, Vec<u8>>(5)?,
                    ))
                },
            )
            .map_err(db_error)?;
        let mut events = Vec::new();
        for row in rows {
            let (rev, key, create_rev, prev_rev, deleted, value) = row.map_err(db_error)?;
            let (kind, mod_revision) = if deleted {
                (EventKind::Deleted, prev_rev)
            } else if create_rev == rev {
                (EventKind::Added, rev)
            } else {
                (EventKind::Modified, rev)
            };
            events.push(Event {
                kind,
                revision: rev,
                kv: KeyValue {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    value: Bytes::from(value),
                    create_revision: create_rev,
                    mod_revision,
                },
            });
        }
        Ok(events)
    })
}

//! The on-disk layout of the embedded store and how its connections are
//! opened. Owns the SQL schema; knows nothing of requests or watches.
//!
//! One table, `log`, holds every revision still in history: a row per write
//! (`deleted = 1` rows are tombstones carrying the last value). The state at
//! revision R is, per key, the newest row with `rev <= R` unless it is a
//! tombstone. `meta` holds the current revision (which never goes back, even
//! when compaction deletes the newest rows) and the compaction points.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS log (
    rev        INTEGER PRIMARY KEY,
    key        BLOB    NOT NULL,
    create_rev INTEGER NOT NULL,
    prev_rev   INTEGER NOT NULL,
    deleted    INTEGER NOT NULL,
    value      BLOB    NOT NULL
);
CREATE INDEX IF NOT EXISTS log_key_rev ON log (key, rev);
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Names of the rows in `meta`.
pub(super) const META_CURRENT: &str = "current_rev";
/// Logical compaction point: reads before it answer Compacted.
pub(super) const META_COMPACT: &str = "compact_rev";
/// How far rows have actually been deleted (trails META_COMPACT).
pub(super) const META_PHYSICAL: &str = "physical_compact_rev";

/// Opens the single writer connection: WAL, and `synchronous = FULL` so a
/// commit is on disk (the WAL fsynced) before it is acknowledged.
pub(super) fn open_writer(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(rusqlite::Error::InvalidQuery);
    }
    conn.execute_batch(
        "PRAGMA synchronous = FULL;
         PRAGMA cache_size = -16384;",
    )?;
    conn.execute_batch(SCHEMA)?;
    tune(&conn)?;
    Ok(conn)
}

/// Opens a read-only connection for the read pool.
pub(super) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA query_only = 1; PRAGMA cache_size = -8192;")?;
    tune(&conn)?;
    Ok(conn)
}

/// Statement settings shared by both kinds of connection. The bundled
/// SQLite is built with STAT4, under which binding a new key to a cached
/// statement can expire its plan and force a re-parse on every execution;
/// the query planner stability guarantee keeps one plan per statement (our
/// queries have a single sensible plan: the `(key, rev)` index).
fn tune(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(())
}

/// Runs a transaction-control statement (`BEGIN …`, `COMMIT`, `ROLLBACK`)
/// through the statement cache instead of parsing it each time.
pub(super) fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Reads one `meta` value (0 when absent).
pub(super) fn meta(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Writes one `meta` value.
pub(super) fn set_meta(conn: &Connection, name: &str, value: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO meta (name, value) VALUES (?1, ?2)
         ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    )?
    .execute(rusqlite::params![name, value])?;
    Ok(())
}

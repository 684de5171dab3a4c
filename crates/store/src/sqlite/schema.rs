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

/// Bytes per database page for a new store (SQLite's default is 4096).
pub(super) const PAGE_SIZE: u32 = 16_384;

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
    // Set before the first table exists (an existing file keeps its
    // size). SQLite writes each WAL frame with two pwrite calls, one page
    // per frame: against 4 KiB pages, a pod (3-5 KiB) no longer spills
    // into an overflow page and a commit dirties fewer pages, and in
    // `skiff-bench sim` the pod phase made half as many pwrite calls
    // (175,319 -> 86,816).
    conn.execute_batch(&format!("PRAGMA page_size = {PAGE_SIZE}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn page_size(conn: &Connection) -> u32 {
        conn.query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_new_store_has_the_larger_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let conn = open_writer(&path).unwrap();
        assert_eq!(page_size(&conn), PAGE_SIZE);
        drop(conn);
        assert_eq!(page_size(&open_reader(&path).unwrap()), PAGE_SIZE);
    }

    #[test]
    fn a_store_made_with_small_pages_keeps_them_and_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let old = Connection::open(&path).unwrap();
        old.execute_batch("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;")
            .unwrap();
        old.execute_batch(SCHEMA).unwrap();
        old.execute(
            "INSERT INTO log (rev, key, create_rev, prev_rev, deleted, value)
             VALUES (1, x'2f61', 1, 0, 0, x'7b7d')",
            [],
        )
        .unwrap();
        drop(old);
        let conn = open_writer(&path).unwrap();
        assert_eq!(page_size(&conn), 4096);
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM log", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }
}

//! Opening the embedded store: reopen keeps data and revision; a database
//! held by another opener or a corrupt file is a clear error, not a panic.

use skiff_store::sqlite::{Config, OpenError, SqliteStore};
use skiff_store::Store;

#[tokio::test]
async fn reopen_keeps_data_and_revision() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/state.db");
    let kv = {
        let store = SqliteStore::open(&path, Config::default()).unwrap();
        store.create("/a", "1".into()).await.unwrap();
        store.create("/b", "2".into()).await.unwrap()
    };
    let store = SqliteStore::open(&path, Config::default()).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), kv.mod_revision);
    assert_eq!(store.get("/b").await.unwrap(), kv);
    let next = store.create("/c", "3".into()).await.unwrap();
    assert_eq!(next.mod_revision, kv.mod_revision + 1);
}

#[tokio::test]
async fn a_locked_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let first = SqliteStore::open(&path, Config::default()).unwrap();
    match SqliteStore::open(&path, Config::default()) {
        Err(e @ OpenError::Locked { .. }) => {
            let message = e.to_string();
            assert!(message.contains("in use by another process"), "{message}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(first);
    SqliteStore::open(&path, Config::default()).expect("free again once closed");
}

#[test]
fn a_corrupt_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    std::fs::write(
        &path,
        b"this is not a database at all, just text. ".repeat(200),
    )
    .unwrap();
    match SqliteStore::open(&path, Config::default()) {
        Err(e @ OpenError::Corrupt { .. }) => {
            let message = e.to_string();
            assert!(message.contains("corrupt"), "{message}");
            assert!(message.contains("state.db"), "{message}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

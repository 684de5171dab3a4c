//! Builds a store of each backend for one test, with what keeps it alive.

use std::sync::Arc;

use skiff_store::etcd::{EtcdConfig, EtcdStore};
use skiff_store::sqlite::{Config, SqliteStore};
use skiff_store::Store;
use skiff_testkit::EtcdServer;

pub struct Backend {
    pub store: Arc<dyn Store>,
    _sqlite_dir: Option<tempfile::TempDir>,
    _etcd: Option<EtcdServer>,
}

pub async fn sqlite(watch_capacity: usize) -> Backend {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        watch_capacity,
        ..Config::default()
    };
    let store = SqliteStore::open(dir.path().join("state.db"), config).expect("open sqlite store");
    Backend {
        store: Arc::new(store),
        _sqlite_dir: Some(dir),
        _etcd: None,
    }
}

pub async fn etcd(watch_capacity: usize) -> Backend {
    let server = EtcdServer::start().await.expect("start etcd");
    let mut config = EtcdConfig::new(vec![server.endpoint().to_string()]);
    config.watch_capacity = watch_capacity;
    let store = EtcdStore::connect(config).await.expect("connect to etcd");
    Backend {
        store: Arc::new(store),
        _sqlite_dir: None,
        _etcd: Some(server),
    }
}

//! The store conformance suite: every case runs against both backends, the
//! embedded SQLite store and a real etcd started by the test (Debian's
//! `etcd-server`, free loopback port, temporary data dir).

mod cases;
mod harness;

macro_rules! conformance {
    ($($case:ident => $capacity:expr),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let backend = crate::harness::sqlite($capacity).await;
                    crate::cases::$case(backend.store.clone()).await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let backend = crate::harness::etcd($capacity).await;
                    crate::cases::$case(backend.store.clone()).await;
                }
            )*
        }
    };
}

conformance! {
    basic_semantics => 1_000,
    no_lost_update => 1_000,
    consistent_lists => 1_000,
    exact_watch_delivery => 20_000,
    compaction => 1_000,
    slow_watcher_is_cut_off => 100,
    size_limit => 1_000,
}

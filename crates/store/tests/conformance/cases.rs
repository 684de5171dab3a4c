//! The cases of the conformance suite; each takes a fresh store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use rand::Rng;
use skiff_store::{Error, Event, EventKind, ListOptions, Store, WatchStream, MAX_VALUE_BYTES};

/// Upper bound on waiting for one watch event before the test fails.
const EVENT_TIMEOUT: Duration = Duration::from_secs(60);

fn b(s: impl Into<String>) -> Bytes {
    Bytes::from(s.into())
}

async fn next(stream: &mut WatchStream) -> Option<Result<Event, Error>> {
    tokio::time::timeout(EVENT_TIMEOUT, stream.next())
        .await
        .expect("timed out waiting for a watch event")
}

async fn next_event(stream: &mut WatchStream) -> Event {
    next(stream)
        .await
        .expect("watch ended early")
        .expect("watch failed")
}

/// Lists everything under `prefix`, following continue tokens.
async fn list_all(store: &dyn Store, prefix: &str, page: usize) -> (i64, Vec<(String, Bytes)>) {
    let mut opts = ListOptions {
        limit: Some(page),
        ..Default::default()
    };
    let mut items = Vec::new();
    let mut first_revision = None;
    loop {
        let result = store.list(prefix, opts.clone()).await.expect("list");
        let revision = *first_revision.get_or_insert(result.revision);
        assert_eq!(
            result.revision, revision,
            "every page reads the first page's snapshot"
        );
        assert!(result.items.len() <= page);
        items.extend(result.items.into_iter().map(|kv| (kv.key, kv.value)));
        match result.continue_token {
            Some(token) => opts.continue_token = Some(token),
            None => return (revision, items),
        }
    }
}

pub async fn basic_semantics(store: Arc<dyn Store>) {
    let a = store.create("/t/a", b("1")).await.unwrap();
    assert_eq!(a.create_revision, a.mod_revision);
    assert!(matches!(
        store.create("/t/a", b("x")).await,
        Err(Error::AlreadyExists { .. })
    ));
    assert!(matches!(
        store.get("/t/missing").await,
        Err(Error::NotFound { .. })
    ));
    let got = store.get("/t/a").await.unwrap();
    assert_eq!(got, a);

    let a2 = store.update("/t/a", b("2"), a.mod_revision).await.unwrap();
    assert!(a2.mod_revision > a.mod_revision);
    assert_eq!(a2.create_revision, a.create_revision);
    match store.update("/t/a", b("3"), a.mod_revision).await {
        Err(Error::Conflict {
            expected, actual, ..
        }) => {
            assert_eq!(expected, a.mod_revision);
            assert_eq!(actual, a2.mod_revision);
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    for expected in [0, 1] {
        assert!(matches!(
            store.update("/t/missing", b("3"), expected).await,
            Err(Error::NotFound { .. })
        ));
    }
    assert!(matches!(
        store.get("/t/missing").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete("/t/a", Some(a.mod_revision)).await,
        Err(Error::Conflict { .. })
    ));
    assert_eq!(store.current_revision().await.unwrap(), a2.mod_revision);

    // Prefixes are exact: /t/ does not include /tt/.
    store.create("/tt/x", b("other")).await.unwrap();
    store.create("/t/b", b("b")).await.unwrap();
    let (_, items) = list_all(store.as_ref(), "/t/", 10).await;
    let keys: Vec<_> = items.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, vec!["/t/a", "/t/b"]);
    // Paging works for a prefix without a trailing slash, and a huge limit
    // is just "everything".
    let (_, items) = list_all(store.as_ref(), "/t", 1).await;
    let keys: Vec<_> = items.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, vec!["/t/a", "/t/b", "/tt/x"]);
    let (_, items) = list_all(store.as_ref(), "/t/", usize::MAX).await;
    assert_eq!(items.len(), 2);

    let before_delete = store.current_revision().await.unwrap();
    let mut watch = store.watch("/t/", before_delete).await.unwrap();
    let deleted = store.delete("/t/a", Some(a2.mod_revision)).await.unwrap();
    assert_eq!(deleted.prev.value, b("2"));
    assert_eq!(deleted.prev.mod_revision, a2.mod_revision);
    assert!(deleted.revision > before_delete);
    assert!(matches!(
        store.get("/t/a").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete("/t/a", None).await,
        Err(Error::NotFound { .. })
    ));
    let recreated = store.create("/t/a", b("again")).await.unwrap();
    assert!(recreated.create_revision > deleted.revision);

    let e = next_event(&mut watch).await;
    assert_eq!(e.kind, EventKind::Deleted);
    assert_eq!(e.revision, deleted.revision);
    assert_eq!(e.kv.value, b("2"), "a DELETED event carries the last value");
    let e = next_event(&mut watch).await;
    assert_eq!(e.kind, EventKind::Added);
    assert_eq!(e.revision, recreated.mod_revision);
    let updated = store
        .update("/t/a", b("later"), recreated.mod_revision)
        .await
        .unwrap();
    let e = next_event(&mut watch).await;
    assert_eq!(
        (e.kind, e.revision),
        (EventKind::Modified, updated.mod_revision)
    );
    assert_eq!(e.kv.create_revision, recreated.create_revision);
}

pub async fn no_lost_update(store: Arc<dyn Store>) {
    const TASKS: usize = 64;
    const INCREMENTS: usize = 100;
    store.create("/counter", b("0")).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..INCREMENTS {
                loop {
                    let kv = store.get("/counter").await.unwrap();
                    let n: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
                    match store
                        .update("/counter", b((n + 1).to_string()), kv.mod_revision)
                        .await
                    {
                        Ok(_) => break,
                        Err(Error::Conflict { .. }) => continue,
                        Err(e) => panic!("update failed: {e}"),
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let kv = store.get("/counter").await.unwrap();
    assert_eq!(kv.value, b((TASKS * INCREMENTS).to_string()));
}

/// Every acknowledged write, for rebuilding the state at any revision.
#[derive(Default)]
struct Model {
    writes: Vec<(i64, String, Option<Bytes>)>,
}

impl Model {
    fn state_at(&self, revision: i64) -> Vec<(String, Bytes)> {
        let mut writes: Vec<_> = self.writes.iter().filter(|w| w.0 <= revision).collect();
        writes.sort_by_key(|w| w.0);
        let mut state = BTreeMap::new();
        for (_, key, value) in writes {
            match value {
                Some(v) => state.insert(key.clone(), v.clone()),
                None => state.remove(key),
            };
        }
        state.into_iter().collect()
    }
}

pub async fn consistent_lists(store: Arc<dyn Store>) {
    const KEYS: usize = 60;
    const WRITERS: usize = 8;
    const OPS: usize = 120;
    let model = Arc::new(Mutex::new(Model::default()));
    for i in 0..KEYS {
        let key = format!("/list/k{i:03}");
        let kv = store.create(&key, b("init")).await.unwrap();
        model
            .lock()
            .unwrap()
            .writes
            .push((kv.mod_revision, key, Some(b("init"))));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (store, model) = (store.clone(), model.clone());
        writers.push(tokio::spawn(async move {
            for op in 0..OPS {
                let key = format!("/list/k{:03}", rand::rng().random_range(0..KEYS));
                let value = b(format!("w{w}-op{op}"));
                let delete = rand::rng().random_ratio(1, 5);
                let record = match store.get(&key).await {
                    Ok(kv) if delete => store
                        .delete(&key, Some(kv.mod_revision))
                        .await
                        .ok()
                        .map(|d| (d.revision, None)),
                    Ok(kv) => store
                        .update(&key, value.clone(), kv.mod_revision)
                        .await
                        .ok()
                        .map(|kv| (kv.mod_revision, Some(value))),
                    Err(_) => store
                        .create(&key, value.clone())
                        .await
                        .ok()
                        .map(|kv| (kv.mod_revision, Some(value))),
                };
                if let Some((rev, value)) = record {
                    model.lock().unwrap().writes.push((rev, key, value));
                }
            }
        }));
    }
    // List while the writers run: whole lists and small pages.
    let mut snapshots = Vec::new();
    while !writers.iter().all(|w| w.is_finished()) {
        snapshots.push(list_all(store.as_ref(), "/list/", 1_000).await);
        snapshots.push(list_all(store.as_ref(), "/list/", 7).await);
    }
    for w in writers {
        w.await.unwrap();
    }
    snapshots.push(list_all(store.as_ref(), "/list/", 7).await);
    let model = model.lock().unwrap();
    assert!(snapshots.len() >= 2);
    for (revision, items) in &snapshots {
        assert_eq!(
            items,
            &model.state_at(*revision),
            "list at revision {revision} is not the state at that revision"
        );
    }
}

pub async fn exact_watch_delivery(store: Arc<dyn Store>) {
    const WRITES: usize = 10_000;
    const WRITERS: usize = 16;
    const WATCHERS: usize = 50;
    let start = store.current_revision().await.unwrap();
    let revisions = Arc::new(Mutex::new(Vec::with_capacity(WRITES)));

    let spawn_watcher = |store: Arc<dyn Store>| {
        tokio::spawn(async move {
            let mut watch = store.watch("/watch/", start).await.unwrap();
            let mut seen = Vec::with_capacity(WRITES);
            while seen.len() < WRITES {
                seen.push(next_event(&mut watch).await.revision);
            }
            seen
        })
    };
    let write_half = |store: Arc<dyn Store>, half: usize| {
        let revisions = revisions.clone();
        async move {
            let mut tasks = Vec::new();
            for w in 0..WRITERS {
                let (store, revisions) = (store.clone(), revisions.clone());
                tasks.push(tokio::spawn(async move {
                    for i in (w..WRITES / 2).step_by(WRITERS) {
                        let key = format!("/watch/{half}-{i}");
                        let kv = store.create(&key, b("x".repeat(100))).await.unwrap();
                        revisions.lock().unwrap().push(kv.mod_revision);
                        if i % 10 == 0 {
                            // Noise on another prefix the watchers must not see.
                            store
                                .create(&format!("/other/{half}-{i}"), b("y"))
                                .await
                                .unwrap();
                        }
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    };

    // Half the watchers follow live from the start; the other half start
    // after the first 5,000 writes and must replay them from history.
    let mut watchers: Vec<_> = (0..WATCHERS / 2)
        .map(|_| spawn_watcher(store.clone()))
        .collect();
    write_half(store.clone(), 0).await;
    watchers.extend((0..WATCHERS / 2).map(|_| spawn_watcher(store.clone())));
    write_half(store.clone(), 1).await;

    let mut expected = revisions.lock().unwrap().clone();
    expected.sort_unstable();
    assert_eq!(expected.len(), WRITES);
    for watcher in watchers {
        let seen = watcher.await.unwrap();
        assert_eq!(
            seen, expected,
            "a watcher missed, repeated or reordered events"
        );
    }
}

pub async fn compaction(store: Arc<dyn Store>) {
    let a1 = store.create("/c/a", b("a1")).await.unwrap();
    let b1 = store.create("/c/b", b("b1")).await.unwrap();
    let a2 = store
        .update("/c/a", b("a2"), a1.mod_revision)
        .await
        .unwrap();
    let del_b = store.delete("/c/b", None).await.unwrap();
    let c1 = store.create("/c/c", b("c1")).await.unwrap();
    let c2 = store
        .update("/c/c", b("c2"), c1.mod_revision)
        .await
        .unwrap();
    let compact_at = a2.mod_revision;

    store.compact(compact_at).await.unwrap();

    assert!(matches!(
        store
            .list(
                "/c/",
                ListOptions {
                    revision: Some(compact_at - 1),
                    ..Default::default()
                }
            )
            .await,
        Err(Error::Compacted { .. })
    ));
    match store.watch("/c/", compact_at - 1).await {
        Err(Error::Compacted { .. }) => {}
        Ok(mut stream) => assert!(
            matches!(next(&mut stream).await, Some(Err(Error::Compacted { .. }))),
            "a watch from a compacted revision must fail with Compacted"
        ),
        Err(e) => panic!("expected Compacted, got {e}"),
    }
    assert!(matches!(
        store.compact(compact_at).await,
        Err(Error::Compacted { .. })
    ));

    // The state at the compaction point is intact.
    let at = store
        .list(
            "/c/",
            ListOptions {
                revision: Some(compact_at),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let state: Vec<_> = at
        .items
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.clone()))
        .collect();
    assert_eq!(state, vec![("/c/a", b("a2")), ("/c/b", b("b1"))]);
    assert_eq!(
        store.get("/c/a").await.unwrap().mod_revision,
        a2.mod_revision
    );
    assert_eq!(at.items[1].create_revision, b1.create_revision);
    assert_eq!(at.items[0].mod_revision, a2.mod_revision);

    // Everything after it is still delivered, in order.
    let mut watch = store.watch("/c/", compact_at).await.unwrap();
    let e = next_event(&mut watch).await;
    assert_eq!(
        (e.kind, e.revision, e.kv.value.clone()),
        (EventKind::Deleted, del_b.revision, b("b1"))
    );
    let e = next_event(&mut watch).await;
    assert_eq!((e.kind, e.revision), (EventKind::Added, c1.mod_revision));
    let e = next_event(&mut watch).await;
    assert_eq!((e.kind, e.revision), (EventKind::Modified, c2.mod_revision));
    let (_, now) = list_all(store.as_ref(), "/c/", 1).await;
    assert_eq!(
        now,
        vec![("/c/a".into(), b("a2")), ("/c/c".into(), b("c2"))]
    );
}

pub async fn slow_watcher_is_cut_off(store: Arc<dyn Store>) {
    // The harness gives this case a watch buffer of 100 events.
    const WRITES: usize = 1_000;
    let start = store.current_revision().await.unwrap();
    let mut slow = store.watch("/slow/", start).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..WRITES).step_by(8) {
                store.create(&format!("/slow/{i}"), b("v")).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut delivered = 0;
    let error = loop {
        match next(&mut slow).await {
            Some(Ok(_)) => delivered += 1,
            Some(Err(e)) => break e,
            None => panic!("watch ended without an error after {delivered} events"),
        }
        assert!(
            delivered <= 100,
            "a cut-off watcher delivered more than its buffer"
        );
    };
    assert!(
        matches!(error, Error::WatcherTooSlow { capacity: 100 }),
        "got {error}"
    );

    // The store is fine, and a new watch works.
    let now = store.current_revision().await.unwrap();
    let mut fresh = store.watch("/slow/", now).await.unwrap();
    let kv = store.create("/slow/after", b("v")).await.unwrap();
    assert_eq!(next_event(&mut fresh).await.revision, kv.mod_revision);
}

pub async fn size_limit(store: Arc<dyn Store>) {
    let big = Bytes::from(vec![b'x'; MAX_VALUE_BYTES + 1]);
    assert!(matches!(
        store.create("/big/a", big.clone()).await,
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        store.get("/big/a").await,
        Err(Error::NotFound { .. })
    ));
    let ok = store
        .create("/big/a", Bytes::from(vec![b'x'; 1024 * 1024]))
        .await
        .unwrap();
    assert!(matches!(
        store.update("/big/a", big, ok.mod_revision).await,
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(
        store.get("/big/a").await.unwrap().mod_revision,
        ok.mod_revision
    );
}

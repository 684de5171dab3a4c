//! The etcd v3 backend. Compare-and-swap is a Txn on `mod_revision` (or
//! `create_revision = 0` for create); watches use etcd's watch with prevKV
//! and progress notifications, forwarded by one task per watch into the
//! same bounded queue the embedded store uses; compaction is etcd's.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, KvClient,
    PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse, WatchClient, WatchOptions,
};

use crate::types::{encode_continue, list_start, page_limit};
use crate::watch::{channel, WatchSender, DEFAULT_WATCH_CAPACITY};
use crate::{
    check_value_size, prefix_end, Deleted, Error, Event, EventKind, KeyValue, ListOptions,
    ListResult, Result, Store, WatchStream,
};

/// Largest gRPC response we accept (a big list).
const MAX_RESPONSE_BYTES: usize = 1 << 30;

/// Settings of the etcd backend.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    pub endpoints: Vec<String>,
    pub connect_timeout: Duration,
    /// Events buffered per watcher before it is cut off as too slow.
    pub watch_capacity: usize,
}

impl EtcdConfig {
    pub fn new(endpoints: Vec<String>) -> Self {
        EtcdConfig {
            endpoints,
            connect_timeout: Duration::from_secs(5),
            watch_capacity: DEFAULT_WATCH_CAPACITY,
        }
    }
}

/// A [`Store`] on an etcd v3 cluster.
#[derive(Clone)]
pub struct EtcdStore {
    kv: KvClient,
    watch: WatchClient,
    watch_capacity: usize,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore").finish_non_exhaustive()
    }
}

/// Maps an etcd client error; `requested` is the revision the call named.
fn map_error(e: etcd_client::Error, requested: i64) -> Error {
    if let etcd_client::Error::GRpcStatus(status) = &e {
        let message = status.message();
        if message.contains("required revision has been compacted") {
            return Error::Compacted {
                requested,
                compacted: 0,
            };
        }
        if message.contains("required revision is a future revision") {
            return Error::FutureRevision {
                requested,
                current: 0,
            };
        }
        if message.contains("request is too large") {
            return Error::TooLarge {
                size: 0,
                limit: crate::MAX_VALUE_BYTES,
            };
        }
    }
    Error::unavailable("etcd request failed", e)
}

/// How many times a request is sent again when it did not reach a member
/// that could serve it.
const RETRIES: u32 = 5;

/// Whether an etcd error says the request never reached a member that
/// could serve it (a dead member's connection refused or reset, no
/// leader yet): sent again, the client's balancer routes it to another
/// member. Upstream's etcd client retries the same way.
fn retryable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) => true,
        // 14: gRPC's UNAVAILABLE.
        etcd_client::Error::GRpcStatus(status) => status.code() as i32 == 14,
        _ => false,
    }
}

/// Sends a request (made by `send`) until it is answered or fails for
/// another reason, at most [`RETRIES`] more times, waiting 50, 100,
/// 200... ms between.
async fn with_retries<T, Fut>(
    mut send: impl FnMut() -> Fut,
) -> std::result::Result<T, etcd_client::Error>
where
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let mut delay = Duration::from_millis(50);
    for _ in 0..RETRIES {
        match send().await {
            Err(e) if retryable(&e) => {
                tracing::debug!(error = %e, "etcd request not served; sending again");
                // Back-off between attempts, not a wait for a condition.
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            other => return other,
        }
    }
    send().await
}

fn to_kv(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
    }
}

fn revision_of(resp: &TxnResponse) -> i64 {
    resp.header().map(|h| h.revision()).unwrap_or(0)
}

/// The key found by the `get` of a failed Txn's else branch.
fn else_get(resp: &TxnResponse) -> Option<KeyValue> {
    resp.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().map(to_kv),
        _ => None,
    })
}

/// The end of the key range under `prefix` in etcd's terms ("\0" = all).
fn range_end(prefix: &str) -> Vec<u8> {
    let end = prefix_end(prefix.as_bytes());
    if end.is_empty() {
        vec![0]
    } else {
        end
    }
}

impl EtcdStore {
    /// Connects to the cluster.
    pub async fn connect(config: EtcdConfig) -> Result<Self> {
        let options = ConnectOptions::new().with_connect_timeout(config.connect_timeout);
        let client = Client::connect(&config.endpoints, Some(options))
            .await
            .map_err(|e| Error::unavailable("cannot connect to etcd", e))?;
        Ok(EtcdStore {
            kv: client
                .kv_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            watch: client
                .watch_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            watch_capacity: config.watch_capacity,
        })
    }

    /// Fails the (already created) queue when `revision` is compacted.
    async fn check_not_compacted(&self, prefix: &str, revision: i64) -> Result<()> {
        if revision <= 0 {
            return Ok(());
        }
        let opts = GetOptions::new()
            .with_range(range_end(prefix))
            .with_revision(revision)
            .with_count_only();
        match self.kv.clone().get(prefix, Some(opts)).await {
            Ok(_) => Ok(()),
            Err(e) => match map_error(e, revision) {
                // Watching from a revision not yet written is allowed.
                Error::FutureRevision { .. } => Ok(()),
                other => Err(other),
            },
        }
    }
}

/// Moves one etcd watch into the bounded queue until either side ends.
async fn forward(mut stream: etcd_client::WatchStream, sender: WatchSender, after: i64) {
    loop {
        let message = tokio::select! {
            _ = sender.closed() => return,
            message = stream.message() => message,
        };
        let resp = match message {
            Ok(Some(resp)) => resp,
            Ok(None) => {
                sender.fail(Error::Unavailable {
                    message: "etcd closed the watch stream".into(),
                    source: None,
                });
                return;
            }
            Err(e) => {
                sender.fail(map_error(e, after));
                return;
            }
        };
        if resp.compact_revision() > 0 {
            sender.fail(Error::Compacted {
                requested: after,
                compacted: resp.compact_revision(),
            });
            return;
        }
        if resp.canceled() {
            sender.fail(Error::Unavailable {
                message: format!("etcd cancelled the watch: {}", resp.cancel_reason()),
                source: None,
            });
            return;
        }
        let events: Vec<Event> = resp
            .events()
            .iter()
            .filter_map(|e| {
                let kv = e.kv()?;
                Some(match e.event_type() {
                    EventType::Put => Event {
                        kind: if kv.create_revision() == kv.mod_revision() {
                            EventKind::Added
                        } else {
                            EventKind::Modified
                        },
                        revision: kv.mod_revision(),
                        kv: to_kv(kv),
                    },
                    EventType::Delete => Event {
                        kind: EventKind::Deleted,
                        revision: kv.mod_revision(),
                        kv: e.prev_kv().map(to_kv).unwrap_or_else(|| KeyValue {
                            value: Bytes::new(),
                            ..to_kv(kv)
                        }),
                    },
                })
            })
            .collect();
        if !events.is_empty() && !sender.push_all(&events) {
            return;
        }
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        check_value_size(&value)?;
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value.to_vec(), None)]);
        let resp = with_retries(|| {
            let (mut kv, txn) = (self.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(|e| map_error(e, 0))?;
        if !resp.succeeded() {
            return Err(Error::AlreadyExists {
                key: key.to_string(),
            });
        }
        let rev = revision_of(&resp);
        Ok(KeyValue {
            key: key.to_string(),
            value,
            create_revision: rev,
            mod_revision: rev,
        })
    }

    async fn get(&self, key: &str) -> Result<KeyValue> {
        let resp = with_retries(|| {
            let mut kv = self.kv.clone();
            async move { kv.get(key, None).await }
        })
        .await
        .map_err(|e| map_error(e, 0))?;
        resp.kvs()
            .first()
            .map(to_kv)
            .ok_or_else(|| Error::NotFound {
                key: key.to_string(),
            })
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let (start, revision) = list_start(prefix, &opts)?;
        let limit = page_limit(&opts);
        let mut get = GetOptions::new().with_range(range_end(prefix));
        if let Some(limit) = limit {
            get = get.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        if let Some(revision) = revision {
            get = get.with_revision(revision);
        }
        let resp = with_retries(|| {
            let (mut kv, start, get) = (self.kv.clone(), start.clone(), get.clone());
            async move { kv.get(start, Some(get)).await }
        })
        .await
        .map_err(|e| map_error(e, revision.unwrap_or(0)))?;
        let snapshot = revision.unwrap_or_else(|| resp.header().map(|h| h.revision()).unwrap_or(0));
        let items: Vec<KeyValue> = resp.kvs().iter().map(to_kv).collect();
        let continue_token = match (resp.more(), items.last()) {
            (true, Some(last)) => Some(encode_continue(prefix, &last.key, snapshot)),
            _ => None,
        };
        Ok(ListResult {
            items,
            revision: snapshot,
            continue_token,
        })
    }

    async fn update(&self, key: &str, value: Bytes, expected_revision: i64) -> Result<KeyValue> {
        check_value_size(&value)?;
        let txn = Txn::new()
            // etcd compares a missing key's mod_revision as 0: also require
            // that the key exists, so an update never creates.
            .when([
                Compare::mod_revision(key, CompareOp::Equal, expected_revision),
                Compare::create_revision(key, CompareOp::Greater, 0),
            ])
            .and_then([TxnOp::put(
                key,
                value.to_vec(),
                Some(PutOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let resp = with_retries(|| {
            let (mut kv, txn) = (self.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(|e| map_error(e, 0))?;
        if !resp.succeeded() {
            return Err(match else_get(&resp) {
                Some(current) => Error::Conflict {
                    key: key.to_string(),
                    expected: expected_revision,
                    actual: current.mod_revision,
                },
                None => Error::NotFound {
                    key: key.to_string(),
                },
            });
        }
        let rev = revision_of(&resp);
        let create_revision = resp
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Put(put) => put.prev_key().map(|kv| kv.create_revision()),
                _ => None,
            })
            .unwrap_or(rev);
        Ok(KeyValue {
            key: key.to_string(),
            value,
            create_revision,
            mod_revision: rev,
        })
    }

    async fn delete(&self, key: &str, expected_revision: Option<i64>) -> Result<Deleted> {
        let guard = match expected_revision {
            Some(rev) => Compare::mod_revision(key, CompareOp::Equal, rev),
            None => Compare::create_revision(key, CompareOp::Greater, 0),
        };
        let txn = Txn::new()
            .when([guard])
            .and_then([TxnOp::delete(
                key,
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let resp = with_retries(|| {
            let (mut kv, txn) = (self.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(|e| map_error(e, 0))?;
        if !resp.succeeded() {
            return Err(match (else_get(&resp), expected_revision) {
                (Some(current), Some(expected)) => Error::Conflict {
                    key: key.to_string(),
                    expected,
                    actual: current.mod_revision,
                },
                _ => Error::NotFound {
                    key: key.to_string(),
                },
            });
        }
        let prev = resp
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Delete(del) => del.prev_kvs().first().map(to_kv),
                _ => None,
            })
            .ok_or_else(|| Error::NotFound {
                key: key.to_string(),
            })?;
        Ok(Deleted {
            prev,
            revision: revision_of(&resp),
        })
    }

    async fn watch(&self, prefix: &str, after_revision: i64) -> Result<WatchStream> {
        self.check_not_compacted(prefix, after_revision).await?;
        let options = WatchOptions::new()
            .with_range(range_end(prefix))
            .with_prev_key()
            .with_progress_notify()
            .with_start_revision(after_revision.max(0).saturating_add(1));
        let stream = self
            .watch
            .clone()
            .watch(prefix, Some(options))
            .await
            .map_err(|e| map_error(e, after_revision))?;
        let (sender, receiver) = channel(self.watch_capacity);
        tokio::spawn(forward(stream, sender, after_revision));
        Ok(WatchStream::new(receiver.into_stream()))
    }

    async fn compact(&self, revision: i64) -> Result<()> {
        self.kv
            .clone()
            .compact(revision, None)
            .await
            .map_err(|e| map_error(e, revision))?;
        Ok(())
    }

    async fn current_revision(&self) -> Result<i64> {
        let resp = self
            .kv
            .clone()
            .get("/", Some(GetOptions::new().with_count_only()))
            .await
            .map_err(|e| map_error(e, 0))?;
        Ok(resp.header().map(|h| h.revision()).unwrap_or(0))
    }
}

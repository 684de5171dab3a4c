//! The embedded backend: one SQLite file (WAL, `synchronous = FULL`), one
//! writer thread doing group commit ([`writer`]), a pool of read-only
//! connections ([`reader`]) and an in-memory fan-out of committed events to
//! watchers ([`hub`]). No polling anywhere: watches are fed by the writer
//! right after each commit, and read older events from the log table.
//!
//! The file is owned by one process at a time (an exclusive lock on
//! `<file>.lock`); a second opener gets [`OpenError::Locked`].

mod hub;
mod reader;
mod schema;
mod writer;

use std::collections::VecDeque;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use self::hub::Hub;
use self::reader::Readers;
use self::writer::{Done, Op, Request, Writer};
use crate::types::{encode_continue, list_start, page_limit};
use crate::watch::{WatchReceiver, DEFAULT_WATCH_CAPACITY};
use crate::{
    check_value_size, Deleted, Error, Event, KeyValue, ListOptions, ListResult, Result, Store,
    WatchStream,
};

/// Events read from history per query while a watch catches up.
const HISTORY_CHUNK: usize = 1_000;

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("database {path} is in use by another process (lock {lock} is held)")]
    Locked { path: PathBuf, lock: PathBuf },

    #[error("database {path} is corrupt or not a Skiff database: {source}")]
    Corrupt {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },

    #[error("cannot open database {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot open database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// Tuning of the embedded store.
#[derive(Debug, Clone)]
pub struct Config {
    /// Events buffered per watcher before it is cut off as too slow.
    pub watch_capacity: usize,
    /// Most write requests committed in one transaction.
    pub max_batch: usize,
    /// When the previous commit carried several writers' requests (so more
    /// are likely on the way), the longest the writer waits for the next
    /// batch to grow (like Postgres' commit_delay). It stops early once no
    /// request has come for twice the recent gap between requests (at
    /// least 100 µs). A lone writer never waits.
    /// Each commit is an fsync, so under concurrency fewer, larger commits
    /// save CPU and disk work.
    pub commit_delay: std::time::Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            watch_capacity: DEFAULT_WATCH_CAPACITY,
            max_batch: 1_024,
            // Measured with `skiff-bench scheduler` (5,000 nodes) and
            // `skiff-bench store`: shorter caps left most commits at a
            // handful of writes; this one cut the server's CPU by a fifth.
            commit_delay: std::time::Duration::from_micros(800),
        }
    }
}

/// The embedded SQLite store. Cheap to clone; the writer stops when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tx: Option<mpsc::UnboundedSender<Request>>,
    writer: Option<std::thread::JoinHandle<()>>,
    hub: Arc<Hub>,
    readers: Arc<Readers>,
    /// Held (locked) for as long as the store is open.
    _lock: File,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel stops the writer after its current batch;
        // wait for it so the file is free once the store is dropped.
        self.tx.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

fn classify(path: &Path, source: rusqlite::Error) -> OpenError {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    match source.sqlite_error_code() {
        Some(NotADatabase | DatabaseCorrupt) => OpenError::Corrupt {
            path: path.to_path_buf(),
            source,
        },
        _ => OpenError::Sqlite {
            path: path.to_path_buf(),
            source,
        },
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Self, OpenError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| OpenError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let lock_path = PathBuf::from(format!("{}.lock", path.display()));
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(OpenError::Locked {
                    path,
                    lock: lock_path,
                })
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let conn = schema::open_writer(&path).map_err(|e| classify(&path, e))?;
        let hub = Arc::new(Hub::new(0, config.watch_capacity));
        let writer = Writer::new(conn, hub.clone(), config.max_batch, config.commit_delay)
            .map_err(|e| classify(&path, e))?;
        hub.publish(&[], writer.revision());
        tracing::info!(
            path = %path.display(),
            revision = writer.revision(),
            compacted = writer.compacted(),
            "opened embedded store"
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = std::thread::Builder::new()
            .name("skiff-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(io)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                tx: Some(tx),
                writer: Some(handle),
                hub,
                readers: Arc::new(Readers::new(path)),
                _lock: lock,
            }),
        })
    }

    async fn write(&self, op: Op) -> Result<Done> {
        let stopped = || Error::Unavailable {
            message: "store writer has stopped".into(),
            source: None,
        };
        let (reply, answer) = oneshot::channel();
        self.inner
            .tx
            .as_ref()
            .ok_or_else(stopped)?
            .send(Request { op, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn unexpected(done: Done) -> Error {
    Error::Unavailable {
        message: format!("store writer answered {done:?} to the wrong request"),
        source: None,
    }
}

/// Where a watch stream is: replaying history, then following the hub.
struct WatchState {
    readers: Arc<Readers>,
    prefix: String,
    /// Revision of the last event delivered (or the start revision).
    after: i64,
    /// History has been read up to here.
    cursor: i64,
    /// History ends here; the live feed starts after it.
    history_until: i64,
    buffer: VecDeque<Event>,
    live: WatchReceiver,
    finished: bool,
}

impl WatchState {
    /// Reads the next slice of history into the buffer.
    async fn fill(&mut self) -> Result<()> {
        let (prefix, after, until) = (self.prefix.clone(), self.cursor, self.history_until);
        let events = self
            .readers
            .with(move |c| reader::history(c, &prefix, after, until, HISTORY_CHUNK))
            .await?;
        self.cursor = match events.last() {
            Some(last) if events.len() == HISTORY_CHUNK => last.revision,
            _ => self.history_until,
        };
        self.buffer.extend(events);
        Ok(())
    }

    async fn next(&mut self) -> Option<Result<Event>> {
        if self.finished {
            return None;
        }
        loop {
            if let Some(event) = self.buffer.pop_front() {
                self.after = event.revision;
                return Some(Ok(event));
            }
            if self.cursor < self.history_until {
                if let Err(e) = self.fill().await {
                    self.finished = true;
                    return Some(Err(e));
                }
                continue;
            }
            match self.live.recv().await? {
                Ok(event) if event.revision <= self.after => continue,
                Ok(event) => {
                    self.after = event.revision;
                    return Some(Ok(event));
                }
                Err(e) => {
                    self.finished = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        check_value_size(&value)?;
        match self
            .write(Op::Create {
                key: key.to_string(),
                value,
            })
            .await?
        {
            Done::Put(kv) => Ok(kv),
            other => Err(unexpected(other)),
        }
    }

    async fn get(&self, key: &str) -> Result<KeyValue> {
        let key = key.to_string();
        self.inner.readers.with(move |c| reader::get(c, &key)).await
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let (start, revision) = list_start(prefix, &opts)?;
        let limit = page_limit(&opts);
        let owned_prefix = prefix.to_string();
        let page = self
            .inner
            .readers
            .with(move |c| reader::list(c, &owned_prefix, &start, revision, limit))
            .await?;
        let continue_token = match (page.more, page.items.last()) {
            (true, Some(last)) => Some(encode_continue(prefix, &last.key, page.revision)),
            _ => None,
        };
        Ok(ListResult {
            items: page.items,
            revision: page.revision,
            continue_token,
        })
    }

    async fn update(&self, key: &str, value: Bytes, expected_revision: i64) -> Result<KeyValue> {
        check_value_size(&value)?;
        match self
            .write(Op::Update {
                key: key.to_string(),
                value,
                expected: expected_revision,
            })
            .await?
        {
            Done::Put(kv) => Ok(kv),
            other => Err(unexpected(other)),
        }
    }

    async fn delete(&self, key: &str, expected_revision: Option<i64>) -> Result<Deleted> {
        match self
            .write(Op::Delete {
                key: key.to_string(),
                expected: expected_revision,
            })
            .await?
        {
            Done::Deleted(d) => Ok(d),
            other => Err(unexpected(other)),
        }
    }

    async fn watch(&self, prefix: &str, after_revision: i64) -> Result<WatchStream> {
        let (live, live_after) = self.inner.hub.subscribe(prefix);
        let mut state = WatchState {
            readers: self.inner.readers.clone(),
            prefix: prefix.to_string(),
            after: after_revision,
            cursor: after_revision,
            history_until: live_after,
            buffer: VecDeque::new(),
            live,
            finished: false,
        };
        // Read the first slice of history now, so that a compacted start
        // revision fails the call itself.
        if after_revision < live_after {
            state.fill().await?;
        }
        Ok(WatchStream::new(futures::stream::unfold(
            state,
            |mut state| async move {
                let item = state.next().await?;
                Some((item, state))
            },
        )))
    }

    async fn compact(&self, revision: i64) -> Result<()> {
        match self.write(Op::Compact { revision }).await? {
            Done::Compacted => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    async fn current_revision(&self) -> Result<i64> {
        Ok(self.inner.hub.published())
    }
}

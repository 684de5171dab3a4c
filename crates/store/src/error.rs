//! The store's error type. Each failure a caller must tell apart is its own
//! variant; the API server maps them to HTTP statuses (NotFound → 404,
//! AlreadyExists / Conflict → 409, Compacted → 410 Gone, TooLarge → 413).

/// Errors from any [`crate::Store`] backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key does not exist (or was deleted).
    #[error("key {key:?} not found")]
    NotFound { key: String },

    /// `create` of a key that already exists.
    #[error("key {key:?} already exists")]
    AlreadyExists { key: String },

    /// A compare-and-swap found a different revision than the caller expected.
    #[error("revision mismatch on {key:?}: expected {expected}, found {actual}")]
    Conflict {
        key: String,
        expected: i64,
        actual: i64,
    },

    /// The requested revision is older than the compaction point.
    #[error("revision {requested} has been compacted (oldest available is {compacted})")]
    Compacted { requested: i64, compacted: i64 },

    /// The requested revision has not happened yet.
    #[error("revision {requested} is in the future (current is {current})")]
    FutureRevision { requested: i64, current: i64 },

    /// A value larger than [`crate::MAX_VALUE_BYTES`].
    #[error("value of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },

    /// A watcher stopped reading and fell behind its bounded buffer; it was
    /// cut off and must re-list and watch again.
    #[error("watcher fell behind by more than {capacity} events and was cut off")]
    WatcherTooSlow { capacity: usize },

    /// A continue token that this store did not issue, or for another prefix.
    #[error("invalid continue token: {reason}")]
    InvalidContinue { reason: String },

    /// The backend cannot serve the request now (I/O failure, lost
    /// connection, writer stopped). The message says why.
    #[error("store unavailable: {message}")]
    Unavailable {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl Error {
    /// An [`Error::Unavailable`] with a cause.
    pub fn unavailable(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Unavailable {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// Result alias for store operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

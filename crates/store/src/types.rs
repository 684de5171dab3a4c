//! The [`Store`] trait and the plain data types it speaks: key-values,
//! watch events, list options and the continue token.

use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::{Error, Result, WatchStream};

/// The largest value a store accepts: 1.5 MiB, etcd's default request limit.
pub const MAX_VALUE_BYTES: usize = 1536 * 1024;

/// One stored key with its value and revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the write that created the key.
    pub create_revision: i64,
    /// Revision of the last write to the key.
    pub mod_revision: i64,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One change delivered by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// The revision of this change.
    pub revision: i64,
    /// The new value; for [`EventKind::Deleted`], the last value before the
    /// delete (its `mod_revision` is that of the last write, not the delete).
    pub kv: KeyValue,
}

/// The result of a delete: the last value and the revision of the delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    pub prev: KeyValue,
    pub revision: i64,
}

/// How to list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// At most this many items; `None` or 0 means all.
    pub limit: Option<usize>,
    /// A token from an earlier page; the page continues that snapshot.
    pub continue_token: Option<String>,
    /// List the snapshot at this revision; `None` means the current one.
    /// Ignored when a continue token is given (the token names its revision).
    pub revision: Option<i64>,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListResult {
    pub items: Vec<KeyValue>,
    /// The revision of the snapshot this page was read from.
    pub revision: i64,
    /// Set when more items follow: pass it back to read the next page.
    pub continue_token: Option<String>,
}

/// A revisioned key-value store with compare-and-swap and watch.
///
/// Every write gets the next global revision. Writes are acknowledged only
/// once durable.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Creates `key`; fails with [`Error::AlreadyExists`] if it exists.
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue>;

    /// Reads the current value of `key`, or [`Error::NotFound`].
    async fn get(&self, key: &str) -> Result<KeyValue>;

    /// Lists the keys under `prefix` in key order, as one consistent snapshot.
    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult>;

    /// Replaces `key` if its current revision is `expected_revision`, else
    /// [`Error::Conflict`] (or [`Error::NotFound`]).
    async fn update(&self, key: &str, value: Bytes, expected_revision: i64) -> Result<KeyValue>;

    /// Deletes `key`, if given only when its revision is `expected_revision`.
    async fn delete(&self, key: &str, expected_revision: Option<i64>) -> Result<Deleted>;

    /// Watches keys under `prefix`, delivering every event with a revision
    /// greater than `after_revision`, in order.
    async fn watch(&self, prefix: &str, after_revision: i64) -> Result<WatchStream>;

    /// Discards history at and before `revision` (the state at `revision`
    /// stays readable).
    async fn compact(&self, revision: i64) -> Result<()>;

    /// The revision of the last acknowledged write.
    async fn current_revision(&self) -> Result<i64>;
}

/// Rejects values over [`MAX_VALUE_BYTES`].
pub fn check_value_size(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::TooLarge {
            size: value.len(),
            limit: MAX_VALUE_BYTES,
        });
    }
    Ok(())
}

/// The smallest key greater than every key that starts with `prefix`
/// (empty when there is none, i.e. "to the end").
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    end
}

/// The continue token, in the shape the Kubernetes API server uses:
/// base64 of `{"v":"meta.k8s.io/v1","rv":R,"start":"<key suffix>"}`.
#[derive(Debug, Serialize, Deserialize)]
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
}

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// Encodes a token that resumes the snapshot at `revision` just after
/// `last_key` (which must start with `prefix`).
pub fn encode_continue(prefix: &str, last_key: &str, revision: i64) -> String {
    let suffix = last_key.strip_prefix(prefix).unwrap_or(last_key);
    let token = ContinueToken {
        v: TOKEN_VERSION.to_string(),
        rv: revision,
        start: format!("{suffix}\u{0}"),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(json)
}

/// Decodes a continue token into (first key to read, snapshot revision).
pub(crate) fn decode_continue(prefix: &str, token: &str) -> Result<(String, i64)> {
    let invalid = |reason: &str| Error::InvalidContinue {
        reason: reason.to_string(),
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| invalid("not base64"))?;
    let token: ContinueToken = serde_json::from_slice(&raw).map_err(|_| invalid("not JSON"))?;
    if token.v != TOKEN_VERSION {
        return Err(invalid("unknown version"));
    }
    if token.rv <= 0 {
        return Err(invalid("no resource version"));
    }
    // The start key is always appended to the list's own prefix, so a
    // token can never read outside it.
    Ok((format!("{prefix}{}", token.start), token.rv))
}

/// Resolves the start key and snapshot revision of a list request.
pub(crate) fn list_start(prefix: &str, opts: &ListOptions) -> Result<(String, Option<i64>)> {
    match &opts.continue_token {
        Some(token) => {
            let (start, rv) = decode_continue(prefix, token)?;
            Ok((start, Some(rv)))
        }
        None => Ok((prefix.to_string(), opts.revision.filter(|r| *r > 0))),
    }
}

/// The page size a list request asks for (`None` = unlimited).
pub(crate) fn page_limit(opts: &ListOptions) -> Option<usize> {
    opts.limit.filter(|l| *l > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_byte() {
        assert_eq!(prefix_end(b"/registry/pods/"), b"/registry/pods0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), Vec::<u8>::new());
    }

    #[test]
    fn continue_token_round_trips() {
        let token = encode_continue("/registry/pods/", "/registry/pods/default/web", 42);
        let (start, rv) = decode_continue("/registry/pods/", &token).unwrap();
        assert_eq!(start, "/registry/pods/default/web\u{0}");
        assert_eq!(rv, 42);
    }

    #[test]
    fn bad_continue_tokens_are_rejected() {
        for token in ["%%%", "bm90IGpzb24=", ""] {
            assert!(matches!(
                decode_continue("/p/", token),
                Err(Error::InvalidContinue { .. })
            ));
        }
    }

    #[test]
    fn size_limit() {
        assert!(check_value_size(&vec![0; MAX_VALUE_BYTES]).is_ok());
        assert!(matches!(
            check_value_size(&vec![0; MAX_VALUE_BYTES + 1]),
            Err(Error::TooLarge { .. })
        ));
    }
}

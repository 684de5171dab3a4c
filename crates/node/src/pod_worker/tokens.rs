//! The agent's service-account token cache (upstream kubelet's
//! `token.Manager`): the tokens of `serviceAccountToken` projections,
//! requested through TokenRequest bound to their pod, kept until they need
//! refreshing (more than 80 % of their life gone, or older than 24 h) and
//! dropped when their pod goes. A refresh that fails keeps serving the old
//! token while it is still valid.
//!
//! It owns only the cache; asking the API is a [`Requester`]'s and writing
//! the volume is `super::volume_sources`'. The clock is injectable
//! ([`Clock`]) so rotation is tested without waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

/// Why no token could be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to fetch token: {0}")]
    Request(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Upstream's `maxTTL`: a token older than this is refreshed whatever its
/// expiry.
pub const MAX_TTL_SECONDS: i64 = 24 * 60 * 60;

/// The time, in Unix seconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> i64;
}

/// The host's clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        chrono::Utc::now().timestamp()
    }
}

/// What a token is requested for (the cache key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub namespace: String,
    pub service_account: String,
    /// Empty: the API server's audience.
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    pub pod_name: String,
    pub pod_uid: String,
}

/// A token the API issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub token: String,
    /// Unix seconds.
    pub expires: i64,
}

/// Asks the API for a token.
#[async_trait]
pub trait Requester: Send + Sync {
    async fn request(&self, key: &Key) -> Result<Issued>;
}

/// The cache; one per agent, shared by its pod workers.
#[derive(Debug)]
pub struct TokenManager {
    clock: Arc<dyn Clock>,
    cache: Mutex<HashMap<Key, Issued>>,
}

impl Default for TokenManager {
    fn default() -> Self {
        Self::new(Arc::new(SystemClock))
    }
}

/// When a token issued for `seconds` and expiring at `expires` is to be
/// refreshed: at 80 % of its life, or 24 h after it was issued.
pub fn refresh_at(expires: i64, seconds: i64) -> i64 {
    let issued = expires - seconds;
    (issued + MAX_TTL_SECONDS).min(expires - seconds * 20 / 100)
}

impl TokenManager {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        TokenManager {
            clock,
            cache: Mutex::default(),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Issued>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The token for `key` and when to ask again (Unix seconds): the
    /// cached one while it is fresh, else a new one from `requester` (or
    /// the cached one, still valid, if that fails).
    pub async fn get(&self, requester: &dyn Requester, key: &Key) -> Result<(String, i64)> {
        let now = self.clock.now();
        let cached = self.cache().get(key).cloned();
        if let Some(t) = &cached {
            let at = refresh_at(t.expires, key.expiration_seconds);
            if now < at {
                return Ok((t.token.clone(), at));
            }
        }
        match requester.request(key).await {
            Ok(issued) => {
                let at = refresh_at(issued.expires, key.expiration_seconds);
                let token = issued.token.clone();
                self.cache().insert(key.clone(), issued);
                Ok((token, at))
            }
            Err(e) => match cached {
                Some(t) if now < t.expires => {
                    tracing::warn!(pod = %key.pod_name, error = %e, "cannot refresh a service-account token; keeping the current one");
                    // Try again in a minute.
                    Ok((t.token, now + 60))
                }
                _ => Err(e),
            },
        }
    }

    /// Whether a token for `key` is cached and not yet due for refresh.
    pub fn fresh(&self, key: &Key) -> bool {
        let now = self.clock.now();
        self.cache()
            .get(key)
            .is_some_and(|t| now < refresh_at(t.expires, key.expiration_seconds))
    }

    /// Drops the tokens of pod `uid` (it is gone), and any expired ones.
    pub fn forget_pod(&self, uid: &str) {
        let now = self.clock.now();
        self.cache()
            .retain(|k, t| k.pod_uid != uid && t.expires > now);
    }

    /// How many tokens are cached.
    pub fn len(&self) -> usize {
        self.cache().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    #[derive(Debug, Default)]
    struct FakeClock(AtomicI64);

    impl Clock for FakeClock {
        fn now(&self) -> i64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// Issues `token-N` valid `expiration_seconds` from the fake clock's
    /// time; fails while `down` is set.
    struct FakeApi {
        clock: Arc<FakeClock>,
        calls: AtomicUsize,
        down: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl Requester for FakeApi {
        async fn request(&self, key: &Key) -> Result<Issued> {
            if self.down.load(Ordering::SeqCst) {
                return Err(Error::Request("connection refused".into()));
            }
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(Issued {
                token: format!("token-{n}"),
                expires: self.clock.now() + key.expiration_seconds,
            })
        }
    }

    fn key(uid: &str, seconds: i64) -> Key {
        Key {
            namespace: "ns".into(),
            service_account: "default".into(),
            audiences: vec![],
            expiration_seconds: seconds,
            pod_name: "p".into(),
            pod_uid: uid.into(),
        }
    }

    #[tokio::test]
    async fn tokens_rotate_at_80_percent_of_their_life() {
        let clock = Arc::new(FakeClock(AtomicI64::new(1_000_000)));
        let api = FakeApi {
            clock: clock.clone(),
            calls: AtomicUsize::new(0),
            down: Default::default(),
        };
        let tokens = TokenManager::new(clock.clone());
        let k = key("u1", 3600);
        let (first, at) = tokens.get(&api, &k).await.unwrap();
        assert_eq!(first, "token-0");
        assert_eq!(at, 1_000_000 + 2880);
        // Until 80 % of the hour: the same token, no request.
        clock.0.store(1_000_000 + 2879, Ordering::SeqCst);
        assert_eq!(tokens.get(&api, &k).await.unwrap().0, "token-0");
        assert_eq!(api.calls.load(Ordering::SeqCst), 1);
        assert!(tokens.fresh(&k));
        // Past it: a new one.
        clock.0.store(1_000_000 + 2880, Ordering::SeqCst);
        assert!(!tokens.fresh(&k));
        let (second, at) = tokens.get(&api, &k).await.unwrap();
        assert_eq!(second, "token-1");
        assert_eq!(at, 1_000_000 + 2880 + 2880);
        // The API down at the next refresh: the old token while valid...
        api.down.store(true, Ordering::SeqCst);
        clock.0.store(1_000_000 + 2880 + 3000, Ordering::SeqCst);
        assert_eq!(tokens.get(&api, &k).await.unwrap().0, "token-1");
        // ...and an error once it has expired.
        clock.0.store(1_000_000 + 2880 + 3601, Ordering::SeqCst);
        assert!(tokens.get(&api, &k).await.is_err());
    }

    #[tokio::test]
    async fn long_tokens_rotate_after_a_day_and_go_with_their_pod() {
        let clock = Arc::new(FakeClock(AtomicI64::new(0)));
        let api = FakeApi {
            clock: clock.clone(),
            calls: AtomicUsize::new(0),
            down: Default::default(),
        };
        let tokens = TokenManager::new(clock.clone());
        let week = key("u1", 7 * 24 * 3600);
        let (_, at) = tokens.get(&api, &week).await.unwrap();
        assert_eq!(at, MAX_TTL_SECONDS);
        tokens.get(&api, &key("u2", 3600)).await.unwrap();
        assert_eq!(tokens.len(), 2);
        tokens.forget_pod("u1");
        assert_eq!(tokens.len(), 1);
        tokens.forget_pod("u2");
        assert!(tokens.is_empty());
    }
}

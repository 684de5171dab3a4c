//! A client-side request rate limit, as client-go's token bucket
//! (`--kube-api-qps`, `--kube-api-burst`): a bucket of `burst` tokens
//! refilled at `qps` per second; each request but a watch takes one and
//! waits for it when the bucket is empty. A watch is one long request, and
//! client-go does not hold it up either once it is open.
//!
//! This module owns [`limit`] (wrap a kube client) and the bucket. It does
//! not retry or reorder requests.

use std::sync::Arc;
use std::time::Duration;

use kube::client::Body;
use kube::Client;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// A token bucket.
#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            at: Instant::now(),
        }
    }

    /// Takes a token at `now`: how long the caller must wait before its
    /// request may go (the token is spent either way, as a reservation).
    fn take(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// Whether `uri` opens a watch (not limited).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

/// `client` with at most `qps` requests a second after a burst of `burst`
/// (watches not counted). A `qps` of zero or less means no limit.
pub fn limit(client: Client, qps: f32, burst: u32) -> Client {
    if qps <= 0.0 {
        return client;
    }
    let bucket = Arc::new(Mutex::new(Bucket::new(f64::from(qps), burst)));
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let client = client.clone();
        let bucket = bucket.clone();
        async move {
            if !is_watch(request.uri()) {
                let wait = bucket.lock().await.take(Instant::now());
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
            client.send(request).await
        }
    });
    Client::new(service, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_one_token_per_period() {
        let start = Instant::now();
        let mut bucket = Bucket::new(10.0, 3);
        bucket.at = start;
        for _ in 0..3 {
            assert_eq!(bucket.take(start), Duration::ZERO);
        }
        // The fourth waits a tenth of a second, the fifth two tenths.
        let fourth = bucket.take(start);
        let fifth = bucket.take(start);
        assert!((fourth.as_secs_f64() - 0.1).abs() < 1e-9, "{fourth:?}");
        assert!((fifth.as_secs_f64() - 0.2).abs() < 1e-9, "{fifth:?}");
        // After a second the bucket is full again (and no fuller).
        let later = start + Duration::from_secs(10);
        for _ in 0..3 {
            assert_eq!(bucket.take(later), Duration::ZERO);
        }
        assert!(bucket.take(later) > Duration::ZERO);
    }

    #[test]
    fn watches_are_not_limited() {
        assert!(is_watch(
            &"/api/v1/pods?watch=true&resourceVersion=1".parse().unwrap()
        ));
        assert!(!is_watch(&"/api/v1/pods?limit=500".parse().unwrap()));
        assert!(!is_watch(
            &"/api/v1/namespaces/default/pods".parse().unwrap()
        ));
    }
}

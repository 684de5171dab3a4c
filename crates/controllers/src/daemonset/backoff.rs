//! The back-off on deleting failed daemon pods per (set, node) (upstream's
//! `failedPodsBackoff`, client-go's `flowcontrol.Backoff` from 1 s to
//! 15 min): a kubelet that keeps rejecting the pod does not make the
//! controller delete and recreate it in a hot loop.
//!
//! Bookkeeping only; no I/O.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first delay.
pub const INITIAL: Duration = Duration::from_secs(1);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(15 * 60);

/// Delays per key: (last time, current delay).
#[derive(Debug, Default)]
pub struct Backoff(Mutex<HashMap<String, (Instant, Duration)>>);

impl Backoff {
    /// How long `key` must still wait at `now` (`None`: it may go).
    pub fn waiting(&self, key: &str, now: Instant) -> Option<Duration> {
        let entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (last, delay) = entries.get(key)?;
        let since = now.saturating_duration_since(*last);
        (since < *delay).then(|| *delay - since)
    }

    /// `key` goes now: its next delay doubles (or starts again at
    /// [`INITIAL`] after a long quiet spell).
    pub fn next(&self, key: &str, now: Instant) {
        let mut entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, (last, _)| now.saturating_duration_since(*last) <= 2 * MAX);
        let entry = entries
            .entry(key.to_string())
            .or_insert((now, Duration::ZERO));
        entry.1 = if entry.1.is_zero() {
            INITIAL
        } else {
            (entry.1 * 2).min(MAX)
        };
        entry.0 = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let b = Backoff::default();
        let t0 = Instant::now();
        assert_eq!(b.waiting("k", t0), None);
        b.next("k", t0);
        assert_eq!(b.waiting("k", t0), Some(INITIAL));
        assert_eq!(b.waiting("k", t0 + INITIAL), None);
        b.next("k", t0 + INITIAL);
        assert_eq!(b.waiting("k", t0 + INITIAL), Some(2 * INITIAL));
        for i in 0..20 {
            b.next("k", t0 + INITIAL * (i + 2));
        }
        let last = t0 + INITIAL * 21;
        assert_eq!(b.waiting("k", last), Some(MAX));
        assert_eq!(b.waiting("other", last), None);
    }
}

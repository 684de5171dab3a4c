//! [`Backoff`]: per-key exponential back-off as upstream's
//! `flowcontrol.Backoff`, used for crash loops (key: pod UID + container)
//! and image pulls (key: pod UID + image). 10 s doubling to 300 s; an
//! entry untouched for 600 s starts again from 10 s. Pure: the caller
//! passes the time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The crash-loop and image-pull back-off's first step.
pub const INITIAL: Duration = Duration::from_secs(10);
/// Its cap.
pub const MAX: Duration = Duration::from_secs(300);
/// Quiet time after which an entry starts over.
pub const RESET_AFTER: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: Instant,
}

/// Back-off per key.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    reset_after: Duration,
    entries: HashMap<String, Entry>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(INITIAL, MAX, RESET_AFTER)
    }
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration, reset_after: Duration) -> Self {
        Self {
            initial,
            max,
            reset_after,
            entries: HashMap::new(),
        }
    }

    /// Records one more failure at `now`: the first (or the first after a
    /// quiet spell) waits `initial`, each next one twice the last, capped.
    pub fn next(&mut self, key: &str, now: Instant) {
        let entry = match self.entries.get(key) {
            Some(e) if now.saturating_duration_since(e.last_update) <= self.reset_after => Entry {
                backoff: (e.backoff * 2).min(self.max),
                last_update: now,
            },
            _ => Entry {
                backoff: self.initial,
                last_update: now,
            },
        };
        self.entries.insert(key.to_string(), entry);
    }

    /// Whether something that happened at `event` (a container's exit, a
    /// failed pull) is still inside its back-off at `now`.
    pub fn in_backoff_since(&self, key: &str, event: Instant, now: Instant) -> bool {
        match self.entries.get(key) {
            None => false,
            Some(e) if now.saturating_duration_since(e.last_update) > self.reset_after => false,
            Some(e) => now.saturating_duration_since(event) < e.backoff,
        }
    }

    /// The current step for `key` (for messages such as "back-off 20s").
    pub fn current(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|e| e.backoff)
    }

    /// When the back-off for an `event` at that instant ends.
    pub fn until(&self, key: &str, event: Instant) -> Option<Instant> {
        self.entries.get(key).map(|e| event + e.backoff)
    }

    /// When `key` last failed.
    pub fn last_update(&self, key: &str) -> Option<Instant> {
        self.entries.get(key).map(|e| e.last_update)
    }

    /// Forgets `key` (the pod is gone).
    pub fn forget(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Forgets every key starting with `prefix`.
    pub fn forget_prefix(&mut self, prefix: &str) {
        self.entries.retain(|k, _| !k.starts_with(prefix));
    }
}

/// "10s", "5m0s": Go's `time.Duration.String` for whole seconds, as the
/// kubelet prints back-offs.
pub fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{}h{}m{}s", s / 3600, (s % 3600) / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets_after_quiet() {
        let mut b = Backoff::default();
        let t0 = Instant::now();
        let mut steps = vec![];
        for i in 0..7 {
            b.next("k", t0 + Duration::from_secs(i));
            steps.push(b.current("k").map(|d| d.as_secs()));
        }
        assert_eq!(steps, [10, 20, 40, 80, 160, 300, 300].map(Some).to_vec());
        b.next("k", t0 + Duration::from_secs(7 + 601));
        assert_eq!(b.current("k"), Some(INITIAL));
    }

    #[test]
    fn in_backoff_is_measured_from_the_event() {
        let mut b = Backoff::default();
        let t0 = Instant::now();
        assert!(!b.in_backoff_since("k", t0, t0));
        b.next("k", t0);
        assert!(b.in_backoff_since("k", t0, t0 + Duration::from_secs(9)));
        assert!(!b.in_backoff_since("k", t0, t0 + Duration::from_secs(10)));
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(160)), "2m40s");
    }
}

//! client-go's event correlation before an event is written, as pure
//! functions of the event and the time (no I/O):
//!
//! - the spam filter: a token bucket per source and object (and type,
//!   reason and message), 25 events at once and one more every 5 minutes,
//!   as client-go's `EventSourceObjectSpamFilter`;
//! - aggregation: once 10 events with the same source, object, type and
//!   reason but different messages have come within 10 minutes, further
//!   ones are folded into one event whose message starts with
//!   `(combined from similar events): `, as client-go's `EventAggregator`.
//!
//! Deduplication of identical events (the `count`) is the recorder's.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Events a source may send about one object at once.
pub const SPAM_BURST: f64 = 25.0;
/// And then one every this long.
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Distinct messages before similar events are combined.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long similar events count toward that.
pub const AGGREGATE_WINDOW: Duration = Duration::from_secs(600);
/// The prefix of a combined event's message.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";
/// Keys remembered, as client-go's LRU; past twice that, the half least
/// recently seen is forgotten at once (amortized O(log n) per event).
const MAX_KEYS: usize = 4096;

/// What identifies an event for correlation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// Source component and host, involved object (kind, namespace, name,
    /// uid, apiVersion), type and reason, joined.
    pub aggregate: String,
    pub message: String,
}

/// What to do with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Write it as it is.
    Write,
    /// Write it folded into the combined event of its kind, with this
    /// message.
    Combine(String),
    /// Drop it (the source is spamming this object).
    Drop,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Debug)]
struct Similar {
    messages: HashSet<String>,
    last: Instant,
}

/// The correlator's memory.
#[derive(Debug, Default)]
pub struct Correlator {
    buckets: HashMap<String, Bucket>,
    similar: HashMap<String, Similar>,
}

impl Correlator {
    /// Decides about one event seen at `now`.
    pub fn observe(&mut self, key: &EventKey, now: Instant) -> Verdict {
        let spam_key = format!("{}\u{0}{}", key.aggregate, key.message);
        if !self.take_token(&spam_key, now) {
            return Verdict::Drop;
        }
        let similar = self
            .similar
            .entry(key.aggregate.clone())
            .or_insert_with(|| Similar {
                messages: HashSet::new(),
                last: now,
            });
        if now.duration_since(similar.last) > AGGREGATE_WINDOW {
            similar.messages.clear();
        }
        similar.last = now;
        similar.messages.insert(key.message.clone());
        let combine = similar.messages.len() >= AGGREGATE_MAX_EVENTS;
        if combine {
            // Do not grow the set past the limit (client-go pops one).
            if let Some(any) = similar.messages.iter().next().cloned() {
                similar.messages.remove(&any);
            }
        }
        self.bound();
        if combine {
            Verdict::Combine(format!("{COMBINED_PREFIX}{}", key.message))
        } else {
            Verdict::Write
        }
    }

    fn take_token(&mut self, key: &str, now: Instant) -> bool {
        let bucket = self.buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: SPAM_BURST,
            at: now,
        });
        let refill = now.duration_since(bucket.at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        bucket.tokens = (bucket.tokens + refill).min(SPAM_BURST);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }

    /// Bounds memory (see [`MAX_KEYS`]).
    fn bound(&mut self) {
        fn halve<V>(map: &mut HashMap<String, V>, at: impl Fn(&V) -> Instant) {
            if map.len() <= 2 * MAX_KEYS {
                return;
            }
            let mut seen: Vec<(Instant, String)> =
                map.iter().map(|(k, v)| (at(v), k.clone())).collect();
            seen.sort_unstable();
            for (_, k) in seen.into_iter().take(map.len() - MAX_KEYS) {
                map.remove(&k);
            }
        }
        halve(&mut self.buckets, |b| b.at);
        halve(&mut self.similar, |s| s.last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(message: &str) -> EventKey {
        EventKey {
            aggregate: "scheduler/Pod/d/web/uid/v1/Warning/FailedScheduling".into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_burst_of_25_then_one_every_five_minutes() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        for _ in 0..25 {
            assert_eq!(c.observe(&key("same"), t0), Verdict::Write);
        }
        assert_eq!(c.observe(&key("same"), t0), Verdict::Drop);
        assert_eq!(
            c.observe(&key("same"), t0 + Duration::from_secs(299)),
            Verdict::Drop
        );
        assert_eq!(
            c.observe(&key("same"), t0 + Duration::from_secs(301)),
            Verdict::Write
        );
    }

    #[test]
    fn the_tenth_distinct_message_is_combined_until_the_window_passes() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        for i in 0..9 {
            assert_eq!(c.observe(&key(&format!("m{i}")), t0), Verdict::Write);
        }
        assert_eq!(
            c.observe(&key("m9"), t0),
            Verdict::Combine("(combined from similar events): m9".into())
        );
        assert_eq!(
            c.observe(&key("m10"), t0 + Duration::from_secs(1)),
            Verdict::Combine("(combined from similar events): m10".into())
        );
        let later = t0 + AGGREGATE_WINDOW + Duration::from_secs(2);
        assert_eq!(c.observe(&key("m11"), later), Verdict::Write);
    }

    #[test]
    fn memory_is_bounded() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        for i in 0..(3 * MAX_KEYS) {
            let k = EventKey {
                aggregate: format!("object-{i}"),
                message: "m".into(),
            };
            c.observe(&k, t0 + Duration::from_millis(i as u64));
        }
        assert!(c.buckets.len() <= 2 * MAX_KEYS && c.similar.len() <= 2 * MAX_KEYS);
    }
}

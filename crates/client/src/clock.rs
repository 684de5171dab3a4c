//! Time as a boundary: the [`Clock`] trait, the real [`SystemClock`] and a
//! [`FakeClock`] that tests advance by hand.
//!
//! This module owns only "what time is it now" as a monotonic
//! [`Instant`]. It must not sleep or schedule wake-ups; callers that wait
//! ask the clock for `now` and compute deadlines themselves.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A source of monotonic time.
pub trait Clock: std::fmt::Debug + Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The process's monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone)]
pub struct FakeClock {
    now: Arc<Mutex<Instant>>,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A fake clock starting at the real current instant.
    pub fn new() -> Self {
        Self {
            now: Arc::new(Mutex::new(Instant::now())),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

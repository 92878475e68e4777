//! Stopping a live run: a signal (SIGINT, SIGTERM), a key in the terminal view, the end
//! of `--duration`, or an error. The first stop ends reading and the run still writes
//! its report; a second signal exits at once.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

/// Why a live run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `--duration` ran out (or a replay reached the end of its file).
    Duration,
    /// SIGINT or SIGTERM.
    Signal,
    /// `q`, Esc or Ctrl-C in the terminal view.
    Key,
    /// The source failed.
    Error,
}

impl StopReason {
    /// The word the report uses (`files[].live.stopped_by`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Duration => "duration",
            Self::Signal => "signal",
            Self::Key => "key",
            Self::Error => "error",
        }
    }

    fn code(self) -> u8 {
        match self {
            Self::Duration => 1,
            Self::Signal => 2,
            Self::Key => 3,
            Self::Error => 4,
        }
    }
}

/// The stop flag every thread of a live run watches.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    signalled: Arc<AtomicBool>,
    reason: Arc<AtomicU8>,
}

impl Stop {
    /// A flag that SIGINT and SIGTERM set; a second one of either exits the process at
    /// once with 128 + the signal number, as shells report it.
    pub fn with_signals() -> std::io::Result<Self> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Self::default();
        for sig in [SIGINT, SIGTERM] {
            // The conditional shutdown is registered first: it sees the flag as the
            // previous signal left it.
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&stop.signalled))?;
            signal_hook::flag::register(sig, Arc::clone(&stop.signalled))?;
        }
        Ok(stop)
    }

    /// Stops the run for `why` (the first reason given is kept).
    pub fn set(&self, why: StopReason) {
        let _ = self.reason.compare_exchange(0, why.code(), Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Whether the run is to stop.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.signalled.load(Ordering::Relaxed) || self.reason.load(Ordering::Relaxed) != 0
    }

    /// Why it stopped (a signal wins: it came from outside), `None` while running.
    pub fn reason(&self) -> Option<StopReason> {
        if self.signalled.load(Ordering::SeqCst) {
            return Some(StopReason::Signal);
        }
        [StopReason::Duration, StopReason::Signal, StopReason::Key, StopReason::Error]
            .into_iter()
            .find(|r| r.code() == self.reason.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_is_kept() {
        let s = Stop::default();
        assert!(!s.is_set() && s.reason().is_none());
        s.set(StopReason::Key);
        s.set(StopReason::Duration);
        assert!(s.is_set());
        assert_eq!(s.reason(), Some(StopReason::Key));
    }
}

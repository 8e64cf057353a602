//! Riding out transient faults (contract C18, "Transient faults").
//!
//! A server that restarts, or an administrator who terminates a session,
//! makes the call in flight fail with `Unavailable` of kind
//! [`Unreachable`](UnavailableKind::Unreachable) although the server may be
//! back a moment later. The `Store` retries such a port call, on a fresh
//! connection (an adapter drops a connection a statement failed on), with a
//! short pause that doubles from [`FIRST_PAUSE`] to [`LONGEST_PAUSE`], for
//! at most its retry window ([`DEFAULT_RETRY_WINDOW`] unless
//! `Store::with_retry_window` says otherwise) counted from the first
//! failure. Then it gives up with the last error, still `Unreachable`, its
//! message saying how long it tried.
//!
//! Only `Unreachable` is retried here: `Locked` has the engine's own wait
//! (SQLite's busy timeout), `Contended` is what the race loop already gave
//! up on, and every other kind needs someone to act.
//!
//! Retrying is safe because every write is a decision the domain replays:
//! a write whose first attempt committed before its reply was lost finds
//! its own result on the retry and returns it (see the contract).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{StoreError, StoreResult, UnavailableKind};

/// How many calls the stores of this process have tried again after
/// finding the server unreachable.
static RETRIES: AtomicU64 = AtomicU64::new(0);

/// How many times the stores of this process have tried a call again
/// after finding the server unreachable, since the process started: what
/// a service reports as its store retries (`/metrics`).
pub fn retries_total() -> u64 {
    RETRIES.load(Ordering::Relaxed)
}

/// How long a `Store` retries a call that found the server unreachable,
/// counted from the first failure, unless `Store::with_retry_window` says
/// otherwise: longer than a server's fast restart.
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(10);

/// The pause before the first retry.
pub const FIRST_PAUSE: Duration = Duration::from_millis(20);

/// The longest pause between two attempts; pauses double up to it.
pub const LONGEST_PAUSE: Duration = Duration::from_millis(500);

/// The retries of one call: when the first attempt failed, the next pause
/// and how many attempts failed.
#[derive(Debug)]
pub(crate) struct Retries {
    window: Duration,
    first_failure: Option<Instant>,
    pause: Duration,
    failed: u32,
}

impl Retries {
    /// No failure yet; retries for at most `window` after the first one.
    pub(crate) fn new(window: Duration) -> Self {
        Self {
            window,
            first_failure: None,
            pause: FIRST_PAUSE,
            failed: 0,
        }
    }

    /// After an attempt at `what` failed with `error`: pauses and returns
    /// `Ok(())` when another attempt may get past it (the server was
    /// unreachable and the window leaves room for the pause); otherwise
    /// returns the error to give the caller, which says how long it tried.
    pub(crate) async fn after_failure(&mut self, what: &str, error: StoreError) -> StoreResult<()> {
        if error.unavailable_kind() != Some(UnavailableKind::Unreachable) || self.window.is_zero() {
            return Err(error);
        }
        let first_failure = *self.first_failure.get_or_insert_with(Instant::now);
        self.failed += 1;
        let tried_for = first_failure.elapsed();
        if tried_for + self.pause > self.window {
            return Err(self.gave_up(what, error, tried_for));
        }
        tracing::info!(
            attempt = self.failed,
            pause_ms = u64::try_from(self.pause.as_millis()).unwrap_or(u64::MAX),
            "{what}: the server was unreachable ({}); retrying in {:?}",
            error.message(),
            self.pause
        );
        RETRIES.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
        Ok(())
    }

    fn gave_up(&self, what: &str, error: StoreError, tried_for: Duration) -> StoreError {
        let message = format!(
            "{}; gave up on {what} after {} attempts over {:.1} s (the store's retry window is \
             {:?})",
            error.message(),
            self.failed,
            tried_for.as_secs_f64(),
            self.window
        );
        StoreError::unavailable_because(UnavailableKind::Unreachable, message, error)
    }
}

/// Runs `call` until it succeeds, fails with anything but an unreachable
/// server, or the retry `window` is spent: each attempt is the same port
/// call again. `what` names the call in the log and in the final error
/// ("gave up on {what} after ...").
///
/// # Errors
/// The first error that is not `Unreachable`, or the last `Unreachable`
/// one once the window is spent, its message saying how long it tried.
pub async fn retry<T, F, Fut>(window: Duration, what: &str, mut call: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let mut retries = Retries::new(window);
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(error) => retries.after_failure(what, error).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn unreachable() -> StoreError {
        StoreError::unavailable(UnavailableKind::Unreachable, "server down")
    }

    #[tokio::test]
    async fn an_unreachable_server_is_retried_until_it_answers() {
        let calls = AtomicU32::new(0);
        let answer = retry(Duration::from_secs(5), "test", || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                Err(unreachable())
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(answer.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn other_failures_are_not_retried() {
        for kind in UnavailableKind::ALL {
            if kind == UnavailableKind::Unreachable {
                continue;
            }
            let calls = AtomicU32::new(0);
            let answer: StoreResult<()> = retry(Duration::from_secs(5), "test", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::unavailable(kind, "no"))
            })
            .await;
            assert_eq!(answer.unwrap_err().unavailable_kind(), Some(kind));
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{kind}");
        }
        let calls = AtomicU32::new(0);
        let answer: StoreResult<()> = retry(Duration::from_secs(5), "test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::NotFound("x".into()))
        })
        .await;
        assert!(answer.unwrap_err().is_not_found());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_zero_window_fails_at_once_with_the_error_unchanged() {
        let calls = AtomicU32::new(0);
        let answer: StoreResult<()> = retry(Duration::ZERO, "test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(unreachable())
        })
        .await;
        let error = answer.unwrap_err();
        assert_eq!(error.unavailable_kind(), Some(UnavailableKind::Unreachable));
        assert_eq!(error.message(), "server down");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_server_that_stays_down_gives_up_within_the_window_saying_so() {
        let calls = AtomicU32::new(0);
        let window = Duration::from_millis(290);
        let started = Instant::now();
        let answer: StoreResult<()> = retry(window, "loading handoff x", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(unreachable())
        })
        .await;
        let took = started.elapsed();
        let error = answer.unwrap_err();
        assert_eq!(error.unavailable_kind(), Some(UnavailableKind::Unreachable));
        assert!(error
            .message()
            .starts_with("server down; gave up on loading handoff x after "));
        assert!(error.message().contains("retry window is 290ms"), "{error}");
        // 20 + 40 + 80 ms pauses fit in 290 ms, 160 more would not.
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert!(
            took >= Duration::from_millis(140) && took <= window,
            "{took:?}"
        );
        assert!(std::error::Error::source(&error).is_some());
    }
}

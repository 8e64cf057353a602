//! The busy handler of every SQLite connection the store makes: when
//! another connection holds the lock a statement needs, sleep a short,
//! jittered while and try again, until the store's busy timeout.
//!
//! SQLite's own handler (what `busy_timeout` installs) sleeps 1, 2, 5, 10,
//! 15, 20, 25, 25, 25, 50, 50 and then 100 ms between tries. With many
//! writers on one file each waiter soon sleeps 25-100 ms while the lock
//! is free again after a fraction of a millisecond, so 16 concurrent
//! callers made about a tenth of the lifecycles one caller makes alone
//! (`docs/history/BENCHMARKS-2026-12.md`). This handler sleeps 50 µs at
//! first, doubling
//! to at most [`LONGEST_SLEEP`], each sleep drawn at random between half
//! and one and a half times that, so waiters that started together do not
//! retry together. It gives up once the busy timeout has passed since the
//! statement's first busy try, and the statement then fails with
//! `SQLITE_BUSY`, which the store reports as `Unavailable` (`locked`).
//!
//! sqlx 0.8 has no call for a busy handler, so this module calls SQLite's
//! C API (`sqlite3_busy_handler`) on the connection's raw handle: the one
//! place of the workspace with `unsafe` code. What makes it sound:
//!
//! - the handle is borrowed through sqlx's `LockedSqliteHandle`, which
//!   keeps the connection's worker thread from using it meanwhile, and
//!   `sqlite3_busy_handler` only stores a function and an argument in it;
//! - the argument is the timeout in milliseconds carried in the pointer's
//!   address, never dereferenced, so nothing can dangle or leak however
//!   long the connection lives;
//! - the handler is a plain Rust function that cannot panic (no
//!   arithmetic that overflows, no allocation), so nothing unwinds into C.

#![allow(unsafe_code)]

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::ffi::{c_int, c_void};
use std::hash::{BuildHasher as _, Hasher as _};
use std::time::{Duration, Instant};

use libsqlite3_sys::{sqlite3_busy_handler, SQLITE_OK};
use sqlx::sqlite::SqliteConnection;

use super::MAX_BUSY_TIMEOUT;

/// The first sleep of a statement kept waiting.
const FIRST_SLEEP: Duration = Duration::from_micros(50);

/// The longest sleep between two tries (before jitter).
pub(super) const LONGEST_SLEEP: Duration = Duration::from_millis(1);

thread_local! {
    /// When the statement this thread runs first found its lock busy.
    /// SQLite calls the handler on the thread that runs the statement,
    /// with a count that is 0 on the first busy try of each statement.
    static BUSY_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// This thread's state of a xorshift generator for the jitter; 0
    /// until first used.
    static JITTER: Cell<u64> = const { Cell::new(0) };
}

/// Replaces `conn`'s busy handler with this module's, waiting up to
/// `timeout` (at most [`MAX_BUSY_TIMEOUT`]) for a busy lock.
///
/// # Errors
/// The connection's worker thread is gone, or SQLite refused the call.
pub(super) async fn install(
    conn: &mut SqliteConnection,
    timeout: Duration,
) -> Result<(), sqlx::Error> {
    let millis = usize::try_from(timeout.min(MAX_BUSY_TIMEOUT).as_millis()).unwrap_or(usize::MAX);
    let mut locked = conn.lock_handle().await?;
    let handle = locked.as_raw_handle();
    // SAFETY: `handle` is the live connection's `sqlite3*`, and `locked`
    // keeps its worker thread off it until this call returns. The handler
    // is a function with SQLite's signature that never unwinds, and its
    // argument is an integer that is never dereferenced.
    let code = unsafe {
        sqlite3_busy_handler(
            handle.as_ptr(),
            Some(on_busy),
            std::ptr::without_provenance_mut::<c_void>(millis),
        )
    };
    if code == SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "SQLite refused the busy handler (result code {code})"
        )))
    }
}

/// SQLite's busy callback: `timeout` carries the busy timeout in
/// milliseconds in its address; `count` is how many times this statement
/// was kept waiting before. Returns 1 to try again, 0 to give up.
extern "C" fn on_busy(timeout: *mut c_void, count: c_int) -> c_int {
    let timeout = Duration::from_millis(u64::try_from(timeout.addr()).unwrap_or(u64::MAX));
    let now = Instant::now();
    let since = match BUSY_SINCE.get() {
        Some(since) if count > 0 => since,
        _ => {
            BUSY_SINCE.set(Some(now));
            now
        }
    };
    let left = timeout.saturating_sub(now.saturating_duration_since(since));
    if left.is_zero() {
        return 0;
    }
    std::thread::sleep(sleep_for(count).min(left));
    1
}

/// The sleep after the `count`th busy try: [`FIRST_SLEEP`] doubling to
/// [`LONGEST_SLEEP`], times a random factor from 0.5 to 1.5.
pub(super) fn sleep_for(count: c_int) -> Duration {
    let doublings = u32::try_from(count).unwrap_or(0).min(16);
    let base = FIRST_SLEEP
        .saturating_mul(1 << doublings)
        .min(LONGEST_SLEEP);
    // A factor in [512, 1536) / 1024.
    let factor = 512 + (next_random() % 1024);
    base.saturating_mul(u32::try_from(factor).unwrap_or(1024)) / 1024
}

/// The next number of this thread's xorshift generator, seeded from the
/// standard library's random hash keys.
fn next_random() -> u64 {
    let mut state = JITTER.get();
    if state == 0 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(0);
        state = hasher.finish() | 1;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    JITTER.set(state);
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_grow_to_the_longest_and_are_jittered() {
        for count in 0..40 {
            let base = FIRST_SLEEP
                .saturating_mul(1 << count.min(16))
                .min(LONGEST_SLEEP);
            let sleep = sleep_for(count);
            assert!(
                sleep >= base / 2 && sleep < base * 3 / 2,
                "{count}: {sleep:?}"
            );
        }
        let drawn: std::collections::HashSet<Duration> = (0..50).map(|_| sleep_for(30)).collect();
        assert!(drawn.len() > 10, "the sleeps are not jittered: {drawn:?}");
    }
}

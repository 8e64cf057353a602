//! `wait`: blocks until a handoff is finished, then prints it.
//!
//! The store is polled with backoff: 50 ms at first, doubling up to one
//! second, so a finish is seen quickly without hammering the store while a
//! person works. A handoff with a deadline is polled again right when the
//! deadline passes; a due one is expired then (`expire_if_due`, C14) and
//! printed like any finished handoff, exit 0: its `status` (`expired`)
//! says how it ended, as it does for `failed`. No backend offers change notifications through the store
//! port yet; when one does, this is the one place to use it. A spinner
//! shows on stderr only when stderr is a terminal.

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::InteractiveHandoffStatus;

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::handoffs::{load, print_handoff};
use crate::output::age;

const FIRST_POLL: Duration = Duration::from_millis(50);
const LONGEST_POLL: Duration = Duration::from_secs(1);
const SPINNER_TICK: Duration = Duration::from_millis(120);

/// Waits for `id` to finish or expire, at most `timeout` when given.
///
/// # Errors
/// Exit 3 for an unknown id; exit 4 when the timeout passes first. An
/// expiry is not an error: the expired handoff is printed.
pub async fn wait(
    ctx: &Context,
    id: &InteractiveHandoffId,
    timeout: Option<Duration>,
) -> CliResult<()> {
    let started = Instant::now();
    let deadline = timeout.map(|timeout| started + timeout);
    let mut spinner = Spinner::new();
    let mut backoff = FIRST_POLL;
    loop {
        let delay = backoff;
        let handoff = load(ctx, id).await;
        let handoff = match handoff {
            Ok(handoff) => handoff,
            Err(error) => {
                spinner.clear();
                return Err(error);
            }
        };
        let handoff = if handoff.is_due(ctx.store.now()) {
            match ctx.store.expire_if_due(id).await {
                Ok(handoff) => handoff,
                Err(error) => {
                    spinner.clear();
                    return Err(ctx.fail(error));
                }
            }
        } else {
            handoff
        };
        if !handoff.is_active() {
            spinner.clear();
            return print_handoff(ctx, &handoff);
        }
        // Poll again no later than the deadline (a moment after, so it is
        // due then).
        let to_deadline = handoff.expires_at.map(|at| {
            let left = at - ctx.store.now();
            Duration::try_from(left).unwrap_or(Duration::ZERO) + Duration::from_millis(1)
        });
        let delay = to_deadline.map_or(delay, |left| delay.min(left));
        let now = Instant::now();
        if let (Some(deadline), Some(timeout)) = (deadline, timeout) {
            if now >= deadline {
                spinner.clear();
                return Err(timed_out(id, timeout, handoff.status));
            }
        }
        let next_poll = deadline.map_or(now + delay, |deadline| (now + delay).min(deadline));
        while Instant::now() < next_poll {
            spinner.tick(id, handoff.status, started.elapsed());
            let nap = if spinner.active() {
                SPINNER_TICK
            } else {
                delay
            };
            tokio::time::sleep(nap.min(next_poll.saturating_duration_since(Instant::now()))).await;
        }
        backoff = (backoff * 2).min(LONGEST_POLL);
    }
}

fn timed_out(
    id: &InteractiveHandoffId,
    timeout: Duration,
    status: InteractiveHandoffStatus,
) -> CliError {
    let waited = if timeout.subsec_millis() != 0 || timeout.as_secs() == 0 {
        format!("{}ms", timeout.as_millis())
    } else {
        format!("{}s", timeout.as_secs())
    };
    CliError::timeout(format!(
        "timed out after {waited}: handoff {id} is still {}",
        status.describe()
    ))
    .hint(format!(
        "wait longer with --timeout, or finish it with `lf-handoff complete|back|fail {id}`"
    ))
}

/// A one-line spinner on stderr, shown only when stderr is a terminal.
struct Spinner {
    enabled: bool,
    frame: usize,
    drawn: bool,
}

impl Spinner {
    fn new() -> Self {
        Self {
            enabled: io::stderr().is_terminal(),
            frame: 0,
            drawn: false,
        }
    }

    fn active(&self) -> bool {
        self.enabled
    }

    fn tick(
        &mut self,
        id: &InteractiveHandoffId,
        status: InteractiveHandoffStatus,
        waited: Duration,
    ) {
        if !self.enabled {
            return;
        }
        const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
        let frame = FRAMES[self.frame % FRAMES.len()];
        self.frame += 1;
        let waited = age(i64::try_from(waited.as_secs()).unwrap_or(i64::MAX));
        let mut stderr = io::stderr().lock();
        let _ = write!(
            stderr,
            "\r\x1b[2K{frame} waiting for {id} ({}, {waited})",
            status.describe()
        );
        let _ = stderr.flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut stderr = io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
            self.drawn = false;
        }
    }
}

//! `wait`: blocks until a handoff is finished, then prints it.
//!
//! On SQLite and PostgreSQL it is the library's `Store::wait` (C16): it
//! sleeps on the store's change signal (`PRAGMA data_version`, `LISTEN`),
//! so a finish reaches it within milliseconds and an idle wait costs the
//! store nothing but that signal. A handoff whose deadline passes while
//! waiting is expired then (`expire_if_due`, C14) and printed like any
//! finished handoff, exit 0: its `status` (`expired`) says how it ended,
//! as it does for `failed`.
//!
//! sled lets one process open a store at a time; the command line opens
//! every store shared with other processes
//! (`StorageConfig::shared_with_other_processes`), so on sled the store is
//! held only while the wait reads, it wakes on the signal file every write
//! touches, and the person can finish the handoff from another terminal
//! meanwhile. A spinner shows on stderr only when stderr is a terminal.

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use lf_handoff_adapters::Waited;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus;

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::handoffs::{load, print_handoff};
use crate::output::age;

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
    let first = load(ctx, id).await?;
    let mut spinner = Spinner::new();
    let waiting = ctx.store.wait(id, timeout);
    tokio::pin!(waiting);
    let waited = loop {
        tokio::select! {
            waited = &mut waiting => break waited,
            () = tokio::time::sleep(SPINNER_TICK), if spinner.active() => {
                spinner.tick(id, first.status, started.elapsed());
            }
        }
    };
    spinner.clear();
    match waited.map_err(|e| ctx.fail(e))? {
        Waited::Ended(handoff) => print_handoff(ctx, &handoff),
        Waited::TimedOut(handoff) => {
            Err(timed_out(id, timeout.unwrap_or_default(), handoff.status))
        }
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

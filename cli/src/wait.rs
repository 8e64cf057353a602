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
//! sled lets one process open a store at a time, so on sled `wait` opens
//! the store only while it reads and closes it between reads (50 ms at
//! first, doubling up to one second), and a store another process holds
//! at that moment is read again after the pause: the person can finish
//! the handoff from another terminal meanwhile. A spinner shows on stderr
//! only when stderr is a terminal.

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffStatus,
};
use lf_handoff_adapters::{open_store, StorageConfig, Store, UnavailableKind, Waited};

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

/// [`wait`] on a store that one process may open at a time (sled): the
/// store is opened for each read and closed between reads.
///
/// # Errors
/// As [`wait`]; a store that stays locked by another process is read again
/// until the timeout.
pub async fn wait_reopening(
    config: &StorageConfig,
    json: bool,
    id: &InteractiveHandoffId,
    timeout: Option<Duration>,
) -> CliResult<()> {
    let started = Instant::now();
    let deadline = timeout.map(|timeout| started + timeout);
    let mut spinner = Spinner::new();
    let mut pause = FIRST_POLL;
    let mut status = None;
    loop {
        match read_once(config, json, id).await {
            Ok(Read::Ended(ctx, handoff)) => {
                spinner.clear();
                return print_handoff(&ctx, &handoff);
            }
            Ok(Read::Active(handoff)) => status = Some(handoff.status),
            Ok(Read::Locked) => {}
            Err(error) => {
                spinner.clear();
                return Err(error);
            }
        }
        let now = Instant::now();
        if deadline.is_some_and(|deadline| now >= deadline) {
            spinner.clear();
            return Err(timed_out(
                id,
                timeout.unwrap_or_default(),
                status.unwrap_or(InteractiveHandoffStatus::Waiting),
            ));
        }
        let next = deadline.map_or(now + pause, |deadline| (now + pause).min(deadline));
        while Instant::now() < next {
            if let Some(status) = status {
                spinner.tick(id, status, started.elapsed());
            }
            let nap = if spinner.active() {
                SPINNER_TICK
            } else {
                pause
            };
            tokio::time::sleep(nap.min(next.saturating_duration_since(Instant::now()))).await;
        }
        pause = (pause * 2).min(LONGEST_POLL);
    }
}

/// Opens the store `config` names; `None` while another process holds it
/// (sled), so the caller reads again later.
///
/// # Errors
/// Exit 5 (or 2) as `open_store` reports anything else.
pub async fn open_unless_locked(config: &StorageConfig) -> CliResult<Option<Store>> {
    match open_store(config).await {
        Ok(store) => Ok(Some(store)),
        Err(error) if error.unavailable_kind() == Some(UnavailableKind::Locked) => Ok(None),
        Err(error) => Err(CliError::from(error)),
    }
}

/// What one read of [`wait_reopening`] found.
enum Read {
    /// Terminal: the handoff, and the store still open to print it.
    Ended(Context, InteractiveHandoff),
    /// Still active; the store is closed again.
    Active(InteractiveHandoff),
    /// Another process holds the store right now.
    Locked,
}

async fn read_once(
    config: &StorageConfig,
    json: bool,
    id: &InteractiveHandoffId,
) -> CliResult<Read> {
    let Some(store) = open_unless_locked(config).await? else {
        return Ok(Read::Locked);
    };
    let ctx = Context {
        store,
        url: config.url(),
        json,
    };
    // A wait that does not wait expires a due handoff (C14).
    let handoff = match ctx.store.wait(id, Some(Duration::ZERO)).await {
        Ok(Waited::Ended(handoff) | Waited::TimedOut(handoff)) => handoff,
        Err(error) => return Err(ctx.fail(error)),
    };
    if handoff.is_active() {
        Ok(Read::Active(handoff))
    } else {
        Ok(Read::Ended(ctx, handoff))
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

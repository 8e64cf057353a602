//! Failover without loss (contract C25): a primary with a standby, clients
//! running lifecycles through one store URL that names both, the primary
//! killed (`kill -9` of every process of it, as a crashing machine) at a
//! random moment and the standby promoted (`pg_promote()`); the clients go
//! on (half of them through the store's retry window, the other half
//! without one, so that writes in flight at the kill end in errors).
//! Afterwards, on the new primary:
//!
//! - every write a client was told succeeded (acknowledged) is there;
//! - a write that ended in an error (its outcome unknown to the client) is
//!   either wholly there (the record and its history event) or not at all;
//! - the invariants hold: at most one active handoff per parent, one
//!   outcome and one wake per handoff, and each handoff's history numbered
//!   1, 2, 3, ... without a gap, in the order of its lifecycle and agreeing
//!   with its record.
//!
//! [`run`] plays one [`Plan`]: with a synchronous standby
//! (`synchronous_commit = on` or `remote_apply`) nothing acknowledged may
//! be lost; with an asynchronous one (the control) the report counts what
//! was. With more than one failover, the killed server is rebuilt as a
//! standby of the new primary (`pg_basebackup -R`, as an operator rebuilds
//! a failed primary), made synchronous again, and the next failover kills
//! the new primary: the roles alternate, and the clients follow through
//! the same URL. The fast form (one failover) runs in `cargo test`
//! (`tests/failover.rs`); the long form is the `lf-handoff-failover`
//! program (`src/bin/failover.rs`, docs/RELIABILITY.md).

use lf_handoff_adapters::ListQuery;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, GenerateId, StorageConfig, Store};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    HandoffEventKind, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus,
};
use lf_handoff_domain::wave::Wave;

use crate::fixtures::{outcome, wave_request};
use crate::own_postgres::OwnPostgres;
use crate::rng::Rng;

/// How the standby confirms a commit before the primary acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Synchronous, `synchronous_commit = on`: the standby has the commit
    /// on disk.
    On,
    /// Synchronous, `synchronous_commit = remote_apply`: the standby has
    /// applied it (a read there sees it).
    RemoteApply,
    /// Asynchronous (no `synchronous_standby_names`): the control, which
    /// may lose acknowledged writes.
    Async,
}

impl Commit {
    /// Reads `on`, `remote_apply` or `async`.
    ///
    /// # Errors
    /// Naming the accepted values.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "on" => Ok(Self::On),
            "remote_apply" => Ok(Self::RemoteApply),
            "async" => Ok(Self::Async),
            other => Err(format!(
                "commit mode {other:?} is unknown; use on, remote_apply or async"
            )),
        }
    }

    /// The `synchronous_commit` setting, or `None` for no synchronous
    /// standby.
    fn setting(self) -> Option<&'static str> {
        match self {
            Self::On => Some("on"),
            Self::RemoteApply => Some("remote_apply"),
            Self::Async => None,
        }
    }
}

impl fmt::Display for Commit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::On => "synchronous (synchronous_commit = on)",
            Self::RemoteApply => "synchronous (synchronous_commit = remote_apply)",
            Self::Async => "asynchronous",
        })
    }
}

/// One run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// How the standby confirms commits.
    pub commit: Commit,
    /// How many clients (each a store handle of its own) run lifecycles.
    pub clients: usize,
    /// How many times the primary is killed.
    pub failovers: usize,
    /// Fixes the moments of the kills.
    pub seed: u64,
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Primaries killed and replaced.
    pub failovers: usize,
    /// Lifecycles begun by the clients.
    pub lifecycles: usize,
    /// Writes the clients were told succeeded.
    pub acknowledged: usize,
    /// Writes that ended in an error, whose outcome the client does not
    /// know.
    pub unknown: usize,
    /// Of those, how many are wholly on the new primary (the rest are
    /// wholly absent).
    pub unknown_there: usize,
    /// Of those, how many were of clients with a retry window (the
    /// others retry nothing).
    pub unknown_retried: usize,
    /// Acknowledged writes missing on the new primary.
    pub lost: usize,
    /// Broken invariants and inconsistent records, each described.
    pub violations: Vec<String>,
    /// The first errors the clients saw (at most 5), for the report.
    pub errors: Vec<String>,
    /// How long the clients ran.
    pub elapsed: Duration,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failovers, {} lifecycles in {:.1} s: {} acknowledged writes, {} lost; {} unknown \
             outcomes ({} there, {} absent; {} of clients with a retry window); {} violations",
            self.failovers,
            self.lifecycles,
            self.elapsed.as_secs_f64(),
            self.acknowledged,
            self.lost,
            self.unknown,
            self.unknown_there,
            self.unknown - self.unknown_there,
            self.unknown_retried,
            self.violations.len()
        )
    }
}

/// The writes of one lifecycle, in order.
const STEPS: [&str; 5] = [
    "create the wave",
    "open",
    "attach",
    "finish",
    "claim the wake",
];

/// What one client did in one lifecycle: how many of its writes were
/// acknowledged (in order), and the write that failed after them, if one
/// did (the client then moves on to a new lifecycle).
#[derive(Debug)]
struct Lifecycle {
    wave: WaveId,
    n: usize,
    /// Whether the client's store handle has a retry window.
    retried: bool,
    handoff: Option<InteractiveHandoffId>,
    acknowledged: usize,
    unknown: Option<String>,
}

/// Why a run did not get to its report.
#[derive(Debug)]
pub enum Failure {
    /// The servers could not be started here (no PostgreSQL installed,
    /// ...): a test skips, unless CI requires the servers
    /// (`own_postgres::skip_or_fail`).
    Setup(String),
    /// Something failed during the run: a server that could not be
    /// killed, promoted or rebuilt, a store that could not be opened.
    Run(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Setup(reason) => write!(f, "cannot start the servers: {reason}"),
            Self::Run(reason) => f.write_str(reason),
        }
    }
}

/// A primary and a streaming standby of it, each of its own.
///
/// # Errors
/// Why they cannot be started.
pub async fn primary_and_standby() -> Result<(OwnPostgres, OwnPostgres), String> {
    blocking(|| {
        let primary = OwnPostgres::start()?;
        let standby = OwnPostgres::standby_of(&primary)?;
        Ok((primary, standby))
    })
    .await
}

/// Plays `plan` on two servers of its own; `say` is told what happens.
///
/// # Errors
/// [`Failure::Setup`] when the servers cannot be started;
/// [`Failure::Run`] when they cannot be killed, promoted or rebuilt, or a
/// store cannot be opened. What the run finds is in the report.
pub async fn run(plan: &Plan, say: &(dyn Fn(&str) + Sync)) -> Result<Report, Failure> {
    let (first, second) = primary_and_standby().await.map_err(Failure::Setup)?;
    play_on(plan, first, second, say)
        .await
        .map_err(Failure::Run)
}

async fn play_on(
    plan: &Plan,
    first: OwnPostgres,
    second: OwnPostgres,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Report, String> {
    let mut rng = Rng::new(plan.seed);
    let servers = [Arc::new(first), Arc::new(second)];
    let mut primary = 0;
    make_synchronous(&servers[primary], plan.commit).await?;
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?pool_size=2",
        servers[0].port(),
        servers[1].port()
    );
    say(&format!(
        "primary on port {}, standby on port {}, {}; store URL {url}",
        servers[0].port(),
        servers[1].port(),
        plan.commit
    ));
    let config = StorageConfig::from_url(&url).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // The first open migrates the store, so the clients' opens race no
    // migration.
    drop(open_store(&config).await.map_err(|e| e.to_string())?);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut clients = Vec::new();
    for client in 0..plan.clients {
        // Half the clients retry nothing, so that a write in flight at the
        // kill ends in an error (an unknown outcome) instead of being
        // retried to its end on the new primary, as the others' are.
        let mut store = open_store(&config).await.map_err(|e| e.to_string())?;
        let retried = client % 2 == 0;
        if !retried {
            store = store.with_retry_window(Duration::ZERO);
        }
        clients.push(tokio::spawn(run_client(
            store,
            dir.path().to_path_buf(),
            (client, retried),
            stop.clone(),
            done.clone(),
        )));
    }
    let mut report = Report::default();
    for round in 0..plan.failovers {
        // Some lifecycles, then the kill at a random moment.
        wait_for_progress(&done, plan.clients, Duration::from_secs(30), &mut report).await;
        tokio::time::sleep(Duration::from_millis(200 + rng.below(1300))).await;
        let standby = 1 - primary;
        let (old, new) = (servers[primary].clone(), servers[standby].clone());
        let before = done.load(Ordering::SeqCst);
        blocking(move || {
            old.kill_9()?;
            new.promote()?;
            // No standby is left to wait for until the old primary is
            // rebuilt.
            new.psql("ALTER SYSTEM SET synchronous_standby_names = ''")?;
            new.psql("SELECT pg_reload_conf()").map(|_| ())
        })
        .await?;
        report.failovers += 1;
        say(&format!(
            "failover {}: killed port {}, promoted port {} after {before} lifecycles",
            round + 1,
            servers[primary].port(),
            servers[standby].port()
        ));
        primary = standby;
        if round + 1 < plan.failovers {
            let (old, new) = (servers[1 - primary].clone(), servers[primary].clone());
            blocking(move || old.rebuild_as_standby_of(&new)).await?;
            make_synchronous(&servers[primary], plan.commit).await?;
        }
    }
    // The clients go on after the last failover.
    wait_for_progress(&done, plan.clients, Duration::from_secs(30), &mut report).await;
    stop.store(true, Ordering::SeqCst);
    let mut lifecycles = Vec::new();
    for client in clients {
        lifecycles.extend(
            client
                .await
                .map_err(|e| format!("a client panicked: {e}"))?,
        );
    }
    report.elapsed = started.elapsed();
    let on_new = StorageConfig::from_url(&format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        servers[primary].port()
    ))
    .map_err(|e| e.to_string())?;
    let store = open_store(&on_new).await.map_err(|e| e.to_string())?;
    check(&store, &lifecycles, &mut report).await;
    Ok(report)
}

/// Makes `primary`'s standby synchronous as `commit` says, and waits until
/// it is (or, for the asynchronous control, until it streams).
async fn make_synchronous(primary: &Arc<OwnPostgres>, commit: Commit) -> Result<(), String> {
    let primary = primary.clone();
    blocking(move || {
        let Some(setting) = commit.setting() else {
            return wait_for_streaming(&primary);
        };
        primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'")?;
        primary.psql(&format!(
            "ALTER SYSTEM SET synchronous_commit = '{setting}'"
        ))?;
        primary.psql("SELECT pg_reload_conf()")?;
        primary.wait_for_sync_standby(Duration::from_secs(60))
    })
    .await
}

/// Waits until a standby streams from `primary`.
fn wait_for_streaming(primary: &OwnPostgres) -> Result<(), String> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let streaming = primary.psql(
            "SELECT count(*) FROM pg_catalog.pg_stat_replication WHERE state = 'streaming'",
        )?;
        if streaming != "0" {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "no standby streams from port {} within 60 s",
        primary.port()
    ))
}

/// Waits until every client has finished at least one more lifecycle (as
/// many more as there are clients), noting a stall as a violation.
async fn wait_for_progress(
    done: &AtomicUsize,
    clients: usize,
    limit: Duration,
    report: &mut Report,
) {
    let from = done.load(Ordering::SeqCst);
    let started = Instant::now();
    while done.load(Ordering::SeqCst) < from + clients.max(1) {
        if started.elapsed() > limit {
            report.violations.push(format!(
                "the clients stalled: {} lifecycles in {limit:?}",
                done.load(Ordering::SeqCst) - from
            ));
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `work` off the async threads (`pg_ctl`, `psql` and the kills
/// block).
///
/// # Errors
/// `work`'s, or a panic's message.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("a server operation panicked: {e}"))?
}

/// One client: lifecycles on `store` until told to stop, each recording
/// what was acknowledged and the write that failed, if one did.
async fn run_client(
    store: Store,
    dir: PathBuf,
    (client, retried): (usize, bool),
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
) -> Vec<Lifecycle> {
    let mut lifecycles = Vec::new();
    let mut n = client * 1_000_000;
    while !stop.load(Ordering::SeqCst) {
        let mut lifecycle = Lifecycle {
            wave: WaveId::new(),
            n,
            retried,
            handoff: None,
            acknowledged: 0,
            unknown: None,
        };
        let failed = play(&store, &dir, &mut lifecycle).await.err();
        let pause = failed.is_some();
        lifecycle.unknown = failed;
        lifecycles.push(lifecycle);
        if pause {
            // The server is down or changing: try again in a moment.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        done.fetch_add(1, Ordering::SeqCst);
        n += 1;
    }
    lifecycles
}

/// The writes of one lifecycle, counting each acknowledged one; the first
/// error ends it.
async fn play(store: &Store, dir: &Path, lifecycle: &mut Lifecycle) -> Result<(), String> {
    let wave = Wave::new(
        lifecycle.wave.clone(),
        "product".into(),
        dir.display().to_string(),
    );
    store.create_wave(&wave).await.map_err(|e| e.to_string())?;
    lifecycle.acknowledged += 1;
    let (opened, _created) = store
        .open_interactive_handoff(wave_request(&wave, dir))
        .await
        .map_err(|e| e.to_string())?;
    lifecycle.handoff = Some(opened.id.clone());
    lifecycle.acknowledged += 1;
    store
        .attach_interactive_handoff(&opened.id)
        .await
        .map_err(|e| e.to_string())?;
    lifecycle.acknowledged += 1;
    store
        .finish_interactive_handoff(&opened.id, &outcome(lifecycle.n), None)
        .await
        .map_err(|e| e.to_string())?;
    lifecycle.acknowledged += 1;
    let claimed = store
        .claim_interactive_handoff_wake(&opened.id, 1)
        .await
        .map_err(|e| e.to_string())?
        .claimed;
    if !claimed {
        return Err("generation 1 was refused the wake it alone claims".into());
    }
    lifecycle.acknowledged += 1;
    Ok(())
}

/// How far a lifecycle got on the store: 0 nothing, 1 the wave, 2 opened,
/// 3 attached, 4 finished, 5 wake claimed; checked against the handoff's
/// history, whose events must agree with its record.
async fn stored_level(
    store: &Store,
    lifecycle: &Lifecycle,
    report: &mut Report,
) -> Result<usize, String> {
    let parent = InteractiveHandoffParent::Wave(lifecycle.wave.clone());
    if store
        .get_parent(&parent)
        .await
        .map_err(|e| e.to_string())?
        .is_none()
    {
        return Ok(0);
    }
    let handoffs = store
        .list_interactive_handoffs(ListQuery::from(&parent))
        .await
        .map_err(|e| e.to_string())?;
    let handoff = match handoffs.as_slice() {
        [] => return Ok(1),
        [handoff] => handoff,
        more => {
            report.violations.push(format!(
                "wave {} has {} handoffs; each lifecycle opens one",
                lifecycle.wave,
                more.len()
            ));
            return Ok(1);
        }
    };
    if let Some(id) = &lifecycle.handoff {
        if id != &handoff.id {
            report.violations.push(format!(
                "wave {}: the client was told handoff {id}, the store holds {}",
                lifecycle.wave, handoff.id
            ));
        }
    }
    let history = store
        .history(&handoff.id)
        .await
        .map_err(|e| e.to_string())?;
    let expected = [
        HandoffEventKind::Opened,
        HandoffEventKind::Attached,
        HandoffEventKind::Finished,
        HandoffEventKind::WakeClaimed,
    ];
    let kinds: Vec<HandoffEventKind> = history.iter().map(|event| event.kind).collect();
    let seqs: Vec<u64> = history.iter().map(|event| event.seq).collect();
    let gapless: Vec<u64> = (1..=history.len() as u64).collect();
    if seqs != gapless || kinds.len() > expected.len() || kinds != expected[..kinds.len()] {
        report.violations.push(format!(
            "handoff {}: history {:?} numbered {seqs:?}, where a lifecycle writes {expected:?} \
             numbered from 1 without a gap",
            handoff.id, kinds
        ));
    }
    if let Some(problem) = disagreement(handoff, history.len(), &outcome(lifecycle.n)) {
        report.violations.push(format!(
            "handoff {}: {problem} (history of {} events)",
            handoff.id,
            history.len()
        ));
    }
    Ok(1 + history.len())
}

/// How the record of `handoff` disagrees with a history of `events`
/// events of its lifecycle, whose outcome is `expected`; `None` when it
/// agrees.
fn disagreement(
    handoff: &InteractiveHandoff,
    events: usize,
    expected: &InteractiveHandoffOutcome,
) -> Option<String> {
    let attached = handoff.attached_at.is_some();
    let outcome = handoff.outcome.as_ref();
    let wake = handoff.wake_claimed_by_generation;
    let agrees = match events {
        1 => handoff.status == InteractiveHandoffStatus::Waiting && !attached && outcome.is_none(),
        2 => handoff.status == InteractiveHandoffStatus::Attached && attached && outcome.is_none(),
        3 => {
            handoff.status.is_terminal() && attached && outcome == Some(expected) && wake.is_none()
        }
        4 => {
            handoff.status.is_terminal() && attached && outcome == Some(expected) && wake == Some(1)
        }
        _ => false,
    };
    (!agrees).then(|| {
        format!(
            "the record (status {}, attached {attached}, outcome {outcome:?}, wake {wake:?}) \
             does not match its history",
            handoff.status.as_str()
        )
    })
}

/// Checks every lifecycle on the new primary, and the invariants over the
/// whole store.
async fn check(store: &Store, lifecycles: &[Lifecycle], report: &mut Report) {
    report.lifecycles = lifecycles.len();
    for lifecycle in lifecycles {
        report.acknowledged += lifecycle.acknowledged;
        let level = match stored_level(store, lifecycle, report).await {
            Ok(level) => level,
            Err(error) => {
                report
                    .violations
                    .push(format!("the new primary cannot be read: {error}"));
                return;
            }
        };
        if level < lifecycle.acknowledged {
            report.lost += lifecycle.acknowledged - level;
        }
        match &lifecycle.unknown {
            None if level > lifecycle.acknowledged => report.violations.push(format!(
                "wave {}: {level} writes stored, {} made",
                lifecycle.wave, lifecycle.acknowledged
            )),
            None => {}
            Some(error) => {
                report.unknown += 1;
                if lifecycle.retried {
                    report.unknown_retried += 1;
                }
                if report.errors.len() < 5 {
                    report.errors.push(format!(
                        "{} of wave {}: {error}",
                        STEPS[lifecycle.acknowledged.min(STEPS.len() - 1)],
                        lifecycle.wave
                    ));
                }
                if level == lifecycle.acknowledged + 1 {
                    report.unknown_there += 1;
                } else if level > lifecycle.acknowledged + 1 {
                    report.violations.push(format!(
                        "wave {}: {level} writes stored, {} acknowledged and one unknown",
                        lifecycle.wave, lifecycle.acknowledged
                    ));
                }
            }
        }
    }
    // One active handoff per parent, over everything the store holds.
    match store.list_interactive_handoffs(ListQuery::default()).await {
        Ok(all) => {
            let mut active: Vec<&InteractiveHandoffParent> = all
                .iter()
                .filter(|handoff| !handoff.status.is_terminal())
                .map(|handoff| &handoff.parent)
                .collect();
            let count = active.len();
            active.sort_by_key(|parent| parent.id_str().to_string());
            active.dedup();
            if active.len() != count {
                report.violations.push(format!(
                    "{} active handoffs over {} parents: a parent has two",
                    count,
                    active.len()
                ));
            }
        }
        Err(error) => report
            .violations
            .push(format!("the new primary cannot list: {error}")),
    }
}

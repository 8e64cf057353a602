//! The kill loop of the crash harness (`--kills N`): many cheap SIGKILLs
//! of processes creating, opening, upgrading and writing an embedded
//! store, each followed by the two questions a person asks after a crash:
//! does the store still open, and is every acknowledged write there?
//!
//! The crash trials ([`crate::crash`]) kill one long-lived store's child
//! mostly in the middle of its writes and check every record and history
//! in depth. This loop aims at what a killed command leaves *around* the
//! writes instead: sled writes its snapshot and zeroes its log's tail when
//! it opens a store, sled and SQLite create their files when a store is
//! made, and an upgrade rewrites a store of release 0.1.0. So the loop
//! works through a series of small stores, each killed many times:
//!
//! - a store starts fresh (created by the first child, which is killed
//!   while it creates it) or, one store in four, as a copy of the
//!   backend's release 0.1.0 store (`tests/fixtures/v1`, upgraded by the
//!   first child, which is killed while it upgrades it);
//! - each later round on the store kills one of: a crash child (two
//!   lifecycle lanes, [`crate::crash_child`]) while it opens the store,
//!   within one and a half times the last measured open; a crash child
//!   while it writes, 0 to `--max-delay` after it is ready; or (with
//!   `--cli`) the real `lf-handoff complete` command, 0 to 30 ms after it
//!   started, on a handoff the command line opened, followed by
//!   `lf-handoff status` (as the reproduction does);
//! - after every kill this process opens the store. A store that does not
//!   open is an **unopenable store** (a failure, kept for inspection; the
//!   loop goes on with a new store). Otherwise every write acknowledged on
//!   this store so far (by children, by the command line, and every record
//!   found after an earlier kill) must be there, as acknowledged or further
//!   along ([`crate::check`]); one missing or behind is a **lost write**.
//!   The records of an upgraded store must still be those of release 0.1.0.
//!
//! Every kill is counted by where it landed: before the child had the store
//! open (creating, upgrading or opening it), during a write (by the write's
//! kind), between writes, or in the command line's `complete`. For sled the
//! loop also counts the kills that left an unfinished
//! `snap.<lsn>.generating` (the file a killed open leaves, which every
//! later open had refused before this build).

mod round;
mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lf_handoff_adapters::StorageConfig;
use lf_handoff_conformance::backends::{sled, sqlite};
use lf_handoff_conformance::upgrade::Release;
use lf_handoff_conformance::Backend;
use serde_json::Value;
use tempfile::TempDir;

use crate::problems::Problems;
use crate::rng::Rng;
use round::Round;
use verify::Ledger;

/// How long a store open is assumed to take until one is measured.
const FIRST_OPEN: Duration = Duration::from_millis(100);

/// What a kill loop does.
#[derive(Debug, Clone)]
pub struct KillOptions {
    /// The backends to run it on (SQLite and sled; others are skipped).
    pub backends: Vec<&'static str>,
    /// Kills per backend.
    pub kills: u64,
    /// Kills per store before the loop starts a new one.
    pub per_store: u64,
    /// Fixes every choice of the loop and its children.
    pub seed: u64,
    /// The longest delay from a writing child's `ready` to its kill.
    pub max_delay: Duration,
    /// No new kill starts on a backend after this long on it.
    pub time_limit: Duration,
    /// Where stores are made.
    pub base_dir: PathBuf,
    /// The `lf-handoff` command line binary whose `complete` is killed
    /// (none: no command line rounds).
    pub cli: Option<PathBuf>,
    /// strace, to kill children at an exact system call (none: only
    /// timed kills).
    pub strace: Option<PathBuf>,
    /// Print a line per kill.
    pub verbose: bool,
    /// Self-test only: children acknowledge writes they never made, so the
    /// loop must report lost writes.
    pub fake_acks: bool,
}

/// The figures of one backend's kill loop.
#[derive(Debug, Default)]
pub struct KillFigures {
    /// The backend.
    pub backend: &'static str,
    /// Kills made.
    pub kills: u64,
    /// Kills by where they landed.
    pub by_phase: BTreeMap<String, u64>,
    /// Kills at an exact system call (strace), by the call.
    pub by_syscall: BTreeMap<&'static str, u64>,
    /// Stores used (fresh or upgraded).
    pub stores: u64,
    /// Acknowledged writes checked after the kills (each every time it
    /// was checked).
    pub checked: u64,
    /// Kills after which the store did not open. Must be 0.
    pub unopenable: u64,
    /// Acknowledged writes missing or behind after a kill. Must be 0.
    pub lost: u64,
    /// sled: kills that left a new `snap.*.generating` (an open killed
    /// while it wrote its snapshot).
    pub unfinished_snapshots: u64,
    /// Of those, how many left it empty.
    pub empty_snapshots: u64,
    /// Harness failures (a child or command that failed by itself, a
    /// store that could not be made). Must be 0.
    pub errors: u64,
    /// The first problems, described.
    pub problems: Problems,
    /// Stores kept for inspection after a failure.
    pub kept: Vec<PathBuf>,
    /// Wall-clock time of the loop.
    pub elapsed: Duration,
    /// True when the time limit stopped the loop before every kill.
    pub stopped_by_time_limit: bool,
}

impl KillFigures {
    /// True if and only if every store opened, nothing acknowledged was
    /// lost and the harness had no error.
    pub fn passed(&self) -> bool {
        self.unopenable == 0 && self.lost == 0 && self.errors == 0
    }

    fn fail(&mut self, message: String) {
        self.problems
            .count(&mut self.errors, format!("error: {message}"));
    }

    fn lose(&mut self, message: String) {
        self.problems
            .count(&mut self.lost, format!("lost: {message}"));
    }

    /// The report, one `[backend] label: value` line per figure.
    pub fn report(&self) -> String {
        let b = self.backend;
        let phases: Vec<String> = self
            .by_phase
            .iter()
            .map(|(phase, count)| format!("{phase} {count}"))
            .collect();
        let mut out = format!(
            "[{b}] kill loop: {} kills on {} stores{} ({})\n",
            self.kills,
            self.stores,
            if self.stopped_by_time_limit {
                " (stopped by the time limit)"
            } else {
                ""
            },
            phases.join(", ")
        );
        let calls: Vec<String> = self
            .by_syscall
            .iter()
            .map(|(call, count)| format!("{call} {count}"))
            .collect();
        out += &format!(
            "[{b}] of them at a system call (strace): {} ({})\n",
            self.by_syscall.values().sum::<u64>(),
            calls.join(", ")
        );
        if b == "sled" {
            out += &format!(
                "[{b}] kills that left a snap.*.generating: {} ({} of them empty)\n",
                self.unfinished_snapshots, self.empty_snapshots
            );
        }
        out += &format!("[{b}] acknowledged writes checked: {}\n", self.checked);
        out += &format!("[{b}] unopenable stores: {}\n", self.unopenable);
        out += &format!("[{b}] acknowledged writes lost: {}\n", self.lost);
        out += &format!("[{b}] harness errors: {}\n", self.errors);
        out += &format!(
            "[{b}] kill loop elapsed: {:.1} s\n",
            self.elapsed.as_secs_f64()
        );
        self.problems.report(&mut out, &format!("[{b}] "));
        for kept in &self.kept {
            out += &format!(
                "[{b}] a store was kept for inspection in {}\n",
                kept.display()
            );
        }
        out
    }
}

/// Runs the kill loop on every backend of `options` that keeps its store
/// in files, printing each backend's figures as it finishes. `exe` acts as
/// the crash child.
pub async fn run(options: &KillOptions, exe: &Path) -> Vec<KillFigures> {
    let mut rng = Rng::new(options.seed ^ 0x006b_696c_6c73);
    let mut all = Vec::new();
    for &backend in &options.backends {
        let fixture = match backend {
            "sqlite" => sqlite().await,
            "sled" => sled().await,
            other => {
                println!(
                    "[{other}] kill loop: skipped: it is for the embedded stores (sqlite, sled)"
                );
                continue;
            }
        };
        let mut figures = KillFigures {
            backend,
            ..KillFigures::default()
        };
        match fixture {
            Ok(fixture) => {
                let mut runner = Runner {
                    options,
                    exe,
                    fixture: fixture.as_ref(),
                    rng: rng.fork(),
                    open_times: BTreeMap::new(),
                };
                runner.run_backend(&mut figures).await;
            }
            Err(message) => figures.fail(message),
        }
        print!("{}", figures.report());
        all.push(figures);
    }
    all
}

/// How a store began, which names where an early kill landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Begun {
    /// Not yet made: the next child creates it.
    Fresh,
    /// A copy of release 0.1.0's store: the next child upgrades it.
    Release1,
    /// Opened at least once.
    Opened,
}

/// One store of the loop.
struct KilledStore {
    /// Holds the store (embedded backends) and is the handoffs' cwd.
    dir: TempDir,
    config: StorageConfig,
    begun: Begun,
    ledger: Ledger,
    /// The release 0.1.0 records the store must keep (an upgraded store).
    manifest: Vec<Value>,
}

struct Runner<'a> {
    options: &'a KillOptions,
    exe: &'a Path,
    fixture: &'a dyn Backend,
    rng: Rng,
    /// The last measured time from a child's start to its `ready`, by how
    /// the store began.
    open_times: BTreeMap<Begun, Duration>,
}

impl Runner<'_> {
    async fn run_backend(&mut self, figures: &mut KillFigures) {
        let started = Instant::now();
        let mut current: Option<KilledStore> = None;
        let mut on_store = 0;
        while figures.kills < self.options.kills {
            if started.elapsed() >= self.options.time_limit {
                figures.stopped_by_time_limit = true;
                break;
            }
            let store = match current.as_mut() {
                Some(store) if on_store < self.options.per_store => store,
                _ => {
                    figures.stores += 1;
                    on_store = 0;
                    match self.new_store(figures.stores).await {
                        Ok(store) => current.insert(store),
                        Err(message) => {
                            figures.fail(message);
                            break;
                        }
                    }
                }
            };
            let round = self.pick_round(store.begun);
            on_store += 1;
            figures.kills += 1;
            let kill = figures.kills;
            let opened = match self.one_kill(round, store, kill, figures).await {
                Ok(opened) => opened,
                Err(message) => {
                    figures.fail(format!("kill {kill}: {message}"));
                    break;
                }
            };
            if !opened {
                // Unopenable: kept for inspection, and the loop goes on
                // with a new store.
                if let Some(store) = current.take() {
                    figures.kept.push(store.dir.keep());
                }
            }
        }
        figures.elapsed = started.elapsed();
    }

    /// A fresh store location, or (one store in four) a copy of release
    /// 0.1.0's store.
    async fn new_store(&mut self, number: u64) -> Result<KilledStore, String> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("lf-kills-{}-{number}-", self.fixture.name()))
            .tempdir_in(&self.options.base_dir)
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        if number % 4 == 0 {
            let config = self.fixture.release_store(Release::V1, dir.path()).await;
            let manifest = crate::upgrade::read_manifest(self.fixture.name(), Release::V1)?;
            return Ok(KilledStore {
                dir,
                config,
                begun: Begun::Release1,
                ledger: Ledger::default(),
                manifest,
            });
        }
        let config = self.fixture.config(dir.path().join("store"));
        Ok(KilledStore {
            dir,
            config,
            begun: Begun::Fresh,
            ledger: Ledger::default(),
            manifest: Vec::new(),
        })
    }

    /// The round for a store that has been opened: an open killed at a
    /// moment (25%) or at a system call (25%), a write killed (30%), or the
    /// command line's `complete` killed (20%). Without strace, timed
    /// kills take the system calls' share; without a command line, writes
    /// take its share. A store that was never opened gets its open killed,
    /// at a moment or (one time in two, with strace) at a system call.
    fn pick_round(&mut self, begun: Begun) -> Round {
        let syscall = if self.options.strace.is_some() {
            Round::Syscall
        } else {
            Round::Open
        };
        if begun != Begun::Opened {
            return if self.rng.chance(1, 2) {
                Round::Open
            } else {
                syscall
            };
        }
        match self.rng.below(20) {
            0..=4 => Round::Open,
            5..=9 => syscall,
            10..=15 => Round::Write,
            _ if self.options.cli.is_some() => Round::Cli,
            _ => Round::Write,
        }
    }

    /// One kill and the check after it; returns whether the store opened.
    async fn one_kill(
        &mut self,
        round: Round,
        store: &mut KilledStore,
        kill: u64,
        figures: &mut KillFigures,
    ) -> Result<bool, String> {
        let before = generating_snapshots(&store.config);
        let killed = self.kill_in(round, store, kill).await?;
        if let Some(error) = &killed.error {
            figures.fail(format!("kill {kill}: {error}"));
        }
        let landed = killed.phase.split(" (at ").next().unwrap_or_default();
        *figures.by_phase.entry(landed.to_string()).or_default() += 1;
        if let Some(call) = killed.syscall {
            *figures.by_syscall.entry(call).or_default() += 1;
        }
        if let Some(open_time) = killed.open_time {
            self.open_times.insert(store.begun, open_time);
        }
        let left: Vec<u64> = generating_snapshots(&store.config)
            .into_iter()
            .filter(|(name, _)| !before.contains_key(name))
            .map(|(_, len)| len)
            .collect();
        if !left.is_empty() {
            figures.unfinished_snapshots += 1;
            figures.empty_snapshots += u64::from(left.contains(&0));
        }
        let opened = verify::after_kill(store, &killed, kill, figures).await;
        if self.options.verbose {
            println!(
                "[{}] kill {kill}: {} ({} lines), store {}",
                figures.backend,
                killed.phase,
                killed.lines.len(),
                if opened { "opened" } else { "UNOPENABLE" }
            );
        }
        if opened {
            store.begun = Begun::Opened;
        }
        Ok(opened)
    }
}

/// The `snap.*.generating` files of a sled store, with their lengths:
/// the snapshots opens were writing when they were killed (or, complete,
/// had not renamed yet), which sled reads first on its next open.
fn generating_snapshots(config: &StorageConfig) -> BTreeMap<String, u64> {
    let StorageConfig::Sled(sled) = config else {
        return BTreeMap::new();
    };
    let Ok(entries) = std::fs::read_dir(&sled.path) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let generating = name.starts_with("snap.") && name.ends_with(".generating");
            let len = entry.metadata().ok()?.len();
            generating.then_some((name, len))
        })
        .collect()
}

//! The race harness: P racers contend for the same handoff in three kinds of
//! race, over M handoffs, and every race must have exactly one winner.
//!
//! For each of the M handoffs, on a fresh wave:
//!
//! 1. **open**: every racer opens a handoff for the wave; exactly one may
//!    create it, the others must get the same handoff back (contract C3);
//! 2. **finish**: every racer finishes it with its own outcome; exactly one
//!    may succeed, the others get a conflict, and the stored outcome is the
//!    winner's (C6);
//! 3. **claim**: every racer claims the wake with its own body generation;
//!    exactly one may hold it, and the stored claim is the winner's (C7).
//!
//! Racers are separate OS processes ([`worker`]) on one store, released
//! together for each race in a shuffled order. A backend that allows one
//! process per store (sled) races P store handles inside one process
//! instead, released together by a barrier; the report says so.

use lf_handoff_adapters::ListQuery;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, ConflictKind, GenerateId, Store, StoreError};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use lf_handoff_domain::wave::Wave;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Barrier;

use lf_handoff_conformance::fixtures::outcome;

use crate::problems::Problems;
use crate::program::each_backend;
use crate::requests::wave_request;
use crate::rng::Rng;
use crate::target::{Placement, StoreTarget};

/// The first argument that makes a harness binary act as a race worker.
pub const WORKER_ARG: &str = "__race-worker";

/// The most racers a run may have.
pub const MAX_RACERS: usize = 64;

/// How racers are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RacerMode {
    /// Separate OS processes where the backend allows it, else handles.
    Auto,
    /// Separate OS processes (refused for a single-process backend).
    Processes,
    /// Store handles inside this process.
    Handles,
}

/// What a race run does.
#[derive(Debug, Clone)]
pub struct RaceOptions {
    /// The backends to run, in order.
    pub backends: Vec<&'static str>,
    /// Racers per race.
    pub racers: usize,
    /// Handoffs raced over (three races each).
    pub handoffs: u64,
    /// Fixes who gets which outcome and generation, and the release order.
    pub seed: u64,
    /// How racers are run.
    pub mode: RacerMode,
    /// No new handoff starts on a backend after this much time on it.
    pub time_limit: Duration,
    /// Where stores are made.
    pub placement: Placement,
    /// Self-test only: racers that lose a finish claim they won, so the run
    /// must report several winners.
    pub false_wins: bool,
}

/// The optional third worker argument that makes it claim a lost finish as
/// a win: the harness's own tests use it to show a double winner is caught.
pub const FALSE_WIN_ARG: &str = "false-win";

/// One operation a racer performs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaceOp {
    /// Open a handoff for a wave (no body recorded, generation 1).
    Open(WaveId),
    /// Finish with the conformance fixtures' `outcome(n)`, whose text names `n`.
    Finish(InteractiveHandoffId, usize),
    /// Claim the wake for a generation.
    Claim(InteractiveHandoffId, u32),
}

impl RaceOp {
    /// The line a worker reads.
    pub fn to_line(&self) -> String {
        match self {
            Self::Open(wave) => format!("open {wave}"),
            Self::Finish(id, n) => format!("finish {id} {n}"),
            Self::Claim(id, generation) => format!("claim {id} {generation}"),
        }
    }

    /// Parses [`to_line`](Self::to_line)'s form.
    ///
    /// # Errors
    /// A sentence naming the line.
    pub fn parse(line: &str) -> Result<Self, String> {
        let words: Vec<&str> = line.split(' ').collect();
        let bad = || format!("unknown race operation {line:?}");
        let id = |text: &str| InteractiveHandoffId::parse(text).map_err(|e| e.to_string());
        match words.as_slice() {
            ["open", wave] => Ok(Self::Open(WaveId::parse(wave).map_err(|e| e.to_string())?)),
            ["finish", handoff, n] => Ok(Self::Finish(id(handoff)?, n.parse().map_err(|_| bad())?)),
            ["claim", handoff, generation] => Ok(Self::Claim(
                id(handoff)?,
                generation.parse().map_err(|_| bad())?,
            )),
            _ => Err(bad()),
        }
    }
}

/// Performs `op` on `store` and describes the answer in one line:
/// `created <id>`, `replayed <id>`, `won <n>`, `conflict`, `claimed <g>`,
/// `lost`, or `error <message>` for anything the contract does not allow.
pub async fn perform(store: &Store, op: &RaceOp, cwd: &Path, false_wins: bool) -> String {
    match op {
        RaceOp::Open(wave) => {
            match store
                .open_interactive_handoff(wave_request(wave, cwd))
                .await
            {
                Ok((handoff, true)) => format!("created {}", handoff.id),
                Ok((handoff, false)) => format!("replayed {}", handoff.id),
                Err(e) => format!("error {e}"),
            }
        }
        RaceOp::Finish(id, n) => match store
            .finish_interactive_handoff(id, &outcome(*n), None)
            .await
        {
            Ok(_) => format!("won {n}"),
            Err(StoreError::Conflict {
                kind: ConflictKind::OtherOutcome,
                ..
            }) if false_wins => format!("won {n}"),
            Err(StoreError::Conflict {
                kind: ConflictKind::OtherOutcome,
                ..
            }) => "conflict".into(),
            Err(e) => format!("error {e}"),
        },
        RaceOp::Claim(id, generation) => {
            match store.claim_interactive_handoff_wake(id, *generation).await {
                Ok(wake) if wake.claimed => format!("claimed {generation}"),
                Ok(_) => "lost".into(),
                Err(e) => format!("error {e}"),
            }
        }
    }
}

/// The race worker: `args` are `<store url> <cwd> [false-win]`. Opens the
/// store, prints `ready`, then performs one operation per line read from
/// stdin and prints its answer, until stdin closes.
///
/// # Errors
/// A store that does not open, or unreadable input.
pub async fn worker(args: &[String]) -> Result<(), String> {
    let (url, cwd, false_wins) = match args {
        [url, cwd] => (url, cwd, false),
        [url, cwd, fault] if fault == FALSE_WIN_ARG => (url, cwd, true),
        _ => {
            return Err(format!(
                "usage: {WORKER_ARG} <store url> <cwd> [{FALSE_WIN_ARG}], got {args:?}"
            ))
        }
    };
    let config = lf_handoff_adapters::StorageConfig::from_url(url).map_err(|e| e.to_string())?;
    let store = open_store(&config).await.map_err(|e| e.to_string())?;
    let cwd = PathBuf::from(cwd);
    let mut out = tokio::io::stdout();
    out.write_all(b"ready\n").await.map_err(|e| e.to_string())?;
    out.flush().await.map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
        let answer = match RaceOp::parse(&line) {
            Ok(op) => perform(&store, &op, &cwd, false_wins).await,
            Err(message) => format!("error {message}"),
        };
        out.write_all(format!("{answer}\n").as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        out.flush().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Counts for one kind of race.
#[derive(Debug, Default, Clone)]
pub struct RaceKindFigures {
    /// Races run.
    pub races: u64,
    /// Races with exactly one winner whose result is the one stored.
    pub one_winner: u64,
    /// Races with no winner.
    pub no_winner: u64,
    /// Races with more than one winner.
    pub several_winners: u64,
    /// Races whose stored result is not the winner's.
    pub wrong_stored: u64,
    /// Wins per racer index.
    pub wins: Vec<u64>,
}

impl RaceKindFigures {
    fn new(racers: usize) -> Self {
        Self {
            wins: vec![0; racers],
            ..Self::default()
        }
    }

    fn passed(&self) -> bool {
        self.one_winner == self.races
    }
}

/// The figures of one backend's run.
#[derive(Debug, Default)]
pub struct RaceFigures {
    /// The backend.
    pub backend: &'static str,
    /// How the racers ran, in words.
    pub mode: String,
    /// Racers per race.
    pub racers: usize,
    /// Handoffs raced over.
    pub handoffs: u64,
    /// Open races.
    pub open: RaceKindFigures,
    /// Finish races.
    pub finish: RaceKindFigures,
    /// Claim races.
    pub claim: RaceKindFigures,
    /// Losing answers, by kind (`replayed`, `conflict`, `lost`).
    pub losers: std::collections::BTreeMap<String, u64>,
    /// Answers the contract does not allow, and harness failures.
    pub errors: u64,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// True when the time limit stopped the run before every handoff ran.
    pub stopped_by_time_limit: bool,
    /// The first problems found, described.
    pub problems: Problems,
}

impl RaceFigures {
    /// Returns true if and only if every race had exactly one winner whose
    /// result is stored, and nothing failed.
    pub fn passed(&self) -> bool {
        self.errors == 0 && self.open.passed() && self.finish.passed() && self.claim.passed()
    }

    /// Races run, of every kind.
    pub fn races(&self) -> u64 {
        self.open.races + self.finish.races + self.claim.races
    }

    /// Races with exactly one winner whose result is stored.
    pub fn races_with_one_winner(&self) -> u64 {
        self.open.one_winner + self.finish.one_winner + self.claim.one_winner
    }

    fn fail(&mut self, message: String) {
        self.problems
            .count(&mut self.errors, format!("error: {message}"));
    }

    /// The report, one `[backend] label: value` line per figure.
    pub fn report(&self) -> String {
        let b = self.backend;
        let mut out = format!(
            "[{b}] racers: {} {} x {} handoffs",
            self.racers, self.mode, self.handoffs
        );
        if self.stopped_by_time_limit {
            out += " (stopped by the time limit)";
        }
        out += "\n";
        for (name, kind, winner) in [
            ("open", &self.open, "exactly one creator"),
            ("finish", &self.finish, "exactly one winner"),
            ("claim", &self.claim, "exactly one winner"),
        ] {
            out += &format!(
                "[{b}] {name} races with {winner}: {}/{} (no winner {}, several winners {}, stored result not the winner's {})\n",
                kind.one_winner, kind.races, kind.no_winner, kind.several_winners, kind.wrong_stored
            );
        }
        let losers: Vec<String> = self
            .losers
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        out += &format!("[{b}] losing answers: {}\n", losers.join(", "));
        out += &format!("[{b}] errors: {}\n", self.errors);
        for (name, kind) in [("finish", &self.finish), ("claim", &self.claim)] {
            let wins: Vec<String> = kind.wins.iter().map(u64::to_string).collect();
            out += &format!("[{b}] {name} wins per racer: {}\n", wins.join(" "));
        }
        let races = self.races();
        let seconds = self.elapsed.as_secs_f64();
        out += &format!(
            "[{b}] elapsed: {seconds:.1} s ({:.0} races/s)\n",
            if seconds > 0.0 {
                races as f64 / seconds
            } else {
                0.0
            }
        );
        self.problems.report(&mut out, &format!("[{b}] "));
        out
    }
}

/// Runs the race harness on every backend of `options`, printing each
/// backend's figures as it finishes. `exe` is the binary that acts as a
/// worker when given [`WORKER_ARG`].
pub async fn run(options: &RaceOptions, exe: &Path) -> Vec<RaceFigures> {
    each_backend(
        &options.backends,
        options.seed,
        RaceFigures::report,
        |backend, rng| run_backend(backend, options, exe, rng),
    )
    .await
}

async fn run_backend(
    backend: &'static str,
    options: &RaceOptions,
    exe: &Path,
    mut rng: Rng,
) -> RaceFigures {
    let started = Instant::now();
    let racers = options.racers;
    let mut figures = RaceFigures {
        backend,
        racers,
        open: RaceKindFigures::new(racers),
        finish: RaceKindFigures::new(racers),
        claim: RaceKindFigures::new(racers),
        ..RaceFigures::default()
    };
    let target = match StoreTarget::create(backend, &options.placement).await {
        Ok(target) => target,
        Err(message) => {
            figures.fail(message);
            return figures;
        }
    };
    let processes = match options.mode {
        RacerMode::Auto => target.shares_across_processes(),
        RacerMode::Processes => true,
        RacerMode::Handles => false,
    };
    figures.mode = if processes {
        "separate OS processes".into()
    } else if target.shares_across_processes() {
        "store handles in one process (asked for)".into()
    } else {
        format!(
            "store handles in one process ({backend} allows one process per store, so a \
             cross-process race does not apply)"
        )
    };
    if processes && !target.shares_across_processes() {
        figures.fail(format!(
            "{backend} allows one process per store; race it with handles instead"
        ));
    } else {
        match Racers::start(&target, racers, processes, exe, options.false_wins).await {
            Ok(mut racing) => {
                race_all(
                    &target,
                    &mut racing,
                    options,
                    &mut rng,
                    started,
                    &mut figures,
                )
                .await;
                racing.stop().await;
            }
            Err(message) => figures.fail(message),
        }
    }
    figures.elapsed = started.elapsed();
    target.finish(false).await;
    figures
}

async fn race_all(
    target: &StoreTarget,
    racing: &mut Racers,
    options: &RaceOptions,
    rng: &mut Rng,
    started: Instant,
    figures: &mut RaceFigures,
) {
    let store = match open_store(target.config()).await {
        Ok(store) => store,
        Err(e) => return figures.fail(format!("cannot open the store: {e}")),
    };
    let racers = options.racers;
    for round in 0..options.handoffs {
        if started.elapsed() >= options.time_limit {
            figures.stopped_by_time_limit = true;
            break;
        }
        figures.handoffs += 1;
        let wave = Wave::new(WaveId::new(), format!("race {round}"), "/src/race".into());
        if let Err(e) = store.create_wave(&wave).await {
            return figures.fail(format!("cannot create a wave: {e}"));
        }
        let mut order: Vec<usize> = (0..racers).collect();

        // Open.
        rng.shuffle(&mut order);
        let ops = vec![RaceOp::Open(wave.id().clone()); racers];
        let answers = match racing.race(&ops, &order).await {
            Ok(answers) => answers,
            Err(message) => return figures.fail(message),
        };
        let Some(id) = judge_open(&store, &wave, &answers, figures).await else {
            continue;
        };

        // Finish: racer i finishes with outcome number `base + i`.
        rng.shuffle(&mut order);
        let base = usize::try_from(round)
            .unwrap_or(usize::MAX)
            .saturating_mul(racers);
        let ops: Vec<RaceOp> = (0..racers)
            .map(|i| RaceOp::Finish(id.clone(), base + i))
            .collect();
        let answers = match racing.race(&ops, &order).await {
            Ok(answers) => answers,
            Err(message) => return figures.fail(message),
        };
        judge_finish(&store, &id, base, &answers, figures).await;

        // Claim: racers hold a shuffled set of generations 1..=P.
        rng.shuffle(&mut order);
        let mut generations: Vec<u32> = (1..=u32::try_from(racers).unwrap_or(u32::MAX)).collect();
        rng.shuffle(&mut generations);
        let ops: Vec<RaceOp> = generations
            .iter()
            .map(|generation| RaceOp::Claim(id.clone(), *generation))
            .collect();
        let answers = match racing.race(&ops, &order).await {
            Ok(answers) => answers,
            Err(message) => return figures.fail(message),
        };
        judge_claim(&store, &id, &generations, &answers, figures).await;
    }
}

fn count_loser(figures: &mut RaceFigures, answer: &str) {
    let kind = answer.split(' ').next().unwrap_or_default().to_string();
    *figures.losers.entry(kind).or_default() += 1;
}

fn record_winners(kind: &mut RaceKindFigures, winners: &[usize]) -> bool {
    kind.races += 1;
    match winners {
        [] => kind.no_winner += 1,
        [one] => {
            kind.wins[*one] += 1;
            return true;
        }
        _ => kind.several_winners += 1,
    }
    false
}

async fn judge_open(
    store: &Store,
    wave: &Wave,
    answers: &[String],
    figures: &mut RaceFigures,
) -> Option<InteractiveHandoffId> {
    let mut winners = Vec::new();
    let mut ids = BTreeSet::new();
    for (racer, answer) in answers.iter().enumerate() {
        match answer.split_once(' ') {
            Some(("created", id)) => {
                winners.push(racer);
                ids.insert(id.to_string());
            }
            Some(("replayed", id)) => {
                count_loser(figures, answer);
                ids.insert(id.to_string());
            }
            _ => figures.fail(format!("open racer {racer} answered {answer:?}")),
        }
    }
    let one = record_winners(&mut figures.open, &winners);
    let parent = InteractiveHandoffParent::Wave(wave.id().clone());
    let stored = match store
        .list_interactive_handoffs(ListQuery::from(&parent))
        .await
    {
        Ok(stored) => stored,
        Err(e) => {
            figures.fail(format!("listing {parent}: {e}"));
            return None;
        }
    };
    let single = stored.len() == 1 && ids.len() == 1 && ids.contains(stored[0].id.as_str());
    if one && single {
        figures.open.one_winner += 1;
        return Some(stored[0].id.clone());
    }
    if one {
        figures.open.wrong_stored += 1;
    }
    figures.problems.describe(format!(
        "open race on {parent}: answers {answers:?}, {} handoffs stored",
        stored.len()
    ));
    None
}

async fn judge_finish(
    store: &Store,
    id: &InteractiveHandoffId,
    base: usize,
    answers: &[String],
    figures: &mut RaceFigures,
) {
    let mut winners = Vec::new();
    for (racer, answer) in answers.iter().enumerate() {
        if answer == &format!("won {}", base + racer) {
            winners.push(racer);
        } else if answer == "conflict" {
            count_loser(figures, answer);
        } else {
            figures.fail(format!("finish racer {racer} answered {answer:?}"));
        }
    }
    let one = record_winners(&mut figures.finish, &winners);
    let stored = match store.get_interactive_handoff(id).await {
        Ok(Some(stored)) => stored,
        other => return figures.fail(format!("reading {id} after the finish race: {other:?}")),
    };
    if one {
        if stored.outcome == Some(outcome(base + winners[0])) {
            figures.finish.one_winner += 1;
            return;
        }
        figures.finish.wrong_stored += 1;
    }
    figures.problems.describe(format!(
        "finish race on {id}: answers {answers:?}, stored {:?}",
        stored.outcome
    ));
}

async fn judge_claim(
    store: &Store,
    id: &InteractiveHandoffId,
    generations: &[u32],
    answers: &[String],
    figures: &mut RaceFigures,
) {
    let mut winners = Vec::new();
    for (racer, answer) in answers.iter().enumerate() {
        if answer == &format!("claimed {}", generations[racer]) {
            winners.push(racer);
        } else if answer == "lost" {
            count_loser(figures, answer);
        } else {
            figures.fail(format!("claim racer {racer} answered {answer:?}"));
        }
    }
    let one = record_winners(&mut figures.claim, &winners);
    let stored = match store.get_interactive_handoff(id).await {
        Ok(Some(stored)) => stored,
        other => return figures.fail(format!("reading {id} after the claim race: {other:?}")),
    };
    if one {
        if stored.wake_claimed_by_generation == Some(generations[winners[0]]) {
            figures.claim.one_winner += 1;
            return;
        }
        figures.claim.wrong_stored += 1;
    }
    figures.problems.describe(format!(
        "claim race on {id}: answers {answers:?}, stored claim {:?}",
        stored.wake_claimed_by_generation
    ));
}

/// A running worker process.
#[derive(Debug)]
struct WorkerProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

/// The racers of one run.
#[derive(Debug)]
enum Racers {
    Processes(Vec<WorkerProcess>),
    Handles {
        stores: Vec<Store>,
        cwd: PathBuf,
        false_wins: bool,
    },
}

impl Racers {
    async fn start(
        target: &StoreTarget,
        racers: usize,
        processes: bool,
        exe: &Path,
        false_wins: bool,
    ) -> Result<Self, String> {
        if !processes {
            let mut stores = Vec::new();
            for _ in 0..racers {
                stores.push(
                    open_store(target.config())
                        .await
                        .map_err(|e| format!("cannot open a store handle: {e}"))?,
                );
            }
            return Ok(Self::Handles {
                stores,
                cwd: target.work_dir().to_path_buf(),
                false_wins,
            });
        }
        let mut workers = Vec::new();
        for _ in 0..racers {
            let mut command = Command::new(exe);
            command
                .arg(WORKER_ARG)
                .arg(target.url())
                .arg(target.work_dir());
            if false_wins {
                command.arg(FALSE_WIN_ARG);
            }
            let mut child = command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start a worker {}: {e}", exe.display()))?;
            let stdin = child.stdin.take().ok_or("a worker has no stdin")?;
            let stdout = child.stdout.take().ok_or("a worker has no stdout")?;
            workers.push(WorkerProcess {
                child,
                stdin,
                lines: BufReader::new(stdout).lines(),
            });
        }
        for (n, worker) in workers.iter_mut().enumerate() {
            match worker.lines.next_line().await {
                Ok(Some(line)) if line == "ready" => {}
                other => return Err(format!("worker {n} did not open the store: {other:?}")),
            }
        }
        Ok(Self::Processes(workers))
    }

    /// Gives racer `i` the operation `ops[i]`, releasing them in `order`,
    /// and returns each racer's answer.
    async fn race(&mut self, ops: &[RaceOp], order: &[usize]) -> Result<Vec<String>, String> {
        match self {
            Self::Processes(workers) => {
                for &i in order {
                    let line = format!("{}\n", ops[i].to_line());
                    workers[i]
                        .stdin
                        .write_all(line.as_bytes())
                        .await
                        .map_err(|e| format!("worker {i} stopped reading: {e}"))?;
                }
                for &i in order {
                    workers[i]
                        .stdin
                        .flush()
                        .await
                        .map_err(|e| format!("worker {i} stopped reading: {e}"))?;
                }
                let mut answers = Vec::with_capacity(ops.len());
                for (i, worker) in workers.iter_mut().enumerate() {
                    match worker.lines.next_line().await {
                        Ok(Some(answer)) => answers.push(answer),
                        other => return Err(format!("worker {i} did not answer: {other:?}")),
                    }
                }
                Ok(answers)
            }
            Self::Handles {
                stores,
                cwd,
                false_wins,
            } => {
                let false_wins = *false_wins;
                let barrier = Arc::new(Barrier::new(order.len()));
                let mut tasks = Vec::with_capacity(order.len());
                for &i in order {
                    let store = stores[i].clone();
                    let op = ops[i].clone();
                    let barrier = barrier.clone();
                    let cwd = cwd.clone();
                    tasks.push((
                        i,
                        tokio::spawn(async move {
                            barrier.wait().await;
                            perform(&store, &op, &cwd, false_wins).await
                        }),
                    ));
                }
                let mut answers = vec![String::new(); ops.len()];
                for (i, task) in tasks {
                    answers[i] = task.await.map_err(|e| format!("racer {i} failed: {e}"))?;
                }
                Ok(answers)
            }
        }
    }

    /// Ends the workers (closing stdin makes each exit).
    async fn stop(self) {
        if let Self::Processes(workers) = self {
            for worker in workers {
                let WorkerProcess {
                    mut child, stdin, ..
                } = worker;
                drop(stdin);
                if tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
        }
    }
}

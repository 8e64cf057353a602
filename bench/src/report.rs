//! The report: what the run measured, as a table for people and as JSON.

use std::path::Path;

use serde::Serialize;

mod table;

use crate::answers::AnswerFigures;
use crate::coldstart::ColdStart;
use crate::fsync::FsyncRate;
use crate::latency::LatencyAt;
use crate::lifecycle::LifecycleFigures;
use crate::memory::{CacheLoop, ListRss};
use crate::race::RaceFigures;
use crate::serve::events::EventFigures;
use crate::serve::get::GetRateFigures;
use crate::serve::hostile::HostileGetFigures;
use crate::serve::idle::ServeIdleFigures;
use crate::serve::lifecycle::ServeLifecycleFigures;
use crate::statements::StatementFigures;
use crate::stats::{ratio, short, Summary};
use crate::wake::{WakeFigures, CLI_WAIT_ROW, STORE_WAIT_ROW};
use crate::{callers::CallerFigures, idle::IdleFigures};

/// The lifecycle goal: store throughput at least this share of raw.
pub const LIFECYCLE_GOAL: f64 = 0.7;
/// The answers goal (C26): a lifecycle asking allow/deny and answering
/// at least this share of the plain lifecycle's throughput.
pub const ANSWERS_GOAL: f64 = 0.9;
/// The growth goal: latency at the largest size at most this multiple of
/// the smallest.
pub const GROWTH_GOAL: f64 = 2.0;
/// The cold-start goal: `status` at most this multiple of the engine's client.
pub const COLD_START_GOAL: f64 = 3.0;
/// The wake goal on SQLite: `Store::wait` in another process returns at
/// most this many ms (median) after the finish.
pub const WAKE_GOAL_SQLITE_MS: f64 = 50.0;
/// A person's answer reaches the waiting hook's exit within this, ms
/// (median; C27).
const HOOK_ANSWER_GOAL_MS: f64 = 50.0;
/// A hook's own start, process start to handoff opened, ms (median).
const HOOK_START_GOAL_MS: f64 = 20.0;

/// The wake goal on PostgreSQL, ms (median).
pub const WAKE_GOAL_POSTGRES_MS: f64 = 20.0;
/// The wake goal of the command line on sled (issue 20): a person's
/// `lf-handoff complete` reaches an `lf-handoff wait` within this many ms
/// (median), from the start of the `complete` process.
pub const WAKE_GOAL_SLED_CLI_MS: f64 = 50.0;
/// The concurrency goal on PostgreSQL: store/raw throughput at 16 callers.
pub const CALLERS_GOAL: f64 = 0.9;
/// The concurrency goal on SQLite, one writer at a time: the store's
/// throughput at 16 callers at least this share of one caller's.
pub const SQLITE_CALLERS_GOAL: f64 = 0.5;
/// The idle goal on SQLite: 100 idle waiters on 100 handles cost this
/// process at most this much CPU, ms per second.
pub const SQLITE_IDLE_GOAL_MS: f64 = 10.0;

/// The sled tail goal: each read's p99 at most this multiple of its
/// median, at every store size.
pub const SLED_TAIL_GOAL: f64 = 10.0;
/// The sled cold-open goal (issue 16): `lf-handoff status` on the largest
/// store at most this many ms (median).
pub const SLED_COLD_OPEN_GOAL_MS: f64 = 50.0;

/// The service's lifecycle goal: through the service at least this share
/// of through the library (issue 22).
pub const SERVE_LIFECYCLE_GOAL: f64 = 0.8;
/// The service's GET goal: requests per second at least this share of a
/// bare handler's on the same HTTP stack.
pub const SERVE_GET_GOAL: f64 = 0.5;
/// The goal of a finish to another server's event stream, ms (median).
pub const SERVE_EVENTS_GOAL_MS: f64 = 20.0;
/// The idle server's memory goal, MB (10^6 bytes) resident.
pub const SERVE_IDLE_RSS_GOAL_MB: f64 = 100.0;
/// The idle server's CPU goal, ms per second: one clock tick (10 ms) in a
/// 10 s window, the smallest CPU time `/proc` shows above none.
pub const SERVE_IDLE_CPU_GOAL_MS: f64 = 1.0;
/// The hostile peers' goal (C29): a third address's `GET` p99 at most
/// this many ms while they trickle and flood...
pub const SERVE_HOSTILE_P99_GOAL_MS: f64 = 50.0;
/// ...and its throughput at least this share of the same run's without
/// them.
pub const SERVE_HOSTILE_RATIO_GOAL: f64 = 0.8;

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The machine it ran on.
    pub machine: Machine,
    /// Store sizes of the latency figures.
    pub sizes: Vec<u64>,
    /// How much was measured.
    pub settings: Settings,
    /// Per backend.
    pub backends: Vec<BackendReport>,
    /// Each goal, with its figure.
    pub goals: Vec<Goal>,
    /// Wall time of the whole run.
    pub total_seconds: f64,
}

/// How much the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Lifecycles per side.
    pub lifecycles: usize,
    /// `get` samples per store size (`list --parent` takes half,
    /// `list --active` and `list --status waiting` a tenth each).
    pub get_samples: usize,
    /// Untimed reads per store before sampling.
    pub warm_reads: usize,
    /// Racing-finisher races.
    pub races: usize,
    /// Runs per cold-start command.
    pub cold_runs: usize,
}

/// The machine.
#[derive(Debug, Serialize)]
pub struct Machine {
    /// CPUs available (`nproc`).
    pub nproc: usize,
    /// CPU model.
    pub cpu: String,
    /// Total memory, bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// The device and filesystem under the scratch directory.
    pub disk: String,
    /// When the run started (UTC, RFC 3339).
    pub date: String,
}

/// One backend's figures.
#[derive(Debug, Default, Serialize)]
pub struct BackendReport {
    /// Backend name.
    pub name: String,
    /// Why it was not measured, if it was not.
    pub skipped: Option<String>,
    /// Its durability settings.
    pub durability: String,
    /// Engine facts.
    pub notes: Vec<String>,
    /// The disk's fsync rate.
    pub fsync: Option<FsyncRate>,
    /// Lifecycle throughput, store and raw.
    pub lifecycle: Option<LifecycleFigures>,
    /// The lifecycle with a choice answer against the plain one (C26).
    pub answers: Option<AnswerFigures>,
    /// Overwrite fsync rate / commits per lifecycle: the most lifecycles a
    /// second the disk allows when commits are not grouped.
    pub durable_bound_per_sec: Option<f64>,
    /// Read latency per size.
    pub latency: Vec<LatencyAt>,
    /// Largest size / smallest size, per read.
    pub growth: Option<Growth>,
    /// Racing finishers.
    pub race: Option<RaceFigures>,
    /// Command-line cold start.
    pub cold_start: Option<ColdStart>,
    /// `lf-handoff status` alone on each store of the latency phase,
    /// smallest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cold_start_by_size: Vec<SizedColdStart>,
    /// The peak RSS of one `lf-handoff list` on the largest store.
    pub list_rss: Option<ListRss>,
    /// sled: a lifecycle loop's RSS at each page-cache size.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sled_cache_loops: Vec<CacheLoop>,
    /// Wake latency of a waiter (issue 16).
    pub wake: Option<WakeFigures>,
    /// The cost of idle waiters (issue 16).
    pub idle: Option<IdleFigures>,
    /// Concurrent callers, store and raw (issue 16).
    pub callers: Option<CallerFigures>,
    /// Statements per lifecycle, store and raw (PostgreSQL, issue 23).
    pub statements: Option<StatementFigures>,
    /// The lifecycle through the service and through the library (issue
    /// 22).
    pub serve_lifecycle: Option<ServeLifecycleFigures>,
    /// `GET /v1/handoffs/{id}` per second, service and bare handler.
    pub serve_get: Option<GetRateFigures>,
    /// A finish through one server to another's event stream
    /// (PostgreSQL).
    pub serve_events: Option<EventFigures>,
    /// Idle event streams and long polls on a server process.
    pub serve_idle: Option<ServeIdleFigures>,
    /// `GET` while other addresses trickle and flood (C29).
    pub serve_hostile: Option<HostileGetFigures>,
    /// The agents' hooks (C27), SQLite only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hooks: Option<crate::hooks::HookFigures>,
    /// `ask_person` over stdio against the library's open + wait (C28).
    pub mcp: Option<crate::mcp::McpFigures>,
    /// Phases that failed, with why.
    pub errors: Vec<String>,
}

/// The command-line cold start on one store of the latency phase.
#[derive(Debug, Clone, Serialize)]
pub struct SizedColdStart {
    /// Handoffs stored.
    pub handoffs: u64,
    /// `lf-handoff status` alone.
    pub cold_start: ColdStart,
}

/// Latency at the largest size divided by latency at the smallest.
#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    /// Smallest size.
    pub from: u64,
    /// Largest size.
    pub to: u64,
    /// `get` median ratio.
    pub get: f64,
    /// `list --parent` median ratio.
    pub list_parent: f64,
    /// `list --active` median ratio.
    pub list_active: f64,
    /// `list --status waiting` median ratio.
    pub list_status: f64,
    /// The same ratios of the p99s: get, list --parent, list --active,
    /// list --status waiting.
    pub p99: [f64; 4],
    /// The raw engine's get, median ratio (for comparison, not a goal).
    pub raw_get: f64,
}

impl Growth {
    /// The ratios of `figures`' last and first sizes; `None` for fewer than two.
    pub fn of(figures: &[LatencyAt]) -> Option<Self> {
        let (first, last) = (figures.first()?, figures.last()?);
        if figures.len() < 2 {
            return None;
        }
        let median = |f: fn(&LatencyAt) -> Summary| ratio(f(last).median_us, f(first).median_us);
        let p99 = |f: fn(&LatencyAt) -> Summary| ratio(f(last).p99_us, f(first).p99_us);
        Some(Self {
            from: first.handoffs,
            to: last.handoffs,
            get: median(|f| f.get),
            list_parent: median(|f| f.list_parent),
            list_active: median(|f| f.list_active),
            list_status: median(|f| f.list_status),
            p99: [
                p99(|f| f.get),
                p99(|f| f.list_parent),
                p99(|f| f.list_active),
                p99(|f| f.list_status),
            ],
            raw_get: median(|f| f.raw_get),
        })
    }
}

/// One goal and whether this run met it.
#[derive(Debug, Serialize)]
pub struct Goal {
    /// Backend.
    pub backend: String,
    /// What is compared.
    pub figure: String,
    /// The measured value.
    pub value: f64,
    /// The goal, as text (`>= 0.7`).
    pub goal: String,
    /// Whether it was met.
    pub met: bool,
}

impl Report {
    /// Fills [`goals`](Self::goals) from the backends' figures.
    pub fn evaluate_goals(&mut self) {
        self.goals = self.backends.iter().flat_map(backend_goals).collect();
    }
}

/// The goals one backend's figures are held to, with their values.
fn backend_goals(backend: &BackendReport) -> Vec<Goal> {
    let mut goals = Goals {
        backend: &backend.name,
        goals: Vec::new(),
    };
    if let Some(lifecycle) = &backend.lifecycle {
        // The throughput ratio moves with the disk's occasional long
        // syncs; the goal takes the lower of it and the ratio of the
        // median lifecycles, so a lucky stall on the raw side never
        // meets it.
        let median = ratio(
            lifecycle.raw_lifecycle_median_us,
            lifecycle.store_lifecycle_median_us,
        );
        goals.at_least(
            "lifecycle store/raw (lower of 2)".into(),
            lifecycle.ratio.min(median),
            LIFECYCLE_GOAL,
        );
    }
    if let Some(answers) = &backend.answers {
        // As the lifecycle goal: the lower of the throughput ratio and the
        // ratio of the median lifecycles.
        let median = ratio(answers.plain_median_us, answers.choice_median_us);
        goals.at_least(
            "lifecycle with a choice/plain (lower of 2)".into(),
            answers.ratio.min(median),
            ANSWERS_GOAL,
        );
    }
    if let Some(growth) = &backend.growth {
        let span = format!("{}/{}", short(growth.to), short(growth.from));
        for (read, value) in [
            ("get", growth.get),
            ("list --parent", growth.list_parent),
            ("list --active", growth.list_active),
            ("list --status waiting", growth.list_status),
        ] {
            goals.at_most(format!("{read} {span}"), value, GROWTH_GOAL);
        }
    }
    if backend.name == "sled" {
        sled_goals(&mut goals, backend);
    }
    let wake_goal = match backend.name.as_str() {
        "sqlite" => Some((
            "wake Store::wait median ms",
            STORE_WAIT_ROW,
            WAKE_GOAL_SQLITE_MS,
        )),
        "postgres" => Some((
            "wake Store::wait median ms",
            STORE_WAIT_ROW,
            WAKE_GOAL_POSTGRES_MS,
        )),
        "sled" => Some((
            "wake lf-handoff wait median ms",
            CLI_WAIT_ROW,
            WAKE_GOAL_SLED_CLI_MS,
        )),
        _ => None,
    };
    if let (Some((name, waiter, limit)), Some(wake)) = (wake_goal, &backend.wake) {
        let row = wake.waiters.iter().find(|row| row.waiter == waiter);
        if let Some(latency) = row.and_then(|row| row.latency) {
            goals.at_most(name.into(), latency.median_us / 1000.0, limit);
        }
    }
    if let Some(hooks) = &backend.hooks {
        let ms = |summary: &crate::stats::Summary| summary.median_us / 1000.0;
        goals.at_most(
            "hook: answer to exit median ms".into(),
            ms(&hooks.answer_local),
            HOOK_ANSWER_GOAL_MS,
        );
        goals.at_most(
            "hook: answer to exit through serve median ms".into(),
            ms(&hooks.answer_serve),
            HOOK_ANSWER_GOAL_MS,
        );
        goals.at_most(
            "hook: start to handoff opened median ms".into(),
            ms(&hooks.start),
            HOOK_START_GOAL_MS,
        );
    }
    if let Some(callers) = &backend.callers {
        let at = |n: usize| callers.rows.iter().find(|row| row.callers == n);
        if let Some(row) = at(16).filter(|_| backend.name == "postgres") {
            goals.at_least("16 callers store/raw".into(), row.ratio, CALLERS_GOAL);
        }
        let sqlite = backend.name == "sqlite";
        if let (true, Some(one), Some(sixteen)) = (sqlite, at(1), at(16)) {
            goals.at_least(
                "16 callers / 1 caller, store".into(),
                ratio(sixteen.store_per_sec, one.store_per_sec),
                SQLITE_CALLERS_GOAL,
            );
            // Ahead of the raw side, which has SQLite's own busy handler.
            goals.at_least("16 callers store/raw".into(), sixteen.ratio, 1.0);
        }
    }
    if let Some(idle) = backend.idle.as_ref().filter(|_| backend.name == "sqlite") {
        // The setting with every waiter on a handle of its own.
        let spread = idle
            .rows
            .iter()
            .filter(|row| row.waiters > 0)
            .max_by_key(|row| row.handles);
        if let Some(row) = spread {
            goals.at_most(
                format!(
                    "CPU ms/s, {} waiters on {} handles",
                    row.waiters, row.handles
                ),
                row.cpu_ms_per_sec,
                SQLITE_IDLE_GOAL_MS,
            );
        }
    }
    serve_goals(&mut goals, backend);
    if let Some(mcp) = &backend.mcp {
        goals.at_most(
            "ask_person over stdio - open + wait, median ms".into(),
            mcp.extra_median_ms,
            crate::mcp::EXTRA_GOAL_MS,
        );
    }
    if let Some(ColdStart::Measured {
        ratio, raw_command, ..
    }) = &backend.cold_start
    {
        goals.at_most(
            format!("status cold start / {raw_command}"),
            *ratio,
            COLD_START_GOAL,
        );
    }
    goals.goals
}

/// sled's tail at every size, and its cold open on the largest store.
fn sled_goals(goals: &mut Goals<'_>, backend: &BackendReport) {
    for at in &backend.latency {
        for (read, summary) in [("get", at.get), ("list --parent", at.list_parent)] {
            goals.at_most(
                format!("{read} p99/median {}", short(at.handoffs)),
                ratio(summary.p99_us, summary.median_us),
                SLED_TAIL_GOAL,
            );
        }
    }
    let largest = backend.cold_start_by_size.last();
    if let Some((handoffs, cold)) = largest.and_then(|sized| match &sized.cold_start {
        ColdStart::Measured { cli, .. } | ColdStart::CliOnly { cli, .. } => {
            Some((sized.handoffs, cli))
        }
        ColdStart::Unavailable { .. } => None,
    }) {
        goals.at_most(
            format!("status cold start ms, {}", short(handoffs)),
            cold.median_us / 1000.0,
            SLED_COLD_OPEN_GOAL_MS,
        );
    }
}

/// The goals of the service's figures (issue 22).
fn serve_goals(goals: &mut Goals<'_>, backend: &BackendReport) {
    if let Some(lifecycle) = &backend.serve_lifecycle {
        // As the library's lifecycle goal: the lower of the throughput
        // ratio and the ratio of the median lifecycles.
        let median = ratio(
            lifecycle.library_lifecycle_median_us,
            lifecycle.service_lifecycle_median_us,
        );
        goals.at_least(
            "lifecycle service/library (lower of 2)".into(),
            lifecycle.ratio.min(median),
            SERVE_LIFECYCLE_GOAL,
        );
    }
    if let Some(get) = &backend.serve_get {
        for row in &get.rows {
            goals.at_least(
                format!("GET/s service/bare, {} conn", row.connections),
                row.ratio,
                SERVE_GET_GOAL,
            );
        }
    }
    if let Some(events) = &backend.serve_events {
        goals.at_most(
            "finish to other server's stream ms".into(),
            events.latency.median_us / 1000.0,
            SERVE_EVENTS_GOAL_MS,
        );
    }
    if let Some(idle) = &backend.serve_idle {
        let clients = format!("{}+{} idle", idle.streams, idle.long_polls);
        goals.at_most(
            format!("serve RSS MB, {clients}"),
            idle.held.peak_rss_bytes as f64 / 1e6,
            SERVE_IDLE_RSS_GOAL_MB,
        );
        goals.at_most(
            format!("serve CPU ms/s, {clients}"),
            idle.held.cpu_ms_per_sec,
            SERVE_IDLE_CPU_GOAL_MS,
        );
    }
    if let Some(hostile) = &backend.serve_hostile {
        goals.at_most(
            "GET p99 ms, hostile peers".into(),
            hostile.attacked.latency.p99_us / 1000.0,
            SERVE_HOSTILE_P99_GOAL_MS,
        );
        goals.at_least(
            "GET/s attacked/quiet".into(),
            hostile.throughput_ratio,
            SERVE_HOSTILE_RATIO_GOAL,
        );
    }
}

/// The goals of one backend, as they are added.
struct Goals<'a> {
    backend: &'a str,
    goals: Vec<Goal>,
}

impl Goals<'_> {
    /// `figure` must be at least `low`.
    fn at_least(&mut self, figure: String, value: f64, low: f64) {
        self.push(figure, value, format!(">= {low}"), value >= low);
    }

    /// `figure` must be at most `high`.
    fn at_most(&mut self, figure: String, value: f64, high: f64) {
        self.push(figure, value, format!("<= {high}"), value <= high);
    }

    fn push(&mut self, figure: String, value: f64, goal: String, met: bool) {
        self.goals.push(Goal {
            backend: self.backend.to_string(),
            figure,
            value,
            goal,
            met,
        });
    }
}

impl Machine {
    /// Reads the machine's description from /proc and /sys.
    pub fn describe(scratch: &Path, date: String) -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find(|line| line.starts_with("model name"))
            .and_then(|line| line.split(':').nth(1))
            .map_or_else(|| "unknown CPU".into(), |model| model.trim().to_string());
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|line| line.starts_with("MemTotal:"))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024);
        Self {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            memory_bytes,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            disk: disk_of(scratch, &read("/proc/mounts")),
            date,
        }
    }
}

/// The device, filesystem and rotational flag of the mount holding `path`.
fn disk_of(path: &Path, mounts: &str) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let best = mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let device = fields.next()?;
            let mount = fields.next()?;
            let fs = fields.next()?;
            path.starts_with(mount).then_some((device, mount, fs))
        })
        .max_by_key(|(_, mount, _)| mount.len());
    let Some((device, mount, fs)) = best else {
        return "unknown".into();
    };
    let name = device.rsplit('/').next().unwrap_or(device);
    let base: String = name.trim_end_matches(|c: char| c.is_ascii_digit()).into();
    let kind = [name, base.as_str()]
        .iter()
        .find_map(|dev| std::fs::read_to_string(format!("/sys/block/{dev}/queue/rotational")).ok())
        .map_or("", |flag| {
            if flag.trim() == "1" {
                ", the kernel reports it rotational"
            } else {
                ", the kernel reports it non-rotational"
            }
        });
    format!(
        "{device} mounted on {mount} ({fs}{kind}), store files in {}",
        path.display()
    )
}

//! The report: what the run measured, as a table for people and as JSON.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::coldstart::ColdStart;
use crate::fsync::FsyncRate;
use crate::latency::LatencyAt;
use crate::lifecycle::{LifecycleFigures, COMMITS_PER_LIFECYCLE};
use crate::race::RaceFigures;
use crate::statements::StatementFigures;
use crate::stats::{ratio, Summary};
use crate::{callers::CallerFigures, idle::IdleFigures, wake::WakeFigures};

/// The lifecycle goal: store throughput at least this share of raw.
pub const LIFECYCLE_GOAL: f64 = 0.7;
/// The growth goal: latency at the largest size at most this multiple of
/// the smallest.
pub const GROWTH_GOAL: f64 = 2.0;
/// The cold-start goal: `status` at most this multiple of the engine's client.
pub const COLD_START_GOAL: f64 = 3.0;
/// The wake goal on SQLite: `Store::wait` in another process returns at
/// most this many ms (median) after the finish.
pub const WAKE_GOAL_SQLITE_MS: f64 = 50.0;
/// The wake goal on PostgreSQL, ms (median).
pub const WAKE_GOAL_POSTGRES_MS: f64 = 20.0;
/// The concurrency goal on PostgreSQL: store/raw throughput at 16 callers.
pub const CALLERS_GOAL: f64 = 0.9;

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
    /// Wake latency of a waiter (issue 16).
    pub wake: Option<WakeFigures>,
    /// The cost of idle waiters (issue 16).
    pub idle: Option<IdleFigures>,
    /// Concurrent callers, store and raw (issue 16).
    pub callers: Option<CallerFigures>,
    /// Statements per lifecycle, store and raw (PostgreSQL, issue 23).
    pub statements: Option<StatementFigures>,
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
        let mut goals = Vec::new();
        for backend in &self.backends {
            let mut goal =
                |figure: String, value: f64, at_least: Option<f64>, at_most: Option<f64>| {
                    let (text, met) = match (at_least, at_most) {
                        (Some(low), _) => (format!(">= {low}"), value >= low),
                        (_, Some(high)) => (format!("<= {high}"), value <= high),
                        _ => (String::new(), true),
                    };
                    goals.push(Goal {
                        backend: backend.name.clone(),
                        figure,
                        value,
                        goal: text,
                        met,
                    });
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
                goal(
                    "lifecycle store/raw (lower of 2)".into(),
                    lifecycle.ratio.min(median),
                    Some(LIFECYCLE_GOAL),
                    None,
                );
            }
            if let Some(growth) = &backend.growth {
                let span = format!("{}/{}", short(growth.to), short(growth.from));
                goal(format!("get {span}"), growth.get, None, Some(GROWTH_GOAL));
                goal(
                    format!("list --parent {span}"),
                    growth.list_parent,
                    None,
                    Some(GROWTH_GOAL),
                );
                goal(
                    format!("list --active {span}"),
                    growth.list_active,
                    None,
                    Some(GROWTH_GOAL),
                );
                goal(
                    format!("list --status waiting {span}"),
                    growth.list_status,
                    None,
                    Some(GROWTH_GOAL),
                );
            }
            let wake_goal = match backend.name.as_str() {
                "sqlite" => Some(WAKE_GOAL_SQLITE_MS),
                "postgres" => Some(WAKE_GOAL_POSTGRES_MS),
                _ => None,
            };
            if let (Some(limit), Some(wake)) = (wake_goal, &backend.wake) {
                if let Some(latency) = wake.waiters.first().and_then(|row| row.latency) {
                    goal(
                        "wake Store::wait median ms".into(),
                        latency.median_us / 1000.0,
                        None,
                        Some(limit),
                    );
                }
            }
            if let Some(callers) = &backend.callers {
                let at_16 = callers.rows.iter().find(|row| row.callers == 16);
                if let Some(row) = at_16.filter(|_| backend.name == "postgres") {
                    goal(
                        "16 callers store/raw".into(),
                        row.ratio,
                        Some(CALLERS_GOAL),
                        None,
                    );
                }
            }
            if let Some(ColdStart::Measured {
                ratio, raw_command, ..
            }) = &backend.cold_start
            {
                goal(
                    format!("status cold start / {raw_command}"),
                    *ratio,
                    None,
                    Some(COLD_START_GOAL),
                );
            }
        }
        self.goals = goals;
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "lf-handoff-bench, {} — {} CPUs ({}), {:.1} GiB RAM, kernel {}\ndisk: {}\n",
            m.date,
            m.nproc,
            m.cpu,
            m.memory_bytes as f64 / (1u64 << 30) as f64,
            m.kernel,
            m.disk
        );
        let settings = &self.settings;
        let _ = writeln!(
            out,
            "settings: {} lifecycles per side; {} get samples per size after {} untimed warm-up \
             reads; {} races; {} cold starts per command\n",
            settings.lifecycles,
            settings.get_samples,
            settings.warm_reads,
            settings.races,
            settings.cold_runs
        );
        for backend in &self.backends {
            backend_table(&mut out, backend);
        }
        if !self.goals.is_empty() {
            let _ = writeln!(out, "goals");
            for goal in &self.goals {
                let _ = writeln!(
                    out,
                    "  {:<9} {:<36} {:>7.2}  goal {:<7} {}",
                    goal.backend,
                    goal.figure,
                    goal.value,
                    goal.goal,
                    if goal.met { "met" } else { "MISSED" }
                );
            }
        }
        let _ = writeln!(out, "\ntotal time {:.0} s", self.total_seconds);
        out
    }
}

/// A read's name, how to pick its figures, and its growth ratio.
type ReadRow = (&'static str, fn(&LatencyAt) -> Summary, Option<f64>);

fn backend_table(out: &mut String, backend: &BackendReport) {
    let _ = writeln!(out, "== {} ==", backend.name);
    if let Some(reason) = &backend.skipped {
        let _ = writeln!(out, "  skipped: {reason}\n");
        return;
    }
    let _ = writeln!(out, "  durability: {}", backend.durability);
    for note in &backend.notes {
        let _ = writeln!(out, "  {note}");
    }
    match &backend.fsync {
        Some(fsync) => {
            let _ = writeln!(
                out,
                "  disk fsync rate (4 KiB write + fdatasync, in {}):\n    overwrite {:.0}/s (median {:.0} µs), append {:.0}/s (median {:.0} µs)",
                fsync.dir,
                fsync.overwrite_per_sec,
                fsync.overwrite_median_us,
                fsync.append_per_sec,
                fsync.append_median_us
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  disk fsync rate: not measured (the fsync phase did not run, or the store has no local directory)"
            );
        }
    }
    if let Some(lifecycle) = &backend.lifecycle {
        let _ = writeln!(
            out,
            "\n  lifecycle (open+attach+finish+claim_wake, {} fresh handoffs per side, one at a time)",
            lifecycle.lifecycles
        );
        let _ = writeln!(
            out,
            "  {:<22} {:>10} {:>10} {:>10}",
            "", "store", "raw", "store/raw"
        );
        let _ = writeln!(
            out,
            "  {:<22} {:>10.0} {:>10.0} {:>10.2}",
            "lifecycles/s", lifecycle.store_per_sec, lifecycle.raw_per_sec, lifecycle.ratio
        );
        let _ = writeln!(
            out,
            "  {:<22} {:>10.0} {:>10.0} {:>10.2}",
            "lifecycle median µs",
            lifecycle.store_lifecycle_median_us,
            lifecycle.raw_lifecycle_median_us,
            ratio(
                lifecycle.raw_lifecycle_median_us,
                lifecycle.store_lifecycle_median_us
            )
        );
        for step in &lifecycle.steps {
            let _ = writeln!(
                out,
                "  {:<22} {:>10.0} {:>10.0} {:>10.2}",
                format!("{} median µs", step.step),
                step.store.median_us,
                step.raw.median_us,
                ratio(step.raw.median_us, step.store.median_us)
            );
        }
        if let Some(bound) = backend.durable_bound_per_sec {
            let _ = writeln!(
                out,
                "  durable bound: {COMMITS_PER_LIFECYCLE} synced commits per lifecycle at the overwrite fsync rate = at most {bound:.0} lifecycles/s"
            );
        }
    }
    if !backend.latency.is_empty() {
        let _ = writeln!(out, "\n  read latency through the store, µs (median / p99)");
        let mut header = format!("  {:<21}", "handoffs stored");
        for at in &backend.latency {
            header.push_str(&format!(" {:>17}", short(at.handoffs)));
        }
        if let Some(growth) = &backend.growth {
            header.push_str(&format!(
                " {:>16}",
                format!("{}/{} median", short(growth.to), short(growth.from))
            ));
        }
        let _ = writeln!(out, "{header}");
        let rows: [ReadRow; 5] = [
            ("get", |at| at.get, backend.growth.as_ref().map(|g| g.get)),
            (
                "list --parent",
                |at| at.list_parent,
                backend.growth.as_ref().map(|g| g.list_parent),
            ),
            (
                "list --active",
                |at| at.list_active,
                backend.growth.as_ref().map(|g| g.list_active),
            ),
            (
                "list --status waiting",
                |at| at.list_status,
                backend.growth.as_ref().map(|g| g.list_status),
            ),
            (
                "raw engine get",
                |at| at.raw_get,
                backend.growth.as_ref().map(|g| g.raw_get),
            ),
        ];
        for (name, pick, growth) in rows {
            let mut line = format!("  {name:<21}");
            for at in &backend.latency {
                let s = pick(at);
                line.push_str(&format!(
                    " {:>17}",
                    format!("{} / {}", micros(s.median_us), micros(s.p99_us))
                ));
            }
            if let Some(growth) = growth {
                line.push_str(&format!(" {growth:>16.2}"));
            }
            let _ = writeln!(out, "{line}");
        }
        let mut line = format!("  {:<21}", "bulk load s");
        for at in &backend.latency {
            line.push_str(&format!(" {:>17.1}", at.load_seconds));
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(race) = &backend.race {
        let _ = writeln!(
            out,
            "\n  racing finishers: {} handles finish one handoff, {} races, exactly one winner each: \
             median {:.2} ms, p99 {:.2} ms per race",
            race.finishers,
            race.races,
            race.wall.median_us / 1000.0,
            race.wall.p99_us / 1000.0
        );
    }
    match &backend.cold_start {
        Some(ColdStart::Measured {
            runs,
            cli,
            raw_command,
            raw,
            ratio,
        }) => {
            let _ = writeln!(
                out,
                "  cold start ({runs} runs each): lf-handoff status {:.2} ms, {raw_command} {:.2} ms (medians), ratio {ratio:.2}",
                cli.median_us / 1000.0,
                raw.median_us / 1000.0
            );
        }
        Some(ColdStart::CliOnly { runs, cli, reason }) => {
            let _ = writeln!(
                out,
                "  cold start ({runs} runs): lf-handoff status {:.2} ms (median); no comparison: {reason}",
                cli.median_us / 1000.0
            );
        }
        Some(ColdStart::Unavailable { reason }) => {
            let _ = writeln!(out, "  cold start: {reason}");
        }
        None => {}
    }
    if !backend.cold_start_by_size.is_empty() {
        let figures: Vec<String> = backend
            .cold_start_by_size
            .iter()
            .map(|sized| match &sized.cold_start {
                ColdStart::Measured { cli, .. } | ColdStart::CliOnly { cli, .. } => {
                    format!("{} {:.2} ms", short(sized.handoffs), cli.median_us / 1000.0)
                }
                ColdStart::Unavailable { reason } => {
                    format!("{} not measured ({reason})", short(sized.handoffs))
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  cold start by store size (lf-handoff status, medians): {}",
            figures.join(", ")
        );
    }
    if let Some(wake) = &backend.wake {
        wake_table(out, wake);
    }
    if let Some(idle) = &backend.idle {
        idle_table(out, idle);
    }
    if let Some(callers) = &backend.callers {
        callers_table(out, callers);
    }
    if let Some(statements) = &backend.statements {
        statements_table(out, statements);
    }
    for error in &backend.errors {
        let _ = writeln!(out, "  ERROR: {error}");
    }
    let _ = writeln!(out);
}

fn wake_table(out: &mut String, wake: &WakeFigures) {
    let _ = writeln!(
        out,
        "\n  wake latency, finish to the waiter's report, ms ({}; finish after a \
         pseudo-random {}-{} ms wait)",
        wake.setting, 300, wake.max_delay_ms
    );
    let _ = writeln!(
        out,
        "  {:<54} {:>7} {:>8} {:>8} {:>8}",
        "waiter", "samples", "median", "p99", "max"
    );
    for row in &wake.waiters {
        match (&row.latency, &row.missing) {
            (Some(s), _) => {
                let _ = writeln!(
                    out,
                    "  {:<54} {:>7} {:>8.1} {:>8.1} {:>8.1}",
                    row.waiter,
                    s.samples,
                    s.median_us / 1000.0,
                    s.p99_us / 1000.0,
                    s.max_us / 1000.0
                );
            }
            (None, missing) => {
                let _ = writeln!(
                    out,
                    "  {:<54} not measured: {}",
                    row.waiter,
                    missing.as_deref().unwrap_or("?")
                );
            }
        }
    }
}

fn idle_table(out: &mut String, idle: &IdleFigures) {
    let _ = writeln!(
        out,
        "\n  idle waiters: {} tasks of this process in Store::wait for {:.0} s, per second of wall time\n  \
         (CPU: this process, user+system; read()/s: its read/pread system calls, not socket \
         receives; scans: of the store's tables; commits: the whole database's)",
        idle.waiters, idle.seconds
    );
    let _ = writeln!(
        out,
        "  {:<40} {:>8} {:>10} {:>12} {:>12} {:>9}",
        "setting", "CPU ms/s", "read()/s", "table scans/s", "db commits/s", "timed out"
    );
    let cell = |value: Option<f64>| value.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    for row in &idle.rows {
        let _ = writeln!(
            out,
            "  {:<40} {:>8.1} {:>10.0} {:>12} {:>12} {:>9}",
            row.setting,
            row.cpu_ms_per_sec,
            row.read_syscalls_per_sec,
            cell(row.server_scans_per_sec),
            cell(row.server_commits_per_sec),
            format!("{}/{}", row.timed_out, row.waiters)
        );
    }
}

fn callers_table(out: &mut String, callers: &CallerFigures) {
    let _ = writeln!(
        out,
        "\n  concurrent callers, lifecycles/s ({})",
        callers.setting
    );
    let _ = writeln!(
        out,
        "  {:<8} {:>10} {:>10} {:>10} {:>10} {:>18} {:>18}",
        "callers",
        "lifecycles",
        "store/s",
        "raw/s",
        "store/raw",
        "store median/p99 ms",
        "raw median/p99 ms"
    );
    for row in &callers.rows {
        let _ = writeln!(
            out,
            "  {:<8} {:>10} {:>10.0} {:>10.0} {:>10.2} {:>18} {:>18}",
            row.callers,
            row.lifecycles,
            row.store_per_sec,
            row.raw_per_sec,
            row.ratio,
            format!(
                "{:.1} / {:.1}",
                row.store_lifecycle.median_us / 1000.0,
                row.store_lifecycle.p99_us / 1000.0
            ),
            format!(
                "{:.1} / {:.1}",
                row.raw_lifecycle.median_us / 1000.0,
                row.raw_lifecycle.p99_us / 1000.0
            )
        );
    }
}

fn statements_table(out: &mut String, figures: &StatementFigures) {
    let _ = writeln!(
        out,
        "\n  statements per lifecycle ({} callers, {} lifecycles per side, counted by \
         pg_stat_statements on {}): store {:.2}, raw {:.2}",
        figures.callers,
        figures.lifecycles,
        figures.server,
        figures.store.per_lifecycle,
        figures.raw.per_lifecycle
    );
    for (side, counts) in [("store", &figures.store), ("raw", &figures.raw)] {
        for count in &counts.statements {
            let _ = writeln!(
                out,
                "  {side:<6} {:>6.2}  {}",
                count.per_lifecycle, count.statement
            );
        }
    }
}

/// Microseconds for a table cell: one decimal below 10, none above.
fn micros(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

/// 1000 -> "1k", 1000000 -> "1M".
pub fn short(n: u64) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n % 1_000 == 0 {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
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

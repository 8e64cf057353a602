//! The report as a table for people.

use std::fmt::Write as _;

use super::{short, BackendReport, ColdStart, Growth, Report};
use crate::callers::CallerFigures;
use crate::fsync::FsyncRate;
use crate::idle::IdleFigures;
use crate::latency::LatencyAt;
use crate::lifecycle::{LifecycleFigures, COMMITS_PER_LIFECYCLE};
use crate::statements::StatementFigures;
use crate::stats::{ratio, Summary};
use crate::wake::WakeFigures;

impl Report {
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

/// One backend's figures, or why it was skipped.
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
    fsync_lines(out, backend.fsync.as_ref());
    if let Some(lifecycle) = &backend.lifecycle {
        lifecycle_table(out, lifecycle, backend.durable_bound_per_sec);
    }
    if !backend.latency.is_empty() {
        latency_table(out, &backend.latency, backend.growth.as_ref());
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
    cold_start_lines(out, backend);
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

/// The disk's fsync rate, or why it was not measured.
fn fsync_lines(out: &mut String, fsync: Option<&FsyncRate>) {
    match fsync {
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
}

/// Lifecycle throughput, store against raw, step by step.
fn lifecycle_table(out: &mut String, lifecycle: &LifecycleFigures, durable_bound: Option<f64>) {
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
    if let Some(bound) = durable_bound {
        let _ = writeln!(
            out,
            "  durable bound: {COMMITS_PER_LIFECYCLE} synced commits per lifecycle at the overwrite fsync rate = at most {bound:.0} lifecycles/s"
        );
    }
}

/// Read latency through the store per store size, with the growth ratio.
fn latency_table(out: &mut String, latency: &[LatencyAt], growth: Option<&Growth>) {
    let _ = writeln!(out, "\n  read latency through the store, µs (median / p99)");
    let mut header = format!("  {:<21}", "handoffs stored");
    for at in latency {
        header.push_str(&format!(" {:>17}", short(at.handoffs)));
    }
    if let Some(growth) = growth {
        header.push_str(&format!(
            " {:>16}",
            format!("{}/{} median", short(growth.to), short(growth.from))
        ));
    }
    let _ = writeln!(out, "{header}");
    let rows: [ReadRow; 5] = [
        ("get", |at| at.get, growth.map(|g| g.get)),
        (
            "list --parent",
            |at| at.list_parent,
            growth.map(|g| g.list_parent),
        ),
        (
            "list --active",
            |at| at.list_active,
            growth.map(|g| g.list_active),
        ),
        (
            "list --status waiting",
            |at| at.list_status,
            growth.map(|g| g.list_status),
        ),
        ("raw engine get", |at| at.raw_get, growth.map(|g| g.raw_get)),
    ];
    for (name, pick, growth) in rows {
        let mut line = format!("  {name:<21}");
        for at in latency {
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
    for at in latency {
        line.push_str(&format!(" {:>17.1}", at.load_seconds));
    }
    let _ = writeln!(out, "{line}");
}

/// The command line's cold start, overall and per store size.
fn cold_start_lines(out: &mut String, backend: &BackendReport) {
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

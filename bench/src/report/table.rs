//! The report as a table for people.

use std::fmt::Write as _;

use super::{
    BackendReport, ColdStart, Growth, Report, SERVE_EVENTS_GOAL_MS, SERVE_GET_GOAL,
    SERVE_HOSTILE_P99_GOAL_MS, SERVE_HOSTILE_RATIO_GOAL, SERVE_IDLE_CPU_GOAL_MS,
    SERVE_IDLE_RSS_GOAL_MB, SERVE_LIFECYCLE_GOAL,
};
use crate::callers::CallerFigures;
use crate::fsync::FsyncRate;
use crate::idle::IdleFigures;
use crate::latency::LatencyAt;
use crate::lifecycle::{LifecycleFigures, COMMITS_PER_LIFECYCLE};
use crate::statements::StatementFigures;
use crate::stats::{ratio, short, Summary};
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
            hooks_table(&mut out, backend);
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
    if let Some(answers) = &backend.answers {
        let _ = writeln!(
            out,
            "\n  a question with a shape (C26), {} lifecycles each, taking turns: plain {:.0}/s \
             (median {:.0} µs), with choices and a choice answer {:.0}/s (median {:.0} µs): \
             {:.2}",
            answers.lifecycles,
            answers.plain_per_sec,
            answers.plain_median_us,
            answers.choice_per_sec,
            answers.choice_median_us,
            answers.ratio
        );
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
    crate::memory::table_lines(out, backend.list_rss.as_slice(), &backend.sled_cache_loops);
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
    serve_tables(out, backend);
    if let Some(mcp) = &backend.mcp {
        let _ = writeln!(
            out,
            "\n  ask_person over stdio (lf-handoff mcp, a new question answered at once with where \
             it stands) and the library's open + wait of zero, ms; goal: at most {} ms more, median",
            crate::mcp::EXTRA_GOAL_MS
        );
        let _ = writeln!(
            out,
            "  {:<24} {:>7} {:>8} {:>8} {:>8}",
            "side", "samples", "median", "p99", "max"
        );
        for (side, s) in [
            ("ask_person over stdio", &mcp.ask_person),
            ("open + wait", &mcp.library),
        ] {
            let _ = writeln!(
                out,
                "  {:<24} {:>7} {:>8.2} {:>8.2} {:>8.2}",
                side,
                s.samples,
                s.median_us / 1000.0,
                s.p99_us / 1000.0,
                s.max_us / 1000.0
            );
        }
        let _ = writeln!(out, "  extra, median: {:.2} ms", mcp.extra_median_ms);
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
    let rows = lifecycle_rows(
        [
            lifecycle.store_per_sec,
            lifecycle.raw_per_sec,
            lifecycle.ratio,
        ],
        [
            lifecycle.store_lifecycle_median_us,
            lifecycle.raw_lifecycle_median_us,
        ],
        lifecycle
            .steps
            .iter()
            .map(|step| (step.step, step.store.median_us, step.raw.median_us)),
    );
    side_by_side(out, ["store", "raw", "store/raw"], &rows);
    if let Some(bound) = durable_bound {
        let _ = writeln!(
            out,
            "  durable bound: {COMMITS_PER_LIFECYCLE} synced commits per lifecycle at the overwrite fsync rate = at most {bound:.0} lifecycles/s"
        );
    }
}

/// The rows of a lifecycle comparison: lifecycles per second of both
/// sides and their ratio, the median lifecycles, and each step's medians
/// (`(step, first, second)`); the ratios of times are second / first.
fn lifecycle_rows<'a>(
    per_sec: [f64; 3],
    medians: [f64; 2],
    steps: impl Iterator<Item = (&'a str, f64, f64)>,
) -> Vec<(String, f64, f64, f64)> {
    let mut rows = vec![
        (
            "lifecycles/s".to_string(),
            per_sec[0],
            per_sec[1],
            per_sec[2],
        ),
        (
            "lifecycle median µs".to_string(),
            medians[0],
            medians[1],
            ratio(medians[1], medians[0]),
        ),
    ];
    rows.extend(steps.map(|(step, first, second)| {
        (
            format!("{step} median µs"),
            first,
            second,
            ratio(second, first),
        )
    }));
    rows
}

/// Two sides and their ratio, one row per figure: the figure's name, the
/// two values (no decimals) and the ratio.
fn side_by_side(out: &mut String, sides: [&str; 3], rows: &[(String, f64, f64, f64)]) {
    let last = sides[2].chars().count().max(10);
    let _ = writeln!(
        out,
        "  {:<22} {:>10} {:>10} {:>last$}",
        "", sides[0], sides[1], sides[2]
    );
    for (name, first, second, ratio) in rows {
        let _ = writeln!(
            out,
            "  {name:<22} {first:>10.0} {second:>10.0} {ratio:>last$.2}"
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

/// The service's figures (issue 22), each with its goal.
fn serve_tables(out: &mut String, backend: &BackendReport) {
    if let Some(lifecycle) = &backend.serve_lifecycle {
        let _ = writeln!(
            out,
            "\n  lifecycle through the service (http backend -> lf-handoff serve in this process -> \
             store) and through the library, {} per side, one at a time; goal service/library >= {}",
            lifecycle.lifecycles, SERVE_LIFECYCLE_GOAL
        );
        let rows = lifecycle_rows(
            [
                lifecycle.service_per_sec,
                lifecycle.library_per_sec,
                lifecycle.ratio,
            ],
            [
                lifecycle.service_lifecycle_median_us,
                lifecycle.library_lifecycle_median_us,
            ],
            lifecycle
                .steps
                .iter()
                .map(|step| (step.step, step.service.median_us, step.library.median_us)),
        );
        side_by_side(out, ["service", "library", "service/library"], &rows);
    }
    if let Some(get) = &backend.serve_get {
        let _ = writeln!(
            out,
            "\n  GET /v1/handoffs/{{id}} per second, keep-alive connections on loopback, {} round(s) \
             of {:.1} s per server; bare = a handler answering the same {} bytes on the same \
             connection loop; read = the store's read and JSON answer without the service's \
             layers (token, log line, metrics), on the same loop; goal service/bare >= {}",
            get.rounds, get.seconds, get.body_bytes, SERVE_GET_GOAL
        );
        let _ = writeln!(
            out,
            "  {:<12} {:>12} {:>12} {:>12} {:>12} {:>12}",
            "connections", "service/s", "bare/s", "service/bare", "read/s", "read/bare"
        );
        for row in &get.rows {
            let _ = writeln!(
                out,
                "  {:<12} {:>12.0} {:>12.0} {:>12.2} {:>12.0} {:>12.2}",
                row.connections,
                row.service_per_sec,
                row.bare_per_sec,
                row.ratio,
                row.read_only_per_sec,
                ratio(row.read_only_per_sec, row.bare_per_sec)
            );
        }
        let _ = writeln!(
            out,
            "  one caller: get through the http backend's Store {:.0}/s, through the library {:.0}/s",
            get.client_store_per_sec, get.library_per_sec
        );
        if let Some(ceiling) = get.one_connection_ceiling {
            let _ = writeln!(
                out,
                "  ceiling at 1 connection (the bare request, then one library get, nothing lost \
                 between): service/bare <= {ceiling:.2}"
            );
        }
    }
    if let Some(events) = &backend.serve_events {
        let _ = writeln!(
            out,
            "\n  finish through server A to a GET /v1/events client of server B, one store: \
             median {:.1} ms, p95 {:.1} ms, max {:.1} ms ({} samples); goal median <= {} ms",
            events.latency.median_us / 1000.0,
            events.p95_us / 1000.0,
            events.latency.max_us / 1000.0,
            events.latency.samples,
            SERVE_EVENTS_GOAL_MS
        );
    }
    if let Some(idle) = &backend.serve_idle {
        let _ = writeln!(
            out,
            "\n  lf-handoff serve process, {} idle event streams + {} pending long polls \
             (open files limit {}{}); goals RSS <= {} MB, CPU <= {} ms/s",
            idle.streams,
            idle.long_polls,
            idle.open_files_limit,
            if idle.raised_open_files_limit {
                ", raised by this run"
            } else {
                ""
            },
            SERVE_IDLE_RSS_GOAL_MB,
            SERVE_IDLE_CPU_GOAL_MS
        );
        let _ = writeln!(
            out,
            "  {:<28} {:>8} {:>10} {:>8} {:>12}",
            "", "seconds", "CPU ms/s", "RSS MB", "peak RSS MB"
        );
        for (label, window) in [
            ("nobody connected", &idle.baseline),
            ("every client connected", &idle.held),
        ] {
            let _ = writeln!(
                out,
                "  {:<28} {:>8.1} {:>10.2} {:>8.1} {:>12.1}",
                label,
                window.seconds,
                window.cpu_ms_per_sec,
                window.rss_bytes as f64 / 1e6,
                window.peak_rss_bytes as f64 / 1e6
            );
        }
    }
    hostile_table(out, backend);
}

/// The hostile peers' figure (C29), with its goals.
fn hostile_table(out: &mut String, backend: &BackendReport) {
    let Some(hostile) = &backend.serve_hostile else {
        return;
    };
    let _ = writeln!(
        out,
        "\n  GET /v1/handoffs/{{id}} from 127.0.0.1 ({} keep-alive connections, {} round(s) of \
         {:.1} s per side) while 127.0.0.2 trickles a byte every 10 s on its share of {} \
         connections and 127.0.0.3 floods idle connections; goals with them: p99 <= {} ms, \
         throughput >= {} of without",
        hostile.connections,
        hostile.rounds,
        hostile.seconds,
        hostile.share,
        SERVE_HOSTILE_P99_GOAL_MS,
        SERVE_HOSTILE_RATIO_GOAL
    );
    let _ = writeln!(
        out,
        "  {:<22} {:>10} {:>10} {:>10} {:>10}",
        "", "requests", "GET/s", "p50 ms", "p99 ms"
    );
    for (label, side) in [
        ("without the peers", &hostile.quiet),
        ("with the peers", &hostile.attacked),
    ] {
        let _ = writeln!(
            out,
            "  {:<22} {:>10} {:>10.0} {:>10.2} {:>10.2}",
            label,
            side.requests,
            side.per_sec,
            side.latency.median_us / 1000.0,
            side.latency.p99_us / 1000.0
        );
    }
    let _ = writeln!(
        out,
        "  throughput with/without {:.2}; trickling connections held at the end of a run (fewest) \
         {}; flooding connections {} ({} refused with a 503)",
        hostile.throughput_ratio,
        hostile.trickle_held,
        hostile.flood_connections,
        hostile.flood_refused
    );
}

/// Microseconds for a table cell: one decimal below 10, none above.
fn micros(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

/// The agents' hooks (C27), when measured.
fn hooks_table(out: &mut String, backend: &BackendReport) {
    let Some(hooks) = &backend.hooks else {
        return;
    };
    let _ = writeln!(
        out,
        "  the agents' hooks ({} samples each), ms",
        hooks.start.samples
    );
    for (what, summary) in [
        ("start to handoff opened (--wait 0s, to exit)", &hooks.start),
        ("a person's answer to the hook's exit", &hooks.answer_local),
        ("the same through serve", &hooks.answer_serve),
    ] {
        let _ = writeln!(
            out,
            "    {what:<46} median {:>7.2}  p99 {:>7.2}",
            summary.median_us / 1000.0,
            summary.p99_us / 1000.0
        );
    }
    let _ = writeln!(out);
}

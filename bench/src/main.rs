//! `lf-handoff-bench`: how much the lf-handoff store costs over the engine
//! underneath it, and whether it stays fast as the registry grows.
//!
//! Run it with the one command in `docs/BENCHMARKS.md`:
//!
//! ```text
//! cargo build --release -p lf-handoff-cli -p lf-handoff-bench && target/release/lf-handoff-bench
//! ```
//!
//! For each backend it measures, in one run and side by side (only ratios
//! are stable on a noisy machine):
//!
//! - lifecycle throughput through the `Store` and as raw statements on the
//!   same engine with the same durability, and their ratio ([`lifecycle`]);
//! - `get`, `list --parent` and `list --active` latency at growing store
//!   sizes, and the largest/smallest ratio ([`latency`]);
//! - eight racing finishers on one handoff ([`race`]);
//! - the cold start of `lf-handoff status ID` against the engine's own
//!   client ([`coldstart`]);
//! - the fsync rate of the disk under the store ([`fsync`]);
//! - how soon a waiter in another process sees a finish: `Store::wait`,
//!   the old polling loop and `lf-handoff wait` ([`wake`]);
//! - what 100 idle waiters cost ([`idle`]);
//! - lifecycle throughput with 1, 4 and 16 concurrent callers, store and
//!   raw ([`callers`]);
//! - on PostgreSQL, the statements (round trips) per lifecycle on each
//!   side with 16 callers, counted by `pg_stat_statements` on a server of
//!   the benchmark's own ([`statements`]);
//! - the service (issue 22, [`serve`]): the lifecycle through
//!   `lf-handoff serve` against the library, `GET /v1/handoffs/{id}`
//!   requests per second against a bare handler of the same HTTP stack,
//!   a finish through one server to an event stream of another on one
//!   PostgreSQL store, what 1,000 idle event streams and 1,000 long
//!   polls cost a server process, and a client's `GET` p99 and throughput
//!   while two other addresses trickle and flood (C29; `--only serve`
//!   runs these alone);
//! - memory ([`memory`]): the peak resident set of one `lf-handoff list`
//!   on the largest store, and on sled a lifecycle loop's resident set at
//!   each page-cache size.
//!
//! It prints a table, or with `--json` one JSON document. It asserts
//! nothing about time; it fails only when a figure could not be measured
//! or an answer was wrong (a lost handoff, two winners of a race).

mod answers;
mod backends;
mod callers;
mod child;
mod coldstart;
mod error;
mod fsync;
mod hooks;
mod idle;
mod latency;
mod lifecycle;
mod mcp;
mod memory;
mod population;
mod race;
mod raw_sled;
mod raw_sql;
mod report;
mod serve;
mod statements;
mod stats;
mod wake;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::backends::{BenchBackend, PostgresBench, SledBench, SqliteBench};
use crate::error::{BenchResult, Context, Failure};
use crate::report::{BackendReport, Growth, Machine, Report};

/// Benchmarks the lf-handoff store against the raw engine underneath it.
#[derive(Debug, Parser)]
#[command(name = "lf-handoff-bench", version)]
struct Args {
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Backends to measure.
    #[arg(long, value_delimiter = ',', default_value = "sqlite,sled,postgres")]
    backends: Vec<String>,
    /// Store sizes (handoffs) for the read latency figures, ascending,
    /// multiples of 10.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000,1000000")]
    sizes: Vec<u64>,
    /// Lifecycles per side for the throughput figure.
    #[arg(long, default_value_t = 600)]
    lifecycles: usize,
    /// Races of the racing-finisher figure.
    #[arg(long, default_value_t = 30)]
    races: usize,
    /// Untimed reads (`get` and `list --parent` each) on every store before
    /// its latency is sampled. The default leaves the engine's own cache as
    /// a freshly opened store has it; a large value shows a warmed-up one.
    #[arg(long, default_value_t = 50)]
    warm_reads: usize,
    /// Runs per command of the cold-start figure.
    #[arg(long, default_value_t = 30)]
    cold_runs: usize,
    /// A small, fast run to check the program works (sizes 1k and 10k,
    /// fewer samples); its figures are not the documented ones.
    #[arg(long)]
    quick: bool,
    /// Directory for the store files (default: a new directory under the
    /// system temporary directory, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The `lf-handoff` binary (default: beside this program).
    #[arg(long)]
    cli: Option<PathBuf>,
    /// Phases to run (all by default): fsync, lifecycle, answers (the
    /// lifecycle asking allow/deny and answering, against the plain one),
    /// latency (with the
    /// cold start, and sled's cold open by store size), race, wake (wake
    /// latency of a waiter), idle (the cost of 100 idle waiters), callers
    /// (1, 4 and 16 concurrent callers, store and raw), memory (taken on
    /// the latency phase's stores, so with it: one `lf-handoff list`'s
    /// peak RSS, and on sled a lifecycle loop's RSS per cache size), statements
    /// (PostgreSQL: statements per lifecycle, store and raw, on a server
    /// of its own with pg_stat_statements), and the service's:
    /// serve-lifecycle (through `lf-handoff serve` and through the
    /// library), serve-get (GET requests per second, service and bare
    /// handler), serve-events (PostgreSQL: a finish through one server to
    /// an event stream of another), serve-idle (an `lf-handoff serve`
    /// process holding idle event streams and long polls), serve-hostile
    /// (GET p99 and throughput while other addresses trickle and flood).
    /// `serve` names the five. hooks (SQLite): the agents' hooks as
    /// processes, their start and a person's answer to their exit. mcp:
    /// `ask_person` over stdio against the library's open + wait.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fsync,lifecycle,answers,latency,memory,race,wake,idle,callers,statements,serve,hooks,mcp"
    )]
    phases: Vec<String>,
    /// Questions per side of the mcp figure.
    #[arg(long, default_value_t = 200)]
    mcp_samples: usize,
    /// Run only these phases (the same names as --phases; overrides it),
    /// e.g. `--only wake,idle,callers` or `--only serve`.
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// Hook processes per figure of the hooks phase.
    #[arg(long, default_value_t = 30)]
    hook_samples: usize,
    /// Finishes per waiter of the wake-latency figure.
    #[arg(long, default_value_t = 40)]
    wake_samples: usize,
    /// The longest wait before a wake sample's finish, ms (from 300 ms).
    #[arg(long, default_value_t = 2000)]
    wake_max_delay_ms: u64,
    /// How long the idle waiters wait, s.
    #[arg(long, default_value_t = 5.0)]
    idle_seconds: f64,
    /// Concurrent caller counts of the callers figure.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    callers: Vec<usize>,
    /// Lifecycles per side and caller count of the callers figure.
    #[arg(long, default_value_t = 192)]
    caller_lifecycles: usize,
    /// Keep-alive connections of the service's GET rate figure.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    serve_connections: Vec<usize>,
    /// Seconds of each run of the GET rate figure (per server and round).
    #[arg(long, default_value_t = 3.0)]
    serve_seconds: f64,
    /// Rounds of the GET rate figure; each runs the service and the bare
    /// handler once, taking turns.
    #[arg(long, default_value_t = 2)]
    serve_rounds: usize,
    /// Finishes of the event-stream figure across two servers.
    #[arg(long, default_value_t = 40)]
    serve_event_samples: usize,
    /// Idle event streams held open against the server process.
    #[arg(long, default_value_t = 1000)]
    serve_idle_streams: usize,
    /// Pending long polls held open against the server process.
    #[arg(long, default_value_t = 1000)]
    serve_idle_polls: usize,
    /// Seconds of each idle window (nobody connected; everyone connected).
    #[arg(long, default_value_t = 10.0)]
    serve_idle_seconds: f64,
    /// Keep-alive connections of the legitimate client of the hostile
    /// figure.
    #[arg(long, default_value_t = 4)]
    serve_hostile_connections: usize,
    /// Seconds of each run of the hostile figure (with and without the
    /// hostile peers, --serve-rounds rounds).
    #[arg(long, default_value_t = 5.0)]
    serve_hostile_seconds: f64,
    /// The PostgreSQL server (default: `LF_HANDOFF_TEST_POSTGRES_URL`, else
    /// the local test server); every store is a fresh schema, dropped at
    /// the end.
    #[arg(long, env = "LF_HANDOFF_TEST_POSTGRES_URL", default_value = backends::DEFAULT_POSTGRES_URL)]
    postgres_url: String,
    /// Keep the store files (and the scratch directory) for inspection.
    #[arg(long)]
    keep: bool,
    /// sled page-cache sizes of the memory phase's lifecycle loop.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = parse_sled_cache,
        default_value = "16MiB,64MiB,256MiB"
    )]
    sled_caches: Vec<u64>,
    /// Lifecycles of the memory phase's loop, per cache size.
    #[arg(long, default_value_t = 1000)]
    cache_lifecycles: usize,
    /// Random `get`s after each lifecycle of that loop.
    #[arg(long, default_value_t = 50)]
    cache_gets: usize,
    /// Runs of the timed `lf-handoff list` of the memory phase.
    #[arg(long, default_value_t = 3)]
    rss_runs: usize,
    /// sled's page cache for every sled store the run opens, as in a
    /// store URL's `cache=` (`16MiB`, `1GiB`; default: the adapter's,
    /// 64 MiB).
    #[arg(long, value_parser = parse_sled_cache)]
    sled_cache: Option<u64>,
}

/// A sled cache size, read as the sled URL's `cache=` option is.
fn parse_sled_cache(text: &str) -> Result<u64, String> {
    match lf_handoff_adapters::StorageConfig::from_url(&format!("sled:///cache?cache={text}")) {
        Ok(lf_handoff_adapters::StorageConfig::Sled(config)) => Ok(config.cache),
        Ok(other) => Err(format!("not a sled store: {other}")),
        Err(error) => Err(error.to_string()),
    }
}

impl Args {
    fn runs(&self, phase: &str) -> bool {
        self.phases
            .iter()
            .any(|p| p == phase || (p == "serve" && phase.starts_with("serve-")))
    }
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // The wake-latency waiter: this program re-executed by the wake phase.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(wake::CHILD_ARG) {
        let url = argv.get(2).cloned().unwrap_or_default();
        return match runtime.block_on(wake::child_main(&url)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                println!("error {error}");
                eprintln!("error: wake child: {error}");
                ExitCode::FAILURE
            }
        };
    }
    // The children of the latency and memory phases.
    let child = match argv.get(1).map(String::as_str) {
        Some(latency::FILL_ARG) => Some(("fill", runtime.block_on(latency::fill_main(&argv[2..])))),
        Some(memory::CHILD_ARG) => Some((
            "cache-loop",
            runtime.block_on(memory::child_main(&argv[2..])),
        )),
        _ => None,
    };
    if let Some((name, outcome)) = child {
        return match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {name} child: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let mut args = Args::parse();
    if let Some(only) = args.only.take() {
        args.phases = only;
    }
    if args.quick {
        args.sizes = vec![1_000, 10_000];
        args.lifecycles = args.lifecycles.min(100);
        args.races = args.races.min(5);
        args.cold_runs = args.cold_runs.min(5);
        args.wake_samples = args.wake_samples.min(5);
        args.hook_samples = args.hook_samples.min(5);
        args.wake_max_delay_ms = args.wake_max_delay_ms.min(600);
        args.idle_seconds = args.idle_seconds.min(1.0);
        args.caller_lifecycles = args.caller_lifecycles.min(64);
        args.serve_seconds = args.serve_seconds.min(0.5);
        args.serve_rounds = args.serve_rounds.min(1);
        args.serve_event_samples = args.serve_event_samples.min(5);
        args.serve_idle_streams = args.serve_idle_streams.min(100);
        args.serve_idle_polls = args.serve_idle_polls.min(100);
        args.serve_idle_seconds = args.serve_idle_seconds.min(1.0);
        args.serve_hostile_seconds = args.serve_hostile_seconds.min(1.0);
        args.cache_lifecycles = args.cache_lifecycles.min(50);
        args.cache_gets = args.cache_gets.min(10);
        args.rss_runs = args.rss_runs.min(1);
        args.mcp_samples = args.mcp_samples.min(20);
    }
    // The run is a task on the runtime's workers, as an orchestrator's
    // calls are: a call made from `block_on`'s own thread would pay a
    // thread hand-off for every wake-up of the engine's worker, a cost no
    // such program has (it showed as a fixed 50-100 µs on every SQLite
    // `get`, hiding what the store's size adds).
    let outcome = runtime.block_on(async {
        match tokio::spawn(run(args)).await {
            Ok(outcome) => outcome,
            Err(error) => Err(Failure(format!("the run stopped: {error}"))),
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> BenchResult<()> {
    if args.sizes.is_empty()
        || args.sizes.windows(2).any(|pair| pair[0] >= pair[1])
        || args.sizes.iter().any(|size| *size == 0 || size % 10 != 0)
    {
        return Err(Failure(
            "--sizes must be ascending, non-zero multiples of 10, e.g. 1000,100000,1000000".into(),
        ));
    }
    let started = Instant::now();
    let date = OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_default();
    let (scratch, temporary) = match &args.dir {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!("lf-handoff-bench-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&scratch).context(format!("create {}", scratch.display()))?;
    let mut report = Report {
        machine: Machine::describe(&scratch, date),
        sizes: args.sizes.clone(),
        settings: report::Settings {
            lifecycles: args.lifecycles,
            get_samples: samples(&args).get,
            warm_reads: args.warm_reads,
            races: args.races,
            cold_runs: args.cold_runs,
        },
        backends: Vec::new(),
        goals: Vec::new(),
        total_seconds: 0.0,
    };
    for name in &args.backends {
        let backend_report = match make_backend(name, &scratch, &args).await {
            Ok(backend) => measure_backend(backend.as_ref(), &args).await,
            Err(reason) => BackendReport {
                name: name.clone(),
                skipped: Some(reason),
                ..BackendReport::default()
            },
        };
        report.backends.push(backend_report);
    }
    if temporary && !args.keep {
        std::fs::remove_dir_all(&scratch).ok();
    }
    report.total_seconds = started.elapsed().as_secs_f64();
    report.evaluate_goals();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("encode the report")?
        );
    } else {
        print!("{}", report.table());
    }
    let failed: usize = report.backends.iter().map(|b| b.errors.len()).sum();
    if failed > 0 {
        return Err(Failure(format!(
            "{failed} measurement(s) failed; the report names each one"
        )));
    }
    Ok(())
}

/// The backend called `name`, or why it cannot be measured here.
async fn make_backend(
    name: &str,
    scratch: &std::path::Path,
    args: &Args,
) -> Result<Box<dyn BenchBackend>, String> {
    let dir = scratch.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match name {
        "sqlite" => Ok(Box::new(SqliteBench::new(dir))),
        "sled" => {
            let sled = SledBench::new(dir);
            Ok(Box::new(match args.sled_cache {
                Some(cache) => sled.with_cache(cache),
                None => sled,
            }))
        }
        "postgres" => PostgresBench::connect(&args.postgres_url, dir)
            .await
            .map(|backend| Box::new(backend) as Box<dyn BenchBackend>)
            .map_err(|error| {
                format!("{error}; pass --postgres-url or set LF_HANDOFF_TEST_POSTGRES_URL")
            }),
        other => Err(format!(
            "unknown backend {other:?}; known: sqlite, sled, postgres"
        )),
    }
}

/// How many reads the latency phase samples per store.
fn samples(args: &Args) -> latency::Samples {
    if args.quick {
        latency::Samples {
            get: 300,
            list_parent: 200,
            list_active: 50,
            list_status: 50,
            warm_up: args.warm_reads,
        }
    } else {
        latency::Samples {
            get: 3_000,
            list_parent: 1_500,
            list_active: 300,
            list_status: 300,
            warm_up: args.warm_reads,
        }
    }
}

fn progress(backend: &str, what: &str) {
    eprintln!("[{backend}] {what}");
}

async fn measure_backend(backend: &dyn BenchBackend, args: &Args) -> BackendReport {
    let name = backend.name();
    let mut report = BackendReport {
        name: name.into(),
        durability: backend.durability(),
        notes: backend.notes().await,
        ..BackendReport::default()
    };
    if let Some(dir) = backend.disk_dir().filter(|_| args.runs("fsync")) {
        progress(name, "measuring the disk's fsync rate");
        match fsync::measure(&dir, Duration::from_secs(1)) {
            Ok(rate) => report.fsync = Some(rate),
            Err(error) => report.errors.push(format!("fsync probe: {error}")),
        }
    }

    if args.runs("lifecycle") {
        progress(name, "lifecycle throughput, store and raw");
        match lifecycle::measure(backend, args.lifecycles).await {
            Ok(figures) => {
                report.durable_bound_per_sec = report
                    .fsync
                    .as_ref()
                    .map(|f| f.overwrite_per_sec / f64::from(lifecycle::COMMITS_PER_LIFECYCLE));
                report.lifecycle = Some(figures);
            }
            Err(error) => report.errors.push(format!("lifecycle: {error}")),
        }
    }
    if args.runs("answers") {
        progress(name, "lifecycle with a choice answer against the plain one");
        match answers::measure(backend, args.lifecycles).await {
            Ok(figures) => report.answers = Some(figures),
            Err(error) => report.errors.push(format!("answers: {error}")),
        }
    }
    if args.runs("latency") {
        latency_phase(backend, args, &mut report).await;
    }
    if args.runs("race") {
        progress(name, "racing finishers");
        match race::measure(backend, args.races).await {
            Ok(figures) => report.race = Some(figures),
            Err(error) => report.errors.push(format!("racing finishers: {error}")),
        }
    }
    if args.runs("wake") {
        progress(name, "wake latency: Store::wait, polling, lf-handoff wait");
        let cli = args.cli.clone().or_else(coldstart::default_cli_path);
        match wake::measure(backend, args.wake_samples, args.wake_max_delay_ms, cli).await {
            Ok(figures) => report.wake = Some(figures),
            Err(error) => report.errors.push(format!("wake latency: {error}")),
        }
    }
    if args.runs("idle") {
        progress(name, "idle waiters");
        match idle::measure(backend, args.idle_seconds).await {
            Ok(figures) => report.idle = Some(figures),
            Err(error) => report.errors.push(format!("idle waiters: {error}")),
        }
    }
    if args.runs("callers") {
        progress(name, "concurrent callers, store and raw");
        match callers::measure(backend, &args.callers, args.caller_lifecycles).await {
            Ok(figures) => report.callers = Some(figures),
            Err(error) => report.errors.push(format!("concurrent callers: {error}")),
        }
    }
    if args.runs("statements") && name == "postgres" {
        progress(
            name,
            "statements per lifecycle, store and raw (pg_stat_statements)",
        );
        match statements::measure(std::env::temp_dir()).await {
            Ok(figures) => report.statements = Some(figures),
            Err(error) => report
                .errors
                .push(format!("statements per lifecycle: {error}")),
        }
    }
    serve_phases(backend, args, &mut report).await;
    if args.runs("hooks") && name == "sqlite" {
        progress(
            name,
            "the agents' hooks: start, and a person's answer to their exit",
        );
        match args.cli.clone().or_else(coldstart::default_cli_path) {
            Some(cli) if cli.is_file() => {
                match hooks::measure(backend, &cli, args.hook_samples).await {
                    Ok(figures) => report.hooks = Some(figures),
                    Err(error) => report.errors.push(format!("hooks: {error}")),
                }
            }
            _ => report.errors.push(
                "hooks: the lf-handoff binary is not built beside this program; build it \
                 (cargo build --release -p lf-handoff-cli) or pass --cli PATH"
                    .into(),
            ),
        }
    }
    // sled lets one process hold a store at a time, and the server is
    // another process beside this one's finisher.
    if args.runs("mcp") && name != "sled" {
        progress(name, "ask_person over stdio and the library's open + wait");
        let cli = args.cli.clone().or_else(coldstart::default_cli_path);
        let measured = match cli.filter(|path| path.is_file()) {
            Some(cli) => mcp::measure(backend, &cli, &std::env::temp_dir(), args.mcp_samples).await,
            None => Err(error::Failure(
                "no lf-handoff binary beside this program (build lf-handoff-cli, or --cli)".into(),
            )),
        };
        match measured {
            Ok(figures) => report.mcp = Some(figures),
            Err(error) => report
                .errors
                .push(format!("ask_person over stdio: {error}")),
        }
    }
    report
}

/// The service's figures (issue 22).
async fn serve_phases(backend: &dyn BenchBackend, args: &Args, report: &mut BackendReport) {
    let name = backend.name();
    let wanted = [
        "serve-lifecycle",
        "serve-get",
        "serve-events",
        "serve-idle",
        "serve-hostile",
    ];
    if !wanted.iter().any(|phase| args.runs(phase)) {
        return;
    }
    let access = match serve::Access::create() {
        Ok(access) => access,
        Err(error) => {
            report.errors.push(format!("the service's token: {error}"));
            return;
        }
    };
    if args.runs("serve-lifecycle") {
        progress(
            name,
            "lifecycle through the service and through the library",
        );
        match serve::lifecycle::measure(backend, &access, args.lifecycles).await {
            Ok(figures) => report.serve_lifecycle = Some(figures),
            Err(error) => report
                .errors
                .push(format!("lifecycle through the service: {error}")),
        }
    }
    if args.runs("serve-get") {
        progress(name, "GET requests per second, service and bare handler");
        let measured = serve::get::measure(
            backend,
            &access,
            &args.serve_connections,
            args.serve_seconds,
            args.serve_rounds.max(1),
        )
        .await;
        match measured {
            Ok(figures) => report.serve_get = Some(figures),
            Err(error) => report.errors.push(format!("GET rate: {error}")),
        }
    }
    if args.runs("serve-events") && name == "postgres" {
        progress(
            name,
            "a finish through one server to another's event stream",
        );
        match serve::events::measure(backend, &access, args.serve_event_samples).await {
            Ok(figures) => report.serve_events = Some(figures),
            Err(error) => report
                .errors
                .push(format!("events across servers: {error}")),
        }
    }
    if args.runs("serve-idle") {
        progress(
            name,
            "idle event streams and long polls on a server process",
        );
        let cli = args.cli.clone().or_else(coldstart::default_cli_path);
        let measured = serve::idle::measure(
            backend,
            &access,
            cli.as_deref(),
            args.serve_idle_streams,
            args.serve_idle_polls,
            args.serve_idle_seconds,
        )
        .await;
        match measured {
            Ok(figures) => report.serve_idle = Some(figures),
            Err(error) => report
                .errors
                .push(format!("idle clients of a server: {error}")),
        }
    }
    if args.runs("serve-hostile") {
        progress(
            name,
            "GET p99 and throughput while other addresses trickle and flood",
        );
        let measured = serve::hostile::measure(
            backend,
            &access,
            args.serve_hostile_connections.max(1),
            args.serve_hostile_seconds,
            args.serve_rounds.max(1),
        )
        .await;
        match measured {
            Ok(figures) => report.serve_hostile = Some(figures),
            Err(error) => report
                .errors
                .push(format!("GET under hostile peers: {error}")),
        }
    }
}

/// The memory figures, on the largest store of the latency phase.
async fn memory_phase(
    backend: &dyn BenchBackend,
    args: &Args,
    grown: &latency::Grown,
    report: &mut BackendReport,
) {
    let name = backend.name();
    let (Some(config), Some(&handoffs)) = (grown.configs.last(), args.sizes.last()) else {
        return;
    };
    progress(name, "memory: one `lf-handoff list`'s peak RSS");
    let cli = args.cli.clone().or_else(coldstart::default_cli_path);
    let (url, runs) = (config.url(), args.rss_runs);
    match tokio::task::spawn_blocking(move || {
        memory::list_rss(cli.as_deref(), &url, handoffs, runs)
    })
    .await
    {
        Ok(rss) => report.list_rss = Some(rss),
        Err(error) => report.errors.push(format!("list RSS: {error}")),
    }
    let lf_handoff_adapters::StorageConfig::Sled(sled) = config else {
        return;
    };
    progress(name, "memory: a lifecycle loop at each cache size");
    let (path, population) = (sled.path.clone(), grown.population.clone());
    let (caches, lifecycles, gets) = (
        args.sled_caches.clone(),
        args.cache_lifecycles,
        args.cache_gets,
    );
    let loops = tokio::task::spawn_blocking(move || {
        memory::cache_loops(&path, &population, handoffs, &caches, lifecycles, gets)
    })
    .await;
    match loops {
        Ok(Ok(loops)) => report.sled_cache_loops = loops,
        Ok(Err(error)) => report.errors.push(format!("sled cache loop: {error}")),
        Err(error) => report.errors.push(format!("sled cache loop: {error}")),
    }
}

async fn latency_phase(backend: &dyn BenchBackend, args: &Args, report: &mut BackendReport) {
    let name = backend.name();

    let samples = samples(args);
    match latency::measure(backend, &args.sizes, samples, |what| progress(name, what)).await {
        Ok(grown) => {
            report.growth = Growth::of(&grown.sizes);
            report.latency = grown.sizes.clone();
            progress(name, "command-line cold start");
            let cli = args.cli.clone().or_else(coldstart::default_cli_path);
            let largest = grown.configs.last().cloned();
            let url = largest.as_ref().map(|c| c.url()).unwrap_or_default();
            let raw_command = largest
                .as_ref()
                .and_then(|c| backend.raw_get_command(c, &grown.sample_id));
            let (id, runs) = (grown.sample_id.clone(), args.cold_runs);
            let cold = tokio::task::spawn_blocking(move || {
                coldstart::measure(cli.as_deref(), &url, &id, raw_command, runs)
            })
            .await;
            match cold {
                Ok(cold) => report.cold_start = Some(cold),
                Err(error) => report.errors.push(format!("cold start: {error}")),
            }
            // The same `status` alone on every store, so the figure shows
            // how opening grows with the store (sled's does).
            let stores: Vec<(u64, String, String)> = report
                .latency
                .iter()
                .zip(&grown.configs)
                .zip(&grown.sample_ids)
                .map(|((at, config), id)| (at.handoffs, config.url(), id.clone()))
                .collect();
            let cli = args.cli.clone().or_else(coldstart::default_cli_path);
            let runs = args.cold_runs;
            let by_size = tokio::task::spawn_blocking(move || {
                stores
                    .into_iter()
                    .map(|(handoffs, url, id)| report::SizedColdStart {
                        handoffs,
                        cold_start: coldstart::measure(cli.as_deref(), &url, &id, None, runs),
                    })
                    .collect()
            })
            .await;
            match by_size {
                Ok(by_size) => report.cold_start_by_size = by_size,
                Err(error) => report.errors.push(format!("cold start by size: {error}")),
            }
            if args.runs("memory") {
                memory_phase(backend, args, &grown, report).await;
            }
            if !args.keep {
                for config in &grown.configs {
                    backend.remove(config).await;
                }
            }
        }
        Err(error) => report.errors.push(format!("read latency: {error}")),
    }
}

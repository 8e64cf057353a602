//! `lf-handoff-soak`: `lf-handoff serve` under a mixed legitimate load
//! while hostile peers trickle and flood, on each backend. See the
//! `lf_handoff_harness::soak` module and `docs/RELIABILITY.md`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use lf_handoff_harness::program::{
    act_as, backends_and_exe, duration_arg, runtime, verdict, PlacementArgs, EXIT_USAGE,
};
use lf_handoff_harness::soak::{
    self, hostile::HostileOptions, server, ServedLimits, SoakFigures, SoakOptions, SERVER_ARG,
};

/// Serve a fresh store of each backend with `lf-handoff serve` in a child
/// process, drive a mixed load through it from 127.0.0.1 (opens, lists,
/// finishes through the API and through links' forms, claims, long polls,
/// an event stream) while 127.0.0.2 trickles bodies a byte at a time on
/// every connection it may hold and 127.0.0.3 opens idle connections as
/// fast as it can; then check the store.
///
/// Exit status: 0 passed; 1 the legitimate client saw an error, the
/// store broke an invariant or lost an acknowledged change, the server's
/// resident set grew past the bound after the warm-up, or the harness
/// failed; 2 bad arguments.
#[derive(Debug, Parser)]
#[command(name = "lf-handoff-soak", version)]
struct Args {
    /// Backends to soak, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    backends: String,
    /// How long the load runs on each backend, e.g. 30m.
    #[arg(long, default_value = "1m", value_parser = duration_arg)]
    duration: Duration,
    /// The warm-up, whose resident set the end is compared with
    /// [default: a fifth of --duration].
    #[arg(long, value_parser = duration_arg)]
    warm_up: Option<Duration>,
    /// Seed of the legitimate client's choices (printed, so a run can be
    /// repeated; the interleaving is the operating system's).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Soak this `lf-handoff` binary's `serve` [default: this program
    /// runs `lf_handoff_server::serve`, what that command runs, as its
    /// own child].
    #[arg(long)]
    cli: Option<PathBuf>,
    /// The service's `--header-timeout`.
    #[arg(long, default_value = "5s", value_parser = duration_arg)]
    header_timeout: Duration,
    /// The service's `--body-timeout`.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    body_timeout: Duration,
    /// The service's `--max-connections` (one address's share is an
    /// eighth, at least 4).
    #[arg(long, default_value_t = 512)]
    max_connections: usize,
    /// Connections the trickling peer holds [default: one address's
    /// share].
    #[arg(long)]
    trickle_connections: Option<usize>,
    /// The pause between two bytes of a trickled body.
    #[arg(long, default_value = "1s", value_parser = duration_arg)]
    trickle_every: Duration,
    /// Connections the flooding peer has opening at once [default: twice
    /// one address's share].
    #[arg(long)]
    flood_at_once: Option<usize>,
    /// Lanes of each legitimate kind (openers, API finishers, link
    /// finishers).
    #[arg(long, default_value_t = 2)]
    lanes: usize,
    /// The largest growth of the server's resident set after the warm-up,
    /// in percent.
    #[arg(long, default_value_t = 10.0)]
    max_rss_growth: f64,
    #[command(flatten)]
    placement: PlacementArgs,
    /// Self-test: count an open that was never made as acknowledged, to
    /// show the store's check reports it lost (the run must exit 1).
    #[arg(long, hide = true)]
    self_test_fake_acks: bool,
}

fn main() -> ExitCode {
    if let Some(status) = act_as(SERVER_ARG, "soak server", |args| async move {
        server::server_child(&args).await
    }) {
        return status;
    }
    let args = Args::parse();
    let (backends, exe) = match backends_and_exe(&args.backends) {
        Ok(found) => found,
        Err(status) => return status,
    };
    if args.duration.is_zero() || args.lanes == 0 || args.max_connections == 0 {
        eprintln!("error: --duration, --lanes and --max-connections must be above 0");
        return ExitCode::from(EXIT_USAGE);
    }
    let limits = ServedLimits {
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        max_connections: args.max_connections,
    };
    let share = limits.per_peer();
    let options = SoakOptions {
        backends,
        duration: args.duration,
        warm_up: args.warm_up.unwrap_or(args.duration / 5),
        seed: args.seed,
        placement: args.placement.placement(),
        cli: args.cli,
        limits,
        hostile: HostileOptions {
            trickle_connections: args.trickle_connections.unwrap_or(share),
            trickle_every: args.trickle_every,
            flood_at_once: args.flood_at_once.unwrap_or(2 * share),
        },
        lanes: args.lanes,
        max_rss_growth: args.max_rss_growth / 100.0,
        fake_acks: args.self_test_fake_acks,
    };
    println!(
        "soak: seed {}, {} s per backend on {} (warm-up {} s); serve with header timeout {:?}, \
         body timeout {:?}, {} connections ({} per address); legitimate client 127.0.0.1 \
         ({} lanes of each kind); trickling peer 127.0.0.2 ({} connections, a byte every {:?}); \
         flooding peer 127.0.0.3 ({} connections opening at once)",
        options.seed,
        options.duration.as_secs(),
        options.backends.join(", "),
        options.warm_up.as_secs(),
        limits.header_timeout,
        limits.body_timeout,
        limits.max_connections,
        share,
        options.lanes,
        options.hostile.trickle_connections,
        options.hostile.trickle_every,
        options.hostile.flood_at_once,
    );
    let figures = runtime().block_on(soak::run(&options, &exe));
    let served: u64 = figures.iter().map(|f| f.legit.total()).sum();
    let errors: u64 = figures.iter().map(|f| f.legit.errors).sum();
    verdict(
        "soak",
        figures.iter().all(SoakFigures::passed),
        true,
        &format!("{served} legitimate requests served, {errors} legitimate errors"),
    )
}

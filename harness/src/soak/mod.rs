//! `lf-handoff-soak`: `lf-handoff serve` under a mixed legitimate load
//! while hostile peers trickle and flood (C29), on each backend.
//!
//! For each backend the soak makes a fresh store ([`crate::target`]), a
//! tokens file with an agent's and a person's token, and starts the
//! service in a child process ([`server`]): this program re-executed,
//! running `lf_handoff_server::serve` (what `lf-handoff serve` runs after
//! reading its flags), or, with `--cli`, the `lf-handoff` binary's own
//! `serve`. A child of its own, so the resident set read from
//! `/proc/PID/status` is the service's alone, not the load's.
//!
//! Then, for the run's duration, at once:
//!
//! - the **legitimate client** ([`legit`]), from `127.0.0.1`: agents
//!   create waves and open handoffs; a person reads each, finishes it
//!   through the API (complete, back or fail) or through a link's page and
//!   its form; the agent claims each wake; lists of the active handoffs
//!   and of the newest; long polls on the newest open handoff; and one
//!   event stream, read throughout, that must see an event for every
//!   change the client made. Any failed request or unexpected answer is
//!   an error;
//! - the **trickling peer** ([`hostile`]), from `127.0.0.2`: as many
//!   connections as one address may hold, each sending a body a byte at a
//!   time (to the sign-in form, which needs no token, and to the open
//!   route with a stolen agent token), opened again whenever the server
//!   cuts one;
//! - the **flooding peer**, from `127.0.0.3`: opens idle connections as
//!   fast as it can, more at once than its share.
//!
//! Afterwards the service is stopped (SIGTERM) and the store opened
//! directly ([`verify`]): every record keeps its invariants (I1-I7), every
//! acknowledged open, finish and claim is stored, and the histories read
//! are well formed and match their records. The run fails on any error of
//! the legitimate client, any store finding, or a resident set that grew
//! after the warm-up by more than `--max-rss-growth`. Latency is reported
//! (p50, p99), never judged: speed goals belong to the benchmarks.

mod figures;
pub mod hostile;
pub mod legit;
pub mod server;
mod verify;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_adapters::StorageConfig;
use lf_handoff_api::Scope;
use lf_handoff_server::tokens;

pub use figures::{RssFigures, SoakFigures};
pub use server::SERVER_ARG;

use crate::rng::Rng;
use crate::target::{Placement, StoreTarget};

/// The legitimate client's address.
pub const LEGIT_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
/// The trickling peer's address.
pub const TRICKLE_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// The flooding peer's address.
pub const FLOOD_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

/// Connections each PostgreSQL store handle of the served store may
/// open: `serve`'s default (the harness's own stores use fewer).
const SERVED_POSTGRES_POOL: u32 = 4;

/// What a soak runs.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Backends, each soaked in turn.
    pub backends: Vec<&'static str>,
    /// How long the load runs on each backend.
    pub duration: Duration,
    /// How long of it counts as the warm-up: the resident set after it is
    /// what the end is compared with.
    pub warm_up: Duration,
    /// Seed of the legitimate client's choices (outcomes, which finish).
    pub seed: u64,
    /// Where stores are made.
    pub placement: Placement,
    /// The `lf-handoff` binary whose `serve` is soaked; `None`: this
    /// program re-executed as the server.
    pub cli: Option<PathBuf>,
    /// The service's limits the run sets (the rest are `serve`'s
    /// defaults).
    pub limits: ServedLimits,
    /// The hostile peers' behaviour.
    pub hostile: hostile::HostileOptions,
    /// Concurrent lanes of each legitimate kind (openers, finishers).
    pub lanes: usize,
    /// The largest growth of the server's resident set from the end of
    /// the warm-up to the end of the run, as a fraction (0.10: 10%).
    pub max_rss_growth: f64,
    /// Self-test: count an open as acknowledged that was never made, to
    /// show the store's check finds it lost (the run must then fail).
    pub fake_acks: bool,
}

/// The handoff the self-test claims was opened: an id no run makes.
const FAKE_ACK: &str = "ih_00000000-0000-7000-8000-000000000000";

/// The limits the soak gives `serve` (`--header-timeout`,
/// `--body-timeout`, `--max-connections`); the per-peer share is
/// `serve`'s default, an eighth of the connections.
#[derive(Debug, Clone, Copy)]
pub struct ServedLimits {
    /// `--header-timeout`.
    pub header_timeout: Duration,
    /// `--body-timeout`.
    pub body_timeout: Duration,
    /// `--max-connections`.
    pub max_connections: usize,
}

impl ServedLimits {
    /// One peer address's share, as `serve` computes it by default.
    pub fn per_peer(&self) -> usize {
        lf_handoff_server::Limits {
            max_connections: self.max_connections,
            ..lf_handoff_server::Limits::default()
        }
        .connections_per_peer()
    }
}

/// Soaks each backend of `options` in turn, printing each one's report as
/// it finishes; returns the figures.
pub async fn run(options: &SoakOptions, exe: &std::path::Path) -> Vec<SoakFigures> {
    crate::program::each_backend(
        &options.backends,
        options.seed,
        SoakFigures::report,
        |backend, rng| soak_backend(backend, options, exe, rng),
    )
    .await
}

async fn soak_backend(
    backend: &'static str,
    options: &SoakOptions,
    exe: &std::path::Path,
    rng: Rng,
) -> SoakFigures {
    let started = Instant::now();
    let mut figures = SoakFigures::new(backend, options);
    let target = match StoreTarget::create(backend, &options.placement).await {
        Ok(target) => target,
        Err(message) => {
            figures.harness_error(message);
            return figures;
        }
    };
    if let Err(message) = soak_on(&target, options, exe, rng, &mut figures).await {
        figures.harness_error(message);
    }
    figures.elapsed = started.elapsed();
    if let Some(kept) = target.finish(!figures.passed()).await {
        figures.kept = Some(kept);
    }
    figures
}

async fn soak_on(
    target: &StoreTarget,
    options: &SoakOptions,
    exe: &std::path::Path,
    rng: Rng,
    figures: &mut SoakFigures,
) -> Result<(), String> {
    let tokens_file = target.work_dir().join("tokens");
    let now = time::OffsetDateTime::now_utc();
    let agent = tokens::create(&tokens_file, "soak-agent", &[Scope::Agent], now)
        .map_err(|e| format!("cannot make the agent's token: {e}"))?
        .token;
    let person = tokens::create(&tokens_file, "soak-person", &[Scope::Person], now)
        .map_err(|e| format!("cannot make the person's token: {e}"))?
        .token;
    let store_url = served_url(target);
    let mut server = server::Server::start(
        options.cli.as_deref(),
        exe,
        &store_url,
        &tokens_file,
        &options.limits,
    )
    .await?;
    figures.rss.start = server.rss()?;
    let access = Arc::new(legit::Access {
        base: server.url().to_string(),
        agent: agent.clone(),
        person,
        work_dir: target.work_dir().to_path_buf(),
    });
    let deadline = Instant::now() + options.duration;
    let legit = legit::Load::start(access, options.lanes, rng, deadline).await;
    let legit = match legit {
        Ok(legit) => legit,
        Err(message) => {
            server.stop().await;
            return Err(message);
        }
    };
    let hostile = hostile::Hostile::start(server.addr(), &agent, &options.hostile, deadline);
    // The resident set: after the warm-up, then every few seconds (its
    // highest), and at the end of the load.
    let warm_until = Instant::now() + options.warm_up.min(options.duration);
    tokio::time::sleep_until(warm_until.into()).await;
    figures.rss.after_warm_up = server.rss()?;
    figures.rss.highest = figures.rss.after_warm_up;
    while Instant::now() < deadline {
        let next = (Instant::now() + Duration::from_secs(5)).min(deadline);
        tokio::time::sleep_until(next.into()).await;
        let now = server.rss()?;
        figures.rss.highest = figures.rss.highest.max(now);
        figures.rss.end = now;
    }
    figures.hostile = hostile.finish().await;
    figures.legit = legit.finish().await;
    if options.fake_acks {
        figures.legit.acked.opened.insert(FAKE_ACK.to_string());
    }
    figures.rss.end = server.rss()?;
    figures.server_exit = server.stop().await;
    let config = target.config().clone();
    figures.store = verify::verify(&config, &figures.legit.acked, options.seed).await;
    Ok(())
}

/// The store URL the server child opens: the target's, with `serve`'s
/// default pool on PostgreSQL.
fn served_url(target: &StoreTarget) -> String {
    match StorageConfig::from_url(&target.child_url()) {
        Ok(StorageConfig::Postgres(mut postgres)) => {
            postgres.pool_size = SERVED_POSTGRES_POOL;
            StorageConfig::Postgres(postgres).url()
        }
        _ => target.child_url(),
    }
}

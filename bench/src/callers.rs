//! Concurrent callers (issue 16): lifecycle throughput (open, attach,
//! finish, claim_wake per handoff) with 1, 4 and 16 callers at once,
//! through the `Store` and as raw statements, side by side.
//!
//! Each caller has a store handle of its own (`open_store`, its own pool),
//! as separate processes would, and on the raw side a raw engine of its
//! own (one connection each on SQLite and PostgreSQL). sled allows one
//! `Db` per directory per process: its store handles share one `Db` (the
//! adapter's registry), and its raw callers share one raw engine, so on
//! sled the callers are tasks of one process on both sides.
//!
//! Every lifecycle opens a handoff on a wave of its own, created
//! beforehand (not timed). For each caller count the two sides take turns
//! in rounds (store then raw, raw then store, ...): in a round every
//! caller runs its share of lifecycles, all callers released at once, and
//! the round's wall time is from the release to the last caller's end.
//! Throughput is the side's lifecycles over the sum of its rounds' wall
//! times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, GenerateId, Store};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::wave::Wave;
use serde::Serialize;
use tokio::sync::Barrier;

use crate::backends::{BenchBackend, RawEngine};
use crate::error::{fail, BenchResult, Context};
use crate::lifecycle::{create_waves, raw_lifecycle, store_lifecycle};
use crate::stats::{ratio, Summary};

/// Rounds per side and caller count.
const ROUNDS: usize = 4;

/// The concurrent-caller figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct CallerFigures {
    /// How the callers are set up on this backend.
    pub setting: String,
    /// One row per caller count.
    pub rows: Vec<CallerRow>,
}

/// One caller count's throughput on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct CallerRow {
    /// Concurrent callers.
    pub callers: usize,
    /// Lifecycles per side.
    pub lifecycles: usize,
    /// Store side, lifecycles per second.
    pub store_per_sec: f64,
    /// Raw side, lifecycles per second.
    pub raw_per_sec: f64,
    /// store / raw.
    pub ratio: f64,
    /// One lifecycle's latency through the store.
    pub store_lifecycle: Summary,
    /// One raw lifecycle's latency.
    pub raw_lifecycle: Summary,
}

/// Measures each count of `counts`, `lifecycles` per side (rounded down to
/// a multiple of the count times the rounds).
pub async fn measure(
    backend: &dyn BenchBackend,
    counts: &[usize],
    lifecycles: usize,
) -> BenchResult<CallerFigures> {
    let mut rows = Vec::with_capacity(counts.len());
    for &callers in counts {
        if callers == 0 {
            continue;
        }
        rows.push(one_count(backend, callers, lifecycles).await?);
    }
    Ok(CallerFigures {
        setting: if backend.name() == "sled" {
            "sled: one process; the store handles share one Db, the raw callers one raw engine"
                .into()
        } else {
            "each caller its own store handle (pool) and its own raw connection".into()
        },
        rows,
    })
}

async fn one_count(
    backend: &dyn BenchBackend,
    callers: usize,
    lifecycles: usize,
) -> BenchResult<CallerRow> {
    let per_caller_round = (lifecycles / (callers * ROUNDS)).max(1);
    let total = per_caller_round * callers * ROUNDS;
    let store_config = backend
        .new_store(&format!("callers-{callers}-store"))
        .await?;
    let raw_config = backend.new_store(&format!("callers-{callers}-raw")).await?;
    let mut handles = Vec::with_capacity(callers);
    for _ in 0..callers {
        handles.push(
            open_store(&store_config)
                .await
                .context("open a store handle")?,
        );
    }
    let store_waves = create_waves(&handles[0], total).await?;
    let raw_waves = {
        let setup = open_store(&raw_config).await.context("open raw store")?;
        create_waves(&setup, total).await?
    };
    let mut raws: Vec<Arc<dyn RawEngine>> = Vec::with_capacity(callers);
    if backend.name() == "sled" {
        let shared: Arc<dyn RawEngine> = Arc::from(backend.raw(&raw_config).await?);
        raws.resize(callers, shared);
    } else {
        for _ in 0..callers {
            raws.push(Arc::from(backend.raw(&raw_config).await?));
        }
    }
    // Warm every handle and connection: one untimed read each.
    for (handle, raw) in handles.iter().zip(&raws) {
        let id = InteractiveHandoffId::new();
        handle
            .get_interactive_handoff(&id)
            .await
            .context("warm-up")?;
        raw.get(&id).await?;
    }

    let mut store_wall = Duration::ZERO;
    let mut raw_wall = Duration::ZERO;
    let mut store_times = Vec::with_capacity(total);
    let mut raw_times = Vec::with_capacity(total);
    let chunk = per_caller_round * callers;
    for round in 0..ROUNDS {
        let store_round = &store_waves[round * chunk..(round + 1) * chunk];
        let raw_round = &raw_waves[round * chunk..(round + 1) * chunk];
        for store_turn in if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        } {
            if store_turn {
                let (wall, times) = store_burst(&handles, store_round).await?;
                store_wall += wall;
                store_times.extend(times);
            } else {
                let (wall, times) = raw_burst(&raws, raw_round).await?;
                raw_wall += wall;
                raw_times.extend(times);
            }
        }
    }
    drop(handles);
    drop(raws);
    backend.remove(&store_config).await;
    backend.remove(&raw_config).await;
    let store_per_sec = ratio(total as f64, store_wall.as_secs_f64());
    let raw_per_sec = ratio(total as f64, raw_wall.as_secs_f64());
    Ok(CallerRow {
        callers,
        lifecycles: total,
        store_per_sec,
        raw_per_sec,
        ratio: ratio(store_per_sec, raw_per_sec),
        store_lifecycle: Summary::of(&store_times),
        raw_lifecycle: Summary::of(&raw_times),
    })
}

/// Every handle runs its share of `waves` at once; the wall time and each
/// lifecycle's time.
async fn store_burst(handles: &[Store], waves: &[Wave]) -> BenchResult<(Duration, Vec<Duration>)> {
    let per = waves.len() / handles.len();
    let barrier = Arc::new(Barrier::new(handles.len() + 1));
    let mut tasks = Vec::with_capacity(handles.len());
    for (n, handle) in handles.iter().enumerate() {
        let (handle, barrier) = (handle.clone(), barrier.clone());
        let mine: Vec<Wave> = waves[n * per..(n + 1) * per].to_vec();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut times = Vec::with_capacity(mine.len());
            for wave in &mine {
                times.push(store_lifecycle(&handle, wave).await?.iter().sum());
            }
            Ok::<_, crate::error::Failure>(times)
        }));
    }
    join(barrier, tasks).await
}

async fn raw_burst(
    raws: &[Arc<dyn RawEngine>],
    waves: &[Wave],
) -> BenchResult<(Duration, Vec<Duration>)> {
    let per = waves.len() / raws.len();
    let barrier = Arc::new(Barrier::new(raws.len() + 1));
    let mut tasks = Vec::with_capacity(raws.len());
    for (n, raw) in raws.iter().enumerate() {
        let (raw, barrier) = (raw.clone(), barrier.clone());
        let mine: Vec<Wave> = waves[n * per..(n + 1) * per].to_vec();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut times = Vec::with_capacity(mine.len());
            for wave in &mine {
                times.push(raw_lifecycle(raw.as_ref(), wave).await?.0.iter().sum());
            }
            Ok::<_, crate::error::Failure>(times)
        }));
    }
    join(barrier, tasks).await
}

type CallerTask = tokio::task::JoinHandle<BenchResult<Vec<Duration>>>;

async fn join(
    barrier: Arc<Barrier>,
    tasks: Vec<CallerTask>,
) -> BenchResult<(Duration, Vec<Duration>)> {
    barrier.wait().await;
    let start = Instant::now();
    let mut times = Vec::new();
    let mut failure = None;
    for task in tasks {
        match task.await.context("caller task") {
            Ok(Ok(mine)) => times.extend(mine),
            Ok(Err(error)) | Err(error) => failure = failure.or(Some(error)),
        }
    }
    let wall = start.elapsed();
    match failure {
        Some(error) => fail(format!("a caller failed: {error}")),
        None => Ok((wall, times)),
    }
}

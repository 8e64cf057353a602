//! Read latency as the registry grows: `get`, `list --parent`,
//! `list --active` and `list --status waiting` through the `Store` at each
//! store size.
//!
//! One store per size (1k, 100k and 1M handoffs by default) is filled by the
//! backend's raw bulk loader with the same [`Population`], in a child
//! process of its own ([`FILL_ARG`]): this process opens the stores as a
//! program that uses a registry does, without the heap a bulk load of a
//! million records leaves behind (in a process that loaded sled itself,
//! glibc's allocator stalled sled's reads for tens of milliseconds, a
//! tail no user of an existing store sees; see docs/BENCHMARKS.md). The reads are
//! then sampled on random keys from the whole store, in rounds that visit
//! every size in turn, so a busy moment of the machine hits all sizes alike
//! and the ratios stay comparable. Every answer is checked (the handoff is
//! found, the parent has its ten, the active set is complete, so is the
//! waiting set), so a read that stops being correct fails the run instead
//! of getting fast.

use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, ListQuery, StorageConfig, Store};
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, InteractiveHandoffStatus};
use serde::Serialize;
use time::OffsetDateTime;

use crate::backends::{raw_engine, BenchBackend};
use crate::child::run_self;
use crate::error::{fail, BenchResult, Context, Failure};
use crate::population::{Population, PER_PARENT};
use crate::stats::{short, Rng, Summary};

/// Sampling rounds; each takes its share of every read at every size (by
/// default 10 gets, 5 lists of a parent and one each of the active and the
/// waiting set), so
/// every size sees the machine in the same state, a few reads apart.
const ROUNDS: usize = 300;

/// How many samples each read takes at each size.
#[derive(Debug, Clone, Copy)]
pub struct Samples {
    /// `get` calls.
    pub get: usize,
    /// `list --parent` calls.
    pub list_parent: usize,
    /// `list --active` calls.
    pub list_active: usize,
    /// `list --status waiting` calls.
    pub list_status: usize,
    /// Untimed `get` and `list --parent` calls per store before sampling.
    pub warm_up: usize,
}

/// The figures at one store size.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyAt {
    /// Handoffs stored.
    pub handoffs: u64,
    /// Seconds the bulk loader took to fill the store.
    pub load_seconds: f64,
    /// `get` of a random handoff.
    pub get: Summary,
    /// `list --parent` of a random wave (ten handoffs each).
    pub list_parent: Summary,
    /// `list --active` (the same active set at every size).
    pub list_active: Summary,
    /// `list --status waiting` (the same waiting set at every size).
    pub list_status: Summary,
    /// The engine's own read of a random handoff's row or record, without
    /// the store (no decoding, no checks), on a freshly opened engine.
    pub raw_get: Summary,
}

/// What the latency phase leaves behind for the cold-start figure.
pub struct Grown {
    /// The figures per size.
    pub sizes: Vec<LatencyAt>,
    /// Every store, smallest first.
    pub configs: Vec<StorageConfig>,
    /// A handoff in the largest store.
    pub sample_id: String,
    /// A handoff in each store, smallest first.
    pub sample_ids: Vec<String>,
    /// The population every store holds (a prefix of).
    pub population: Population,
}

/// One store under measurement.
struct Sized {
    size: u64,
    store: Store,
    load_seconds: f64,
    rng: Rng,
    get: Vec<Duration>,
    list_parent: Vec<Duration>,
    list_active: Vec<Duration>,
    list_status: Vec<Duration>,
}

/// Fills one store per size in `sizes` (ascending) and measures them.
pub async fn measure(
    backend: &dyn BenchBackend,
    sizes: &[u64],
    samples: Samples,
    mut progress: impl FnMut(&str),
) -> BenchResult<Grown> {
    let population = Population::new(OffsetDateTime::now_utc())?;
    let mut stores = Vec::new();
    let mut configs = Vec::new();
    for &size in sizes {
        progress(&format!("loading {size} handoffs"));
        let (config, sized) = load(backend, &population, size).await?;
        configs.push(config);
        stores.push(sized);
    }
    progress("sampling reads, every size in turn");
    for sized in &mut stores {
        // Untimed warm-up: the first reads load the engine's caches.
        let share = Samples {
            get: samples.warm_up,
            list_parent: samples.warm_up,
            list_active: 5,
            list_status: 5,
            warm_up: 0,
        };
        sample(sized, &population, share, false).await?;
    }
    for _ in 0..ROUNDS {
        for sized in &mut stores {
            let share = Samples {
                get: samples.get.div_ceil(ROUNDS),
                list_parent: samples.list_parent.div_ceil(ROUNDS),
                list_active: samples.list_active.div_ceil(ROUNDS),
                list_status: samples.list_status.div_ceil(ROUNDS),
                warm_up: 0,
            };
            sample(sized, &population, share, true).await?;
        }
    }
    // sled allows one open Db per directory: each store is closed as its
    // figures are taken, before the raw engine opens it.
    let mut figures: Vec<LatencyAt> = stores.into_iter().map(Sized::figures).collect();
    progress("sampling the raw engine's reads");
    for (figure, config) in figures.iter_mut().zip(&configs) {
        figure.raw_get = raw_gets(backend, config, &population, figure.handoffs, samples).await?;
    }
    let largest = sizes.last().copied().unwrap_or(0);
    Ok(Grown {
        sizes: figures,
        configs,
        sample_id: population.handoff_id(largest / 2).to_string(),
        sample_ids: sizes
            .iter()
            .map(|size| population.handoff_id(size / 2).to_string())
            .collect(),
        population,
    })
}

/// Creates a store of `size` handoffs of `population` (loaded raw, timed)
/// and opens it through the store.
async fn load(
    backend: &dyn BenchBackend,
    population: &Population,
    size: u64,
) -> BenchResult<(StorageConfig, Sized)> {
    let config = backend
        .new_store(&format!("latency-{}", short(size)))
        .await?;
    let load_seconds = fill_in_a_child(&config, population, size).await?;
    let store = open_store(&config).await.context("open store")?;
    let sized = Sized {
        size,
        store,
        load_seconds,
        rng: Rng::new(size),
        get: Vec::new(),
        list_parent: Vec::new(),
        list_active: Vec::new(),
        list_status: Vec::new(),
    };
    Ok((config, sized))
}

/// The hidden first argument that makes this program a fill child.
pub const FILL_ARG: &str = "fill-child";

/// Fills the store `config` names with the first `size` handoffs of
/// `population` (and their parents) in a child process; returns the
/// seconds the bulk load took there.
async fn fill_in_a_child(
    config: &StorageConfig,
    population: &Population,
    size: u64,
) -> BenchResult<f64> {
    let url = config.url();
    let args = vec![
        FILL_ARG.to_string(),
        url.clone(),
        population.base_micros().to_string(),
        size.to_string(),
    ];
    let what = format!("fill child on {url}");
    let line = tokio::task::spawn_blocking(move || run_self(&what, &args))
        .await
        .context("the fill child's task")??;
    line.parse::<f64>()
        .map_err(|e| Failure(format!("the fill child on {url} reported {line:?}: {e}")))
}

/// The fill child: `URL BASE_MICROS HANDOFFS`; bulk-loads the store
/// through its raw engine and prints the seconds it took.
///
/// # Errors
/// Bad arguments, or the engine's failure.
pub async fn fill_main(args: &[String]) -> BenchResult<()> {
    let [url, base, size] = args else {
        return fail(format!(
            "usage: {FILL_ARG} URL BASE_MICROS HANDOFFS (got {args:?})"
        ));
    };
    let config = StorageConfig::from_url(url).context("store URL")?;
    let population = Population::from_base_arg(base)?;
    let size = size
        .parse::<u64>()
        .map_err(|e| Failure(format!("handoffs {size:?}: {e}")))?;
    let raw = raw_engine(&config).await?;
    let start = Instant::now();
    raw.bulk_load(&population, 0..Population::parents_for(size), 0..size)
        .await?;
    let seconds = start.elapsed().as_secs_f64();
    raw.close().await;
    println!("{seconds}");
    Ok(())
}

impl Sized {
    /// The figures of the samples taken; the store is closed.
    fn figures(self) -> LatencyAt {
        LatencyAt {
            handoffs: self.size,
            load_seconds: self.load_seconds,
            get: Summary::of(&self.get),
            list_parent: Summary::of(&self.list_parent),
            list_active: Summary::of(&self.list_active),
            list_status: Summary::of(&self.list_status),
            raw_get: Summary::default(),
        }
    }
}

async fn sample(
    sized: &mut Sized,
    population: &Population,
    samples: Samples,
    keep: bool,
) -> BenchResult<()> {
    let size = sized.size;
    let parents = Population::parents_for(size);
    let active = ListQuery {
        parent: None,
        active_only: true,
        ..Default::default()
    };
    let expected_active = Population::active_in(size) as usize;
    let waiting = ListQuery {
        statuses: vec![InteractiveHandoffStatus::Waiting],
        ..Default::default()
    };
    let expected_waiting = Population::waiting_in(size) as usize;
    for _ in 0..samples.get {
        let elapsed = get(&sized.store, population, sized.rng.below(size)).await?;
        if keep {
            sized.get.push(elapsed);
        }
    }
    for _ in 0..samples.list_parent {
        let p = sized.rng.below(parents);
        let elapsed = list_parent(&sized.store, population, p, size).await?;
        if keep {
            sized.list_parent.push(elapsed);
        }
    }
    for _ in 0..samples.list_active {
        let elapsed = list_active(&sized.store, &active, expected_active).await?;
        if keep {
            sized.list_active.push(elapsed);
        }
    }
    for _ in 0..samples.list_status {
        let elapsed = list_waiting(&sized.store, &waiting, expected_waiting).await?;
        if keep {
            sized.list_status.push(elapsed);
        }
    }
    Ok(())
}

/// Samples `samples.get` raw reads of random handoffs on a freshly opened
/// engine, after the same untimed warm-up the store had.
async fn raw_gets(
    backend: &dyn BenchBackend,
    config: &StorageConfig,
    population: &Population,
    size: u64,
    samples: Samples,
) -> BenchResult<Summary> {
    let raw = backend.raw(config).await?;
    let mut rng = Rng::new(size ^ 0x5EED);
    let mut timings = Vec::with_capacity(samples.get);
    for n in 0..samples.warm_up + samples.get {
        let id = population.handoff_id(rng.below(size));
        let start = Instant::now();
        let found = raw.get(&id).await?;
        let elapsed = start.elapsed();
        if !found {
            return fail(format!("raw get {id}: the loaded handoff was not found"));
        }
        if n >= samples.warm_up {
            timings.push(elapsed);
        }
    }
    raw.close().await;
    Ok(Summary::of(&timings))
}

async fn get(store: &Store, population: &Population, i: u64) -> BenchResult<Duration> {
    let id = population.handoff_id(i);
    let start = Instant::now();
    let found = store.get_interactive_handoff(&id).await.context("get")?;
    let elapsed = start.elapsed();
    match found {
        Some(handoff) if handoff.id == id => Ok(elapsed),
        _ => fail(format!("get {id}: the loaded handoff was not found")),
    }
}

async fn list_parent(
    store: &Store,
    population: &Population,
    p: u64,
    size: u64,
) -> BenchResult<Duration> {
    let parent = population.parent_ref(p);
    let start = Instant::now();
    let handoffs = store
        .list_interactive_handoffs(ListQuery::from(&parent))
        .await
        .context("list --parent")?;
    let elapsed = start.elapsed();
    let expected = (size - p * PER_PARENT).min(PER_PARENT) as usize;
    if handoffs.len() != expected {
        return fail(format!(
            "list --parent {parent}: {} handoffs, expected {expected}",
            handoffs.len()
        ));
    }
    Ok(elapsed)
}

async fn list_active(store: &Store, query: &ListQuery, expected: usize) -> BenchResult<Duration> {
    let start = Instant::now();
    let handoffs = store
        .list_interactive_handoffs(query.clone())
        .await
        .context("list --active")?;
    let elapsed = start.elapsed();
    if handoffs.len() != expected || handoffs.iter().any(|h| !h.is_active()) {
        return fail(format!(
            "list --active: {} handoffs, expected {expected} active ones",
            handoffs.len()
        ));
    }
    Ok(elapsed)
}

async fn list_waiting(store: &Store, query: &ListQuery, expected: usize) -> BenchResult<Duration> {
    let start = Instant::now();
    let handoffs = store
        .list_interactive_handoffs(query.clone())
        .await
        .context("list --status waiting")?;
    let elapsed = start.elapsed();
    let waiting = |h: &InteractiveHandoff| h.status == InteractiveHandoffStatus::Waiting;
    if handoffs.len() != expected || !handoffs.iter().all(waiting) {
        return fail(format!(
            "list --status waiting: {} handoffs, expected {expected} waiting ones",
            handoffs.len()
        ));
    }
    Ok(elapsed)
}

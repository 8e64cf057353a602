//! Lifecycle throughput: open, attach, finish and claim_wake on fresh
//! handoffs, through the `Store` and as raw statements on the same engine.
//!
//! Both sides run in the same process, on two stores of the same backend
//! created the same way, sequentially (one call at a time). They take turns
//! lifecycle by lifecycle (store then raw, raw then store, ...), so a slow
//! moment of the disk hits both alike. Parents are created beforehand and
//! are not timed: each lifecycle opens a handoff on its own wave.

use std::time::{Duration, Instant};

use lf_handoff_adapters::testing::OpenRequest;
use lf_handoff_adapters::{open_store, GenerateId, Store};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Answer, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffStatus,
    OpenInteractiveHandoff,
};
use lf_handoff_domain::timestamp::truncate_to_micros;
use lf_handoff_domain::wave::Wave;
use serde::Serialize;
use time::OffsetDateTime;

use crate::backends::{BenchBackend, RawEngine};
use crate::error::{fail, BenchResult, Context};
use crate::stats::{ratio, Summary};

/// Durable commits one lifecycle makes (open, attach, finish, claim).
pub const COMMITS_PER_LIFECYCLE: u32 = 4;

pub(crate) const STEPS: [&str; 4] = ["open", "attach", "finish", "claim_wake"];
const SUMMARY: &str = "logged in; deploy re-run";

/// The lifecycle figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct LifecycleFigures {
    /// Lifecycles per side.
    pub lifecycles: usize,
    /// Through the `Store`, lifecycles per second.
    pub store_per_sec: f64,
    /// Raw statements, lifecycles per second.
    pub raw_per_sec: f64,
    /// store / raw.
    pub ratio: f64,
    /// Median time of one whole lifecycle through the `Store`, µs.
    pub store_lifecycle_median_us: f64,
    /// Median time of one whole raw lifecycle, µs.
    pub raw_lifecycle_median_us: f64,
    /// Each step's latency on both sides.
    pub steps: Vec<StepFigures>,
}

/// One step's latency through the store and raw.
#[derive(Debug, Clone, Serialize)]
pub struct StepFigures {
    /// `open`, `attach`, `finish` or `claim_wake`.
    pub step: &'static str,
    /// Through the `Store`.
    pub store: Summary,
    /// Raw.
    pub raw: Summary,
}

/// Timings of each step, and the total time.
#[derive(Default)]
pub(crate) struct Side {
    pub(crate) steps: [Vec<Duration>; 4],
    pub(crate) lifecycles: Vec<Duration>,
    total: Duration,
    pub(crate) count: usize,
}

impl Side {
    pub(crate) fn record(&mut self, timings: [Duration; 4]) {
        for (step, timing) in self.steps.iter_mut().zip(timings) {
            step.push(timing);
        }
        let lifecycle = timings.iter().sum::<Duration>();
        self.lifecycles.push(lifecycle);
        self.total += lifecycle;
        self.count += 1;
    }

    pub(crate) fn per_sec(&self) -> f64 {
        ratio(self.count as f64, self.total.as_secs_f64())
    }
}

/// Measures `lifecycles` lifecycles per side, taking turns.
pub async fn measure(
    backend: &dyn BenchBackend,
    lifecycles: usize,
) -> BenchResult<LifecycleFigures> {
    let store_config = backend.new_store("lifecycle-store").await?;
    let raw_config = backend.new_store("lifecycle-raw").await?;
    let store = open_store(&store_config).await.context("open store")?;
    let warmup = 10;
    let store_waves = create_waves(&store, lifecycles + warmup).await?;
    let raw_waves = {
        // Parents on the raw side are written through a store too: the
        // comparison is about handoffs.
        let setup = open_store(&raw_config).await.context("open raw store")?;
        create_waves(&setup, lifecycles + warmup).await?
    };
    let raw = backend.raw(&raw_config).await?;

    let mut store_side = Side::default();
    let mut raw_side = Side::default();
    for wave in &store_waves[..warmup] {
        store_lifecycle(&store, wave).await?;
    }
    for wave in &raw_waves[..warmup] {
        raw_lifecycle(raw.as_ref(), wave).await?;
    }
    for (turn, (store_wave, raw_wave)) in store_waves[warmup..]
        .iter()
        .zip(&raw_waves[warmup..])
        .enumerate()
    {
        if turn % 2 == 0 {
            store_side.record(store_lifecycle(&store, store_wave).await?);
            raw_side.record(raw_lifecycle(raw.as_ref(), raw_wave).await?.0);
        } else {
            raw_side.record(raw_lifecycle(raw.as_ref(), raw_wave).await?.0);
            store_side.record(store_lifecycle(&store, store_wave).await?);
        }
    }
    raw.close().await;
    drop(store);
    backend.remove(&store_config).await;
    backend.remove(&raw_config).await;

    let steps = STEPS
        .iter()
        .enumerate()
        .map(|(index, step)| StepFigures {
            step,
            store: Summary::of(&store_side.steps[index]),
            raw: Summary::of(&raw_side.steps[index]),
        })
        .collect();
    Ok(LifecycleFigures {
        lifecycles: store_side.count,
        store_per_sec: store_side.per_sec(),
        raw_per_sec: raw_side.per_sec(),
        ratio: ratio(store_side.per_sec(), raw_side.per_sec()),
        store_lifecycle_median_us: Summary::of(&store_side.lifecycles).median_us,
        raw_lifecycle_median_us: Summary::of(&raw_side.lifecycles).median_us,
        steps,
    })
}

pub(crate) async fn create_waves(store: &Store, count: usize) -> BenchResult<Vec<Wave>> {
    let mut waves = Vec::with_capacity(count);
    for n in 0..count {
        let wave = Wave::new(
            GenerateId::new(),
            format!("lifecycle wave {n}"),
            "/srv/repos/product".into(),
        );
        store.create_wave(&wave).await.context("create wave")?;
        waves.push(wave);
    }
    Ok(waves)
}

/// The open request every benchmark lifecycle sends for `wave`: the
/// workspace's test request in the benchmark's repository.
pub fn request(wave: &Wave) -> OpenInteractiveHandoff {
    OpenRequest::on_wave(wave).cwd("/srv/repos/product").build()
}

pub(crate) async fn store_lifecycle(store: &Store, wave: &Wave) -> BenchResult<[Duration; 4]> {
    store_lifecycle_of(store, request(wave), None).await
}

/// One lifecycle of `request` through the store, finishing with `answer`
/// (C26) when it asks for one; each step's time.
pub(crate) async fn store_lifecycle_of(
    store: &Store,
    request: OpenInteractiveHandoff,
    answer: Option<&Answer>,
) -> BenchResult<[Duration; 4]> {
    let outcome = InteractiveHandoffOutcome::Completed {
        summary: SUMMARY.into(),
    };
    let start = Instant::now();
    let (handoff, created) = store
        .open_interactive_handoff(request)
        .await
        .context("store open")?;
    let opened = Instant::now();
    store
        .attach_interactive_handoff(&handoff.id)
        .await
        .context("store attach")?;
    let attached = Instant::now();
    store
        .finish_interactive_handoff(&handoff.id, &outcome, answer)
        .await
        .context("store finish")?;
    let finished = Instant::now();
    let claimed = store
        .claim_interactive_handoff_wake(&handoff.id, 1)
        .await
        .context("store claim_wake")?
        .claimed;
    let done = Instant::now();
    if !created || !claimed {
        return fail(format!(
            "store lifecycle of {}: created {created}, claimed {claimed}",
            handoff.id
        ));
    }
    Ok([
        opened - start,
        attached - opened,
        finished - attached,
        done - finished,
    ])
}

/// The raw lifecycle: the records a caller would build (plain field
/// updates), one INSERT and three guarded UPDATEs (or the engine's
/// equivalents), each with its history event. Returns the step timings
/// and the four records written, in order.
pub(crate) async fn raw_lifecycle(
    raw: &dyn RawEngine,
    wave: &Wave,
) -> BenchResult<([Duration; 4], [InteractiveHandoff; 4])> {
    let request = request(wave);
    let now = || truncate_to_micros(OffsetDateTime::now_utc());
    let start = Instant::now();
    let created = now();
    let waiting = InteractiveHandoff {
        id: InteractiveHandoffId::new(),
        parent: request.parent,
        wave_id: wave.id().clone(),
        home: request.home,
        cwd: request.cwd,
        provider: request.provider,
        provider_session_id: request.provider_session_id,
        body_generation: request.body_generation,
        reason: request.reason,
        environment: request.environment,
        attach_argv: request.attach_argv,
        status: InteractiveHandoffStatus::Waiting,
        outcome: None,
        created_at: created,
        updated_at: created,
        attached_at: None,
        terminal_at: None,
        wake_claimed_at: None,
        wake_claimed_by_generation: None,
        step: None,
        expires_at: None,
        choices: None,
        form: None,
        on_expiry: None,
        answer: None,
    };
    raw.insert(&waiting).await?;
    let opened = Instant::now();
    let at = now();
    let attached = InteractiveHandoff {
        status: InteractiveHandoffStatus::Attached,
        attached_at: Some(at),
        updated_at: at,
        ..waiting.clone()
    };
    raw.attach(&waiting, &attached).await?;
    let attached_done = Instant::now();
    let at = now();
    let finished = InteractiveHandoff {
        status: InteractiveHandoffStatus::Completed,
        outcome: Some(InteractiveHandoffOutcome::Completed {
            summary: SUMMARY.into(),
        }),
        terminal_at: Some(at),
        updated_at: at,
        ..attached.clone()
    };
    raw.finish(&attached, &finished).await?;
    let finished_done = Instant::now();
    let at = now();
    let claimed = InteractiveHandoff {
        wake_claimed_at: Some(at),
        wake_claimed_by_generation: Some(1),
        updated_at: at,
        ..finished.clone()
    };
    raw.claim(&finished, &claimed).await?;
    let done = Instant::now();
    let timings = [
        opened - start,
        attached_done - opened,
        finished_done - attached_done,
        done - finished_done,
    ];
    Ok((timings, [waiting, attached, finished, claimed]))
}

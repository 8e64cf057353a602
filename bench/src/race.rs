//! Racing finishers: eight store handles finish one handoff at once, each
//! with a different outcome; exactly one may win.
//!
//! Each handle is a separate `open_store` on the same store (its own
//! connection pool), as separate orchestrator processes would be. A race is
//! timed from the moment all eight are released to the moment the last
//! answers; the winner count is checked on every race.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, GenerateId, Store};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffOutcome;
use lf_handoff_domain::wave::Wave;
use serde::Serialize;
use tokio::sync::Barrier;

use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult, Context};
use crate::stats::Summary;

/// Finishers per race.
pub const FINISHERS: usize = 8;

/// The racing-finisher figures.
#[derive(Debug, Clone, Serialize)]
pub struct RaceFigures {
    /// Races run.
    pub races: usize,
    /// Finishers per race.
    pub finishers: usize,
    /// Wall time of one race.
    pub wall: Summary,
}

/// Runs `races` races.
pub async fn measure(backend: &dyn BenchBackend, races: usize) -> BenchResult<RaceFigures> {
    let config = backend.new_store("race").await?;
    let mut handles = Vec::with_capacity(FINISHERS);
    for _ in 0..FINISHERS {
        handles.push(open_store(&config).await.context("open a store handle")?);
    }
    let wave = Wave::new(
        GenerateId::new(),
        "race".into(),
        "/srv/repos/product".into(),
    );
    handles[0].create_wave(&wave).await.context("create wave")?;
    let mut timings = Vec::with_capacity(races);
    for race in 0..races + 1 {
        let elapsed = one_race(&handles, &wave).await?;
        // The first race warms every handle's connection.
        if race > 0 {
            timings.push(elapsed);
        }
    }
    drop(handles);
    backend.remove(&config).await;
    Ok(RaceFigures {
        races,
        finishers: FINISHERS,
        wall: Summary::of(&timings),
    })
}

async fn one_race(handles: &[Store], wave: &Wave) -> BenchResult<Duration> {
    let request = crate::lifecycle::request(wave);
    let (handoff, _) = handles[0]
        .open_interactive_handoff(request)
        .await
        .context("open")?;
    let barrier = Arc::new(Barrier::new(handles.len() + 1));
    let mut tasks = Vec::with_capacity(handles.len());
    for (n, store) in handles.iter().enumerate() {
        let store = store.clone();
        let barrier = barrier.clone();
        let id = handoff.id.clone();
        let outcome = InteractiveHandoffOutcome::Completed {
            summary: format!("finished by handle {n}"),
        };
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            store.finish_interactive_handoff(&id, &outcome, None).await
        }));
    }
    barrier.wait().await;
    let start = Instant::now();
    let mut winners = 0;
    for task in tasks {
        match task.await.context("finisher task")? {
            Ok(_) => winners += 1,
            Err(error) if error.is_conflict() => {}
            Err(error) => return fail(format!("a finisher failed: {error}")),
        }
    }
    let elapsed = start.elapsed();
    if winners != 1 {
        return fail(format!(
            "{winners} of {} racing finishers won on {}",
            handles.len(),
            handoff.id
        ));
    }
    Ok(elapsed)
}

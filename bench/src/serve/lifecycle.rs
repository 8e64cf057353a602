//! The lifecycle through the service against the same lifecycle through
//! the library (issue 22).
//!
//! Two fresh stores of the backend: one served by a server of this
//! process (the store opened as `lf-handoff serve` opens it) and reached
//! through the `http` backend's `Store`, the other opened by the library
//! in this process. The same four calls (`open`, `attach`, `finish`,
//! `claim_wake`, [`crate::lifecycle::store_lifecycle`]) run on each, one
//! at a time, taking turns lifecycle by lifecycle, so a slow moment of the
//! disk or the machine hits both alike, in a task of the runtime. Parents
//! are created beforehand and are not timed.

use lf_handoff_adapters::open_store;
use serde::Serialize;

use super::{Access, Service};
use crate::backends::BenchBackend;
use crate::error::{BenchResult, Context};
use crate::lifecycle::{create_waves, store_lifecycle, Side, STEPS};
use crate::stats::{ratio, Summary};

/// Untimed lifecycles on each side before the timed ones.
const WARM_UP: usize = 10;

/// The figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct ServeLifecycleFigures {
    /// Lifecycles per side.
    pub lifecycles: usize,
    /// Through the service, lifecycles per second.
    pub service_per_sec: f64,
    /// Through the library, lifecycles per second.
    pub library_per_sec: f64,
    /// service / library.
    pub ratio: f64,
    /// Median time of one whole lifecycle through the service, µs.
    pub service_lifecycle_median_us: f64,
    /// Median time of one whole lifecycle through the library, µs.
    pub library_lifecycle_median_us: f64,
    /// Each step's latency on both sides.
    pub steps: Vec<ServeStep>,
}

/// One step's latency through the service and through the library.
#[derive(Debug, Clone, Serialize)]
pub struct ServeStep {
    /// `open`, `attach`, `finish` or `claim_wake`.
    pub step: &'static str,
    /// Through the service.
    pub service: Summary,
    /// Through the library.
    pub library: Summary,
}

/// Measures `lifecycles` lifecycles per side, taking turns.
///
/// # Errors
/// When a store cannot be made or a call fails.
pub async fn measure(
    backend: &dyn BenchBackend,
    access: &Access,
    lifecycles: usize,
) -> BenchResult<ServeLifecycleFigures> {
    let served_config = backend.new_store("serve-lifecycle-service").await?;
    let library_config = backend.new_store("serve-lifecycle-library").await?;
    let served = open_store(&served_config)
        .await
        .context("open the served store")?;
    let service = Service::start(served, access, None).await?;
    let client = access.client(service.url()).await?;
    let library = open_store(&library_config)
        .await
        .context("open the library's store")?;
    let service_waves = create_waves(&client, lifecycles + WARM_UP).await?;
    let library_waves = create_waves(&library, lifecycles + WARM_UP).await?;
    // In a task of the runtime, as a program's calls are: the thread that
    // runs the benchmark's phases is not one of the runtime's workers, and
    // a call from it pays a hand-off more each way, which the service's
    // path (client, connection and server tasks) would pay more often.
    let (turns_client, turns_library) = (client.clone(), library.clone());
    let turns = tokio::spawn(async move {
        let (client, library) = (turns_client, turns_library);
        for (service_wave, library_wave) in service_waves.iter().zip(&library_waves).take(WARM_UP) {
            store_lifecycle(&client, service_wave).await?;
            store_lifecycle(&library, library_wave).await?;
        }
        let mut service_side = Side::default();
        let mut library_side = Side::default();
        for (turn, (service_wave, library_wave)) in service_waves[WARM_UP..]
            .iter()
            .zip(&library_waves[WARM_UP..])
            .enumerate()
        {
            if turn % 2 == 0 {
                service_side.record(store_lifecycle(&client, service_wave).await?);
                library_side.record(store_lifecycle(&library, library_wave).await?);
            } else {
                library_side.record(store_lifecycle(&library, library_wave).await?);
                service_side.record(store_lifecycle(&client, service_wave).await?);
            }
        }
        BenchResult::Ok((service_side, library_side))
    });
    let (service_side, library_side) = turns.await.context("the lifecycles' task")??;
    drop(client);
    drop(library);
    service.stop().await;
    backend.remove(&served_config).await;
    backend.remove(&library_config).await;

    let steps = STEPS
        .iter()
        .enumerate()
        .map(|(index, step)| ServeStep {
            step,
            service: Summary::of(&service_side.steps[index]),
            library: Summary::of(&library_side.steps[index]),
        })
        .collect();
    Ok(ServeLifecycleFigures {
        lifecycles: service_side.count,
        service_per_sec: service_side.per_sec(),
        library_per_sec: library_side.per_sec(),
        ratio: ratio(service_side.per_sec(), library_side.per_sec()),
        service_lifecycle_median_us: Summary::of(&service_side.lifecycles).median_us,
        library_lifecycle_median_us: Summary::of(&library_side.lifecycles).median_us,
        steps,
    })
}

//! A finish through one server to an event-stream client of another
//! server on the same PostgreSQL store (issue 22).
//!
//! Two servers of this process serve one store, each with a store handle
//! of its own (its own pool and `LISTEN` session, as two `lf-handoff serve`
//! processes would have). A client follows `GET /v1/events` of server B
//! through the `http` backend's `Store::watch`, in a task of its own that
//! notes when each event arrives. Each sample opens and attaches a handoff
//! through server A, waits a pseudo-random 50-150 ms, then finishes it
//! through server A; the latency is from just before the finish request to
//! the arrival of the finish event (the handoff's third) at the client. It
//! includes the finish's own commit, which every such client pays too.

use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, WatchFilter, WatchFrom};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffOutcome;
use serde::Serialize;
use tokio::sync::mpsc;

use super::{Access, Service};
use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult, Context};
use crate::lifecycle::{create_waves, request};
use crate::stats::{percentile, Rng, Summary};

/// Untimed samples first.
const WARM_UP: usize = 2;

/// How long the client may take to see a finish before the sample fails.
const PATIENCE: Duration = Duration::from_secs(15);

/// The event number of a lifecycle's finish: open 1, attach 2, finish 3.
const FINISH_SEQ: u64 = 3;

/// The figures.
#[derive(Debug, Clone, Serialize)]
pub struct EventFigures {
    /// Finish to the event's arrival at the other server's client.
    pub latency: Summary,
    /// Its 95th percentile (nearest rank), µs.
    pub p95_us: f64,
}

/// Measures `samples` finishes.
///
/// # Errors
/// When a server cannot start, a call fails or an event does not arrive.
pub async fn measure(
    backend: &dyn BenchBackend,
    access: &Access,
    samples: usize,
) -> BenchResult<EventFigures> {
    let config = backend.new_store("serve-events").await?;
    let first = open_store(&config).await.context("open store")?;
    let second = open_store(&config).await.context("open store again")?;
    let writing = Service::start(first, access, None).await?;
    let following = Service::start(second, access, None).await?;
    let writer = access.client(writing.url()).await?;
    let reader = access.client(following.url()).await?;
    let mut watcher = reader
        .watch(WatchFrom::Now, WatchFilter::default())
        .await
        .context("follow the events")?;
    let (arrived, mut arrivals) = mpsc::unbounded_channel::<(InteractiveHandoffId, Instant)>();
    let follower = tokio::spawn(async move {
        loop {
            match watcher.next().await {
                Ok(event) if event.seq == FINISH_SEQ => {
                    if arrived.send((event.handoff_id, Instant::now())).is_err() {
                        return Ok(());
                    }
                }
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
    });
    let waves = create_waves(&writer, samples + WARM_UP).await?;
    let outcome = InteractiveHandoffOutcome::Completed {
        summary: "done".into(),
    };
    let mut rng = Rng::new(22);
    let mut timings = Vec::with_capacity(samples);
    for (n, wave) in waves.iter().enumerate() {
        let (handoff, _) = writer
            .open_interactive_handoff(request(wave))
            .await
            .context("open")?;
        writer
            .attach_interactive_handoff(&handoff.id)
            .await
            .context("attach")?;
        tokio::time::sleep(Duration::from_millis(50 + rng.below(100))).await;
        let finishing = Instant::now();
        writer
            .finish_interactive_handoff(&handoff.id, &outcome, None)
            .await
            .context("finish")?;
        let seen = match tokio::time::timeout(PATIENCE, arrivals.recv()).await {
            Ok(Some((id, at))) if id == handoff.id => at,
            Ok(Some((id, _))) => {
                return fail(format!("the stream reported {id}, not {}", handoff.id))
            }
            Ok(None) => {
                return match follower.await {
                    Ok(Err(error)) => fail(format!("the event stream failed: {error}")),
                    _ => fail("the event stream ended"),
                }
            }
            Err(_) => {
                return fail(format!(
                    "the finish of {} did not reach the other server's stream within {} s",
                    handoff.id,
                    PATIENCE.as_secs()
                ))
            }
        };
        if n >= WARM_UP {
            timings.push(seen.saturating_duration_since(finishing));
        }
    }
    follower.abort();
    drop((writer, reader));
    writing.stop().await;
    following.stop().await;
    backend.remove(&config).await;
    let mut micros: Vec<f64> = timings.iter().map(|t| t.as_secs_f64() * 1e6).collect();
    micros.sort_by(f64::total_cmp);
    Ok(EventFigures {
        latency: Summary::of(&timings),
        p95_us: percentile(&micros, 95.0),
    })
}

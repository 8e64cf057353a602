//! `GET /v1/handoffs/{id}` requests per second through the service,
//! against a bare handler of the same HTTP stack (issue 22).
//!
//! One store of the backend holds one handoff. Two servers of this process
//! run the same connection loop (`Server::run_router`: hyper's HTTP/1.1
//! connection, the same limits and TCP settings): one with the service's
//! routes and layers (token check, request log line and metrics, the
//! store's read, the JSON answer), the other with a bare axum handler on
//! the same path answering the bytes the service answered first, with the
//! same content type. A third server, on the same loop, shows where the
//! difference goes: a handler that reads the handoff from the store and
//! answers its JSON as the service's handler does, without the service's
//! layers (token, log line, metrics, panic guard). The load generator
//! ([`super::load`]) sends the same request (with the token) to each, from
//! 1 and from 64 keep-alive connections, for a fixed time, taking turns;
//! the ratio is service / bare. Beside them, one caller at a time for the
//! same time: the same read through the `http` backend's `Store` (the
//! service's own client) and through the library.

use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hyper::body::Bytes;
use lf_handoff_adapters::{open_store, StorageConfig, Store};
use lf_handoff_api::HandoffJson;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoff;
use serde::Serialize;

use super::load::{self, Connection, Load};
use super::{Access, Service};
use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult, Context};
use crate::lifecycle::{create_waves, request};
use crate::stats::ratio;

/// How long the untimed warm-up of each server and connection count lasts.
const WARM_UP: Duration = Duration::from_millis(300);

/// The figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct GetRateFigures {
    /// Bytes of the answer's body (the bare handler's too).
    pub body_bytes: usize,
    /// Rounds per connection count; each round runs each server once.
    pub rounds: usize,
    /// Seconds of each server's run in a round.
    pub seconds: f64,
    /// One row per connection count.
    pub rows: Vec<GetRateRow>,
    /// One caller: `get` through the `http` backend's `Store` against the
    /// service, per second.
    pub client_store_per_sec: f64,
    /// One caller: `get` through the library, per second.
    pub library_per_sec: f64,
    /// The most service/bare could be at one connection if answering
    /// cost only the bare request and one library `get` one after the
    /// other, with nothing lost between them:
    /// `bare time / (bare time + get time)`.
    pub one_connection_ceiling: Option<f64>,
}

/// The rates at one connection count.
#[derive(Debug, Clone, Serialize)]
pub struct GetRateRow {
    /// Keep-alive connections, one client task each.
    pub connections: usize,
    /// Requests answered by the service.
    pub service_requests: u64,
    /// Through the service, requests per second.
    pub service_per_sec: f64,
    /// Requests answered by the bare handler.
    pub bare_requests: u64,
    /// The bare handler, requests per second.
    pub bare_per_sec: f64,
    /// The store's read and the JSON answer without the service's layers,
    /// requests per second.
    pub read_only_per_sec: f64,
    /// service / bare.
    pub ratio: f64,
}

/// Measures the rates at each count of `connections`, `rounds` rounds of
/// `seconds` per server.
///
/// # Errors
/// When a server cannot start, a connection fails or an answer is wrong.
pub async fn measure(
    backend: &dyn BenchBackend,
    access: &Access,
    connections: &[usize],
    seconds: f64,
    rounds: usize,
) -> BenchResult<GetRateFigures> {
    let (config, store, handoff) = one_handoff(backend, "serve-get").await?;
    let path = format!("/v1/handoffs/{}", handoff.id.as_str());
    let expect = handoff.id.as_str().as_bytes().to_vec();
    let service = Service::start(store.clone(), access, None).await?;
    let (status, body) = Connection::open(service.addr(), access.token())
        .await?
        .get_body(&path)
        .await?;
    if status != 200 {
        return fail(format!("GET {path} answered {status}"));
    }
    let bare = Service::start(store.clone(), access, Some(bare_router(body.clone()))).await?;
    let read_only = Service::start(store.clone(), access, Some(read_router(store.clone()))).await?;
    let duration = Duration::from_secs_f64(seconds);
    let mut rows = Vec::new();
    for &clients in connections {
        let run = |addr| load::run(addr, access.token(), &path, &expect, clients, duration);
        let warm = |addr| load::run(addr, access.token(), &path, &expect, clients, WARM_UP);
        warm(service.addr()).await?;
        warm(bare.addr()).await?;
        warm(read_only.addr()).await?;
        let (mut on_service, mut on_bare, mut on_read) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            if round % 2 == 0 {
                on_service.push(run(service.addr()).await?);
                on_bare.push(run(bare.addr()).await?);
                on_read.push(run(read_only.addr()).await?);
            } else {
                on_read.push(run(read_only.addr()).await?);
                on_bare.push(run(bare.addr()).await?);
                on_service.push(run(service.addr()).await?);
            }
        }
        let (service_requests, service_per_sec) = rate(&on_service);
        let (bare_requests, bare_per_sec) = rate(&on_bare);
        let (_, read_only_per_sec) = rate(&on_read);
        rows.push(GetRateRow {
            connections: clients,
            service_requests,
            service_per_sec,
            bare_requests,
            bare_per_sec,
            read_only_per_sec,
            ratio: ratio(service_per_sec, bare_per_sec),
        });
    }
    let single = duration * u32::try_from(rounds).unwrap_or(1);
    let client = access.client(service.url()).await?;
    let client_store_per_sec = gets_per_sec(client, &handoff.id, single).await?;
    let library_per_sec = gets_per_sec(store, &handoff.id, single).await?;
    service.stop().await;
    bare.stop().await;
    read_only.stop().await;
    backend.remove(&config).await;
    let one_connection_ceiling = rows
        .iter()
        .find(|row| row.connections == 1)
        .map(|row| ceiling(row.bare_per_sec, library_per_sec));
    Ok(GetRateFigures {
        body_bytes: body.len(),
        rounds,
        seconds,
        rows,
        client_store_per_sec,
        library_per_sec,
        one_connection_ceiling,
    })
}

/// A new store of `backend` (named after `label`) holding one handoff,
/// opened on a new wave.
///
/// # Errors
/// When the store cannot be made or the handoff opened.
pub(super) async fn one_handoff(
    backend: &dyn BenchBackend,
    label: &str,
) -> BenchResult<(StorageConfig, Store, InteractiveHandoff)> {
    let config = backend.new_store(label).await?;
    let store = open_store(&config).await.context("open store")?;
    let waves = create_waves(&store, 1).await?;
    let (handoff, _) = store
        .open_interactive_handoff(request(&waves[0]))
        .await
        .context("open")?;
    Ok((config, store, handoff))
}

/// `get`s of `id` through `store` per second, one after another for
/// `duration`, in a task of the runtime (as the load generator's clients
/// are: the thread that runs the benchmark's phases is not one of the
/// runtime's workers, and a call from it pays a hand-off more each way).
async fn gets_per_sec(
    store: Store,
    id: &InteractiveHandoffId,
    duration: Duration,
) -> BenchResult<f64> {
    let id = id.clone();
    let task = tokio::spawn(async move {
        let started = Instant::now();
        let mut count = 0_u64;
        loop {
            match store.get_interactive_handoff(&id).await.context("get")? {
                Some(handoff) if handoff.id == id => {}
                _ => return fail(format!("get {id} did not return the handoff")),
            }
            count += 1;
            if started.elapsed() >= duration {
                break;
            }
        }
        Ok(ratio(count as f64, started.elapsed().as_secs_f64()))
    });
    task.await.context("the caller's task")?
}

/// service/bare at one connection if a request cost the bare request's
/// time plus one `get` at `get_per_sec`, one after the other.
pub(super) fn ceiling(bare_per_sec: f64, get_per_sec: f64) -> f64 {
    if bare_per_sec <= 0.0 || get_per_sec <= 0.0 {
        return 0.0;
    }
    let (bare, get) = (1.0 / bare_per_sec, 1.0 / get_per_sec);
    bare / (bare + get)
}

/// Requests and requests per second over all `loads`.
fn rate(loads: &[Load]) -> (u64, f64) {
    let requests: u64 = loads.iter().map(|load| load.requests).sum();
    let seconds: f64 = loads.iter().map(|load| load.elapsed.as_secs_f64()).sum();
    (requests, ratio(requests as f64, seconds))
}

/// The bare handler: `GET /v1/handoffs/{id}` answers `body` as JSON, and
/// nothing else runs around it.
fn bare_router(body: Bytes) -> Router {
    Router::new().route(
        "/v1/handoffs/{id}",
        get(move || {
            let body = body.clone();
            async move { ([(CONTENT_TYPE, "application/json")], body) }
        }),
    )
}

/// The service's read without its layers: the handoff from `store`,
/// answered as the service's handler answers it.
fn read_router(store: Store) -> Router {
    async fn read(State(store): State<Store>, Path(id): Path<String>) -> Response {
        let Ok(id) = InteractiveHandoffId::parse(&id) else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        match store.get_interactive_handoff(&id).await {
            Ok(Some(handoff)) => Json(HandoffJson::new(handoff, store.now())).into_response(),
            Ok(None) => StatusCode::NOT_FOUND.into_response(),
            Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        }
    }
    Router::new()
        .route("/v1/handoffs/{id}", get(read))
        .with_state(store)
}

//! `/metrics` in the Prometheus text format (version 0.0.4), written by
//! hand: a few counters, gauges and one histogram do not call for a
//! metrics crate.
//!
//! - `lf_handoff_http_requests_total{method, route, status}` and
//!   `lf_handoff_http_request_duration_seconds{method, route, status}` (a
//!   histogram): every request, by its route template (`unmatched` for an
//!   unknown path), never by its path or query;
//! - `lf_handoff_handoffs_open`, `lf_handoff_handoffs_due`: counted at
//!   each scrape by listing the active handoffs, a page of 1000 at a
//!   time (cost: one indexed read per 1000 active handoffs; memory: one
//!   page);
//! - `lf_handoff_event_streams`, `lf_handoff_long_polls`: in progress now;
//! - `lf_handoff_connections`: open now; `lf_handoff_connections_refused_total`:
//!   turned away at the connection limit;
//! - `lf_handoff_store_retries_total`: calls the store tried again after
//!   finding its server unreachable (C18);
//! - `lf_handoff_notifications_total{endpoint, outcome}`: notification
//!   posts (C23) delivered, retried and dropped, by endpoint scheme, host
//!   and port (never its path, which may be a secret).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use lf_handoff_adapters::{retries_total, ListQuery, Store, StoreResult};
use lf_handoff_api::requests::MAX_PAGE;

/// The histogram's upper bounds, in seconds.
const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 300.0,
];

/// A gauge of things in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gauge {
    /// Event streams open now.
    EventStreams,
    /// Long polls waiting now.
    LongPolls,
    /// Connections open now.
    Connections,
}

#[derive(Debug, Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

/// The service's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, String, u16), Series>>,
    event_streams: AtomicI64,
    long_polls: AtomicI64,
    connections: AtomicI64,
    refused: AtomicU64,
    notifications: Mutex<BTreeMap<(String, &'static str), u64>>,
}

impl Metrics {
    /// Counts a request to `route` (a template, or `unmatched`) answered
    /// with `status` after `took`.
    pub fn request(&self, method: &'static str, route: &str, status: u16, took: Duration) {
        let seconds = took.as_secs_f64();
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        let series = requests
            .entry((method, route.to_string(), status))
            .or_default();
        series.count += 1;
        series.sum += seconds;
        for (bucket, bound) in series.buckets.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
    }

    /// Moves `gauge` by `by`.
    pub fn gauge(&self, gauge: Gauge, by: i64) {
        self.cell(gauge).fetch_add(by, Ordering::Relaxed);
    }

    /// The value of `gauge` now.
    pub fn gauge_value(&self, gauge: Gauge) -> i64 {
        self.cell(gauge).load(Ordering::Relaxed)
    }

    fn cell(&self, gauge: Gauge) -> &AtomicI64 {
        match gauge {
            Gauge::EventStreams => &self.event_streams,
            Gauge::LongPolls => &self.long_polls,
            Gauge::Connections => &self.connections,
        }
    }

    /// Counts a notification post to the endpoint named `endpoint` (its
    /// scheme, host and port) that ended as `outcome`: `delivered`,
    /// `retried` or `dropped`.
    pub fn notification(&self, endpoint: &str, outcome: &'static str) {
        let mut counts = self
            .notifications
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *counts.entry((endpoint.to_string(), outcome)).or_default() += 1;
    }

    /// Counts a connection turned away at the limit.
    pub fn refused_connection(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The text of `/metrics`, with the open and due handoffs of `store`
    /// counted now.
    ///
    /// # Errors
    /// As listing the store's active handoffs.
    pub async fn render(&self, store: &Store) -> StoreResult<String> {
        let (open, due) = count_open(store).await?;
        let mut out = String::new();
        self.write_requests(&mut out);
        self.write_gauges(&mut out, open, due);
        self.write_notifications(&mut out);
        Ok(out)
    }

    /// The requests' counters and duration histograms.
    fn write_requests(&self, out: &mut String) {
        family(
            out,
            "lf_handoff_http_requests_total",
            "counter",
            "Requests answered, by method, route template and status.",
        );
        let requests = self.snapshot();
        for ((method, route, status), series) in &requests {
            let labels = labels(method, route, *status);
            let _ = writeln!(
                out,
                "lf_handoff_http_requests_total{{{labels}}} {}",
                series.count
            );
        }
        family(
            out,
            "lf_handoff_http_request_duration_seconds",
            "histogram",
            "How long requests took, by method, route template and status.",
        );
        for ((method, route, status), series) in &requests {
            let labels = labels(method, route, *status);
            for (bound, count) in BUCKETS.iter().zip(series.buckets) {
                let _ = writeln!(
                    out,
                    "lf_handoff_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "lf_handoff_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                series.count
            );
            let _ = writeln!(
                out,
                "lf_handoff_http_request_duration_seconds_sum{{{labels}}} {}",
                series.sum
            );
            let _ = writeln!(
                out,
                "lf_handoff_http_request_duration_seconds_count{{{labels}}} {}",
                series.count
            );
        }
    }

    /// One value each: the store's `open` and `due` handoffs, the
    /// service's gauges and its counters.
    fn write_gauges(&self, out: &mut String, open: u64, due: u64) {
        for (name, kind, help, value) in [
            (
                "lf_handoff_handoffs_open",
                "gauge",
                "Handoffs not finished, counted at this scrape.",
                open,
            ),
            (
                "lf_handoff_handoffs_due",
                "gauge",
                "Open handoffs whose deadline has passed (only an expiry can still happen to them).",
                due,
            ),
            (
                "lf_handoff_event_streams",
                "gauge",
                "Event streams open now.",
                self.gauge_value(Gauge::EventStreams).max(0).unsigned_abs(),
            ),
            (
                "lf_handoff_long_polls",
                "gauge",
                "Long polls waiting now.",
                self.gauge_value(Gauge::LongPolls).max(0).unsigned_abs(),
            ),
            (
                "lf_handoff_connections",
                "gauge",
                "Connections open now.",
                self.gauge_value(Gauge::Connections).max(0).unsigned_abs(),
            ),
            (
                "lf_handoff_connections_refused_total",
                "counter",
                "Connections turned away at the connection limit.",
                self.refused.load(Ordering::Relaxed),
            ),
            (
                "lf_handoff_store_retries_total",
                "counter",
                "Store calls tried again after finding the server unreachable.",
                retries_total(),
            ),
        ] {
            family(out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
    }

    /// The notification posts by endpoint and outcome.
    fn write_notifications(&self, out: &mut String) {
        family(
            out,
            "lf_handoff_notifications_total",
            "counter",
            "Notification posts by endpoint (scheme, host and port) and outcome: delivered, \
             retried, dropped.",
        );
        let notifications = self
            .notifications
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for ((endpoint, outcome), count) in notifications {
            let _ = writeln!(
                out,
                "lf_handoff_notifications_total{{endpoint=\"{}\",outcome=\"{outcome}\"}} {count}",
                escape_label(&endpoint)
            );
        }
    }

    fn snapshot(&self) -> Vec<((&'static str, String, u16), Series)> {
        let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        requests
            .iter()
            .map(|(key, series)| {
                (
                    key.clone(),
                    Series {
                        count: series.count,
                        sum: series.sum,
                        buckets: series.buckets,
                    },
                )
            })
            .collect()
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format asks: backslash, quote and line
/// feed escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(method: &str, route: &str, status: u16) -> String {
    // Route templates hold no quote or backslash; escape them all the
    // same, as the format asks.
    let route = escape_label(route);
    format!("method=\"{method}\",route=\"{route}\",status=\"{status}\"")
}

/// The active handoffs of `store` and how many of them are due, paging
/// through them so memory stays one page.
async fn count_open(store: &Store) -> StoreResult<(u64, u64)> {
    let now = store.now();
    let (mut open, mut due) = (0_u64, 0_u64);
    let mut after = None;
    loop {
        let page = match store
            .list_interactive_handoffs(ListQuery {
                active_only: true,
                after: after.clone(),
                limit: Some(MAX_PAGE),
                ..ListQuery::default()
            })
            .await
        {
            Ok(page) => page,
            // The page's start was finished and pruned meanwhile: what was
            // counted stands for this scrape.
            Err(error) if error.is_not_found() && after.is_some() => return Ok((open, due)),
            Err(error) => return Err(error),
        };
        open += page.len() as u64;
        due += page.iter().filter(|h| h.is_due(now)).count() as u64;
        match page.last() {
            Some(last) if page.len() == MAX_PAGE => after = Some(last.id.clone()),
            _ => return Ok((open, due)),
        }
    }
}

//! What a soak of one backend found, and its report.

use std::fmt::Write as _;
use std::time::Duration;

use super::hostile::{HostileFigures, PeerFigures};
use super::legit::LegitFigures;
use super::verify::StoreFigures;
use super::SoakOptions;

/// Every kind of request the legitimate client makes; a run that served
/// none of one did not soak it.
pub const KINDS: &[&str] = &[
    "wave",
    "open",
    "get",
    "finish",
    "link",
    "link page",
    "link form",
    "claim",
    "list",
    "wait",
];

/// The server's resident set, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RssFigures {
    /// Once it listens, before any load.
    pub start: u64,
    /// At the end of the warm-up.
    pub after_warm_up: u64,
    /// The highest of the samples taken every 5 s after the warm-up.
    pub highest: u64,
    /// When the load ended.
    pub end: u64,
}

impl RssFigures {
    /// Growth from the end of the warm-up to the end, as a fraction.
    pub fn growth(&self) -> f64 {
        if self.after_warm_up == 0 {
            return 0.0;
        }
        (self.end as f64 - self.after_warm_up as f64) / self.after_warm_up as f64
    }
}

/// One backend's soak.
#[derive(Debug)]
pub struct SoakFigures {
    /// The backend.
    pub backend: &'static str,
    /// The options it ran with.
    pub options: SoakOptions,
    /// The legitimate client's figures.
    pub legit: LegitFigures,
    /// The hostile peers'.
    pub hostile: HostileFigures,
    /// The server's resident set.
    pub rss: RssFigures,
    /// The store's check.
    pub store: StoreFigures,
    /// How the server ended, when not as it should (exit 0 on SIGTERM).
    pub server_exit: Option<String>,
    /// What stopped the run, if anything.
    pub harness_errors: Vec<String>,
    /// Wall time of the backend's run.
    pub elapsed: Duration,
    /// Where the store was kept (a failed run).
    pub kept: Option<String>,
}

impl SoakFigures {
    /// Empty figures of `backend`.
    pub fn new(backend: &'static str, options: &SoakOptions) -> Self {
        Self {
            backend,
            options: options.clone(),
            legit: LegitFigures::default(),
            hostile: HostileFigures::default(),
            rss: RssFigures::default(),
            store: StoreFigures::default(),
            server_exit: None,
            harness_errors: Vec::new(),
            elapsed: Duration::ZERO,
            kept: None,
        }
    }

    /// Notes what stopped the run.
    pub fn harness_error(&mut self, message: String) {
        self.harness_errors.push(message);
    }

    /// The kinds of request the run never served.
    pub fn kinds_not_served(&self) -> Vec<&'static str> {
        KINDS
            .iter()
            .copied()
            .filter(|kind| self.legit.served.get(kind).copied().unwrap_or(0) == 0)
            .collect()
    }

    /// Whether the run passed: no error of the legitimate client, every
    /// kind served, a sound store, a clean stop, and the resident set
    /// within its bound after the warm-up.
    pub fn passed(&self) -> bool {
        self.harness_errors.is_empty()
            && self.legit.errors == 0
            && self.kinds_not_served().is_empty()
            && self.store.sound()
            && self.server_exit.is_none()
            && self.rss.growth() <= self.options.max_rss_growth
    }

    /// The report, one line per figure, each starting `[backend]`.
    pub fn report(&self) -> String {
        let b = self.backend;
        let mut out = String::new();
        for message in &self.harness_errors {
            let _ = writeln!(out, "[{b}] harness error: {message}");
        }
        let served: Vec<String> = self
            .legit
            .served
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "[{b}] legitimate requests served: {} ({})",
            self.legit.total(),
            served.join(", ")
        );
        let _ = writeln!(out, "[{b}] legitimate errors: {}", self.legit.errors);
        self.legit.problems.report(&mut out, &format!("[{b}]   "));
        let not_served = self.kinds_not_served();
        if !not_served.is_empty() {
            let _ = writeln!(out, "[{b}] kinds never served: {}", not_served.join(", "));
        }
        let all = Spread::of(self.legit.times_without_waits());
        let _ = writeln!(
            out,
            "[{b}] legitimate latency (every request but the long polls): p50 {}, p99 {}, max {}",
            ms(all.p50),
            ms(all.p99),
            ms(all.max)
        );
        let kinds: Vec<String> = self
            .legit
            .times
            .iter()
            .map(|(kind, times)| {
                let spread = Spread::of(times.clone());
                format!("{kind} {}/{}", ms(spread.p50), ms(spread.p99))
            })
            .collect();
        let _ = writeln!(out, "[{b}] p50/p99 by kind: {}", kinds.join(", "));
        let _ = writeln!(
            out,
            "[{b}] long polls answered by the handoff's end: {}; event stream: {} events for {} acknowledged changes",
            self.legit.waits_ended,
            self.legit.stream_events,
            self.legit.acked.changes()
        );
        peer(
            &mut out,
            b,
            "trickling peer 127.0.0.2",
            &self.hostile.trickle,
        );
        peer(&mut out, b, "flooding peer 127.0.0.3", &self.hostile.flood);
        let _ = writeln!(
            out,
            "[{b}] server RSS: start {}, after the warm-up ({} s) {}, highest after it {}, end {} (growth after the warm-up {:+.1}%, bound {:.0}%)",
            mib(self.rss.start),
            self.options.warm_up.as_secs(),
            mib(self.rss.after_warm_up),
            mib(self.rss.highest),
            mib(self.rss.end),
            self.rss.growth() * 100.0,
            self.options.max_rss_growth * 100.0
        );
        if let Some(exit) = &self.server_exit {
            let _ = writeln!(out, "[{b}] server stop: {exit}");
        }
        let store = &self.store;
        if let Some(why) = &store.unreadable {
            let _ = writeln!(out, "[{b}] store: {why}");
        }
        let _ = writeln!(
            out,
            "[{b}] store: {} handoffs, invariant violations {}, acknowledged changes lost {}, histories checked {} (findings {})",
            store.handoffs, store.violations, store.lost, store.histories, store.history_findings
        );
        store.problems.report(&mut out, &format!("[{b}]   "));
        if let Some(kept) = &self.kept {
            let _ = writeln!(out, "[{b}] store kept for inspection: {kept}");
        }
        let _ = writeln!(out, "[{b}] elapsed: {:.1} s", self.elapsed.as_secs_f64());
        out
    }
}

fn peer(out: &mut String, backend: &str, name: &str, figures: &PeerFigures) {
    let other: Vec<String> = figures
        .other
        .iter()
        .map(|(line, n)| format!("{line:?} {n}"))
        .collect();
    let _ = writeln!(
        out,
        "[{backend}] {name}: connections {}, refused (503) {}, cut (400) {}, closed without an answer {}, held at the end {}, could not connect {}{}",
        figures.connections,
        figures.refused,
        figures.cut,
        figures.closed,
        figures.held_at_end,
        figures.connect_failures,
        if other.is_empty() {
            String::new()
        } else {
            format!(", other answers: {}", other.join(", "))
        }
    );
}

/// The median, 99th percentile (nearest rank) and largest of some times.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spread {
    /// The median.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The largest.
    pub max: Duration,
}

impl Spread {
    /// The spread of `times`; zero when there are none.
    pub fn of(mut times: Vec<Duration>) -> Self {
        times.sort();
        let rank = |pct: usize| {
            if times.is_empty() {
                return Duration::ZERO;
            }
            let rank = (pct * times.len()).div_ceil(100).clamp(1, times.len());
            times[rank - 1]
        };
        Self {
            p50: rank(50),
            p99: rank(99),
            max: times.last().copied().unwrap_or_default(),
        }
    }
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{RssFigures, Spread};

    #[test]
    fn percentiles_are_nearest_rank() {
        let times: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let spread = Spread::of(times);
        assert_eq!(spread.p50, Duration::from_millis(50));
        assert_eq!(spread.p99, Duration::from_millis(99));
        assert_eq!(spread.max, Duration::from_millis(100));
        assert_eq!(Spread::of(Vec::new()).p99, Duration::ZERO);
    }

    #[test]
    fn growth_is_measured_from_the_end_of_the_warm_up() {
        let rss = RssFigures {
            start: 10,
            after_warm_up: 100,
            highest: 120,
            end: 110,
        };
        assert!((rss.growth() - 0.10).abs() < 1e-9);
    }
}

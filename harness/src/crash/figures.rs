//! The figures of one backend's crash run, and their report.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::check::HistoryFindings;
use crate::problems::Problems;

/// The figures of one backend's run.
#[derive(Debug, Default)]
pub struct CrashFigures {
    /// The backend.
    pub backend: &'static str,
    /// Trials run (each ended with a SIGKILL and a check).
    pub trials_run: u64,
    /// Trials whose kill landed before the child had the store open.
    pub kills_before_ready: u64,
    /// Acknowledged transitions, by kind.
    pub acknowledged: BTreeMap<String, u64>,
    /// Transitions issued but not acknowledged when the kill landed.
    pub in_flight: u64,
    /// Of those, how many were found applied after the restart.
    pub in_flight_applied: u64,
    /// Acknowledged (or once observed) state missing or behind after a
    /// restart. Must be 0.
    pub lost: u64,
    /// Records failing `validate()`, I6 broken, refused reads or records
    /// nobody wrote. Must be 0.
    pub violations: u64,
    /// Harness failures: a child that failed by itself, a store that would
    /// not reopen, a store that could not be made. Must be 0.
    pub errors: u64,
    /// Handoffs in the store after the last trial.
    pub handoffs_at_end: usize,
    /// Parents checked after the last trial.
    pub parents_at_end: usize,
    /// Parents playing the crash story.
    pub story_parents: usize,
    /// Story opens at a step that created the step's handoff.
    pub steps_opened: u64,
    /// Story opens at a step that got an existing handoff back: a new
    /// generation ran the step again.
    pub steps_rerun: u64,
    /// Of those, how many got a finished handoff back.
    pub steps_rerun_finished: u64,
    /// Story claims that took the wake over from an older generation.
    pub wakes_taken_over: u64,
    /// Replaced generations' retries answered `claimed = false`.
    pub old_claims_refused: u64,
    /// (parent, step) pairs with more than one handoff. Must be 0.
    pub duplicate_steps: u64,
    /// Handoffs whose wake two generations held (see the module
    /// documentation). Must be 0.
    pub double_held_wakes: u64,
    /// Histories read and checked, after the trials and at the end.
    pub history_reads: u64,
    /// Events in those histories, each counted every time it was checked.
    pub events_checked: u64,
    /// The events in the store after the last trial, by kind.
    pub events_at_end: BTreeMap<String, u64>,
    /// Changes (shown by a stored record or acknowledged) without their
    /// event. Must be 0.
    pub changes_without_event: u64,
    /// Events no change of their record and no acknowledgement accounts
    /// for. Must be 0.
    pub events_without_change: u64,
    /// Malformed histories (numbering, positions, order, status chain,
    /// kinds, details) and events naming a wrong actor. Must be 0.
    pub history_violations: u64,
    /// Every history finding counted so far, so a lasting one counts once.
    pub(super) history_findings: BTreeSet<String>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// True when the time limit stopped the run before every trial ran.
    pub stopped_by_time_limit: bool,
    /// The first problems found, described.
    pub problems: Problems,
    /// Where the store was kept after a failure.
    pub kept_store: Option<String>,
}

impl CrashFigures {
    /// Returns true if and only if nothing was lost, nothing broke an
    /// invariant and the harness itself had no error.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.violations == 0
            && self.errors == 0
            && self.duplicate_steps == 0
            && self.double_held_wakes == 0
            && self.changes_without_event == 0
            && self.events_without_change == 0
            && self.history_violations == 0
    }

    /// Every acknowledged transition.
    pub fn acknowledged_total(&self) -> u64 {
        self.acknowledged.values().sum()
    }

    pub(super) fn lose(&mut self, message: String) {
        self.problems
            .count(&mut self.lost, format!("lost: {message}"));
    }

    pub(super) fn violate(&mut self, message: String) {
        self.problems
            .count(&mut self.violations, format!("violation: {message}"));
    }

    pub(super) fn fail(&mut self, message: String) {
        self.problems
            .count(&mut self.errors, format!("error: {message}"));
    }

    /// Counts what a history check found, each finding once per run.
    pub(super) fn history(&mut self, found: HistoryFindings) {
        let groups = [
            ("change without its event", found.missing),
            ("event without its change", found.extra),
            ("history violation", found.malformed),
        ];
        for (label, messages) in groups {
            for message in messages {
                let message = format!("{label}: {message}");
                if !self.history_findings.insert(message.clone()) {
                    continue;
                }
                match label {
                    "change without its event" => self.changes_without_event += 1,
                    "event without its change" => self.events_without_change += 1,
                    _ => self.history_violations += 1,
                }
                self.problems.describe(message);
            }
        }
    }

    /// The report, one `[backend] label: value` line per figure.
    pub fn report(&self) -> String {
        let b = self.backend;
        let kinds: Vec<String> = self
            .acknowledged
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        let mut out = String::new();
        out += &format!("[{b}] trials run: {}", self.trials_run);
        if self.stopped_by_time_limit {
            out += " (stopped by the time limit)";
        }
        out += "\n";
        out += &format!(
            "[{b}] kills before the store was open: {}\n",
            self.kills_before_ready
        );
        out += &format!(
            "[{b}] transitions acknowledged: {} ({})\n",
            self.acknowledged_total(),
            kinds.join(", ")
        );
        out += &format!(
            "[{b}] in flight at the kill: {} (applied {}, not applied {})\n",
            self.in_flight,
            self.in_flight_applied,
            self.in_flight - self.in_flight_applied
        );
        out += &format!(
            "[{b}] crash story: {} parents, {} steps opened, {} run again by a new generation \
             ({} finished), {} wakes taken over, {} replaced generations' claims refused\n",
            self.story_parents,
            self.steps_opened,
            self.steps_rerun,
            self.steps_rerun_finished,
            self.wakes_taken_over,
            self.old_claims_refused
        );
        self.history_lines(&mut out);
        out += &format!("[{b}] harness errors: {}\n", self.errors);
        out += &format!(
            "[{b}] records checked after the last trial: {} handoffs, {} parents\n",
            self.handoffs_at_end, self.parents_at_end
        );
        out += &format!("[{b}] elapsed: {:.1} s\n", self.elapsed.as_secs_f64());
        self.problems.report(&mut out, &format!("[{b}] "));
        if let Some(place) = &self.kept_store {
            out += &format!("[{b}] the store was kept for inspection in {place}\n");
        }
        out
    }

    /// The report's lines about the crash story's and the histories'
    /// findings.
    fn history_lines(&self, out: &mut String) {
        let b = self.backend;
        let kinds: Vec<String> = self
            .events_at_end
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        *out += &format!(
            "[{b}] events checked: {} in {} history reads (in the store at the end: {} events: {})\n",
            self.events_checked,
            self.history_reads,
            self.events_at_end.values().sum::<u64>(),
            kinds.join(", ")
        );
        *out += &format!("[{b}] transitions lost: {}\n", self.lost);
        *out += &format!("[{b}] invariant violations: {}\n", self.violations);
        *out += &format!(
            "[{b}] duplicate handoffs for one step: {}\n",
            self.duplicate_steps
        );
        *out += &format!(
            "[{b}] wakes held by two generations: {}\n",
            self.double_held_wakes
        );
        *out += &format!(
            "[{b}] changes without their event: {}\n",
            self.changes_without_event
        );
        *out += &format!(
            "[{b}] events without their change: {}\n",
            self.events_without_change
        );
        *out += &format!(
            "[{b}] history violations (malformed, wrong actor): {}\n",
            self.history_violations
        );
    }
}

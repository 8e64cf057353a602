//! Invariants I1-I7: what every stored handoff satisfies.
//!
//! Adapters call [`InteractiveHandoff::validate`] on every record they read
//! and refuse one that fails, so a damaged row is reported, never acted on.

use std::collections::BTreeSet;
use std::fmt;

use thiserror::Error;
use time::OffsetDateTime;

use super::{check_fields, fields_of, Fields, InteractiveHandoff, InteractiveHandoffParent};
use crate::timestamp::is_normalized;

/// One of the handoff invariants (I1-I7, docs/CONTRACT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Invariant {
    /// Terminal status <=> terminal_at set <=> outcome set; outcome matches
    /// status; expired only at or after a deadline.
    I1,
    /// attached_at is set exactly when the handoff was ever attached.
    I2,
    /// The wake claim's time and generation are set together, only when terminal.
    I3,
    /// A wave parent's id equals wave_id.
    I4,
    /// Field rules: provider, session id, generation, reason, cwd, argv, environment.
    I5,
    /// At most one non-terminal handoff per parent.
    I6,
    /// Timestamps never go backwards and are whole UTC microseconds; a
    /// deadline is later than the open.
    I7,
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A record that breaks an invariant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("handoff {handoff} breaks invariant {invariant}: {detail}")]
pub struct InvariantViolation {
    /// The handoff id, as text.
    pub handoff: String,
    /// Which invariant.
    pub invariant: Invariant,
    /// What exactly is wrong.
    pub detail: String,
}

/// A check of one invariant on one record: what is wrong, if anything.
type Check = fn(&InteractiveHandoff) -> Result<(), String>;

/// The per-record checks, in the order they run.
const CHECKS: [(Invariant, Check); 7] = [
    (Invariant::I1, InteractiveHandoff::check_outcome),
    (Invariant::I2, InteractiveHandoff::check_attached_at),
    (Invariant::I3, InteractiveHandoff::check_wake_claim),
    (Invariant::I4, InteractiveHandoff::check_wave_parent),
    (Invariant::I5, InteractiveHandoff::check_request_fields),
    (Invariant::I7, InteractiveHandoff::check_stamps),
    (
        Invariant::I7,
        InteractiveHandoff::check_updated_and_deadline,
    ),
];

impl InteractiveHandoff {
    /// Checks invariants I1-I5 and I7 on this record (I6 spans records: see
    /// [`check_one_active_per_parent`]).
    ///
    /// # Errors
    /// The first [`InvariantViolation`] found.
    pub fn validate(&self) -> Result<(), InvariantViolation> {
        for (invariant, check) in CHECKS {
            check(self).map_err(|detail| InvariantViolation {
                handoff: self.id.to_string(),
                invariant,
                detail,
            })?;
        }
        Ok(())
    }

    /// I1: terminal status, terminal_at and outcome go together, the
    /// outcome matches the status, and an expiry is at or after a deadline.
    fn check_outcome(&self) -> Result<(), String> {
        let terminal = self.status.is_terminal();
        if terminal != self.terminal_at.is_some() || terminal != self.outcome.is_some() {
            return Err(format!(
                "status {} with terminal_at {} and outcome {}",
                self.status,
                presence(self.terminal_at.is_some()),
                presence(self.outcome.is_some())
            ));
        }
        if let Some(outcome) = &self.outcome {
            if outcome.status() != self.status {
                return Err(format!(
                    "outcome {} does not match status {}",
                    outcome.status(),
                    self.status
                ));
            }
            outcome.validate().map_err(|err| err.to_string())?;
        }
        if self.status == super::InteractiveHandoffStatus::Expired {
            let in_time = match (self.expires_at, self.terminal_at) {
                (Some(deadline), Some(expired)) => expired >= deadline,
                _ => false,
            };
            if !in_time {
                return Err("expired without a deadline, or before its deadline".into());
            }
        }
        Ok(())
    }

    /// I2: attached_at is set exactly when the handoff was ever attached.
    fn check_attached_at(&self) -> Result<(), String> {
        let attached = self.status == super::InteractiveHandoffStatus::Attached;
        let waiting = self.status == super::InteractiveHandoffStatus::Waiting;
        if (attached && self.attached_at.is_none()) || (waiting && self.attached_at.is_some()) {
            return Err(format!(
                "status {} with attached_at {}",
                self.status,
                presence(self.attached_at.is_some())
            ));
        }
        Ok(())
    }

    /// I3: the wake claim's time and generation are set together, only on
    /// a terminal handoff, by a generation not older than its body's.
    fn check_wake_claim(&self) -> Result<(), String> {
        if self.wake_claimed_at.is_some() != self.wake_claimed_by_generation.is_some() {
            return Err(
                "wake_claimed_at and wake_claimed_by_generation must be set together".into(),
            );
        }
        if let Some(generation) = self.wake_claimed_by_generation {
            if !self.status.is_terminal() {
                return Err(format!("wake claimed while status is {}", self.status));
            }
            if generation < self.body_generation {
                return Err(format!(
                    "wake claimed by generation {generation}, older than body generation {}",
                    self.body_generation
                ));
            }
        }
        Ok(())
    }

    /// I4: a wave parent's id equals wave_id.
    fn check_wave_parent(&self) -> Result<(), String> {
        match &self.parent {
            InteractiveHandoffParent::Wave(wave) if wave != &self.wave_id => {
                Err(format!("wave parent {wave} but wave_id {}", self.wave_id))
            }
            _ => Ok(()),
        }
    }

    /// I5: the fields an open request carries keep their rules.
    /// I5 also covers the answer spec (C26): the spec keeps the subset's
    /// rules, `on_expiry` fits it, and an answer is recorded only once the
    /// handoff is terminal, fitting the spec when there is one.
    fn check_request_fields(&self) -> Result<(), String> {
        check_fields(&fields_of!(self)).map_err(|err| err.to_string())?;
        let spec = self.answer_spec().map_err(|err| err.to_string())?;
        if let Some(spec) = spec {
            spec.check_spec().map_err(|err| err.to_string())?;
        }
        for (what, answer) in [("on_expiry", &self.on_expiry), ("answer", &self.answer)] {
            let Some(answer) = answer else { continue };
            let Some(spec) = spec else {
                return Err(format!("{what} recorded on a handoff that asks for none"));
            };
            spec.check(answer)
                .map_err(|refusal| format!("{what}: {refusal}"))?;
        }
        if self.answer.is_some() && !self.status.is_terminal() {
            return Err(format!("an answer recorded while {}", self.status));
        }
        Ok(())
    }

    /// The stamps of the transitions, in the order they happen.
    fn stamps(&self) -> [(&'static str, Option<OffsetDateTime>); 4] {
        [
            ("created_at", Some(self.created_at)),
            ("attached_at", self.attached_at),
            ("terminal_at", self.terminal_at),
            ("wake_claimed_at", self.wake_claimed_at),
        ]
    }

    /// I7: the transitions' stamps are whole UTC microseconds and never go
    /// backwards.
    fn check_stamps(&self) -> Result<(), String> {
        let mut previous: Option<(&str, OffsetDateTime)> = None;
        for (name, value) in self.stamps() {
            let Some(value) = value else { continue };
            if !is_normalized(value) {
                return Err(format!("{name} is not whole UTC microseconds"));
            }
            if let Some((before, earlier)) = previous {
                if value < earlier {
                    return Err(format!("{name} is before {before}"));
                }
            }
            previous = Some((name, value));
        }
        Ok(())
    }

    /// I7: updated_at is the latest transition's stamp (or a later
    /// extension's), and a deadline is whole UTC microseconds later than
    /// the open.
    fn check_updated_and_deadline(&self) -> Result<(), String> {
        let latest = self
            .stamps()
            .iter()
            .filter_map(|(_, value)| *value)
            .max()
            .unwrap_or(self.created_at);
        // Moving a deadline changes the record after its latest stamp, so
        // updated_at may be later, never earlier; nothing but an extension
        // happens to an active handoff after its attach.
        let extended_later = self.expires_at.is_some() && self.updated_at > latest;
        if self.updated_at != latest && !extended_later {
            return Err("updated_at is not the time of the latest transition".into());
        }
        if !is_normalized(self.updated_at) {
            return Err("updated_at is not whole UTC microseconds".into());
        }
        if let Some(deadline) = self.expires_at {
            if !is_normalized(deadline) {
                return Err("expires_at is not whole UTC microseconds".into());
            }
            if deadline <= self.created_at {
                return Err("expires_at is not later than created_at".into());
            }
        }
        Ok(())
    }
}

/// Checks invariant I6 over a set of records: at most one non-terminal
/// handoff per parent.
///
/// # Errors
/// An [`InvariantViolation`] naming the second active handoff found.
pub fn check_one_active_per_parent<'a>(
    handoffs: impl IntoIterator<Item = &'a InteractiveHandoff>,
) -> Result<(), InvariantViolation> {
    let mut busy = BTreeSet::new();
    for handoff in handoffs {
        if handoff.is_active() && !busy.insert(&handoff.parent) {
            return Err(InvariantViolation {
                handoff: handoff.id.to_string(),
                invariant: Invariant::I6,
                detail: format!("{} already has another active handoff", handoff.parent),
            });
        }
    }
    Ok(())
}

fn presence(set: bool) -> &'static str {
    if set {
        "set"
    } else {
        "unset"
    }
}

//! Invariants I1-I7: what every stored handoff satisfies.
//!
//! Adapters call [`InteractiveHandoff::validate`] on every record they read
//! and refuse one that fails, so a damaged row is reported, never acted on.

use std::collections::BTreeSet;
use std::fmt;

use thiserror::Error;

use super::{check_fields, Fields, InteractiveHandoff, InteractiveHandoffParent};
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

impl InteractiveHandoff {
    /// Checks invariants I1-I5 and I7 on this record (I6 spans records: see
    /// [`check_one_active_per_parent`]).
    ///
    /// # Errors
    /// The first [`InvariantViolation`] found.
    pub fn validate(&self) -> Result<(), InvariantViolation> {
        let fail = |invariant, detail: String| {
            Err(InvariantViolation {
                handoff: self.id.to_string(),
                invariant,
                detail,
            })
        };
        let terminal = self.status.is_terminal();
        // I1
        if terminal != self.terminal_at.is_some() || terminal != self.outcome.is_some() {
            return fail(
                Invariant::I1,
                format!(
                    "status {} with terminal_at {} and outcome {}",
                    self.status,
                    presence(self.terminal_at.is_some()),
                    presence(self.outcome.is_some())
                ),
            );
        }
        if let Some(outcome) = &self.outcome {
            if outcome.status() != self.status {
                return fail(
                    Invariant::I1,
                    format!(
                        "outcome {} does not match status {}",
                        outcome.status(),
                        self.status
                    ),
                );
            }
            if let Err(err) = outcome.validate() {
                return fail(Invariant::I1, err.to_string());
            }
        }
        if self.status == super::InteractiveHandoffStatus::Expired {
            let in_time = match (self.expires_at, self.terminal_at) {
                (Some(deadline), Some(expired)) => expired >= deadline,
                _ => false,
            };
            if !in_time {
                return fail(
                    Invariant::I1,
                    "expired without a deadline, or before its deadline".into(),
                );
            }
        }
        // I2
        let attached = self.status == super::InteractiveHandoffStatus::Attached;
        let waiting = self.status == super::InteractiveHandoffStatus::Waiting;
        if (attached && self.attached_at.is_none()) || (waiting && self.attached_at.is_some()) {
            return fail(
                Invariant::I2,
                format!(
                    "status {} with attached_at {}",
                    self.status,
                    presence(self.attached_at.is_some())
                ),
            );
        }
        // I3
        if self.wake_claimed_at.is_some() != self.wake_claimed_by_generation.is_some() {
            return fail(
                Invariant::I3,
                "wake_claimed_at and wake_claimed_by_generation must be set together".into(),
            );
        }
        if let Some(generation) = self.wake_claimed_by_generation {
            if !terminal {
                return fail(
                    Invariant::I3,
                    format!("wake claimed while status is {}", self.status),
                );
            }
            if generation < self.body_generation {
                return fail(
                    Invariant::I3,
                    format!(
                        "wake claimed by generation {generation}, older than body generation {}",
                        self.body_generation
                    ),
                );
            }
        }
        // I4
        if let InteractiveHandoffParent::Wave(wave) = &self.parent {
            if wave != &self.wave_id {
                return fail(
                    Invariant::I4,
                    format!("wave parent {wave} but wave_id {}", self.wave_id),
                );
            }
        }
        // I5
        if let Err(err) = check_fields(&Fields {
            cwd: &self.cwd,
            provider: &self.provider,
            provider_session_id: self.provider_session_id.as_deref(),
            body_generation: self.body_generation,
            reason: &self.reason,
            environment: &self.environment,
            attach_argv: &self.attach_argv,
        }) {
            return fail(Invariant::I5, err.to_string());
        }
        // I7
        let steps = [
            ("created_at", Some(self.created_at)),
            ("attached_at", self.attached_at),
            ("terminal_at", self.terminal_at),
            ("wake_claimed_at", self.wake_claimed_at),
        ];
        let mut previous: Option<(&str, time::OffsetDateTime)> = None;
        for (name, value) in steps {
            let Some(value) = value else { continue };
            if !is_normalized(value) {
                return fail(
                    Invariant::I7,
                    format!("{name} is not whole UTC microseconds"),
                );
            }
            if let Some((before, earlier)) = previous {
                if value < earlier {
                    return fail(Invariant::I7, format!("{name} is before {before}"));
                }
            }
            previous = Some((name, value));
        }
        let latest = steps
            .iter()
            .filter_map(|(_, value)| *value)
            .max()
            .unwrap_or(self.created_at);
        // Moving a deadline changes the record after its latest stamp, so
        // updated_at may be later, never earlier; nothing but an extension
        // happens to an active handoff after its attach.
        let extended_later = self.expires_at.is_some() && self.updated_at > latest;
        if self.updated_at != latest && !extended_later {
            return fail(
                Invariant::I7,
                "updated_at is not the time of the latest transition".into(),
            );
        }
        if !is_normalized(self.updated_at) {
            return fail(
                Invariant::I7,
                "updated_at is not whole UTC microseconds".into(),
            );
        }
        if let Some(deadline) = self.expires_at {
            if !is_normalized(deadline) {
                return fail(
                    Invariant::I7,
                    "expires_at is not whole UTC microseconds".into(),
                );
            }
            if deadline <= self.created_at {
                return fail(
                    Invariant::I7,
                    "expires_at is not later than created_at".into(),
                );
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

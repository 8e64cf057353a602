//! History (contract C15): the event every change of a handoff appends.
//!
//! The domain says what a change was ([`HandoffChange::between`] the record
//! before and after it); the store appends it in the same atomic write as
//! the change, numbered per handoff ([`HandoffEvent::seq`]: 1, 2, 3, ...
//! with no gaps) and store-wide ([`HandoffEvent::position`]), with the
//! [`Actor`] that made it. A replay changes nothing and so appends nothing.

use std::fmt;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::transition::rfc3339;
use super::{Answer, InteractiveHandoff, InteractiveHandoffId, InteractiveHandoffStatus};
use crate::error::{DomainError, DomainResult};

/// The longest actor name, in bytes.
pub const MAX_ACTOR_BYTES: usize = 200;

/// Who made a change: a person or program, such as `alice@build-1 (pid
/// 4242)`. Not blank, at most [`MAX_ACTOR_BYTES`] bytes, no control
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "String", into = "String")]
pub struct Actor(String);

impl Actor {
    /// Parses an actor name.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for a blank name, one longer than
    /// [`MAX_ACTOR_BYTES`], or one holding a control character.
    pub fn parse(text: &str) -> DomainResult<Self> {
        if text.trim().is_empty() {
            return Err(DomainError::invalid("actor must not be blank"));
        }
        if text.len() > MAX_ACTOR_BYTES {
            return Err(DomainError::invalid(format!(
                "actor is {} bytes long; the limit is {MAX_ACTOR_BYTES}",
                text.len()
            )));
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(DomainError::invalid(format!(
                "actor must not contain control characters (found {c:?})"
            )));
        }
        Ok(Self(text.to_string()))
    }

    /// `user@host (pid N)`, always valid: control characters are dropped,
    /// a blank user or host reads `unknown` or `localhost`, and the name is
    /// cut (at a character boundary) to fit [`MAX_ACTOR_BYTES`].
    pub fn of_process(user: &str, host: &str, pid: u32) -> Self {
        let clean = |text: &str, blank: &str| {
            let text: String = text.chars().filter(|c| !c.is_control()).collect();
            let text = text.trim().to_string();
            if text.is_empty() {
                blank.to_string()
            } else {
                text
            }
        };
        let pid = format!(" (pid {pid})");
        let mut name = format!("{}@{}", clean(user, "unknown"), clean(host, "localhost"));
        while name.len() + pid.len() > MAX_ACTOR_BYTES {
            name.pop();
        }
        Self(name + &pid)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Actor {
    type Error = DomainError;

    fn try_from(text: String) -> DomainResult<Self> {
        Self::parse(&text)
    }
}

impl From<Actor> for String {
    fn from(actor: Actor) -> Self {
        actor.0
    }
}

impl std::str::FromStr for Actor {
    type Err = DomainError;

    fn from_str(text: &str) -> DomainResult<Self> {
        Self::parse(text)
    }
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HandoffEventKind {
    /// The handoff was opened.
    Opened,
    /// A person attached for the first time.
    Attached,
    /// A person finished it: completed, handed back or failed.
    Finished,
    /// Its deadline passed (C14).
    Expired,
    /// Its deadline was moved.
    Extended,
    /// A body generation claimed the wake first.
    WakeClaimed,
    /// The parent's current body took the wake over from an older one (C13).
    WakeTakenOver,
}

impl HandoffEventKind {
    /// Every kind.
    pub const ALL: [Self; 7] = [
        Self::Opened,
        Self::Attached,
        Self::Finished,
        Self::Expired,
        Self::Extended,
        Self::WakeClaimed,
        Self::WakeTakenOver,
    ];

    /// The snake_case name used in JSON and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Opened => "opened",
            Self::Attached => "attached",
            Self::Finished => "finished",
            Self::Expired => "expired",
            Self::Extended => "extended",
            Self::WakeClaimed => "wake_claimed",
            Self::WakeTakenOver => "wake_taken_over",
        }
    }

    /// The inverse of [`as_str`](Self::as_str).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

impl fmt::Display for HandoffEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change of a handoff as the domain sees it, before the store numbers
/// it and names the actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffChange {
    /// What the change did.
    pub kind: HandoffEventKind,
    /// When: the record's `updated_at` after the change.
    pub at: OffsetDateTime,
    /// The status before (`None` for an open).
    pub status_before: Option<InteractiveHandoffStatus>,
    /// The status after.
    pub status_after: InteractiveHandoffStatus,
    /// A few words more: the deadline set, the generation holding the wake.
    pub detail: Option<String>,
    /// The answer a finish or an expiry recorded (C26).
    pub answer: Option<Answer>,
}

impl HandoffChange {
    /// The change from `before` (`None`: nothing, an open) to `after`.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] when the two are different handoffs,
    /// or `after` is no change of `before` that the state machine makes
    /// (every transition changes the status, the wake holder or the
    /// deadline).
    pub fn between(
        before: Option<&InteractiveHandoff>,
        after: &InteractiveHandoff,
    ) -> DomainResult<Self> {
        let change = |kind, detail| Self {
            kind,
            at: after.updated_at,
            status_before: before.map(|b| b.status),
            status_after: after.status,
            detail,
            answer: None,
        };
        let Some(before) = before else {
            return Ok(change(
                HandoffEventKind::Opened,
                after
                    .expires_at
                    .map(|at| format!("expires {}", rfc3339(at))),
            ));
        };
        if before.id != after.id {
            return Err(DomainError::invalid(format!(
                "handoff {} cannot change into handoff {}",
                before.id, after.id
            )));
        }
        use InteractiveHandoffStatus as S;
        if before.status != after.status {
            let kind = match after.status {
                S::Attached => HandoffEventKind::Attached,
                S::Expired => HandoffEventKind::Expired,
                S::Completed | S::HandedBack | S::Failed => HandoffEventKind::Finished,
                S::Waiting => {
                    return Err(DomainError::invalid(format!(
                        "handoff {} cannot go back to waiting",
                        after.id
                    )))
                }
            };
            let mut finished = change(kind, None);
            if after.status.is_terminal() {
                finished.answer = after.answer.clone();
            }
            return Ok(finished);
        }
        if before.wake_claimed_by_generation != after.wake_claimed_by_generation {
            let Some(holder) = after.wake_claimed_by_generation else {
                return Err(DomainError::invalid(format!(
                    "the wake of handoff {} cannot be released",
                    after.id
                )));
            };
            return Ok(match before.wake_claimed_by_generation {
                None => change(
                    HandoffEventKind::WakeClaimed,
                    Some(format!("generation {holder}")),
                ),
                Some(old) => change(
                    HandoffEventKind::WakeTakenOver,
                    Some(format!("generation {holder} from {old}")),
                ),
            });
        }
        if before.expires_at != after.expires_at {
            return Ok(change(
                HandoffEventKind::Extended,
                after.expires_at.map(|at| format!("until {}", rfc3339(at))),
            ));
        }
        Err(DomainError::invalid(format!(
            "handoff {} did not change in a way its history records",
            after.id
        )))
    }

    /// The event this change is, as the store numbered it.
    pub fn into_event(
        self,
        handoff_id: InteractiveHandoffId,
        seq: u64,
        position: u64,
        actor: Actor,
    ) -> HandoffEvent {
        HandoffEvent {
            position,
            handoff_id,
            seq,
            at: self.at,
            kind: self.kind,
            status_before: self.status_before,
            status_after: self.status_after,
            actor,
            detail: self.detail,
            answer: self.answer,
        }
    }
}

/// One stored event of a handoff's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HandoffEvent {
    /// The store-wide position: every event has its own, later events
    /// larger ones.
    pub position: u64,
    /// The handoff.
    pub handoff_id: InteractiveHandoffId,
    /// The handoff's event number: 1, 2, 3, ... with no gaps.
    pub seq: u64,
    /// When the change was made.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// What the change did.
    pub kind: HandoffEventKind,
    /// The status before (`None` for an open).
    pub status_before: Option<InteractiveHandoffStatus>,
    /// The status after.
    pub status_after: InteractiveHandoffStatus,
    /// Who made it.
    pub actor: Actor,
    /// A few words more, when there are any.
    pub detail: Option<String>,
    /// The answer the finish or expiry recorded (C26); `None` for other
    /// events and for events of earlier releases.
    #[serde(default)]
    pub answer: Option<Answer>,
}

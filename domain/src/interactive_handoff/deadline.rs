//! Deadlines (contract C14): a handoff nobody answers in time expires.
//!
//! A non-terminal handoff whose `expires_at` has passed is *due*. It can
//! only expire: [`expire_if_due`] makes it `expired`; attach, finish and
//! extend refuse a due handoff with [`ConflictKind::Expired`], and the
//! service stores the expiry in the same compare-and-swap round, so once a
//! deadline has passed the handoff's end is decided whoever comes first.
//! A handoff that names an `on_expiry` answer (C26) expires carrying it.
//! Reads never write: a due handoff stays `waiting` or `attached` in
//! storage until a write or a sweep expires it.

use time::OffsetDateTime;

use super::transition::{check_deadline, next_instant, refuse_if_expired};
use super::{InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffStatus, Transition};
use crate::error::{ConflictKind, DomainError, DomainResult};

/// Expires `handoff` if it is due at `now`; anything else is returned
/// unchanged (an expired one, a terminal one, one not due yet), so racing
/// sweepers expire each handoff once.
pub fn expire_if_due(handoff: &InteractiveHandoff, now: OffsetDateTime) -> Transition {
    if !handoff.is_due(now) {
        return Transition::Unchanged(handoff.clone());
    }
    let now = next_instant(handoff, now);
    let mut next = handoff.clone();
    next.status = InteractiveHandoffStatus::Expired;
    next.outcome = Some(InteractiveHandoffOutcome::Expired);
    next.answer = handoff.on_expiry.clone();
    next.terminal_at = Some(now);
    next.updated_at = now;
    Transition::Changed(next)
}

/// Moves the deadline of an active handoff to `until`, which must be later
/// than `now` (earlier or later than the current deadline alike; a handoff
/// without one gets one). Extending to the deadline it has changes nothing.
///
/// # Errors
/// [`DomainError::InvalidInput`] for a deadline not later than `now`;
/// [`ConflictKind::Expired`] for an expired or due handoff (the caller
/// expires a due one); [`ConflictKind::AlreadyFinished`] for another
/// terminal handoff.
pub fn extend(
    handoff: &InteractiveHandoff,
    until: OffsetDateTime,
    now: OffsetDateTime,
) -> DomainResult<Transition> {
    let now = next_instant(handoff, now);
    let until = crate::timestamp::truncate_to_micros(until);
    check_deadline(until, now)?;
    refuse_if_expired(handoff, now, "extended")?;
    if handoff.status.is_terminal() {
        return Err(DomainError::conflict(
            ConflictKind::AlreadyFinished,
            format!(
                "handoff {} is already {}; only an active handoff has a deadline to move",
                handoff.id,
                handoff.status.describe()
            ),
        ));
    }
    if handoff.expires_at == Some(until) {
        return Ok(Transition::Unchanged(handoff.clone()));
    }
    let mut next = handoff.clone();
    next.expires_at = Some(until);
    next.updated_at = now;
    Ok(Transition::Changed(next))
}

//! What "nothing acknowledged was lost" means, record by record, and what
//! "every change has its event" means, history by history.
//!
//! After a crash the store may hold a record exactly as it was last
//! acknowledged, or further along: a transition that was in flight when the
//! process died may have committed before its acknowledgement was printed.
//! It may never hold a record that is behind what was acknowledged, or one
//! whose acknowledged facts (attach time, outcome, claim) changed. The one
//! change a claimed record allows is the wake hand-over (C13): the wake
//! moves to a newer generation.
//!
//! A handoff's history (C15) must be the record's changes, one event each,
//! written in the same atomic write as the change:
//!
//! - [`history_well_formed`]: numbered 1, 2, 3, ... without gaps, positions
//!   strictly increasing, times never going back, each event's status
//!   before the previous one's status after, first an `opened` from
//!   nothing, each kind the status change it names, each wake event naming
//!   the generation it moved the wake to (and from);
//! - [`history_matches_record`]: exactly the changes the stored record
//!   shows (an open at `created_at`, an attach at `attached_at`, a finish
//!   or expiry at `terminal_at`, a claim for every generation seen holding
//!   the wake with the last at `wake_claimed_at`, an extension for every
//!   deadline seen after the first), the last event at `updated_at` with
//!   the record's status;
//! - [`acked_change_has_event`]: an acknowledged transition has its event,
//!   at the time its record shows, named after the writer that made it.

mod history;
#[cfg(test)]
mod tests;

use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, InteractiveHandoffStatus};
use lf_handoff_domain::parent::Parent;

pub use history::{
    acked_change_has_event, claim_detail, deadline_detail, history_matches_record,
    history_well_formed, AckedChange, HistoryFindings, KnownChanges,
};

/// How far a handoff has come: waiting, attached, terminal, wake claimed.
pub fn stage(handoff: &InteractiveHandoff) -> u8 {
    if handoff.wake_claimed_by_generation.is_some() {
        3
    } else if handoff.status.is_terminal() {
        2
    } else if handoff.status == InteractiveHandoffStatus::Attached {
        1
    } else {
        0
    }
}

/// How far a handoff has come, hand-overs included: its [`stage`], then the
/// generation holding its wake (generations only increase along a
/// handoff's life).
pub fn progress(handoff: &InteractiveHandoff) -> (u8, u32) {
    (
        stage(handoff),
        handoff.wake_claimed_by_generation.unwrap_or(0),
    )
}

/// Checks that `stored` is `acknowledged`, or a state the protocol reaches
/// from it without undoing anything acknowledged.
///
/// # Errors
/// A sentence naming what was lost or changed.
pub fn handoff_same_or_later(
    acknowledged: &InteractiveHandoff,
    stored: &InteractiveHandoff,
) -> Result<(), String> {
    if stored == acknowledged {
        return Ok(());
    }
    let id = &acknowledged.id;
    let fixed_fields_equal = stored.id == acknowledged.id
        && stored.parent == acknowledged.parent
        && stored.wave_id == acknowledged.wave_id
        && stored.home == acknowledged.home
        && stored.cwd == acknowledged.cwd
        && stored.provider == acknowledged.provider
        && stored.provider_session_id == acknowledged.provider_session_id
        && stored.body_generation == acknowledged.body_generation
        && stored.reason == acknowledged.reason
        && stored.environment == acknowledged.environment
        && stored.attach_argv == acknowledged.attach_argv
        && stored.created_at == acknowledged.created_at
        && stored.step == acknowledged.step;
    if !fixed_fields_equal {
        return Err(format!(
            "handoff {id}: a field fixed at open changed (acknowledged {acknowledged:?}, stored {stored:?})"
        ));
    }
    if stage(stored) < stage(acknowledged) {
        return Err(format!(
            "handoff {id} went back from {} to {} (claimed by {:?} -> {:?})",
            acknowledged.status,
            stored.status,
            acknowledged.wake_claimed_by_generation,
            stored.wake_claimed_by_generation
        ));
    }
    if acknowledged.attached_at.is_some() && stored.attached_at != acknowledged.attached_at {
        return Err(format!(
            "handoff {id}: attached_at changed from {:?} to {:?}",
            acknowledged.attached_at, stored.attached_at
        ));
    }
    if acknowledged.status.is_terminal()
        && (stored.status != acknowledged.status
            || stored.outcome != acknowledged.outcome
            || stored.terminal_at != acknowledged.terminal_at)
    {
        return Err(format!(
            "handoff {id}: the acknowledged outcome {:?} became {:?}",
            acknowledged.outcome, stored.outcome
        ));
    }
    if let Some(holder) = acknowledged.wake_claimed_by_generation {
        // A claimed handoff changes only when a newer generation takes the
        // wake over, later than the acknowledged claim.
        let handed_over = stored
            .wake_claimed_by_generation
            .is_some_and(|newer| newer > holder)
            && stored.wake_claimed_at > acknowledged.wake_claimed_at
            && stored.updated_at >= acknowledged.updated_at;
        if !handed_over {
            return Err(format!(
                "handoff {id}: the acknowledged wake claim changed (acknowledged {acknowledged:?}, stored {stored:?})"
            ));
        }
        return Ok(());
    }
    if stored.updated_at < acknowledged.updated_at {
        return Err(format!("handoff {id}: updated_at went back"));
    }
    Ok(())
}

/// Checks that `stored` is the acknowledged parent, or the same parent with
/// a newer body recorded (a body change that was in flight).
///
/// # Errors
/// A sentence naming what was lost or changed.
pub fn parent_same_or_later(acknowledged: &Parent, stored: &Parent) -> Result<(), String> {
    if stored == acknowledged {
        return Ok(());
    }
    let reference = acknowledged.reference();
    if stored.reference() != reference {
        return Err(format!(
            "parent {reference} was stored as {}",
            stored.reference()
        ));
    }
    if stored.body_generation() <= acknowledged.body_generation() {
        return Err(format!(
            "parent {reference} changed without a newer body (acknowledged generation {}, stored {}): \
             acknowledged {acknowledged:?}, stored {stored:?}",
            acknowledged.body_generation(),
            stored.body_generation()
        ));
    }
    Ok(())
}

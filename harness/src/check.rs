//! What "nothing acknowledged was lost" means, record by record.
//!
//! After a crash the store may hold a record exactly as it was last
//! acknowledged, or further along: a transition that was in flight when the
//! process died may have committed before its acknowledgement was printed.
//! It may never hold a record that is behind what was acknowledged, or one
//! whose acknowledged facts (attach time, outcome, claim) changed. The one
//! change a claimed record allows is the wake hand-over (C13): the wake
//! moves to a newer generation.

use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffStatus,
};
use lf_handoff_adapters::domain::parent::Parent;

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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use lf_handoff_adapters::domain::id::{InteractiveHandoffId, WaveId};
    use lf_handoff_adapters::domain::interactive_handoff::{
        attach, claim_wake, claim_wake_for_parent, finish, open,
    };
    use lf_handoff_adapters::domain::wave::Wave;
    use lf_handoff_adapters::GenerateId;
    use lf_handoff_conformance::fixtures::{body, outcome};
    use time::macros::datetime;
    use time::OffsetDateTime;

    use super::*;
    use crate::requests::wave_request;

    const T0: OffsetDateTime = datetime!(2026-12-02 12:00:00 UTC);

    fn at(seconds: i64) -> OffsetDateTime {
        T0 + time::Duration::seconds(seconds)
    }

    /// The same handoff waiting, attached, finished and claimed.
    fn stages() -> [InteractiveHandoff; 4] {
        let wave = WaveId::new();
        let request = wave_request(&wave, Path::new("/src/x")).unwrap();
        let waiting = open(&request, wave, InteractiveHandoffId::new(), at(0)).unwrap();
        let attached = attach(&waiting, at(1)).unwrap().into_handoff();
        let finished = finish(&attached, &outcome(1), at(2))
            .unwrap()
            .into_handoff();
        let claimed = claim_wake(&finished, 1, at(3))
            .unwrap()
            .transition
            .into_handoff();
        [waiting, attached, finished, claimed]
    }

    #[test]
    fn the_same_record_or_a_later_one_is_accepted() {
        let stages = stages();
        for (i, acknowledged) in stages.iter().enumerate() {
            for stored in &stages[i..] {
                assert_eq!(handoff_same_or_later(acknowledged, stored), Ok(()));
            }
        }
    }

    #[test]
    fn a_record_behind_what_was_acknowledged_is_lost() {
        let stages = stages();
        for (i, acknowledged) in stages.iter().enumerate() {
            for stored in &stages[..i] {
                let error = handoff_same_or_later(acknowledged, stored).unwrap_err();
                assert!(error.contains("went back"), "{error}");
            }
        }
    }

    #[test]
    fn changed_acknowledged_facts_are_lost() {
        let [waiting, attached, finished, claimed] = stages();
        let mut reason = waiting.clone();
        reason.reason = "another reason".into();
        assert!(handoff_same_or_later(&waiting, &reason)
            .unwrap_err()
            .contains("fixed at open"));

        let reattached = attach(&waiting, at(5)).unwrap().into_handoff();
        assert!(handoff_same_or_later(&attached, &reattached)
            .unwrap_err()
            .contains("attached_at"));

        let other = finish(&attached, &outcome(2), at(2))
            .unwrap()
            .into_handoff();
        assert!(handoff_same_or_later(&finished, &other)
            .unwrap_err()
            .contains("outcome"));

        let other_claim = claim_wake(&finished, 2, at(3))
            .unwrap()
            .transition
            .into_handoff();
        assert!(handoff_same_or_later(&claimed, &other_claim)
            .unwrap_err()
            .contains("wake claim"));
    }

    #[test]
    fn a_wake_handed_over_to_a_newer_generation_is_later_and_never_back() {
        let [_, _, _, claimed] = stages();
        let handed = claim_wake_for_parent(&claimed, 2, Some(2), at(4))
            .unwrap()
            .transition
            .into_handoff();
        assert_eq!(handed.wake_claimed_by_generation, Some(2));
        assert_eq!(handoff_same_or_later(&claimed, &handed), Ok(()));
        assert!(progress(&handed) > progress(&claimed));
        assert!(handoff_same_or_later(&handed, &claimed)
            .unwrap_err()
            .contains("wake claim"));
        let mut stepped = claimed.clone();
        stepped.step = Some(
            lf_handoff_adapters::domain::interactive_handoff::StepKey::parse("login").unwrap(),
        );
        assert!(handoff_same_or_later(&claimed, &stepped)
            .unwrap_err()
            .contains("fixed at open"));
    }

    #[test]
    fn a_parent_may_only_move_on_to_a_newer_body() {
        let wave = Parent::Wave(Wave::new(WaveId::new(), "w".into(), "/src/w".into()));
        assert_eq!(parent_same_or_later(&wave, &wave), Ok(()));
        let newer = wave.record_body(body(2, None), at(1)).unwrap();
        assert_eq!(parent_same_or_later(&wave, &newer), Ok(()));
        assert!(parent_same_or_later(&newer, &wave).is_err());
        let Parent::Wave(inner) = &wave else {
            unreachable!()
        };
        let renamed = Parent::Wave(Wave::new(inner.id().clone(), "x".into(), "/src/w".into()));
        assert!(parent_same_or_later(&wave, &renamed)
            .unwrap_err()
            .contains("without a newer body"));
        let other = Parent::Wave(Wave::new(WaveId::new(), "w".into(), "/src/w".into()));
        assert!(parent_same_or_later(&wave, &other).is_err());
    }
}

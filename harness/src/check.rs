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

use std::collections::BTreeSet;

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::{
    HandoffEvent, HandoffEventKind, InteractiveHandoff, InteractiveHandoffStatus,
};
use lf_handoff_adapters::domain::parent::Parent;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

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

/// What the harness saw of a handoff's changes beyond its current record:
/// the facts a record overwrites when it changes again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownChanges {
    /// The deadline the handoff was opened with (inner `None`: none), from
    /// the first record of it seen; `None` until one was seen.
    pub opened_with: Option<Option<OffsetDateTime>>,
    /// Every deadline an acknowledged or stored record of it showed.
    pub deadlines: BTreeSet<OffsetDateTime>,
    /// Every generation an acknowledged or stored record of it showed
    /// holding its wake.
    pub holders: BTreeSet<u32>,
}

impl KnownChanges {
    /// Notes what `record`, acknowledged or stored, shows.
    pub fn saw(&mut self, record: &InteractiveHandoff) {
        if self.opened_with.is_none() {
            self.opened_with = Some(record.expires_at);
        }
        self.deadlines.extend(record.expires_at);
        self.holders.extend(record.wake_claimed_by_generation);
    }
}

/// What the history checks found, by figure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFindings {
    /// Changes (shown by a record or acknowledged) without their event.
    pub missing: Vec<String>,
    /// Events that no change of the record, and no acknowledgement,
    /// accounts for.
    pub extra: Vec<String>,
    /// Histories that are not well formed, and events naming the wrong
    /// actor.
    pub malformed: Vec<String>,
}

impl HistoryFindings {
    /// Returns true if and only if nothing was found.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.malformed.is_empty()
    }

    /// An event that is not its change's: the change has no event, and the
    /// event no change.
    pub fn mismatch(&mut self, message: String) {
        self.missing.push(message.clone());
        self.extra.push(message);
    }

    /// Adds `other`'s findings.
    pub fn append(&mut self, mut other: Self) {
        self.missing.append(&mut other.missing);
        self.extra.append(&mut other.extra);
        self.malformed.append(&mut other.malformed);
    }
}

/// The generation a wake event says holds the wake after it, and for a
/// take-over the one it took the wake from: `generation G` or `generation
/// G from O`. `None` for another event or an unreadable detail.
pub fn claim_detail(event: &HandoffEvent) -> Option<(u32, Option<u32>)> {
    let words: Vec<&str> = event.detail.as_deref()?.split(' ').collect();
    match (event.kind, words.as_slice()) {
        (HandoffEventKind::WakeClaimed, ["generation", holder]) => {
            Some((holder.parse().ok()?, None))
        }
        (HandoffEventKind::WakeTakenOver, ["generation", holder, "from", old]) => {
            Some((holder.parse().ok()?, Some(old.parse().ok()?)))
        }
        _ => None,
    }
}

/// The deadline an `opened` event (`expires T`, or no detail: none) or an
/// `extended` event (`until T`) names; `Err` for an unreadable detail.
pub fn deadline_detail(event: &HandoffEvent) -> Result<Option<OffsetDateTime>, String> {
    let prefix = match event.kind {
        HandoffEventKind::Opened => "expires ",
        HandoffEventKind::Extended => "until ",
        other => return Err(format!("a {other} event names no deadline")),
    };
    let Some(detail) = event.detail.as_deref() else {
        return if event.kind == HandoffEventKind::Opened {
            Ok(None)
        } else {
            Err("an extended event without its deadline".into())
        };
    };
    detail
        .strip_prefix(prefix)
        .and_then(|text| OffsetDateTime::parse(text, &Rfc3339).ok())
        .map(Some)
        .ok_or_else(|| format!("unreadable detail {detail:?}"))
}

/// Checks that `events`, the history of handoff `id`, is well formed (see
/// the module documentation). Returns one sentence per problem.
pub fn history_well_formed(id: &InteractiveHandoffId, events: &[HandoffEvent]) -> Vec<String> {
    use HandoffEventKind as K;
    use InteractiveHandoffStatus as S;
    let mut problems = Vec::new();
    let mut holder: Option<u32> = None;
    let mut previous: Option<&HandoffEvent> = None;
    for (seq, event) in (1u64..).zip(events) {
        let mut bad = |what: String| {
            problems.push(format!(
                "handoff {id}: event {seq} ({} at {}): {what}",
                event.kind, event.at
            ));
        };
        if event.handoff_id != *id {
            bad(format!("belongs to handoff {}", event.handoff_id));
        }
        if event.seq != seq {
            bad(format!("is numbered {}", event.seq));
        }
        match previous {
            None => {
                if event.kind != K::Opened {
                    bad("the first event is not `opened`".into());
                }
            }
            Some(previous) => {
                if event.position <= previous.position {
                    bad(format!(
                        "position {} is not after the previous event's {}",
                        event.position, previous.position
                    ));
                }
                if event.at < previous.at {
                    bad(format!(
                        "is earlier than the previous event ({})",
                        previous.at
                    ));
                }
                if event.status_before != Some(previous.status_after) {
                    bad(format!(
                        "status before {:?} is not the previous event's status after {}",
                        event.status_before, previous.status_after
                    ));
                }
            }
        }
        let (before, after) = (event.status_before, event.status_after);
        let active = before.is_some_and(|status| !status.is_terminal());
        let finished = matches!(after, S::Completed | S::HandedBack | S::Failed);
        let consistent = match event.kind {
            K::Opened => previous.is_none() && before.is_none() && after == S::Waiting,
            K::Attached => before == Some(S::Waiting) && after == S::Attached,
            K::Finished => active && finished,
            K::Expired => active && after == S::Expired,
            K::Extended => active && before == Some(after),
            K::WakeClaimed | K::WakeTakenOver => after.is_terminal() && before == Some(after),
        };
        if !consistent {
            bad(format!("is not a change from {before:?} to {after}"));
        }
        match event.kind {
            K::Opened | K::Extended => {
                if let Err(problem) = deadline_detail(event) {
                    bad(problem);
                }
            }
            K::WakeClaimed | K::WakeTakenOver => match claim_detail(event) {
                None => bad(format!("unreadable detail {:?}", event.detail)),
                Some((to, from)) => {
                    if from != holder || holder.is_some_and(|old| to <= old) {
                        bad(format!(
                            "moves the wake to generation {to} from {from:?}, but {holder:?} held it"
                        ));
                    }
                    holder = Some(to);
                }
            },
            _ => {}
        }
        previous = Some(event);
    }
    problems
}

/// Checks that `events` are exactly the changes `record` shows, with what
/// `known` says of the changes the record no longer shows (the generations
/// that held its wake before, the deadlines it had). See the module
/// documentation.
pub fn history_matches_record(
    record: &InteractiveHandoff,
    events: &[HandoffEvent],
    known: &KnownChanges,
) -> HistoryFindings {
    use HandoffEventKind as K;
    let id = &record.id;
    let mut found = HistoryFindings::default();
    let of = |kinds: &[K]| -> Vec<&HandoffEvent> {
        events.iter().filter(|e| kinds.contains(&e.kind)).collect()
    };

    // The open.
    let opened = of(&[K::Opened]);
    match opened.first() {
        None => found.missing.push(format!(
            "handoff {id}: its open at {} has no `opened` event",
            record.created_at
        )),
        Some(first) => {
            if first.at != record.created_at {
                found.mismatch(format!(
                    "handoff {id}: its `opened` event is at {}, its open at {}",
                    first.at, record.created_at
                ));
            }
            let with = deadline_detail(first).ok().flatten();
            if known
                .opened_with
                .is_some_and(|opened_with| opened_with != with)
            {
                found.mismatch(format!(
                    "handoff {id}: its `opened` event names the deadline {with:?}, it was opened \
                     with {:?}",
                    known.opened_with.flatten()
                ));
            }
        }
    }
    for again in opened.iter().skip(1) {
        found.extra.push(format!(
            "handoff {id}: a second `opened` event (seq {})",
            again.seq
        ));
    }

    // The attach, and the finish or expiry.
    one_change(
        &mut found,
        id,
        "attach",
        &of(&[K::Attached]),
        record.attached_at,
    );
    let terminal_at = record.terminal_at.filter(|_| record.status.is_terminal());
    let terminal = of(&[K::Finished, K::Expired]);
    one_change(&mut found, id, "finish", &terminal, terminal_at);
    if let (Some(event), Some(_)) = (terminal.first(), terminal_at) {
        let kind = if record.status == InteractiveHandoffStatus::Expired {
            K::Expired
        } else {
            K::Finished
        };
        if event.kind != kind || event.status_after != record.status {
            found.mismatch(format!(
                "handoff {id}: its {} event (seq {}) leads to {}, the record is {}",
                event.kind, event.seq, event.status_after, record.status
            ));
        }
    }

    // The wake: one claim event per generation seen holding it.
    let mut holders = known.holders.clone();
    holders.extend(record.wake_claimed_by_generation);
    let mut claimed = BTreeSet::new();
    let mut last_claim = None;
    for event in of(&[K::WakeClaimed, K::WakeTakenOver]) {
        match claim_detail(event) {
            Some((generation, _)) if holders.contains(&generation) => {
                if !claimed.insert(generation) {
                    found.extra.push(format!(
                        "handoff {id}: a second event (seq {}) for the claim by generation \
                         {generation}",
                        event.seq
                    ));
                }
                last_claim = Some((generation, event));
            }
            Some((generation, _)) => found.extra.push(format!(
                "handoff {id}: event {} says generation {generation} took the wake, which no \
                 acknowledged or stored record shows",
                event.seq
            )),
            None => found.extra.push(format!(
                "handoff {id}: event {} ({}) names no generation",
                event.seq, event.kind
            )),
        }
    }
    for generation in holders.difference(&claimed) {
        found.missing.push(format!(
            "handoff {id}: the wake claim by generation {generation} has no event"
        ));
    }
    if let (Some(holder), Some((last, event))) = (record.wake_claimed_by_generation, last_claim) {
        if claimed.contains(&holder) && (last != holder || Some(event.at) != record.wake_claimed_at)
        {
            found.mismatch(format!(
                "handoff {id}: its last wake event (seq {}, generation {last}, at {}) is not the \
                 record's claim (generation {holder} at {:?})",
                event.seq, event.at, record.wake_claimed_at
            ));
        }
    }

    // Deadlines: one extension per deadline seen after the first.
    // The deadline it was opened with: as first seen, else as its
    // `opened` event says, else as the record has it.
    let first_deadline = known.opened_with.unwrap_or_else(|| {
        opened.first().map_or(record.expires_at, |event| {
            deadline_detail(event).ok().flatten()
        })
    });
    let mut deadlines = known.deadlines.clone();
    deadlines.extend(record.expires_at);
    if let Some(first) = first_deadline {
        deadlines.remove(&first);
    }
    let mut extended = BTreeSet::new();
    for event in of(&[K::Extended]) {
        match deadline_detail(event) {
            Ok(Some(until)) if deadlines.contains(&until) => {
                if !extended.insert(until) {
                    found.extra.push(format!(
                        "handoff {id}: a second event (seq {}) for the extension to {until}",
                        event.seq
                    ));
                }
            }
            Ok(until) => found.extra.push(format!(
                "handoff {id}: event {} extends it to {until:?}, which no acknowledged or stored \
                 record shows",
                event.seq
            )),
            Err(problem) => found
                .extra
                .push(format!("handoff {id}: event {}: {problem}", event.seq)),
        }
    }
    for until in deadlines.difference(&extended) {
        found.missing.push(format!(
            "handoff {id}: the extension to {until} has no event"
        ));
    }

    // The last event is the record as it is.
    if found.is_empty() {
        if let Some(last) = events.last() {
            if last.at != record.updated_at || last.status_after != record.status {
                found.mismatch(format!(
                    "handoff {id}: its last event ({} at {}, then {}) is not its last change \
                     (at {}, {})",
                    last.kind, last.at, last.status_after, record.updated_at, record.status
                ));
            }
        }
    }
    found
}

/// Checks the events of a change a record shows at most once (`expected`:
/// its time, `None` if the record does not show it).
fn one_change(
    found: &mut HistoryFindings,
    id: &InteractiveHandoffId,
    what: &str,
    events: &[&HandoffEvent],
    expected: Option<OffsetDateTime>,
) {
    match (expected, events.first()) {
        (Some(at), None) => found
            .missing
            .push(format!("handoff {id}: its {what} at {at} has no event")),
        (Some(at), Some(event)) if event.at != at => found.mismatch(format!(
            "handoff {id}: its {} event (seq {}) is at {}, its {what} at {at}",
            event.kind, event.seq, event.at
        )),
        _ => {}
    }
    let skip = usize::from(expected.is_some());
    for event in events.iter().skip(skip) {
        found.extra.push(format!(
            "handoff {id}: {} event (seq {} at {}) for {} {what}",
            event.kind,
            event.seq,
            event.at,
            if expected.is_some() { "a second" } else { "no" }
        ));
    }
}

/// A transition the child acknowledged, as the event it must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckedChange {
    /// The acknowledgement's kind (`attach`, `wake`, ...), for messages.
    pub what: String,
    /// The handoff.
    pub id: InteractiveHandoffId,
    /// The event's kind; for a wake claim either `wake_claimed` or
    /// `wake_taken_over` will do.
    pub kind: HandoffEventKind,
    /// The event's time, as the acknowledged record shows it.
    pub at: OffsetDateTime,
    /// For a wake claim: the generation that got the wake; for an
    /// extension: nothing (see `until`).
    pub holder: Option<u32>,
    /// For an extension: the new deadline.
    pub until: Option<OffsetDateTime>,
    /// The actor the event must name, when the acknowledgement proves the
    /// acknowledging writer made the change.
    pub actor: Option<String>,
}

impl AckedChange {
    /// The change `record`, acknowledged by a `what` (`open`, `attach`,
    /// `finish`, `claim`, `extend`, `expire`, `wake`), shows; `None` for
    /// another kind, or a claim whose record names no holder.
    pub fn of(what: &str, record: &InteractiveHandoff, actor: Option<String>) -> Option<Self> {
        use HandoffEventKind as K;
        let (kind, at) = match what {
            "open" | "step-open" => (K::Opened, Some(record.created_at)),
            "attach" => (K::Attached, record.attached_at),
            "finish" => (K::Finished, record.terminal_at),
            "expire" => (K::Expired, record.terminal_at),
            "extend" => (K::Extended, Some(record.updated_at)),
            "claim" | "wake" => (K::WakeClaimed, record.wake_claimed_at),
            _ => return None,
        };
        Some(Self {
            what: what.to_string(),
            id: record.id.clone(),
            kind,
            at: at?,
            holder: if kind == K::WakeClaimed {
                Some(record.wake_claimed_by_generation?)
            } else {
                None
            },
            until: if kind == K::Extended {
                record.expires_at
            } else {
                None
            },
            actor,
        })
    }
}

/// Checks that an acknowledged `change` has its event in `events`: a
/// missing event in `missing`, one naming another actor in `malformed`.
pub fn acked_change_has_event(change: &AckedChange, events: &[HandoffEvent]) -> HistoryFindings {
    let mut found = HistoryFindings::default();
    let event = events.iter().find(|event| {
        let kind = match change.kind {
            HandoffEventKind::WakeClaimed => matches!(
                event.kind,
                HandoffEventKind::WakeClaimed | HandoffEventKind::WakeTakenOver
            ),
            kind => event.kind == kind,
        };
        kind && event.at == change.at
            && (change.holder.is_none()
                || claim_detail(event).map(|(holder, _)| holder) == change.holder)
            && (change.until.is_none() || deadline_detail(event).ok().flatten() == change.until)
    });
    let id = &change.id;
    match event {
        None => found.missing.push(format!(
            "handoff {id}: the acknowledged {} ({} at {}{}) has no event",
            change.what,
            change.kind,
            change.at,
            change
                .holder
                .map(|holder| format!(", generation {holder}"))
                .unwrap_or_default()
        )),
        Some(event) => {
            if let Some(actor) = &change.actor {
                if event.actor.as_str() != actor {
                    found.malformed.push(format!(
                        "handoff {id}: the acknowledged {} by {actor:?} has an event (seq {}) by \
                         {:?}",
                        change.what,
                        event.seq,
                        event.actor.as_str()
                    ));
                }
            }
        }
    }
    found
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
        attach, claim_wake, claim_wake_for_parent, expire_if_due, extend, finish, open, Actor,
        HandoffChange,
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
        let request = wave_request(&wave, Path::new("/src/x"));
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
    // ----- histories -----

    const ACTOR: &str = "crash-child 0 lane 1";

    /// The history the store writes for `records`, the states of one
    /// handoff after each of its changes, and what the harness knows from
    /// having seen each of them.
    fn history_of(records: &[&InteractiveHandoff]) -> (Vec<HandoffEvent>, KnownChanges) {
        let mut known = KnownChanges::default();
        let mut events = Vec::new();
        let mut before = None;
        for (n, record) in (1u64..).zip(records) {
            let change = HandoffChange::between(before, record).unwrap();
            events.push(change.into_event(
                record.id.clone(),
                n,
                100 + 7 * n,
                Actor::parse(ACTOR).unwrap(),
            ));
            known.saw(record);
            before = Some(*record);
        }
        (events, known)
    }

    /// A handoff opened with a deadline, extended, attached, finished,
    /// claimed by generation 1 and taken over by generation 2.
    fn full_life() -> Vec<InteractiveHandoff> {
        let [mut waiting, ..] = stages();
        waiting.expires_at = Some(at(100));
        let extended = extend(&waiting, at(200), at(1)).unwrap().into_handoff();
        let attached = attach(&extended, at(2)).unwrap().into_handoff();
        let finished = finish(&attached, &outcome(1), at(3))
            .unwrap()
            .into_handoff();
        let claimed = claim_wake(&finished, 1, at(4))
            .unwrap()
            .transition
            .into_handoff();
        let taken = claim_wake_for_parent(&claimed, 2, Some(2), at(5))
            .unwrap()
            .transition
            .into_handoff();
        vec![waiting, extended, attached, finished, claimed, taken]
    }

    /// A handoff with a deadline that expired, then had its wake claimed.
    fn expired_life() -> Vec<InteractiveHandoff> {
        let [mut waiting, ..] = stages();
        waiting.expires_at = Some(at(1));
        let expired = expire_if_due(&waiting, at(2)).into_handoff();
        let claimed = claim_wake(&expired, 1, at(3))
            .unwrap()
            .transition
            .into_handoff();
        vec![waiting, expired, claimed]
    }

    fn check(
        record: &InteractiveHandoff,
        events: &[HandoffEvent],
        known: &KnownChanges,
    ) -> HistoryFindings {
        let mut found = HistoryFindings {
            malformed: history_well_formed(&record.id, events),
            ..HistoryFindings::default()
        };
        found.append(history_matches_record(record, events, known));
        found
    }

    /// Every prefix of every life, and each record's own change.
    fn lives() -> Vec<Vec<InteractiveHandoff>> {
        let [waiting, attached, finished, claimed] = stages();
        let mut lives = vec![
            vec![waiting.clone()],
            vec![waiting.clone(), attached.clone()],
            vec![
                waiting.clone(),
                finish(&waiting, &outcome(2), at(1)).unwrap().into_handoff(),
            ],
            vec![waiting, attached, finished, claimed],
            expired_life(),
        ];
        let full = full_life();
        for end in 1..=full.len() {
            lives.push(full[..end].to_vec());
        }
        lives
    }

    #[test]
    fn the_history_of_every_change_is_accepted() {
        for life in lives() {
            let records: Vec<&InteractiveHandoff> = life.iter().collect();
            let (events, known) = history_of(&records);
            let record = life.last().unwrap();
            assert_eq!(
                check(record, &events, &known),
                HistoryFindings::default(),
                "{life:#?}"
            );
            for (n, state) in life.iter().enumerate() {
                let what = match events[n].kind {
                    HandoffEventKind::Opened => "open",
                    HandoffEventKind::Attached => "attach",
                    HandoffEventKind::Finished => "finish",
                    HandoffEventKind::Expired => "expire",
                    HandoffEventKind::Extended => "extend",
                    HandoffEventKind::WakeClaimed | HandoffEventKind::WakeTakenOver => "claim",
                };
                let change = AckedChange::of(what, state, Some(ACTOR.into())).unwrap();
                assert_eq!(
                    acked_change_has_event(&change, &events),
                    HistoryFindings::default(),
                    "{change:?}"
                );
            }
        }
    }

    #[test]
    fn a_history_lacking_an_event_is_reported_as_a_change_without_its_event() {
        for life in lives() {
            let records: Vec<&InteractiveHandoff> = life.iter().collect();
            let (events, known) = history_of(&records);
            let record = life.last().unwrap();
            for gone in 0..events.len() {
                let mut lacking = events.clone();
                lacking.remove(gone);
                // Renumbered, so the history is well formed but for the
                // status chain where the change was.
                for (seq, event) in (1u64..).zip(&mut lacking) {
                    event.seq = seq;
                }
                let found = history_matches_record(record, &lacking, &known);
                assert!(
                    !found.missing.is_empty(),
                    "event {gone} of {events:#?} removed, nothing missing: {found:?}"
                );
                // The acknowledgement of that change finds no event either.
                let state = &life[gone];
                let what = match events[gone].kind {
                    HandoffEventKind::Opened => "open",
                    HandoffEventKind::Attached => "attach",
                    HandoffEventKind::Finished => "finish",
                    HandoffEventKind::Expired => "expire",
                    HandoffEventKind::Extended => "extend",
                    HandoffEventKind::WakeClaimed | HandoffEventKind::WakeTakenOver => "claim",
                };
                let change = AckedChange::of(what, state, None).unwrap();
                let found = acked_change_has_event(&change, &lacking);
                assert_eq!(found.missing.len(), 1, "{change:?} in {lacking:#?}");
                assert!(found.missing[0].contains("has no event"), "{found:?}");
            }
        }
    }

    #[test]
    fn an_event_without_its_change_is_reported() {
        let life = full_life();
        let records: Vec<&InteractiveHandoff> = life.iter().collect();
        let (events, known) = history_of(&records);
        let record = life.last().unwrap();
        let last = events.last().unwrap().clone();
        let appended = |kind, status_after, detail: Option<&str>| {
            let mut extra = events.clone();
            let mut event = last.clone();
            event.seq = last.seq + 1;
            event.position = last.position + 1;
            event.kind = kind;
            event.status_before = Some(last.status_after);
            event.status_after = status_after;
            event.detail = detail.map(str::to_string);
            extra.push(event);
            extra
        };
        let status = record.status;
        for (extra, says) in [
            // A well-formed take-over by a generation nobody saw.
            (
                appended(
                    HandoffEventKind::WakeTakenOver,
                    status,
                    Some("generation 9 from 2"),
                ),
                "generation 9",
            ),
            // A second finish, a second attach, a second open.
            (appended(HandoffEventKind::Finished, status, None), "second"),
            (
                appended(
                    HandoffEventKind::Attached,
                    InteractiveHandoffStatus::Attached,
                    None,
                ),
                "second",
            ),
            (
                appended(
                    HandoffEventKind::Opened,
                    InteractiveHandoffStatus::Waiting,
                    None,
                ),
                "second `opened`",
            ),
            // An extension to a deadline no record showed.
            (
                appended(
                    HandoffEventKind::Extended,
                    status,
                    Some("until 2027-01-01T00:00:00Z"),
                ),
                "no acknowledged or stored record",
            ),
        ] {
            let found = history_matches_record(record, &extra, &known);
            assert!(
                found.extra.iter().any(|message| message.contains(says)),
                "{says:?} not in {found:?}"
            );
        }

        // An attach event on a record never attached, and a claim event on
        // a record never claimed.
        let [waiting, attached, finished, _] = stages();
        let (mut events, known) = history_of(&[&waiting, &attached, &finished]);
        events.remove(1);
        let mut unattached = finished.clone();
        unattached.attached_at = None;
        let (honest, _) = history_of(&[&waiting, &unattached]);
        let mut events_of_unattached = honest.clone();
        events_of_unattached.insert(1, {
            let mut attach = events[0].clone();
            attach.kind = HandoffEventKind::Attached;
            attach
        });
        let found = history_matches_record(&unattached, &events_of_unattached, &known);
        assert!(
            found
                .extra
                .iter()
                .any(|message| message.contains("for no attach")),
            "{found:?}"
        );
    }

    #[test]
    fn an_event_of_another_time_or_outcome_is_a_mismatch() {
        let life = expired_life();
        let records: Vec<&InteractiveHandoff> = life.iter().collect();
        let (events, known) = history_of(&records);
        let record = life.last().unwrap();

        let mut finished = events.clone();
        finished[1].kind = HandoffEventKind::Finished;
        finished[1].status_after = InteractiveHandoffStatus::Completed;
        let found = history_matches_record(record, &finished, &known);
        assert!(
            !found.missing.is_empty() && !found.extra.is_empty(),
            "{found:?}"
        );

        let mut late = events.clone();
        late[1].at += time::Duration::seconds(1);
        let found = history_matches_record(record, &late, &known);
        assert!(
            !found.missing.is_empty() && !found.extra.is_empty(),
            "{found:?}"
        );

        // The last event is not the record's last change.
        let mut later_record = record.clone();
        later_record.updated_at += time::Duration::seconds(1);
        later_record.wake_claimed_at = Some(later_record.updated_at);
        let found = history_matches_record(&later_record, &events, &known);
        assert!(!found.missing.is_empty(), "{found:?}");
    }

    #[test]
    fn malformed_histories_are_reported() {
        let life = full_life();
        let records: Vec<&InteractiveHandoff> = life.iter().collect();
        let (events, _) = history_of(&records);
        let id = &life[0].id;
        assert_eq!(history_well_formed(id, &events), Vec::<String>::new());

        type Break = fn(&mut Vec<HandoffEvent>);
        let broken: [(&str, Break); 8] = [
            ("is numbered", |e| e[2].seq = 4),
            ("position", |e| e[3].position = e[2].position),
            ("earlier than", |e| {
                e[1].at = e[0].at - time::Duration::seconds(1)
            }),
            ("status before", |e| {
                e[3].status_before = Some(InteractiveHandoffStatus::Waiting)
            }),
            ("not `opened`", |e| {
                e.remove(0);
            }),
            ("belongs to", |e| {
                e[1].handoff_id = InteractiveHandoffId::new()
            }),
            ("unreadable detail", |e| {
                e[4].detail = Some("generation one".into())
            }),
            ("moves the wake", |e| {
                e[5].detail = Some("generation 3 from 2".into())
            }),
        ];
        for (says, break_it) in broken {
            let mut bad = events.clone();
            break_it(&mut bad);
            let problems = history_well_formed(id, &bad);
            assert!(
                problems.iter().any(|problem| problem.contains(says)),
                "{says:?} not in {problems:?}"
            );
        }
    }

    #[test]
    fn an_acknowledged_change_by_another_actor_is_reported() {
        let [waiting, attached, ..] = stages();
        let (events, _) = history_of(&[&waiting, &attached]);
        let change =
            AckedChange::of("attach", &attached, Some("crash-child 3 lane 0".into())).unwrap();
        let found = acked_change_has_event(&change, &events);
        assert!(found.missing.is_empty(), "{found:?}");
        assert_eq!(found.malformed.len(), 1, "{found:?}");
        assert!(found.malformed[0].contains(ACTOR), "{found:?}");
    }

    #[test]
    fn wake_and_deadline_details_are_read() {
        let life = full_life();
        let records: Vec<&InteractiveHandoff> = life.iter().collect();
        let (events, _) = history_of(&records);
        assert_eq!(deadline_detail(&events[0]), Ok(Some(at(100))));
        assert_eq!(deadline_detail(&events[1]), Ok(Some(at(200))));
        assert!(deadline_detail(&events[2]).is_err());
        assert_eq!(claim_detail(&events[4]), Some((1, None)));
        assert_eq!(claim_detail(&events[5]), Some((2, Some(1))));
        assert_eq!(claim_detail(&events[3]), None);
    }
}

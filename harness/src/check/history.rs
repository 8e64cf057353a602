//! What "every change has its event" means, history by history (see the
//! module `check`).

use std::collections::BTreeSet;

use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, HandoffEventKind, InteractiveHandoff, InteractiveHandoffStatus,
};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

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
    let opened = of(&[K::Opened]);
    check_opened(record, &opened, known, &mut found);

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

    check_wake_events(
        record,
        &of(&[K::WakeClaimed, K::WakeTakenOver]),
        known,
        &mut found,
    );
    check_extensions(
        record,
        opened.first().copied(),
        &of(&[K::Extended]),
        known,
        &mut found,
    );

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

/// The open: one `opened` event, at `created_at`, naming the deadline the
/// handoff was opened with.
fn check_opened(
    record: &InteractiveHandoff,
    opened: &[&HandoffEvent],
    known: &KnownChanges,
    found: &mut HistoryFindings,
) {
    let id = &record.id;
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
}

/// The wake: one claim event (`claims`) per generation seen holding it,
/// the last the record's claim.
fn check_wake_events(
    record: &InteractiveHandoff,
    claims: &[&HandoffEvent],
    known: &KnownChanges,
    found: &mut HistoryFindings,
) {
    let id = &record.id;
    let mut holders = known.holders.clone();
    holders.extend(record.wake_claimed_by_generation);
    let mut claimed = BTreeSet::new();
    let mut last_claim = None;
    for &event in claims {
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
}

/// Deadlines: one `extended` event (`extensions`) per deadline seen after
/// the first. The deadline it was opened with: as first seen, else as its
/// `opened` event says, else as the record has it.
fn check_extensions(
    record: &InteractiveHandoff,
    opened: Option<&HandoffEvent>,
    extensions: &[&HandoffEvent],
    known: &KnownChanges,
    found: &mut HistoryFindings,
) {
    let id = &record.id;
    let first_deadline = known.opened_with.unwrap_or_else(|| {
        opened.map_or(record.expires_at, |event| {
            deadline_detail(event).ok().flatten()
        })
    });
    let mut deadlines = known.deadlines.clone();
    deadlines.extend(record.expires_at);
    if let Some(first) = first_deadline {
        deadlines.remove(&first);
    }
    let mut extended = BTreeSet::new();
    for &event in extensions {
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

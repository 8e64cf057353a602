//! The handoff state machine: each transition is a pure function of the
//! current record, the request and `now`.
//!
//! `now` is truncated to whole UTC microseconds and never allowed to go
//! behind the record's `updated_at`, so a clock that steps backwards (or a
//! second host whose clock runs behind) can never break invariant I7.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::answer::{Answer, AnswerSpec, Choice, FormSpec};
use super::{
    InteractiveHandoff, InteractiveHandoffId, InteractiveHandoffOutcome, InteractiveHandoffStatus,
    OpenInteractiveHandoff, StepKey,
};
use crate::error::{ConflictKind, DomainError, DomainResult};
use crate::id::WaveId;
use crate::parent::Parent;
use crate::timestamp::truncate_to_micros;

/// The result of a transition that may or may not change the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// A replay: the record is returned as it is and nothing must be written.
    Unchanged(InteractiveHandoff),
    /// The new record, to be stored with a compare-and-swap.
    Changed(InteractiveHandoff),
}

impl Transition {
    /// The record after the transition.
    pub fn handoff(&self) -> &InteractiveHandoff {
        match self {
            Self::Unchanged(handoff) | Self::Changed(handoff) => handoff,
        }
    }

    /// Consumes the transition, returning the record after it.
    pub fn into_handoff(self) -> InteractiveHandoff {
        match self {
            Self::Unchanged(handoff) | Self::Changed(handoff) => handoff,
        }
    }

    /// Returns true if and only if the record must be written.
    pub fn is_changed(&self) -> bool {
        matches!(self, Self::Changed(_))
    }
}

/// What an open request resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenDecision {
    /// No handoff is active for the parent: store this new one.
    Create(InteractiveHandoff),
    /// The parent already has this active handoff: return it, write nothing.
    Replay(InteractiveHandoff),
}

/// The result of a wake claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeClaim {
    /// The record after the claim.
    pub transition: Transition,
    /// Whether the claiming generation holds the wake.
    pub claimed: bool,
}

/// What a body may ask for besides the parent and the attach command: a
/// step and a deadline. Part of [`OpenInteractiveHandoff`] (its
/// `options`); on the wire its fields sit beside the request's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpenOptions {
    /// The body's name for the step it is at (C12): at most one handoff
    /// per parent and step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepKey>,
    /// The deadline (C14), later than the open; `None` waits for ever.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<OffsetDateTime>,
    /// The answers a person picks from (C26): 2 to 10 values with labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<Choice>>,
    /// The form a person fills in (C26): a flat JSON Schema object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<FormSpec>,
    /// The answer the handoff ends with when its deadline passes (C26):
    /// it must fit the choices or the form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expiry: Option<Answer>,
}

impl OpenInteractiveHandoff {
    /// This request with `options` (a step, a deadline) in place of its own.
    #[must_use]
    pub fn with_options(mut self, options: OpenOptions) -> Self {
        self.options = options;
        self
    }
}

impl OpenOptions {
    /// Options naming the body's `step` (C12) and no deadline.
    pub fn at_step(step: StepKey) -> Self {
        Self {
            step: Some(step),
            ..Self::default()
        }
    }

    /// What the options ask a person for: their choices or their form.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] when they give both.
    pub fn answer_spec(&self) -> DomainResult<Option<AnswerSpec<'_>>> {
        AnswerSpec::of(self.choices.as_ref(), self.form.as_ref())
    }

    /// Checks the answer spec and `on_expiry` (C26): a spec keeps the
    /// subset's rules, and an `on_expiry` answer needs a spec it fits.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] naming the rule broken.
    pub fn check_answer_spec(&self) -> DomainResult<()> {
        let spec = self.answer_spec()?;
        if let Some(spec) = spec {
            spec.check_spec()?;
        }
        if let Some(on_expiry) = &self.on_expiry {
            let Some(spec) = spec else {
                return Err(DomainError::invalid(
                    "on_expiry needs choices or a form for the answer to fit",
                ));
            };
            spec.check(on_expiry)
                .map_err(|refusal| DomainError::invalid(format!("on_expiry: {refusal}")))?;
        }
        Ok(())
    }
}

/// Decides an open request when the parent has no handoff at the
/// request's step (contracts C1, C2 and C3, in that order):
/// [`decide_open_with`] without `at_step`.
///
/// # Errors
/// As [`decide_open_with`].
pub fn decide_open(
    request: &OpenInteractiveHandoff,
    parent: &Parent,
    active: Option<&InteractiveHandoff>,
    id: InteractiveHandoffId,
    now: OffsetDateTime,
) -> DomainResult<OpenDecision> {
    decide_open_with(request, parent, active, None, id, now)
}

/// Decides an open request with its [`OpenOptions`]: at the body's step
/// when it names one, with a deadline when it sets one (contracts C1, C2,
/// C3, C12 and C14, in that order).
///
/// The request is validated on its own, then against `parent` (which must be
/// the request's parent), and only then is an existing handoff returned, so
/// a stale body can never obtain one. With a step, `at_step` is the parent's
/// handoff for that step if it has one, whatever its status: it is returned
/// as it is. Without one, the parent's `active` handoff is replayed (C3),
/// whatever its step. A created handoff gets the deadline, which must be
/// later than `now`; a replay returns the existing handoff with the
/// deadline it has.
///
/// # Errors
/// [`DomainError::InvalidInput`] for a malformed request, a `parent` that is
/// not the request's, an `at_step` of another parent or step, or a deadline
/// that is not later than `now`; [`DomainError::Conflict`] naming the parent
/// rule broken, or [`ConflictKind::ParentBusy`] when the parent's active
/// handoff is for another step (or none).
pub fn decide_open_with(
    request: &OpenInteractiveHandoff,
    parent: &Parent,
    active: Option<&InteractiveHandoff>,
    at_step: Option<&InteractiveHandoff>,
    id: InteractiveHandoffId,
    now: OffsetDateTime,
) -> DomainResult<OpenDecision> {
    request.validate()?;
    let options = &request.options;
    let now = truncate_to_micros(now);
    let expires_at = options.expires_at.map(truncate_to_micros);
    if let Some(deadline) = expires_at {
        check_deadline(deadline, now)?;
    }
    parent.check_open(request)?;
    let Some(step) = options.step.as_ref() else {
        return match active {
            Some(existing) => replay(existing, request).map(OpenDecision::Replay),
            None => {
                let mut created = open(request, parent.wave_id().clone(), id, now)?;
                created.expires_at = expires_at;
                Ok(OpenDecision::Create(created))
            }
        };
    };
    if let Some(existing) = at_step {
        if existing.parent != request.parent || existing.step.as_ref() != Some(step) {
            return Err(DomainError::invalid(format!(
                "handoff {} is not {}'s handoff for step {step:?}",
                existing.id, request.parent
            )));
        }
        return Ok(OpenDecision::Replay(existing.clone()));
    }
    if let Some(busy) = active {
        let held = match &busy.step {
            Some(other) => format!("step {:?}", other.as_str()),
            None => "no step".to_string(),
        };
        return Err(DomainError::conflict(
            ConflictKind::ParentBusy,
            format!(
                "parent {} is busy: its active handoff {} is for {held}; finish it before \
                 opening step {:?}",
                request.parent,
                busy.id,
                step.as_str()
            ),
        ));
    }
    let mut created = open(request, parent.wave_id().clone(), id, now)?;
    created.step = Some(step.clone());
    created.expires_at = expires_at;
    Ok(OpenDecision::Create(created))
}

/// Checks that a new deadline is later than `now` (both in storage
/// precision).
///
/// # Errors
/// [`DomainError::InvalidInput`] naming both instants.
pub(super) fn check_deadline(deadline: OffsetDateTime, now: OffsetDateTime) -> DomainResult<()> {
    if deadline <= now {
        return Err(DomainError::invalid(format!(
            "deadline {} is not later than now ({}); give a deadline in the future",
            rfc3339(deadline),
            rfc3339(now)
        )));
    }
    Ok(())
}

/// `instant` in RFC 3339, for messages.
pub(super) fn rfc3339(instant: OffsetDateTime) -> String {
    instant
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| instant.to_string())
}

/// Refuses a write to a handoff that is expired, or due at `now` (C14):
/// the caller then expires a due one ([`super::expire_if_due`]) and reports
/// this refusal. `doing` says what was refused ("attached", ...).
///
/// # Errors
/// [`ConflictKind::Expired`] naming the deadline.
pub(super) fn refuse_if_expired(
    handoff: &InteractiveHandoff,
    now: OffsetDateTime,
    doing: &str,
) -> DomainResult<()> {
    let expired = handoff.status == InteractiveHandoffStatus::Expired;
    if !expired && !handoff.is_due(now) {
        return Ok(());
    }
    let deadline = handoff
        .expires_at
        .map_or_else(|| "its deadline".to_string(), rfc3339);
    Err(DomainError::conflict(
        ConflictKind::Expired,
        format!(
            "handoff {} expired at {deadline}; it can no longer be {doing}",
            handoff.id
        ),
    ))
}

/// Builds a new Waiting handoff from a request. Parent rules are not checked
/// here; [`decide_open`] checks them first.
///
/// # Errors
/// [`DomainError::InvalidInput`] when the request is malformed or, for a wave
/// parent, `wave_id` is not the parent's id (I4).
pub fn open(
    request: &OpenInteractiveHandoff,
    wave_id: WaveId,
    id: InteractiveHandoffId,
    now: OffsetDateTime,
) -> DomainResult<InteractiveHandoff> {
    request.validate()?;
    if let super::InteractiveHandoffParent::Wave(parent_wave) = &request.parent {
        if parent_wave != &wave_id {
            return Err(DomainError::invalid(format!(
                "a wave parent {parent_wave} must own the handoff, not wave {wave_id}"
            )));
        }
    }
    let now = truncate_to_micros(now);
    Ok(InteractiveHandoff {
        id,
        parent: request.parent.clone(),
        wave_id,
        home: request.home.clone(),
        cwd: request.cwd.clone(),
        provider: request.provider.clone(),
        provider_session_id: request.provider_session_id.clone(),
        body_generation: request.body_generation,
        reason: request.reason.clone(),
        environment: request.environment.clone(),
        attach_argv: request.attach_argv.clone(),
        status: InteractiveHandoffStatus::Waiting,
        outcome: None,
        created_at: now,
        updated_at: now,
        attached_at: None,
        terminal_at: None,
        wake_claimed_at: None,
        wake_claimed_by_generation: None,
        step: None,
        expires_at: None,
        choices: request.options.choices.clone(),
        form: request.options.form.clone(),
        on_expiry: request.options.on_expiry.clone(),
        answer: None,
    })
}

/// Replays an open: the parent's active handoff is returned unchanged.
///
/// # Errors
/// [`DomainError::InvalidInput`] if `existing` belongs to another parent;
/// [`DomainError::Conflict`] if it is no longer active.
pub fn replay(
    existing: &InteractiveHandoff,
    request: &OpenInteractiveHandoff,
) -> DomainResult<InteractiveHandoff> {
    if existing.parent != request.parent {
        return Err(DomainError::invalid(format!(
            "handoff {} belongs to {}, not {}",
            existing.id, existing.parent, request.parent
        )));
    }
    if !existing.is_active() {
        return Err(DomainError::conflict(
            ConflictKind::AlreadyFinished,
            format!(
                "handoff {} is already {}; only an active handoff is replayed",
                existing.id,
                existing.status.describe()
            ),
        ));
    }
    Ok(existing.clone())
}

/// Attaches a person: Waiting becomes Attached and records `attached_at`;
/// attaching again changes nothing (contract C5).
///
/// # Errors
/// [`ConflictKind::Expired`] when the handoff is expired or due at `now`
/// (the caller expires a due one, C14); [`DomainError::Conflict`] when it
/// is terminal.
pub fn attach(handoff: &InteractiveHandoff, now: OffsetDateTime) -> DomainResult<Transition> {
    refuse_if_expired(handoff, now, "attached")?;
    match handoff.status {
        InteractiveHandoffStatus::Waiting => {
            let now = next_instant(handoff, now);
            let mut next = handoff.clone();
            next.status = InteractiveHandoffStatus::Attached;
            next.attached_at = Some(now);
            next.updated_at = now;
            Ok(Transition::Changed(next))
        }
        InteractiveHandoffStatus::Attached => Ok(Transition::Unchanged(handoff.clone())),
        terminal => Err(DomainError::conflict(
            ConflictKind::AlreadyFinished,
            format!(
                "handoff {} is already {}; it cannot be attached",
                handoff.id,
                terminal.describe()
            ),
        )),
    }
}

/// Finishes a handoff with `outcome` and, on a handoff that asks for one,
/// an `answer` (contracts C6 and C26). Finishing again with an equal
/// outcome and answer changes nothing.
///
/// # Errors
/// [`DomainError::InvalidInput`] for a blank outcome text, the expiry
/// outcome (which only a deadline gives), or an answer that does not fit
/// ([`check_finish_answer`]); [`ConflictKind::Expired`] when the handoff
/// is expired or due at `now` (the caller expires a due one, C14);
/// [`DomainError::Conflict`] when a different outcome or answer is already
/// recorded (the first one stays).
pub fn finish(
    handoff: &InteractiveHandoff,
    outcome: &InteractiveHandoffOutcome,
    answer: Option<&Answer>,
    now: OffsetDateTime,
) -> DomainResult<Transition> {
    check_person_outcome(outcome)?;
    check_finish_answer(handoff, outcome, answer)?;
    refuse_if_expired(handoff, now, "finished")?;
    if handoff.status.is_terminal() {
        return if handoff.outcome.as_ref() == Some(outcome) && handoff.answer.as_ref() == answer {
            Ok(Transition::Unchanged(handoff.clone()))
        } else {
            Err(DomainError::conflict(
                ConflictKind::OtherOutcome,
                format!(
                    "handoff {} is already {}; the first outcome stays",
                    handoff.id,
                    handoff.status.describe()
                ),
            ))
        };
    }
    let now = next_instant(handoff, now);
    let mut next = handoff.clone();
    next.status = outcome.status();
    next.outcome = Some(outcome.clone());
    next.answer = answer.cloned();
    next.terminal_at = Some(now);
    next.updated_at = now;
    Ok(Transition::Changed(next))
}

/// Checks what of a finish's answer needs no handoff (C26): a failure
/// carries none.
///
/// # Errors
/// [`DomainError::InvalidInput`] for a failure with an answer.
pub fn check_outcome_answer(
    outcome: &InteractiveHandoffOutcome,
    answer: Option<&Answer>,
) -> DomainResult<()> {
    if answer.is_some() && matches!(outcome, InteractiveHandoffOutcome::Failed { .. }) {
        return Err(DomainError::invalid(
            "a failure carries no answer: give the reason only",
        ));
    }
    Ok(())
}

/// Checks the answer a finish carries against the handoff's spec (C26):
/// a completion of a handoff that asks for an answer must carry one that
/// fits; a hand-back may carry one that fits; a failure carries none, and
/// a handoff that asks for nothing takes no answer.
///
/// # Errors
/// [`DomainError::InvalidInput`] naming the field and the rule.
pub fn check_finish_answer(
    handoff: &InteractiveHandoff,
    outcome: &InteractiveHandoffOutcome,
    answer: Option<&Answer>,
) -> DomainResult<()> {
    check_outcome_answer(outcome, answer)?;
    let spec = handoff.answer_spec()?;
    match (answer, spec) {
        (Some(_), None) => Err(DomainError::invalid(format!(
            "handoff {} asks for no answer (no choices, no form): finish it with a summary only",
            handoff.id
        ))),
        (Some(answer), Some(spec)) => spec.check(answer).map_err(DomainError::from),
        (None, Some(spec)) if matches!(outcome, InteractiveHandoffOutcome::Completed { .. }) => {
            Err(DomainError::invalid(format!(
                "handoff {} asks for an answer ({}): complete it with one",
                handoff.id,
                spec.describe()
            )))
        }
        (None, _) => Ok(()),
    }
}

/// Checks an outcome a person gives: not blank, and not the expiry, which
/// only a passed deadline gives (C14).
///
/// # Errors
/// [`DomainError::InvalidInput`] naming the problem.
pub fn check_person_outcome(outcome: &InteractiveHandoffOutcome) -> DomainResult<()> {
    if *outcome == InteractiveHandoffOutcome::Expired {
        return Err(DomainError::invalid(
            "a handoff cannot be finished as expired: it expires when its deadline passes",
        ));
    }
    outcome.validate()
}

/// Checks a wake-claim generation on its own: generation 0 is never valid.
///
/// # Errors
/// [`DomainError::InvalidInput`] for generation 0.
pub fn check_claim_generation(generation: u32) -> DomainResult<()> {
    if generation == 0 {
        Err(DomainError::invalid("wake generation must be at least 1"))
    } else {
        Ok(())
    }
}

/// Claims the wake of a terminal handoff for body `generation` (contract C7),
/// without knowing the parent's current generation, so the wake is never
/// handed over: [`claim_wake_for_parent`] with no parent generation.
///
/// # Errors
/// As [`claim_wake_for_parent`].
pub fn claim_wake(
    handoff: &InteractiveHandoff,
    generation: u32,
    now: OffsetDateTime,
) -> DomainResult<WakeClaim> {
    claim_wake_for_parent(handoff, generation, None, now)
}

/// Claims the wake of a terminal handoff for body `generation` (contracts C7
/// and C13). `parent_generation` is the parent's recorded current body
/// generation, when the caller knows it.
///
/// The first claim records the generation and returns `claimed = true`; the
/// same generation claiming again gets `true` and changes nothing (safe after
/// a lost reply). A generation newer than the holder's that is the parent's
/// current one takes the wake over (a replaced body resumes in place of the
/// one it replaced): `true`, and the old holder's retries then get `false`.
/// Any other generation gets `false`.
///
/// # Errors
/// [`DomainError::InvalidInput`] for generation 0; [`DomainError::Conflict`]
/// for a generation older than the one that opened the handoff, or a handoff
/// that is not terminal yet.
pub fn claim_wake_for_parent(
    handoff: &InteractiveHandoff,
    generation: u32,
    parent_generation: Option<u32>,
    now: OffsetDateTime,
) -> DomainResult<WakeClaim> {
    check_claim_generation(generation)?;
    if generation < handoff.body_generation {
        return Err(DomainError::conflict(
            ConflictKind::StaleGeneration,
            format!(
                "generation {generation} is stale: handoff {} was opened by generation {}",
                handoff.id, handoff.body_generation
            ),
        ));
    }
    if !handoff.status.is_terminal() {
        return Err(DomainError::conflict(
            ConflictKind::NotFinished,
            format!(
                "handoff {} is still {}; finish it before claiming the wake",
                handoff.id,
                handoff.status.describe()
            ),
        ));
    }
    Ok(match handoff.wake_claimed_by_generation {
        Some(holder) if holder == generation => WakeClaim {
            transition: Transition::Unchanged(handoff.clone()),
            claimed: true,
        },
        // The first claim, or a take-over by the parent's current body.
        None => wake_held_by(handoff, generation, now),
        Some(holder) if holder < generation && parent_generation == Some(generation) => {
            wake_held_by(handoff, generation, now)
        }
        Some(_) => WakeClaim {
            transition: Transition::Unchanged(handoff.clone()),
            claimed: false,
        },
    })
}

/// The claim that records `generation` as the wake's holder, now.
fn wake_held_by(handoff: &InteractiveHandoff, generation: u32, now: OffsetDateTime) -> WakeClaim {
    let now = next_instant(handoff, now);
    let mut next = handoff.clone();
    next.wake_claimed_at = Some(now);
    next.wake_claimed_by_generation = Some(generation);
    next.updated_at = now;
    WakeClaim {
        transition: Transition::Changed(next),
        claimed: true,
    }
}

/// `now` in storage precision, never before the record's last change.
pub(super) fn next_instant(handoff: &InteractiveHandoff, now: OffsetDateTime) -> OffsetDateTime {
    truncate_to_micros(now).max(handoff.updated_at)
}

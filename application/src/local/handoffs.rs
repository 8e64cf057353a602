//! Handoffs (contracts C1-C7, C9, C12-C15): open, read, attach, finish,
//! extend, claim the wake, and the history of each change.

use std::sync::Arc;

use lf_handoff_domain::error::DomainResult;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    self as handoff, check_claim_generation, check_person_outcome, decide_open_with, HandoffEvent,
    InteractiveHandoff, InteractiveHandoffOutcome, OpenDecision, OpenHandoff,
    OpenInteractiveHandoff, OpenOptions, Transition,
};
use time::OffsetDateTime;

use super::{lost_a_race, lost_too_often, not_found, CallTimer, Local, MAX_RACE_ATTEMPTS};
use crate::error::{StoreError, StoreResult};
use crate::ports::{Decided, Decision, InsertOutcome, ListQuery, ParentWithActive};
use crate::registry::ClaimedWake;
use crate::retry::Retries;

impl Local {
    /// Opens a handoff for the request's parent, or returns the one the
    /// request is answered by, writing nothing (a replay). The flag is
    /// `true` if and only if a handoff was created.
    ///
    /// `request` is an [`OpenInteractiveHandoff`] (as the first version
    /// sent it) or one [`with_options`](OpenInteractiveHandoff::with_options):
    ///
    /// - without a step, the parent's active handoff answers (C3);
    /// - with a step (C12), the parent's handoff for that step answers,
    ///   whatever its status, so a replaced body that re-runs its step
    ///   finds the handoff it opened before instead of asking a person
    ///   again;
    /// - with a deadline (C14), a created handoff expires then unless it
    ///   was finished; a replay keeps the deadline it has
    ///   ([`extend_interactive_handoff`](Self::extend_interactive_handoff)
    ///   moves it).
    ///
    /// # Errors
    /// `InvalidInput` for a malformed request or a deadline not later than
    /// now (checked before any read); `NotFound` for an unknown parent;
    /// `Conflict` naming the parent rule broken (stale generation,
    /// provider, history, worktree, terminal), or of kind `ParentBusy`
    /// naming the parent's active handoff when it is for another step (or
    /// none).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = tracing::field::Empty))]
    pub async fn open_interactive_handoff(
        &self,
        request: impl Into<OpenHandoff>,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let _call = CallTimer::start();
        let OpenHandoff { request, options } = request.into();
        tracing::Span::current().record("parent", tracing::field::display(&request.parent));
        self.open(request, &options).await
    }

    async fn open(
        &self,
        request: OpenInteractiveHandoff,
        options: &OpenOptions,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        request.validate()?;
        // The handoffs this call tried to insert. An insert whose reply was
        // lost may have committed: the next round then finds it, and the
        // domain replays it (C3, C12), as created by this call.
        let mut tried = Vec::new();
        let mut retries = Retries::new(self.settings.retry_window);
        let mut lost = 0;
        while lost < MAX_RACE_ATTEMPTS {
            let ParentWithActive {
                parent,
                active,
                at_step,
            } = self
                .retry("loading the parent", || {
                    self.parents
                        .load_parent_with_active(&request.parent, options.step.as_ref())
                })
                .await?
                .ok_or_else(|| not_found(&request.parent))?;
            let decision = decide_open_with(
                &request,
                options,
                &parent.value,
                active.as_ref().map(|versioned| &versioned.value),
                at_step.as_ref().map(|versioned| &versioned.value),
                self.ids.new_handoff_id(),
                self.clock.now(),
            )?;
            match decision {
                OpenDecision::Replay(existing) => {
                    let created = tried.contains(&existing.id);
                    return Ok((existing, created));
                }
                OpenDecision::Create(created) => {
                    tried.push(created.id.clone());
                    match self
                        .handoffs
                        .insert(&created, parent.version, &self.settings.actor)
                        .await
                    {
                        Ok(InsertOutcome::Inserted) => return Ok((created, true)),
                        // Another writer got there first: decide again on
                        // what it stored.
                        Ok(
                            InsertOutcome::ParentBusy
                            | InsertOutcome::ParentChanged
                            | InsertOutcome::StepTaken,
                        ) => {
                            lost += 1;
                            lost_a_race("the parent's open");
                        }
                        // Not the same insert again (its id may be stored
                        // by now): the next round reads what is stored.
                        Err(error) => {
                            retries.after_failure("storing the handoff", error).await?;
                        }
                    }
                }
            }
        }
        Err(lost_too_often(&request.parent))
    }

    /// Loads one handoff; `None` for an unknown id.
    ///
    /// # Errors
    /// `Unavailable` on storage failure or a damaged record.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn get_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<InteractiveHandoff>> {
        let _call = CallTimer::start();
        Ok(self
            .retry("loading the handoff", || self.handoffs.load(id))
            .await?
            .map(|versioned| versioned.value))
    }

    /// Lists the handoffs that pass every filter of `query`, ordered by
    /// creation then id (C4, C17), or newest first. `query` is a parent
    /// (`None` for every handoff, `Some(&parent)` for one parent's) or a
    /// whole [`ListQuery`]: a parent, only active ones, statuses, a home,
    /// created before an instant, the order, and the page (those after
    /// `query.after`, the last id of the previous page; at most
    /// `query.limit`). Every filter and the page's start are served by an
    /// index.
    ///
    /// # Errors
    /// `NotFound` when `query.after` names no handoff (checked only when
    /// the page is empty, so a full page costs no extra read);
    /// `Unavailable` on storage failure or a damaged record.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    pub async fn list_interactive_handoffs(
        &self,
        query: impl Into<ListQuery>,
    ) -> StoreResult<Vec<InteractiveHandoff>> {
        let _call = CallTimer::start();
        let query = query.into();
        let page = self
            .retry("listing handoffs", || self.handoffs.list(&query))
            .await?;
        if let (true, Some(after)) = (page.is_empty(), &query.after) {
            if self
                .retry("loading the handoff", || self.handoffs.load(after))
                .await?
                .is_none()
            {
                return Err(StoreError::NotFound(format!(
                    "handoff {after}, the page's start, does not exist (it may have been \
                     pruned); list from the start again"
                )));
            }
        }
        Ok(page)
    }

    /// Records that a person attached. Attaching again returns the record
    /// unchanged.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Conflict` when the handoff is terminal,
    /// of kind `Expired` when its deadline has passed (a due handoff is
    /// expired by this call, C14).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn attach_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        self.apply(id, self.expiring(handoff::attach))
            .await
            .map(|(handoff, _)| handoff)
    }

    /// Finishes a handoff with `outcome`. Finishing again with an equal
    /// outcome returns the record unchanged; of racing finishers exactly one
    /// succeeds.
    ///
    /// # Errors
    /// `InvalidInput` for a blank outcome text or the expiry outcome
    /// (checked before any read); `NotFound` for an unknown id; `Conflict`
    /// when another outcome is already recorded, of kind `Expired` when the
    /// deadline has passed (a due handoff is expired by this call, C14).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id, status = %outcome.status()))]
    pub async fn finish_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        check_person_outcome(outcome)?;
        let outcome = outcome.clone();
        self.apply(
            id,
            self.expiring(move |current, now| handoff::finish(current, &outcome, now)),
        )
        .await
        .map(|(handoff, _)| handoff)
    }

    /// Moves the deadline of an active handoff to `until` (C14), which
    /// must be later than now; a handoff without a deadline gets one.
    /// Extending to the deadline it has returns it unchanged.
    ///
    /// # Errors
    /// `InvalidInput` for a deadline not later than now; `NotFound` for an
    /// unknown id; `Conflict` of kind `Expired` when the deadline has
    /// already passed (a due handoff is expired by this call, never
    /// extended), `AlreadyFinished` for another terminal handoff.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn extend_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        until: OffsetDateTime,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        self.apply(
            id,
            self.expiring(move |current, now| handoff::extend(current, until, now)),
        )
        .await
        .map(|(handoff, _)| handoff)
    }

    /// Expires handoff `id` if it is due (C14) and returns it as it then
    /// is, expired or not: what a waiter calls when the deadline passes.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub(crate) async fn expire_if_due(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        self.apply(id, self.expiry())
            .await
            .map(|(handoff, _)| handoff)
    }

    /// The history of handoff `id` (C15): every change, in order, with who
    /// made it. A handoff stored by a release without history starts with
    /// its first change since the upgrade.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Unavailable` on storage failure or an
    /// unreadable event.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        let _call = CallTimer::start();
        let events = self
            .retry("reading the history", || self.handoffs.history(id))
            .await?;
        if events.is_empty()
            && self
                .retry("loading the handoff", || self.handoffs.load(id))
                .await?
                .is_none()
        {
            return Err(StoreError::NotFound(format!("handoff {id} does not exist")));
        }
        Ok(events)
    }

    /// The decision of a transition that a due handoff refuses (C14): when
    /// `transition` refuses a handoff that is due, its expiry is stored in
    /// the same round and the refusal is the caller's answer.
    fn expiring(
        &self,
        transition: impl Fn(&InteractiveHandoff, OffsetDateTime) -> DomainResult<Transition>
            + Send
            + Sync
            + 'static,
    ) -> Decision {
        let clock = self.clock.clone();
        Arc::new(move |current| {
            let now = clock.now();
            match transition(current, now) {
                Err(refusal) if current.is_due(now) => Ok(Decided {
                    transition: handoff::expire_if_due(current, now),
                    answer: Err(refusal),
                }),
                decided => Ok(decided?.into()),
            }
        })
    }

    /// The decision of a sweep: expire the handoff if it is due; the answer
    /// says whether this decision expired it.
    pub(super) fn expiry(&self) -> Decision {
        let clock = self.clock.clone();
        Arc::new(move |current| {
            let transition = handoff::expire_if_due(current, clock.now());
            let expired = transition.is_changed();
            Ok(Decided {
                transition,
                answer: Ok(expired),
            })
        })
    }

    /// Claims the wake of a terminal handoff for body `generation`: whether
    /// this generation holds it afterwards (the first claim, a retry by the
    /// holder, or a take-over by the parent's current body from an older
    /// holder, C13), with the record as the claim's own change left it.
    ///
    /// # Errors
    /// `InvalidInput` for generation 0 (checked before any read); `NotFound`
    /// for an unknown id; `Conflict` for a stale generation or a handoff that
    /// is not terminal.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id, generation = parent_generation))]
    pub async fn claim_interactive_handoff_wake(
        &self,
        id: &InteractiveHandoffId,
        parent_generation: u32,
    ) -> StoreResult<ClaimedWake> {
        let _call = CallTimer::start();
        check_claim_generation(parent_generation)?;
        let (handoff, claimed) = self.claim_once(id, parent_generation, None).await?;
        let older_holder = handoff
            .wake_claimed_by_generation
            .is_some_and(|holder| holder < parent_generation);
        if claimed || !older_holder {
            return Ok(ClaimedWake { claimed, handoff });
        }
        // An older generation holds the wake: this one takes it over if it
        // is the parent's current body (C13). The parent read is not part
        // of the compare-and-swap: a body replaced between this read and
        // the swap may still take the wake over, and its successor takes it
        // over in turn when it claims. One generation holds it at a time.
        let parent = self
            .retry("loading the parent", || {
                self.parents.load_parent(&handoff.parent)
            })
            .await?
            .ok_or_else(|| not_found(&handoff.parent))?;
        if parent.value.body_generation() != parent_generation {
            return Ok(ClaimedWake {
                claimed: false,
                handoff,
            });
        }
        let (handoff, claimed) = self
            .claim_once(id, parent_generation, Some(parent_generation))
            .await?;
        Ok(ClaimedWake { claimed, handoff })
    }

    /// One wake claim through [`apply`](Self::apply), knowing the parent's
    /// current generation or not.
    async fn claim_once(
        &self,
        id: &InteractiveHandoffId,
        generation: u32,
        parent_generation: Option<u32>,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let clock = self.clock.clone();
        self.apply(
            id,
            Arc::new(move |current| {
                Ok(handoff::claim_wake_for_parent(
                    current,
                    generation,
                    parent_generation,
                    clock.now(),
                )?
                .into())
            }),
        )
        .await
    }
}

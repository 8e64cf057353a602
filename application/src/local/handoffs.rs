//! Handoffs (contracts C1-C7, C9, C12-C15): open, read, attach, finish,
//! extend, claim the wake, and the history of each change.

use std::sync::Arc;

use async_trait::async_trait;

use lf_handoff_domain::error::DomainResult;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    self as handoff, check_claim_generation, check_person_outcome, decide_open_with, Answer,
    HandoffEvent, InteractiveHandoff, InteractiveHandoffOutcome, OpenDecision,
    OpenInteractiveHandoff, Transition,
};
use time::OffsetDateTime;

use super::{lost_a_race, lost_too_often, not_found, CallTimer, Local, MAX_RACE_ATTEMPTS};
use crate::error::{StoreError, StoreResult};
use crate::ports::{Decided, Decision, InsertOutcome, ListQuery, ParentWithActive};
use crate::registry::{ClaimedWake, Handoffs};
use crate::retry::Retries;

#[async_trait]
impl Handoffs for Local {
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = tracing::field::Empty))]
    async fn open_interactive_handoff(
        &self,
        request: OpenInteractiveHandoff,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let _call = CallTimer::start();
        tracing::Span::current().record("parent", tracing::field::display(&request.parent));
        self.open(request).await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    async fn get_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<InteractiveHandoff>> {
        let _call = CallTimer::start();
        Ok(self
            .retry("loading the handoff", || self.handoffs.load(id))
            .await?
            .map(|versioned| versioned.value))
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    async fn list_interactive_handoffs(
        &self,
        query: ListQuery,
    ) -> StoreResult<Vec<InteractiveHandoff>> {
        let _call = CallTimer::start();
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

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    async fn attach_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        self.apply(id, self.expiring(handoff::attach))
            .await
            .map(|(handoff, _)| handoff)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id, status = %outcome.status()))]
    async fn finish_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
        answer: Option<&Answer>,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        check_person_outcome(outcome)?;
        let outcome = outcome.clone();
        let answer = answer.cloned();
        self.apply(
            id,
            self.expiring(move |current, now| {
                handoff::finish(current, &outcome, answer.as_ref(), now)
            }),
        )
        .await
        .map(|(handoff, _)| handoff)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    async fn extend_interactive_handoff(
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

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
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

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id, generation = parent_generation))]
    async fn claim_interactive_handoff_wake(
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
}

impl Local {
    async fn open(
        &self,
        request: OpenInteractiveHandoff,
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
                        .load_parent_with_active(&request.parent, request.options.step.as_ref())
                })
                .await?
                .ok_or_else(|| not_found(&request.parent))?;
            let decision = decide_open_with(
                &request,
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

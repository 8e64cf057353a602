//! The lifecycle lanes and the crash story (see the module `crash_child`).

use lf_handoff_adapters::GenerateId;
use lf_handoff_conformance::fixtures;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffParent, InteractiveHandoffStatus, OpenOptions,
};
use lf_handoff_domain::parent::Parent;

use super::{emit, story_step, Lane};
use crate::requests::{open_request, random_outcome};

impl Lane {
    /// The crash story for `reference` (see the module documentation),
    /// from step `step` on, until the child is killed.
    pub(super) async fn story(
        &mut self,
        reference: InteractiveHandoffParent,
        mut step: u64,
    ) -> Result<(), String> {
        let parent = self
            .store
            .get_parent(&reference)
            .await
            .map_err(|e| format!("read story parent {reference}: {e}"))?
            .ok_or_else(|| format!("story parent {reference} is missing"))?;
        let generation = parent.body_generation();
        loop {
            let key = story_step(step)?;
            let request = open_request(&mut self.rng, &parent, &self.dir)?;
            self.begin("step-open", &reference)?;
            let (mut current, created) = self
                .store
                .open_interactive_handoff(request.with_options(OpenOptions::at_step(key.clone())))
                .await
                .map_err(|e| format!("open {reference} at step {key} by {generation}: {e}"))?;
            let value = serde_json::json!({ "created": created, "step": key, "handoff": current });
            self.ack_json("step-open", &reference, &value)?;
            if self.fake_steps {
                // A deliberate lie for the harness's self-test: a second
                // handoff for the same step.
                let mut phantom = current.clone();
                phantom.id = InteractiveHandoffId::new();
                let value = serde_json::json!({ "created": true, "step": key, "handoff": phantom });
                self.ack_json("step-open", &reference, &value)?;
            }
            let id = current.id.clone();
            if current.status == InteractiveHandoffStatus::Waiting && self.rng.chance(1, 2) {
                current = self.attach(&id).await?;
            }
            if !current.status.is_terminal() {
                let outcome = random_outcome(&mut self.rng);
                current = self.finish(&id, &outcome).await?;
            }
            let replaced = current
                .wake_claimed_by_generation
                .filter(|holder| *holder < generation);
            self.begin("wake", &id)?;
            let (claimed, record) = fixtures::claim_and_read(&self.store, &id, generation)
                .await
                .map_err(|e| format!("claim {id} for {generation}: {e}"))?;
            self.ack_wake(generation, claimed, &record)?;
            if self.fake_steps && claimed {
                // The self-test's other lie: a newer generation won the
                // wake, then this one won it back.
                self.ack_wake(generation + 1, true, &record)?;
                self.ack_wake(generation, true, &record)?;
            }
            if let Some(old) = replaced {
                if self.rng.chance(1, 2) {
                    self.begin("wake", &id)?;
                    let (old_claimed, record) = fixtures::claim_and_read(&self.store, &id, old)
                        .await
                        .map_err(|e| format!("retry the claim of {id} for {old}: {e}"))?;
                    self.ack_wake(old, old_claimed, &record)?;
                }
            }
            if self.rng.chance(1, 2) {
                // The body works on before it records its progress: a kill
                // now makes the next generation run the step again.
                let pause = self.rng.below(20);
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            }
            step += 1;
            emit(&format!("step {} {reference} {step}", self.lane))?;
        }
    }

    /// One lifecycle: a parent, open (with replays), maybe attach, finish,
    /// maybe a new body, claim (with a retry and a loser).
    pub(super) async fn lifecycle(&mut self) -> Result<(), String> {
        let mut parent = self.new_parent().await?;
        let reference = parent.reference();
        let mut current = self.open_on_new_parent(&parent).await?;
        let id = current.id.clone();

        if self.rng.chance(2, 3) {
            current = self.attach(&id).await?;
            if self.rng.chance(1, 4) {
                let again = self
                    .store
                    .attach_interactive_handoff(&id)
                    .await
                    .map_err(|e| format!("attach {id} again: {e}"))?;
                if again != current {
                    return Err(format!("a repeated attach of {id} changed the record"));
                }
            }
        }

        let outcome = random_outcome(&mut self.rng);
        current = self.finish(&id, &outcome).await?;
        if self.rng.chance(1, 4) {
            let again = self
                .store
                .finish_interactive_handoff(&id, &outcome, None)
                .await
                .map_err(|e| format!("finish {id} again: {e}"))?;
            if again != current {
                return Err(format!("a repeated finish of {id} changed the record"));
            }
        }

        let mut generation = current.body_generation;
        if self.rng.chance(1, 3) {
            generation = parent.body_generation().max(1) + 1;
            self.begin("body", &reference)?;
            parent = self
                .store
                .record_body(&reference, fixtures::body(generation, None))
                .await
                .map_err(|e| format!("record body {generation} on {reference}: {e}"))?;
            self.ack_parent("body", &parent)?;
        }
        self.claim_alone(&id, generation).await
    }

    /// Opens a handoff on the new `parent` (acknowledged; with the
    /// self-test's phantom when asked), and one time in three replays the
    /// open, which must change nothing.
    async fn open_on_new_parent(&mut self, parent: &Parent) -> Result<InteractiveHandoff, String> {
        let reference = parent.reference();
        let request = open_request(&mut self.rng, parent, &self.dir)?;
        self.begin("open", &reference)?;
        let (opened, created) = self
            .store
            .open_interactive_handoff(request.clone())
            .await
            .map_err(|e| format!("open on {reference}: {e}"))?;
        if !created {
            return Err(format!(
                "open on a new parent {reference} reused {}",
                opened.id
            ));
        }
        self.ack_handoff("open", &reference, &opened)?;
        if self.fake_ack {
            // A deliberate lie for the harness's self-test: an open that the
            // store never saw.
            let mut phantom = opened.clone();
            phantom.id = InteractiveHandoffId::new();
            self.ack_handoff("open", &reference, &phantom)?;
        }
        if self.rng.chance(1, 3) {
            let (replayed, created) = self
                .store
                .open_interactive_handoff(request)
                .await
                .map_err(|e| format!("replayed open on {reference}: {e}"))?;
            if created || replayed != opened {
                return Err(format!("a replayed open of {} was not a no-op", opened.id));
            }
        }
        Ok(opened)
    }

    /// Claims the wake of `id` for `generation`, its only claimant, which
    /// must win; one time in four the claim is retried by the same
    /// generation (which keeps it) and tried by the next (which loses).
    async fn claim_alone(
        &mut self,
        id: &InteractiveHandoffId,
        generation: u32,
    ) -> Result<(), String> {
        self.begin("claim", id)?;
        let (claimed, record) = fixtures::claim_and_read(&self.store, id, generation)
            .await
            .map_err(|e| format!("claim {id} for {generation}: {e}"))?;
        if !claimed {
            return Err(format!("the only claimant of {id} ({generation}) lost"));
        }
        self.ack_handoff("claim", id, &record)?;
        if self.rng.chance(1, 4) {
            let retry = self
                .store
                .claim_interactive_handoff_wake(id, generation)
                .await
                .map_err(|e| format!("claim {id} again: {e}"))?
                .claimed;
            let other = self
                .store
                .claim_interactive_handoff_wake(id, generation + 1)
                .await
                .map_err(|e| format!("second claimant of {id}: {e}"))?
                .claimed;
            if !retry || other {
                return Err(format!(
                    "claim retry of {id}: same generation {retry}, other generation {other}"
                ));
            }
        }
        Ok(())
    }
}

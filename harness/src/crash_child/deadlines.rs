//! The deadline lanes (C14; see the module `crash_child`).

use lf_handoff_adapters::{ConflictKind, GenerateId, StoreError};
use lf_handoff_conformance::fixtures;
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffStatus, OpenOptions,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;

use super::{emit, Lane};
use crate::requests::{open_request, random_outcome, text};

/// How many deadlines, each further ahead, a deadline lane tries for one
/// open or extension before it gives up.
const DEADLINE_ATTEMPTS: i32 = 5;

impl Lane {
    /// Acknowledges handoffs a write expired, as a JSON array.
    fn ack_expired(
        &self,
        key: &dyn std::fmt::Display,
        expired: &[InteractiveHandoff],
    ) -> Result<(), String> {
        let json = serde_json::to_string(expired).map_err(|e| e.to_string())?;
        emit(&format!("ack {} expire {key} {json}", self.lane))
    }

    /// Sweeps every due handoff (C14), announced before and acknowledged
    /// after with the handoffs this sweep expired.
    async fn sweep(&self) -> Result<Vec<InteractiveHandoff>, String> {
        self.begin("expire", &"due")?;
        let expired = self
            .store
            .expire_due()
            .await
            .map_err(|e| format!("expire the due handoffs: {e}"))?;
        self.ack_expired(&"due", &expired)?;
        Ok(expired)
    }

    /// After a write on `id` was refused because its deadline had passed:
    /// the store expired it in the same round, which is acknowledged with
    /// the record read back.
    async fn refused_as_due(
        &self,
        id: &InteractiveHandoffId,
        error: &StoreError,
    ) -> Result<InteractiveHandoff, String> {
        let record = self
            .store
            .get_interactive_handoff(id)
            .await
            .map_err(|e| format!("read {id} after {error}: {e}"))?
            .ok_or_else(|| format!("{id} is gone after {error}"))?;
        if record.status != InteractiveHandoffStatus::Expired {
            return Err(format!(
                "{id} was refused as expired ({error}) but is {}",
                record.status
            ));
        }
        self.ack_expired(id, std::slice::from_ref(&record))?;
        Ok(record)
    }

    /// A write on a handoff with a deadline: its result, or the expired
    /// record when the deadline had passed.
    async fn in_time(
        &self,
        id: &InteractiveHandoffId,
        kind: &str,
        result: Result<InteractiveHandoff, StoreError>,
    ) -> Result<InteractiveHandoff, String> {
        match result {
            Ok(record) => {
                self.ack_handoff(kind, id, &record)?;
                Ok(record)
            }
            Err(
                error @ StoreError::Conflict {
                    kind: ConflictKind::Expired,
                    ..
                },
            ) => self.refused_as_due(id, &error).await,
            Err(error) => Err(format!("{kind} {id}: {error}")),
        }
    }

    /// 20 to 300 ms, for a deadline.
    fn some_millis(&mut self) -> time::Duration {
        time::Duration::milliseconds(20 + i64::try_from(self.rng.below(280)).unwrap_or(0))
    }

    /// Sleeps until the store's clock is past `deadline`.
    async fn sleep_past(&self, deadline: time::OffsetDateTime) {
        let left = deadline - self.store.now();
        let left = u64::try_from(left.whole_milliseconds()).unwrap_or(0);
        tokio::time::sleep(std::time::Duration::from_millis(left + 2)).await;
    }

    /// One lifecycle of a handoff with a deadline (see the module
    /// documentation).
    pub(super) async fn deadline_lifecycle(&mut self) -> Result<(), String> {
        self.sweep().await?;
        let opened = self.open_with_deadline().await?;
        let id = opened.id.clone();
        let current = match self.rng.below(4) {
            0 => self.finish_in_time(&id, opened).await?,
            1 => self.extend_then_sweep(&id, opened).await?,
            2 => self.finish_too_late(&id).await?,
            // Left waiting: a later sweep, often the next child's, expires it.
            _ => opened,
        };
        if current.status.is_terminal() && self.rng.chance(2, 3) {
            let generation = current.body_generation;
            self.begin("claim", &id)?;
            let (claimed, record) = fixtures::claim_and_read(&self.store, &id, generation)
                .await
                .map_err(|e| format!("claim {id} for {generation}: {e}"))?;
            if !claimed {
                return Err(format!("the only claimant of {id} ({generation}) lost"));
            }
            self.ack_handoff("claim", &id, &record)?;
        }
        Ok(())
    }

    /// A new wave, and a handoff on it whose deadline is 20 to 300 ms
    /// ahead (both acknowledged).
    async fn open_with_deadline(&mut self) -> Result<InteractiveHandoff, String> {
        let wave = Wave::new(
            WaveId::new(),
            text(&mut self.rng, 2),
            self.dir.display().to_string(),
        );
        let parent = Parent::Wave(wave.clone());
        let reference = parent.reference();
        self.begin("wave", &reference)?;
        self.store
            .create_wave(&wave)
            .await
            .map_err(|e| format!("create wave {}: {e}", wave.id()))?;
        self.ack_parent("wave", &parent)?;
        let request = open_request(&mut self.rng, &parent, &self.dir)?;
        let ttl = self.some_millis();
        self.begin("open", &reference)?;
        let mut attempt = 1;
        let (opened, created) = loop {
            let options = OpenOptions {
                step: None,
                expires_at: Some(self.store.now() + ttl * attempt),
                ..OpenOptions::default()
            };
            match self
                .store
                .open_interactive_handoff(request.clone().with_options(options.clone()))
                .await
            {
                Ok(opened) => break opened,
                // On a busy machine the deadline may have passed before the
                // store decided: refused, nothing written; a later one.
                Err(StoreError::InvalidInput(_)) if attempt < DEADLINE_ATTEMPTS => attempt += 1,
                Err(e) => return Err(format!("open on {reference} with a deadline: {e}")),
            }
        };
        if !created {
            return Err(format!(
                "open on a new parent {reference} reused {}",
                opened.id
            ));
        }
        self.ack_handoff("open", &reference, &opened)?;
        Ok(opened)
    }

    /// A person in time (most of the time): maybe attached, then finished.
    async fn finish_in_time(
        &mut self,
        id: &InteractiveHandoffId,
        mut current: InteractiveHandoff,
    ) -> Result<InteractiveHandoff, String> {
        if self.rng.chance(1, 2) {
            self.begin("attach", id)?;
            let result = self.store.attach_interactive_handoff(id).await;
            current = self.in_time(id, "attach", result).await?;
        }
        if !current.status.is_terminal() {
            let outcome = random_outcome(&mut self.rng);
            self.begin("finish", id)?;
            let result = self
                .store
                .finish_interactive_handoff(id, &outcome, None)
                .await;
            current = self.in_time(id, "finish", result).await?;
        }
        Ok(current)
    }

    /// Extended (two times in three), then left to the sweep, which must
    /// expire it once its deadline passed.
    async fn extend_then_sweep(
        &mut self,
        id: &InteractiveHandoffId,
        mut current: InteractiveHandoff,
    ) -> Result<InteractiveHandoff, String> {
        if self.rng.chance(2, 3) {
            let more = self.some_millis();
            self.begin("extend", id)?;
            let mut attempt = 1;
            let result = loop {
                let until = self.store.now() + more * attempt;
                match self.store.extend_interactive_handoff(id, until).await {
                    // As for the open: the new deadline had passed.
                    Err(StoreError::InvalidInput(_)) if attempt < DEADLINE_ATTEMPTS => {
                        attempt += 1;
                    }
                    result => break result,
                }
            };
            current = self.in_time(id, "extend", result).await?;
        }
        if let (false, Some(deadline)) = (current.status.is_terminal(), current.expires_at) {
            self.sleep_past(deadline).await;
            self.sweep().await?;
            // This sweep or another deadline lane's expired it.
            current = self
                .store
                .get_interactive_handoff(id)
                .await
                .map_err(|e| format!("read {id} after the sweep: {e}"))?
                .ok_or_else(|| format!("{id} is gone after the sweep"))?;
            if current.status != InteractiveHandoffStatus::Expired {
                return Err(format!(
                    "the sweep after {id}'s deadline left it {}",
                    current.status
                ));
            }
        }
        Ok(current)
    }

    /// Attached, then finished too late: the store expires it and refuses
    /// the finish.
    async fn finish_too_late(
        &mut self,
        id: &InteractiveHandoffId,
    ) -> Result<InteractiveHandoff, String> {
        self.begin("attach", id)?;
        let result = self.store.attach_interactive_handoff(id).await;
        let current = self.in_time(id, "attach", result).await?;
        let (false, Some(deadline)) = (current.status.is_terminal(), current.expires_at) else {
            return Ok(current);
        };
        self.sleep_past(deadline).await;
        let outcome = random_outcome(&mut self.rng);
        self.begin("finish", id)?;
        match self
            .store
            .finish_interactive_handoff(id, &outcome, None)
            .await
        {
            Ok(finished) => Err(format!(
                "{id} was finished after its deadline: {finished:?}"
            )),
            Err(
                error @ StoreError::Conflict {
                    kind: ConflictKind::Expired,
                    ..
                },
            ) => self.refused_as_due(id, &error).await,
            Err(error) => Err(format!("finish {id} too late: {error}")),
        }
    }
}

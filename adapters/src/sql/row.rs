//! The column form of a handoff and its conversion to and from the domain.
//!
//! Reading is strict: a column that does not parse, or a record that fails
//! `validate()`, is reported as `Unavailable`, never returned.

use std::collections::BTreeMap;
use std::path::PathBuf;

use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus,
};
use lf_handoff_domain::timestamp::{from_unix_micros, to_unix_micros};
use lf_handoff_domain::wave_home::WaveHome;
use time::OffsetDateTime;

/// One `handoffs` row, column for column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HandoffRow {
    pub id: String,
    pub version: i64,
    pub parent_kind: String,
    pub parent_id: String,
    pub wave_id: String,
    pub home: String,
    pub cwd: String,
    pub provider: String,
    pub provider_session_id: Option<String>,
    pub body_generation: i64,
    pub reason: String,
    pub environment: String,
    pub attach_argv: String,
    pub status: String,
    pub outcome_text: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub attached_at: Option<i64>,
    pub terminal_at: Option<i64>,
    pub wake_claimed_at: Option<i64>,
    pub wake_claimed_by_generation: Option<i64>,
}

impl HandoffRow {
    /// The row for `handoff`, at `version`.
    ///
    /// # Errors
    /// `InvalidInput` when the cwd is not UTF-8 (the domain refuses that
    /// earlier; this is a second line of defence).
    pub fn from_domain(handoff: &InteractiveHandoff, version: i64) -> StoreResult<Self> {
        let cwd = handoff
            .cwd
            .to_str()
            .ok_or_else(|| StoreError::InvalidInput("cwd must be valid UTF-8".into()))?
            .to_string();
        Ok(Self {
            id: handoff.id.to_string(),
            version,
            parent_kind: handoff.parent.kind().to_string(),
            parent_id: handoff.parent.id_str().to_string(),
            wave_id: handoff.wave_id.to_string(),
            home: handoff.home.to_string(),
            cwd,
            provider: handoff.provider.clone(),
            provider_session_id: handoff.provider_session_id.clone(),
            body_generation: i64::from(handoff.body_generation),
            reason: handoff.reason.clone(),
            environment: to_json(&handoff.environment)?,
            attach_argv: to_json(&handoff.attach_argv)?,
            status: handoff.status.as_str().to_string(),
            outcome_text: handoff.outcome.as_ref().map(|o| o.text().to_string()),
            created_at: to_unix_micros(handoff.created_at),
            updated_at: to_unix_micros(handoff.updated_at),
            attached_at: handoff.attached_at.map(to_unix_micros),
            terminal_at: handoff.terminal_at.map(to_unix_micros),
            wake_claimed_at: handoff.wake_claimed_at.map(to_unix_micros),
            wake_claimed_by_generation: handoff.wake_claimed_by_generation.map(i64::from),
        })
    }

    /// The domain record this row holds, checked against every invariant.
    ///
    /// # Errors
    /// `Unavailable` naming the handoff and what is wrong with it.
    pub fn into_domain(self) -> StoreResult<InteractiveHandoff> {
        let id = self.id.clone();
        let damaged = |detail: String| {
            StoreError::damaged(format!(
                "stored handoff {id} is unreadable ({detail}); the store may be damaged or \
                 written by another program, and was left unchanged"
            ))
        };
        let parent =
            InteractiveHandoffParent::parse(&format!("{}:{}", self.parent_kind, self.parent_id))
                .map_err(|e| damaged(e.to_string()))?;
        let status = InteractiveHandoffStatus::parse(&self.status)
            .ok_or_else(|| damaged(format!("unknown status {:?}", self.status)))?;
        let outcome = match self.outcome_text {
            Some(text) => Some(
                InteractiveHandoffOutcome::from_parts(status, text)
                    .ok_or_else(|| damaged(format!("an outcome on a {status} handoff")))?,
            ),
            None => None,
        };
        let time = |micros: i64| {
            from_unix_micros(micros)
                .ok_or_else(|| damaged(format!("timestamp {micros} out of range")))
        };
        let optional_time = |micros: Option<i64>| micros.map(time).transpose();
        let generation = |value: i64| {
            u32::try_from(value).map_err(|_| damaged(format!("generation {value} out of range")))
        };
        let environment: BTreeMap<String, String> = serde_json::from_str(&self.environment)
            .map_err(|e| damaged(format!("environment: {e}")))?;
        let attach_argv: Vec<String> = serde_json::from_str(&self.attach_argv)
            .map_err(|e| damaged(format!("attach argv: {e}")))?;
        let handoff = InteractiveHandoff {
            id: InteractiveHandoffId::parse(&self.id).map_err(|e| damaged(e.to_string()))?,
            parent,
            wave_id: WaveId::parse(&self.wave_id).map_err(|e| damaged(e.to_string()))?,
            home: WaveHome::parse(&self.home).map_err(|e| damaged(e.to_string()))?,
            cwd: PathBuf::from(self.cwd),
            provider: self.provider,
            provider_session_id: self.provider_session_id,
            body_generation: generation(self.body_generation)?,
            reason: self.reason,
            environment,
            attach_argv,
            status,
            outcome,
            created_at: time(self.created_at)?,
            updated_at: time(self.updated_at)?,
            attached_at: optional_time(self.attached_at)?,
            terminal_at: optional_time(self.terminal_at)?,
            wake_claimed_at: optional_time(self.wake_claimed_at)?,
            wake_claimed_by_generation: self
                .wake_claimed_by_generation
                .map(generation)
                .transpose()?,
        };
        handoff.validate().map_err(|violation| {
            StoreError::damaged(format!(
                "stored {violation}; the store may be damaged and was left unchanged"
            ))
        })?;
        Ok(handoff)
    }
}

/// Micros for an optional instant (for binding).
pub(crate) fn micros(instant: Option<OffsetDateTime>) -> Option<i64> {
    instant.map(to_unix_micros)
}

pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::InvalidInput(format!("cannot encode record: {e}")))
}

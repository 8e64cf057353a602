//! A handoff's conversion to and from its column form ([`HandoffRow`]).
//!
//! Reading is strict: a column that does not parse, or a record that fails
//! `validate()`, is reported as `Unavailable`, never returned.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, StepKey,
};
use lf_handoff_domain::timestamp::{from_unix_micros, to_unix_micros};
use lf_handoff_domain::wave_home::WaveHome;

use crate::sql::columns::HandoffRow;

impl<'a> HandoffRow<'a> {
    /// The row for `handoff`, at `version`.
    ///
    /// # Errors
    /// `InvalidInput` when the cwd is not UTF-8 (the domain refuses that
    /// earlier; this is a second line of defence).
    pub fn from_domain(handoff: &'a InteractiveHandoff, version: i64) -> StoreResult<Self> {
        let cwd = handoff
            .cwd
            .to_str()
            .ok_or_else(|| StoreError::InvalidInput("cwd must be valid UTF-8".into()))?;
        Ok(Self {
            id: Cow::Borrowed(handoff.id.as_str()),
            version,
            parent_kind: Cow::Borrowed(handoff.parent.kind()),
            parent_id: Cow::Borrowed(handoff.parent.id_str()),
            wave_id: Cow::Borrowed(handoff.wave_id.as_str()),
            home: Cow::Owned(handoff.home.to_string()),
            cwd: Cow::Borrowed(cwd),
            provider: Cow::Borrowed(&handoff.provider),
            provider_session_id: handoff.provider_session_id.as_deref().map(Cow::Borrowed),
            body_generation: i64::from(handoff.body_generation),
            reason: Cow::Borrowed(&handoff.reason),
            environment: Cow::Owned(to_json(&handoff.environment)?),
            attach_argv: Cow::Owned(to_json(&handoff.attach_argv)?),
            status: Cow::Borrowed(handoff.status.as_str()),
            outcome_text: handoff.outcome.as_ref().map(|o| Cow::Borrowed(o.text())),
            created_at: to_unix_micros(handoff.created_at),
            updated_at: to_unix_micros(handoff.updated_at),
            attached_at: handoff.attached_at.map(to_unix_micros),
            terminal_at: handoff.terminal_at.map(to_unix_micros),
            wake_claimed_at: handoff.wake_claimed_at.map(to_unix_micros),
            wake_claimed_by_generation: handoff.wake_claimed_by_generation.map(i64::from),
            step: handoff
                .step
                .as_ref()
                .map(|step| Cow::Borrowed(step.as_str())),
            expires_at: handoff.expires_at.map(to_unix_micros),
            // An insert's value: the `opened` event is the first. A
            // transition does not bind it; its UPDATE increments it.
            events: 1,
            choices: optional_json(handoff.choices.as_ref())?,
            form: optional_json(handoff.form.as_ref())?,
            on_expiry: optional_json(handoff.on_expiry.as_ref())?,
            answer: optional_json(handoff.answer.as_ref())?,
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
                InteractiveHandoffOutcome::from_parts(status, text.into_owned())
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
        let choices = parse_optional(self.choices.as_deref(), "choices").map_err(&damaged)?;
        let form = parse_optional(self.form.as_deref(), "form").map_err(&damaged)?;
        let on_expiry = parse_optional(self.on_expiry.as_deref(), "on_expiry").map_err(&damaged)?;
        let answer = parse_optional(self.answer.as_deref(), "answer").map_err(&damaged)?;
        let handoff = InteractiveHandoff {
            id: InteractiveHandoffId::parse(&self.id).map_err(|e| damaged(e.to_string()))?,
            parent,
            wave_id: WaveId::parse(&self.wave_id).map_err(|e| damaged(e.to_string()))?,
            home: WaveHome::parse(&self.home).map_err(|e| damaged(e.to_string()))?,
            cwd: PathBuf::from(self.cwd.into_owned()),
            provider: self.provider.into_owned(),
            provider_session_id: self.provider_session_id.map(Cow::into_owned),
            body_generation: generation(self.body_generation)?,
            reason: self.reason.into_owned(),
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
            step: self
                .step
                .as_deref()
                .map(StepKey::parse)
                .transpose()
                .map_err(|e| damaged(format!("step: {e}")))?,
            expires_at: optional_time(self.expires_at)?,
            choices,
            form,
            on_expiry,
            answer,
        };
        handoff.validate().map_err(|violation| {
            StoreError::damaged(format!(
                "stored {violation}; the store may be damaged and was left unchanged"
            ))
        })?;
        Ok(handoff)
    }
}

/// `value` as JSON text, when there is one (C26's columns).
fn optional_json<T: serde::Serialize>(value: Option<&T>) -> StoreResult<Option<Cow<'static, str>>> {
    value
        .map(|value| to_json(value).map(Cow::Owned))
        .transpose()
}

/// The JSON text of column `name`, parsed, when the column is not NULL.
fn parse_optional<T: serde::de::DeserializeOwned>(
    text: Option<&str>,
    name: &str,
) -> Result<Option<T>, String> {
    text.map(|text| serde_json::from_str(text).map_err(|e| format!("{name}: {e}")))
        .transpose()
}

/// `value` as JSON text.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::InvalidInput(format!("cannot encode record: {e}")))
}

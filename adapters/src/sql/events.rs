//! History events (C15) in column form: the values a write binds for its
//! event, and the strict reading of a stored event row.

use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffChange, HandoffEvent, HandoffEventKind, InteractiveHandoffStatus,
};
use lf_handoff_domain::timestamp::{from_unix_micros, to_unix_micros};

use crate::sql::driver::Param;
use crate::sql::statements::EVENT_PARAMS;

/// One `handoff_events` row, as [`HISTORY`](crate::sql::statements::HISTORY)
/// returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // Each field is the column of the same name.
pub(crate) struct EventRow {
    pub position: i64,
    pub handoff_id: String,
    pub seq: i64,
    pub at: i64,
    pub kind: String,
    pub status_before: Option<String>,
    pub status_after: String,
    pub actor: String,
    pub detail: Option<String>,
    pub answer: Option<String>,
}

/// An event's own values in bind order (`at`, `kind`, `status_before`,
/// `status_after`, `actor`, `detail`, `answer`), after the handoff's.
/// `answer` is the JSON of the record's answer (its `answer` column); the
/// event carries it when the change recorded one (a finish, an expiry).
pub fn event_values<'a>(
    change: &'a HandoffChange,
    actor: &'a Actor,
    answer: Option<&'a str>,
) -> [Param<'a>; EVENT_PARAMS] {
    [
        Param::Int(to_unix_micros(change.at)),
        Param::Text(change.kind.as_str()),
        Param::OptText(change.status_before.map(InteractiveHandoffStatus::as_str)),
        Param::Text(change.status_after.as_str()),
        Param::Text(actor.as_str()),
        Param::OptText(change.detail.as_deref()),
        Param::OptText(change.answer.as_ref().and(answer)),
    ]
}

impl EventRow {
    /// The event this row holds, checked field by field.
    ///
    /// # Errors
    /// `Unavailable` (damaged) naming the event and what is wrong with it.
    pub(crate) fn into_domain(self) -> StoreResult<HandoffEvent> {
        let (id, position) = (self.handoff_id.clone(), self.position);
        let damaged = |detail: String| {
            StoreError::damaged(format!(
                "stored event {position} of handoff {id} is unreadable ({detail}); the store \
                 may be damaged and was left unchanged"
            ))
        };
        let status = |text: &str| {
            InteractiveHandoffStatus::parse(text)
                .ok_or_else(|| damaged(format!("unknown status {text:?}")))
        };
        let count = |name: &str, value: i64| {
            u64::try_from(value)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| damaged(format!("{name} {value} is not positive")))
        };
        Ok(HandoffEvent {
            position: count("position", self.position)?,
            handoff_id: InteractiveHandoffId::parse(&self.handoff_id)
                .map_err(|e| damaged(e.to_string()))?,
            seq: count("seq", self.seq)?,
            at: from_unix_micros(self.at)
                .ok_or_else(|| damaged(format!("timestamp {} out of range", self.at)))?,
            kind: HandoffEventKind::parse(&self.kind)
                .ok_or_else(|| damaged(format!("unknown event kind {:?}", self.kind)))?,
            status_before: self.status_before.as_deref().map(status).transpose()?,
            status_after: status(&self.status_after)?,
            actor: Actor::parse(&self.actor).map_err(|e| damaged(format!("actor: {e}")))?,
            detail: self.detail,
            answer: self
                .answer
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(|e| damaged(format!("answer: {e}")))?,
        })
    }
}

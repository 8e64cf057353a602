//! What a tool answers: a handoff as the model reads it (a sentence, and
//! the same facts as structured content), or a tool error carrying the
//! error object's kind.

use lf_handoff_api::ErrorResponse;
use lf_handoff_application::StoreError;
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, InteractiveHandoffStatus};
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;

use crate::shape::answer_of;

/// Where a question stands, for the model.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Question {
    /// `answered` (a person finished it: completed, handed back or
    /// failed), `expired` (its deadline passed first) or `waiting` (no
    /// answer yet; `await_answer` waits again).
    pub state: &'static str,
    /// The handoff's id, for `await_answer` and `get_handoff`.
    pub id: String,
    /// The registry's status: waiting, attached, completed, handed_back,
    /// failed or expired.
    pub status: InteractiveHandoffStatus,
    /// The question as stored.
    pub question: String,
    /// The person's summary (completed, handed back) or reason (failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The answer of a question with choices or a form (C26).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    /// The step key it was asked at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Its deadline (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Where a person sees and answers it, when the server knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Whether this call asked it (`false`: the same question, or the same
    /// step, was asked before and this is that handoff). Only from
    /// `ask_person`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
}

impl Question {
    /// `handoff` as the model reads it, with its inbox link when `inbox`
    /// is known.
    pub fn of(handoff: &InteractiveHandoff, inbox: Option<&str>) -> Self {
        let state = match handoff.status {
            InteractiveHandoffStatus::Expired => "expired",
            status if status.is_terminal() => "answered",
            _ => "waiting",
        };
        let text = handoff
            .outcome
            .as_ref()
            .map(|outcome| outcome.text().to_string())
            .filter(|text| !text.is_empty());
        Self {
            state,
            id: handoff.id.to_string(),
            status: handoff.status,
            question: handoff.reason.clone(),
            text,
            answer: answer_of(handoff),
            step: handoff.step.as_ref().map(|step| step.as_str().to_string()),
            expires_at: handoff.expires_at.and_then(|at| at.format(&Rfc3339).ok()),
            link: inbox.map(|base| format!("{}/inbox/{}", base.trim_end_matches('/'), handoff.id)),
            created: None,
        }
    }

    /// The sentence the model reads first.
    pub fn sentence(&self) -> String {
        let id = &self.id;
        let said = |what: &str| match (&self.answer, &self.text) {
            (Some(answer), Some(text)) => format!("{what}: {answer}; they wrote: {text}"),
            (Some(answer), None) => format!("{what}: {answer}"),
            (None, Some(text)) => format!("{what}: {text}"),
            (None, None) => what.to_string(),
        };
        match self.status {
            InteractiveHandoffStatus::Completed => said("The person answered"),
            InteractiveHandoffStatus::HandedBack => said("The person handed the work back to you"),
            InteractiveHandoffStatus::Failed => said("The person declined or could not do it"),
            InteractiveHandoffStatus::Expired => {
                said("Nobody answered before the question's deadline; it expired")
            }
            InteractiveHandoffStatus::Waiting | InteractiveHandoffStatus::Attached => {
                let seen = if self.status == InteractiveHandoffStatus::Attached {
                    "a person has opened it but not answered yet"
                } else {
                    "nobody has answered yet"
                };
                let place = self.link.as_ref().map_or_else(
                    || format!("at a terminal (lf-handoff complete {id} --summary ...)"),
                    |link| format!("at {link}"),
                );
                format!(
                    "The question {id} is still waiting: {seen}. It stays open; a person can answer \
                     it {place}. Call await_answer with id {id} to wait for the answer again, and \
                     go on with other work meanwhile if you can."
                )
            }
        }
    }

    /// The tool's result: the sentence, and these facts as structured
    /// content.
    pub fn result(&self) -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text(self.sentence())]);
        result.structured_content = serde_json::to_value(self).ok();
        result
    }
}

/// A tool error: the error object's message for the model to read, and
/// the object itself (`{"error": {"kind", "category", "code", "message"}}`)
/// as structured content.
pub(crate) fn tool_error(error: &StoreError) -> CallToolResult {
    let object = ErrorResponse::from_store(error);
    let text = format!("{} ({})", object.error.message, object.error.kind);
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = serde_json::to_value(&object).ok();
    result
}

/// The result of `list_waiting`: one line per question, and the list.
pub(crate) fn listed(questions: &[Question]) -> CallToolResult {
    let text = if questions.is_empty() {
        "No question of yours is waiting for a person.".to_string()
    } else {
        let mut text = format!("{} question(s) waiting for a person:", questions.len());
        for question in questions {
            text.push_str(&format!(
                "\n- {} ({}): {}",
                question.id, question.status, question.question
            ));
        }
        text
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(serde_json::json!({ "waiting": questions }));
    result
}

//! A question's shape (C26): the choices or the form `ask_person` takes,
//! turned into the open request, and the answer read back from a finished
//! handoff. The one place that knows how the registry holds them.

use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, OpenInteractiveHandoff};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One option of a question with choices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChoiceArg {
    /// What the answer carries when the person picks this option: 1 to 64
    /// characters of letters, digits and `.`, `_`, `:`, `@`, `-` (e.g.
    /// `allow`, `option-a`).
    pub value: String,
    /// What the person reads on the button (e.g. `Allow`, `Deploy to
    /// staging`).
    pub label: String,
}

/// Puts the shape of the question on `request`: `choices` (2 to 10) or a
/// `form` (a flat JSON Schema object), not both. The registry checks them
/// in full when the handoff is opened.
///
/// # Errors
/// `InvalidInput` when both are given.
pub(crate) fn apply(
    request: &mut OpenInteractiveHandoff,
    choices: Option<Vec<ChoiceArg>>,
    form: Option<Map<String, Value>>,
) -> StoreResult<()> {
    match (choices, form) {
        (Some(_), Some(_)) => Err(StoreError::InvalidInput(
            "give `choices` or `form`, not both".to_string(),
        )),
        // Until the registry holds shapes (C26), the person reads them in
        // the question and answers in the summary.
        (Some(choices), None) => {
            let listed: Vec<String> = choices
                .iter()
                .map(|choice| format!("{} ({})", choice.value, choice.label))
                .collect();
            request.reason = format!("{} [choose one of: {}]", request.reason, listed.join(", "));
            Ok(())
        }
        (None, Some(form)) => {
            request.reason = format!(
                "{} [answer the form: {}]",
                request.reason,
                Value::Object(form)
            );
            Ok(())
        }
        (None, None) => Ok(()),
    }
}

/// The person's structured answer (C26), when the handoff carries one.
pub(crate) fn answer_of(_handoff: &InteractiveHandoff) -> Option<Value> {
    None
}

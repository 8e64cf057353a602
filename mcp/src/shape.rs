//! A question's shape (C26): the choices or the form `ask_person` takes,
//! turned into the open request, and the answer read back from a finished
//! handoff. The one place that knows how the registry holds them.

use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::interactive_handoff::{
    Answer, Choice, FormSpec, InteractiveHandoff, OpenInteractiveHandoff,
};
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
/// `form` (a flat JSON Schema object), not both, and the answer it ends
/// with at its deadline. The registry checks them in full when the
/// handoff is opened.
///
/// # Errors
/// `InvalidInput` when both are given, or the form is not the subset of
/// JSON Schema a form is (naming what is outside it).
pub(crate) fn apply(
    request: &mut OpenInteractiveHandoff,
    choices: Option<Vec<ChoiceArg>>,
    form: Option<Map<String, Value>>,
    on_expiry: Option<Value>,
) -> StoreResult<()> {
    if choices.is_some() && form.is_some() {
        return Err(StoreError::InvalidInput(
            "give `choices` or `form`, not both".to_string(),
        ));
    }
    request.options.choices = choices.map(|choices| {
        choices
            .into_iter()
            .map(|choice| Choice::new(choice.value, choice.label))
            .collect()
    });
    request.options.form = form
        .map(|form| serde_json::from_value::<FormSpec>(Value::Object(form)))
        .transpose()
        .map_err(|error| StoreError::InvalidInput(format!("form: {error}")))?;
    request.options.on_expiry = on_expiry.map(Answer);
    Ok(())
}

/// The answer a handoff ended with (C26): the person's, or its
/// `on_expiry` answer at the deadline.
pub(crate) fn answer_of(handoff: &InteractiveHandoff) -> Option<Value> {
    handoff
        .answer
        .as_ref()
        .map(|answer| answer.as_value().clone())
}

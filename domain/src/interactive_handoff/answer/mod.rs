//! A question with a shape (contract C26): the answer spec an open may
//! carry, the answer a finish may carry, and the one checker of both.
//!
//! A spec is either a list of [`Choice`]s (2 to [`MAX_CHOICES`], each a
//! value and a label) or a [`FormSpec`], a flat JSON Schema object (the
//! subset the Model Context Protocol's elicitation allows). An [`Answer`]
//! is a JSON value: a choice's value (a string) for choices, an object of
//! the form's fields for a form. [`AnswerSpec::check`] says whether an
//! answer fits, naming the field and the rule when it does not
//! ([`AnswerRefusal`]); nothing else in the product decides it.
//!
//! The checker never rewrites an answer (no defaults filled in, no
//! numbers reformatted): an answer it accepts is stored and returned
//! exactly as given.

mod form;

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{DomainError, DomainResult};

pub use form::{FieldKind, FormField, FormSpec};

/// The fewest choices a spec may offer.
pub const MIN_CHOICES: usize = 2;
/// The most choices a spec may offer.
pub const MAX_CHOICES: usize = 10;
/// The longest choice value, in bytes.
pub const MAX_CHOICE_VALUE_BYTES: usize = 64;
/// The longest label, title or field name, in bytes.
pub const MAX_LABEL_BYTES: usize = 200;
/// The longest description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 2000;
/// The most properties a form may have.
pub const MAX_FORM_PROPERTIES: usize = 20;
/// The most values a form field's `enum` may list.
pub const MAX_ENUM_VALUES: usize = 50;
/// The largest answer, as compact JSON, in bytes.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// One choice: the `value` an answer carries and the `label` a person sees.
/// `value` is 1 to [`MAX_CHOICE_VALUE_BYTES`] of `A-Z a-z 0-9 . _ : @ -`
/// (so it is one word on a command line and in a link); the label is any
/// text that is not blank. In JSON a bare string `"allow"` is a choice
/// whose label is its value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(from = "ChoiceForm")]
pub struct Choice {
    /// What an answer carries.
    pub value: String,
    /// What a person sees.
    pub label: String,
}

/// The two JSON forms of a choice.
#[derive(Deserialize)]
#[serde(untagged)]
enum ChoiceForm {
    Bare(String),
    Full {
        value: String,
        #[serde(default)]
        label: Option<String>,
    },
}

impl From<ChoiceForm> for Choice {
    fn from(form: ChoiceForm) -> Self {
        match form {
            ChoiceForm::Bare(value) => Self {
                label: value.clone(),
                value,
            },
            ChoiceForm::Full { value, label } => Self {
                label: label.unwrap_or_else(|| value.clone()),
                value,
            },
        }
    }
}

impl Choice {
    /// A choice with `value` and `label`.
    pub fn new(value: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            label: label.into(),
        }
    }

    /// Parses the command line's `value` or `value=Label`.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for a value or label that breaks the
    /// rules of [`Choice`].
    pub fn parse(text: &str) -> DomainResult<Self> {
        let choice = match text.split_once('=') {
            Some((value, label)) => Self::new(value, label),
            None => Self::new(text, text),
        };
        choice.check().map_err(DomainError::from)?;
        Ok(choice)
    }

    fn check(&self) -> Result<(), AnswerRefusal> {
        let value = &self.value;
        let spec = |rule: String| AnswerRefusal::spec(None, rule);
        if value.is_empty() || value.len() > MAX_CHOICE_VALUE_BYTES {
            return Err(spec(format!(
                "choice value {value:?} must be 1 to {MAX_CHOICE_VALUE_BYTES} bytes"
            )));
        }
        if let Some(c) = value.chars().find(|c| !is_value_char(*c)) {
            return Err(spec(format!(
                "choice value {value:?} holds {c:?}: use letters, digits and . _ : @ -"
            )));
        }
        check_label(&format!("label of choice {value:?}"), &self.label).map_err(spec)
    }
}

fn is_value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '@' | '-')
}

/// A label, title or field name: not blank, no control character, at
/// most [`MAX_LABEL_BYTES`].
fn check_label(what: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err(format!("{what} must not be blank"));
    }
    check_prose(what, text, MAX_LABEL_BYTES)
}

/// Text a person reads: no control character but newline and tab, at
/// most `limit` bytes.
fn check_prose(what: &str, text: &str, limit: usize) -> Result<(), String> {
    if text.len() > limit {
        return Err(format!(
            "{what} is {} bytes long; the limit is {limit}",
            text.len()
        ));
    }
    if let Some(c) = text
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    {
        return Err(format!(
            "{what} must not contain control characters ({c:?})"
        ));
    }
    Ok(())
}

/// What a handoff asks for: choices or a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerSpec<'a> {
    /// One of these values.
    Choices(&'a [Choice]),
    /// An object of this form's fields.
    Form(&'a FormSpec),
}

impl<'a> AnswerSpec<'a> {
    /// The spec of a request's or a record's `choices` and `form`.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] when both are given.
    pub fn of(
        choices: Option<&'a Vec<Choice>>,
        form: Option<&'a FormSpec>,
    ) -> DomainResult<Option<Self>> {
        match (choices, form) {
            (Some(_), Some(_)) => Err(DomainError::invalid(
                "a handoff asks with choices or with a form, not both",
            )),
            (Some(choices), None) => Ok(Some(Self::Choices(choices))),
            (None, Some(form)) => Ok(Some(Self::Form(form))),
            (None, None) => Ok(None),
        }
    }

    /// Checks the spec itself against C26's rules.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] naming the rule broken.
    pub fn check_spec(self) -> DomainResult<()> {
        match self {
            Self::Choices(choices) => {
                if choices.len() < MIN_CHOICES || choices.len() > MAX_CHOICES {
                    return Err(DomainError::invalid(format!(
                        "choices: give {MIN_CHOICES} to {MAX_CHOICES}, not {}",
                        choices.len()
                    )));
                }
                let mut values = BTreeSet::new();
                for choice in choices {
                    choice.check().map_err(DomainError::from)?;
                    if !values.insert(choice.value.as_str()) {
                        return Err(DomainError::invalid(format!(
                            "choices: value {:?} is given twice",
                            choice.value
                        )));
                    }
                }
                Ok(())
            }
            Self::Form(form) => form
                .check_spec()
                .map_err(|rule| DomainError::invalid(format!("form: {rule}"))),
        }
    }

    /// Checks `answer` against this spec: a choice's value, or an object
    /// of the form's fields that keeps every rule; and its size.
    ///
    /// # Errors
    /// [`AnswerRefusal`] naming the field (when one is at fault) and the rule.
    pub fn check(self, answer: &Answer) -> Result<(), AnswerRefusal> {
        answer.check_size()?;
        match self {
            Self::Choices(choices) => match &answer.0 {
                Value::String(value) if choices.iter().any(|c| c.value == *value) => Ok(()),
                other => Err(AnswerRefusal::whole(format!(
                    "{other} is not one of the choices ({})",
                    choices
                        .iter()
                        .map(|c| c.value.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            },
            Self::Form(form) => form.check_answer(&answer.0),
        }
    }

    /// Words for people: `allow | deny`, `form: budget, branch`.
    pub fn describe(self) -> String {
        match self {
            Self::Choices(choices) => choices
                .iter()
                .map(|c| c.value.as_str())
                .collect::<Vec<_>>()
                .join(" | "),
            Self::Form(form) => format!(
                "form: {}",
                form.fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// A person's answer (or a deadline's, `on_expiry`): a JSON value. For
/// choices it is the chosen value as a JSON string; for a form, an object
/// of field values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Answer(pub Value);

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Answer {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{Object, SchemaType, Type};
        // A string or an object, never null: an optional answer's
        // `oneOf` of null and this one must have one branch per value.
        Object::builder()
            .schema_type(SchemaType::from_iter([Type::String, Type::Object]))
            .description(Some(
                "An answer (C26): the chosen value (a string) for choices, an object of \
                 the form's fields for a form.",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Answer {}

impl Answer {
    /// The answer that picks choice `value`.
    pub fn choice(value: impl Into<String>) -> Self {
        Self(Value::String(value.into()))
    }

    /// The chosen value, when the answer is a string.
    pub fn as_choice(&self) -> Option<&str> {
        self.0.as_str()
    }

    /// The JSON value.
    pub fn as_value(&self) -> &Value {
        &self.0
    }

    /// Parses an answer written as JSON.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] when `text` is not JSON.
    pub fn parse_json(text: &str) -> DomainResult<Self> {
        serde_json::from_str(text)
            .map(Self)
            .map_err(|e| DomainError::invalid(format!("answer is not JSON: {e}")))
    }

    /// The summary of a completion that gives this answer and no words of
    /// its own: `answered` and the answer (a choice's value, or compact
    /// JSON cut to 200 characters). `lf-handoff answer` without
    /// `--summary` records it, and the agents' hooks read a summary equal
    /// to it as no message from the person.
    pub fn default_summary(&self) -> String {
        let text = self.to_string();
        match text.char_indices().nth(200) {
            Some((at, _)) => format!("answered {}...", &text[..at]),
            None => format!("answered {text}"),
        }
    }

    /// Compact JSON text.
    pub fn to_json(&self) -> String {
        self.0.to_string()
    }

    fn check_size(&self) -> Result<(), AnswerRefusal> {
        let bytes = self.to_json().len();
        if bytes > MAX_ANSWER_BYTES {
            return Err(AnswerRefusal::whole(format!(
                "is {bytes} bytes of JSON; the limit is {MAX_ANSWER_BYTES}"
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Answer {
    /// A choice as its value, anything else as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Value::String(text) => f.write_str(text),
            other => write!(f, "{other}"),
        }
    }
}

/// Why an answer (or a spec) was refused: the field at fault, when one is,
/// and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerRefusal {
    /// The form field at fault; `None` for the answer as a whole.
    pub field: Option<String>,
    /// The rule, in words.
    pub rule: String,
    /// Whether the spec (not an answer) is at fault.
    spec: bool,
}

impl AnswerRefusal {
    fn field(name: &str, rule: String) -> Self {
        Self {
            field: Some(name.to_string()),
            rule,
            spec: false,
        }
    }

    fn whole(rule: String) -> Self {
        Self {
            field: None,
            rule,
            spec: false,
        }
    }

    fn spec(field: Option<String>, rule: String) -> Self {
        Self {
            field,
            rule,
            spec: true,
        }
    }
}

impl fmt::Display for AnswerRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.field, self.spec) {
            (_, true) => f.write_str(&self.rule),
            (Some(field), false) => write!(f, "answer field {field:?} {}", self.rule),
            (None, false) => write!(f, "answer {}", self.rule),
        }
    }
}

impl From<AnswerRefusal> for DomainError {
    fn from(refusal: AnswerRefusal) -> Self {
        DomainError::invalid(refusal.to_string())
    }
}

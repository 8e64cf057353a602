//! Answers on the person's pages (C26): what a handoff asks for, shown as
//! one button per choice or as the form's typed inputs; the answer a
//! posted form makes; and the answer a handoff ended with, as shown.
//!
//! Everything here is text for the templates, which escape it: a label,
//! a title, a description or an `enum` value an agent typed is never
//! markup.

use lf_handoff_domain::interactive_handoff::{
    Answer, AnswerRefusal, AnswerSpec, Choice, FieldKind, FormField, FormSpec, InteractiveHandoff,
};
use serde_json::Value;

use super::forms::Form;

/// What a form field's input is named: `f.NAME`, so no field of an
/// agent's form clashes with the page's own (`csrf`, `action`, `text`).
pub(super) const FIELD_PREFIX: &str = "f.";

/// One button of a handoff that asks with choices.
#[derive(Debug)]
pub(super) struct ChoiceButton {
    pub(super) value: String,
    pub(super) label: String,
}

/// One value of a select.
#[derive(Debug)]
pub(super) struct OptionView {
    pub(super) value: String,
    pub(super) selected: bool,
}

/// One field of a form, as an input.
#[derive(Debug)]
pub(super) struct FieldView {
    /// The input's name (`f.NAME`) and its element id (`field-NAME`).
    pub(super) input: String,
    pub(super) id: String,
    pub(super) label: String,
    pub(super) help: Option<String>,
    pub(super) required: bool,
    /// `text`, `number`, `checkbox` or `select`.
    pub(super) control: &'static str,
    /// What the input holds: the person's text after a refusal, else the
    /// field's default.
    pub(super) value: String,
    pub(super) checked: bool,
    pub(super) options: Vec<OptionView>,
    pub(super) min: Option<String>,
    pub(super) max: Option<String>,
    pub(super) step: Option<&'static str>,
    pub(super) minlength: Option<u64>,
    pub(super) maxlength: Option<u64>,
    /// Why the person's value was refused, beside the field.
    pub(super) error: Option<String>,
}

/// What an active handoff asks for.
#[derive(Debug)]
pub(super) struct AsksView {
    pub(super) heading: String,
    pub(super) description: Option<String>,
    /// The buttons, when it asks with choices (a one-tap link's page: its
    /// choice alone).
    pub(super) choices: Vec<ChoiceButton>,
    /// The inputs, when it asks with a form.
    pub(super) fields: Vec<FieldView>,
}

/// What a finished handoff was answered with: `(what, value)` pairs.
#[derive(Debug)]
pub(super) struct AnswerView {
    pub(super) lines: Vec<(String, String)>,
}

/// What the person sent that was refused: their values, kept, and the
/// refusal to show beside its field.
#[derive(Debug, Default)]
pub(super) struct Sent<'a> {
    pub(super) form: Option<&'a Form>,
    pub(super) refusal: Option<AnswerRefusal>,
}

/// What `handoff` asks for, when it is active and asks; on a one-tap
/// link's page (`only`) the one choice to confirm.
pub(super) fn asks(
    handoff: &InteractiveHandoff,
    only: Option<&str>,
    sent: &Sent<'_>,
) -> Option<AsksView> {
    if !handoff.is_active() {
        return None;
    }
    match handoff.answer_spec().ok()?? {
        AnswerSpec::Choices(choices) => {
            let buttons: Vec<ChoiceButton> = choices
                .iter()
                .filter(|choice| only.is_none_or(|only| only == choice.value))
                .map(|Choice { value, label }| ChoiceButton {
                    value: value.clone(),
                    label: label.clone(),
                })
                .collect();
            let heading = match (only, buttons.first()) {
                (Some(_), Some(button)) => format!("Confirm your answer: {}", button.label),
                _ => "Choose an answer".to_string(),
            };
            Some(AsksView {
                heading,
                description: None,
                choices: buttons,
                fields: Vec::new(),
            })
        }
        AnswerSpec::Form(form) => Some(AsksView {
            heading: form
                .title
                .clone()
                .unwrap_or_else(|| "Fill in the answer".to_string()),
            description: form.description.clone(),
            choices: Vec::new(),
            fields: form
                .fields
                .iter()
                .map(|field| field_view(form, field, sent))
                .collect(),
        }),
    }
}

fn field_view(form: &FormSpec, field: &FormField, sent: &Sent<'_>) -> FieldView {
    let input = format!("{FIELD_PREFIX}{}", field.name);
    let typed = sent.form.map(|form| form.get(&input));
    let default = field.default.as_ref().map(plain).unwrap_or_default();
    let value = match typed {
        Some(typed) => typed.unwrap_or_default().to_string(),
        None => default,
    };
    let checked = match typed {
        Some(typed) => typed.is_some(),
        None => field.default == Some(Value::Bool(true)),
    };
    let control = match (field.kind, &field.allowed) {
        (FieldKind::Boolean, _) => "checkbox",
        (_, Some(_)) => "select",
        (FieldKind::Integer | FieldKind::Number, None) => "number",
        (FieldKind::String, None) => "text",
    };
    let options = field
        .allowed
        .iter()
        .flatten()
        .map(|allowed| {
            let text = plain(allowed);
            OptionView {
                selected: text == value,
                value: text,
            }
        })
        .collect();
    FieldView {
        id: format!("field-{}", field.name),
        label: field.display_title().to_string(),
        help: field.description.clone(),
        required: form.is_required(&field.name),
        control,
        value,
        checked,
        options,
        min: field.minimum.as_ref().map(ToString::to_string),
        max: field.maximum.as_ref().map(ToString::to_string),
        step: match field.kind {
            FieldKind::Integer => Some("1"),
            FieldKind::Number => Some("any"),
            _ => None,
        },
        minlength: field.min_length,
        maxlength: field.max_length,
        error: sent
            .refusal
            .as_ref()
            .filter(|refusal| refusal.field.as_deref() == Some(field.name.as_str()))
            .map(|refusal| refusal.rule.clone()),
        input,
    }
}

/// A JSON scalar as a person types it: a string without its quotes.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The answer a page's form makes for `handoff`: the chosen `choice`, or
/// the form's inputs typed by their fields (an unchecked checkbox is
/// false; an empty input of a field that is not required is left out);
/// checked against the spec, so a refusal names its field. `None` when
/// the handoff asks for no answer.
///
/// # Errors
/// [`AnswerRefusal`] naming the field (`None` for a choice not among
/// them) and the rule.
pub(super) fn answer_of(
    handoff: &InteractiveHandoff,
    form: &Form,
) -> Result<Option<Answer>, AnswerRefusal> {
    let Some(spec) = handoff.answer_spec().ok().flatten() else {
        return Ok(None);
    };
    let answer = match spec {
        AnswerSpec::Choices(_) => Answer::choice(form.get("choice").unwrap_or_default()),
        AnswerSpec::Form(spec) => {
            let mut texts: Vec<(&str, &str)> = Vec::new();
            for field in &spec.fields {
                let typed = form.get(&format!("{FIELD_PREFIX}{}", field.name));
                let text = match (field.kind, typed) {
                    (FieldKind::Boolean, Some(_)) => "true",
                    (FieldKind::Boolean, None) => "false",
                    (_, None) => continue,
                    (_, Some("")) if !spec.is_required(&field.name) => continue,
                    (_, Some(text)) => text,
                };
                texts.push((field.name.as_str(), text));
            }
            spec.answer_from_texts(texts)?
        }
    };
    spec.check(&answer)?;
    Ok(Some(answer))
}

/// The summary a page's answer is recorded with when the person wrote
/// none: the chosen label, or that the form was filled in.
pub(super) fn summary_of(handoff: &InteractiveHandoff, answer: &Answer) -> String {
    match (&handoff.choices, answer.as_choice()) {
        (Some(choices), Some(value)) => {
            let label = choices
                .iter()
                .find(|choice| choice.value == value)
                .map_or(value, |choice| choice.label.as_str());
            format!("Chose {label}")
        }
        _ => "Answered the form".to_string(),
    }
}

/// The answer `handoff` ended with, as lines: a choice's label and value,
/// or each field of a form by its title.
pub(super) fn answer_view(handoff: &InteractiveHandoff) -> Option<AnswerView> {
    let answer = handoff.answer.as_ref()?;
    let lines = match (answer.as_value(), &handoff.choices, &handoff.form) {
        (Value::String(value), Some(choices), _) => {
            let label = choices
                .iter()
                .find(|choice| choice.value == *value)
                .map_or(value.as_str(), |choice| choice.label.as_str());
            vec![("Choice".to_string(), format!("{label} ({value})"))]
        }
        (Value::Object(object), _, Some(form)) => object
            .iter()
            .map(|(name, value)| {
                let title = form
                    .field(name)
                    .map_or(name.as_str(), FormField::display_title);
                let shown = match value {
                    Value::Bool(true) => "yes".to_string(),
                    Value::Bool(false) => "no".to_string(),
                    other => plain(other),
                };
                (title.to_string(), shown)
            })
            .collect(),
        _ => vec![("Answer".to_string(), answer.to_json())],
    };
    Some(AnswerView { lines })
}

/// A row's word on the answer: what an active handoff asks for, or what
/// a finished one was answered with (cut to a line).
pub(super) fn row_answer(handoff: &InteractiveHandoff) -> Option<String> {
    let text = match (&handoff.answer, handoff.answer_spec().ok().flatten()) {
        (Some(answer), _) => format!("answer: {answer}"),
        (None, Some(spec)) if handoff.is_active() => format!("asks: {}", spec.describe()),
        _ => return None,
    };
    let mut short: String = text.chars().take(80).collect();
    if text.chars().count() > 80 {
        short.push('…');
    }
    Some(short)
}

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

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

use crate::error::{DomainError, DomainResult};

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

/// The type of a form field: JSON Schema's four scalar types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// `"type": "string"`.
    String,
    /// `"type": "integer"`: a whole number.
    Integer,
    /// `"type": "number"`.
    Number,
    /// `"type": "boolean"`.
    Boolean,
}

impl FieldKind {
    /// The JSON Schema name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::String, Self::Integer, Self::Number, Self::Boolean]
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }

    /// Whether `value` is of this type (an integer may be written `3.0`).
    fn admits(self, value: &Value) -> bool {
        match (self, value) {
            (Self::String, Value::String(_)) | (Self::Boolean, Value::Bool(_)) => true,
            (Self::Number, Value::Number(_)) => true,
            (Self::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        }
    }

    /// What a value of the wrong type is called in a message.
    fn describe(value: &Value) -> &'static str {
        match value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

/// One property of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormField {
    /// The property's name: the key in the answer.
    pub name: String,
    /// Its type.
    pub kind: FieldKind,
    /// A short title a person sees (the name when absent).
    pub title: Option<String>,
    /// Help text.
    pub description: Option<String>,
    /// The value a form starts with; it must fit the field.
    pub default: Option<Value>,
    /// The only values allowed (`enum`), each of the field's type.
    pub allowed: Option<Vec<Value>>,
    /// Strings: the fewest characters.
    pub min_length: Option<u64>,
    /// Strings: the most characters.
    pub max_length: Option<u64>,
    /// Numbers: the smallest value.
    pub minimum: Option<Number>,
    /// Numbers: the largest value.
    pub maximum: Option<Number>,
}

impl FormField {
    /// What a person sees as the field's name.
    pub fn display_title(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// Checks `value` against this field's type and rules.
    fn check_value(&self, value: &Value) -> Result<(), AnswerRefusal> {
        let refuse = |rule: String| Err(AnswerRefusal::field(&self.name, rule));
        if !self.kind.admits(value) {
            return refuse(format!(
                "must be {} {}, not {}",
                if self.kind == FieldKind::Integer {
                    "an"
                } else {
                    "a"
                },
                self.kind.as_str(),
                FieldKind::describe(value)
            ));
        }
        if let Some(allowed) = &self.allowed {
            if !allowed.iter().any(|one| same_value(one, value)) {
                return refuse(format!(
                    "{value} is not one of the allowed values ({})",
                    join_values(allowed)
                ));
            }
        }
        if let Value::String(text) = value {
            if text.contains('\0') {
                return refuse("must not contain a NUL byte".into());
            }
            let chars = text.chars().count() as u64;
            if let Some(min) = self.min_length.filter(|min| chars < *min) {
                return refuse(format!("has {chars} characters; minLength is {min}"));
            }
            if let Some(max) = self.max_length.filter(|max| chars > *max) {
                return refuse(format!("has {chars} characters; maxLength is {max}"));
            }
        }
        if let Value::Number(number) = value {
            let x = number.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = self.minimum.as_ref().filter(|min| x < as_f64(min)) {
                return refuse(format!("{number} is below its minimum {min}"));
            }
            if let Some(max) = self.maximum.as_ref().filter(|max| x > as_f64(max)) {
                return refuse(format!("{number} is above its maximum {max}"));
            }
        }
        Ok(())
    }

    /// The value a person typed for this field, typed by the field:
    /// `true`/`false` (also `yes`/`no`, `on`/`off`) for a boolean, a
    /// number for a number or integer, the text itself for a string.
    ///
    /// # Errors
    /// [`AnswerRefusal`] naming the field when the text is not of its type.
    pub fn parse_text(&self, text: &str) -> Result<Value, AnswerRefusal> {
        let refuse = |rule: String| AnswerRefusal::field(&self.name, rule);
        match self.kind {
            FieldKind::String => Ok(Value::String(text.to_string())),
            FieldKind::Boolean => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Ok(Value::Bool(true)),
                "false" | "no" | "off" | "0" => Ok(Value::Bool(false)),
                _ => Err(refuse(format!("{text:?} is not true or false"))),
            },
            FieldKind::Integer => text
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| refuse(format!("{text:?} is not a whole number"))),
            FieldKind::Number => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(|n| {
                    // A whole number stays an integer in the answer.
                    match text.trim().parse::<i64>() {
                        Ok(whole) => Value::from(whole),
                        Err(_) => Value::Number(n),
                    }
                })
                .ok_or_else(|| refuse(format!("{text:?} is not a number"))),
        }
    }

    /// Checks the field's own rules (the spec, not an answer).
    fn check_spec(&self) -> Result<(), String> {
        let name = &self.name;
        if name.is_empty() || name.len() > 64 {
            return Err(format!("form property name {name:?} must be 1 to 64 bytes"));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(format!(
                "form property name {name:?} holds {c:?}: use letters, digits and _ - ."
            ));
        }
        let what = |key: &str| format!("property {name:?}: {key}");
        if let Some(title) = &self.title {
            check_label(&what("title"), title)?;
        }
        if let Some(description) = &self.description {
            check_prose(&what("description"), description, MAX_DESCRIPTION_BYTES)?;
        }
        let string = self.kind == FieldKind::String;
        let numeric = matches!(self.kind, FieldKind::Integer | FieldKind::Number);
        if !string && (self.min_length.is_some() || self.max_length.is_some()) {
            return Err(format!(
                "property {name:?}: minLength and maxLength apply to strings only, not {}",
                self.kind.as_str()
            ));
        }
        if !numeric && (self.minimum.is_some() || self.maximum.is_some()) {
            return Err(format!(
                "property {name:?}: minimum and maximum apply to numbers only, not {}",
                self.kind.as_str()
            ));
        }
        if let (Some(min), Some(max)) = (self.min_length, self.max_length) {
            if min > max {
                return Err(format!(
                    "property {name:?}: minLength {min} is above maxLength {max}"
                ));
            }
        }
        if let (Some(min), Some(max)) = (&self.minimum, &self.maximum) {
            if as_f64(min) > as_f64(max) {
                return Err(format!(
                    "property {name:?}: minimum {min} is above maximum {max}"
                ));
            }
        }
        if let Some(allowed) = &self.allowed {
            if allowed.is_empty() || allowed.len() > MAX_ENUM_VALUES {
                return Err(format!(
                    "property {name:?}: enum must list 1 to {MAX_ENUM_VALUES} values"
                ));
            }
            if self.kind == FieldKind::Boolean {
                return Err(format!(
                    "property {name:?}: enum applies to strings and numbers only"
                ));
            }
            let mut seen = Vec::new();
            for value in allowed {
                if !self.kind.admits(value) {
                    return Err(format!(
                        "property {name:?}: enum value {value} is not {}",
                        self.kind.as_str()
                    ));
                }
                if seen.iter().any(|one| same_value(one, value)) {
                    return Err(format!("property {name:?}: enum lists {value} twice"));
                }
                seen.push(value.clone());
            }
        }
        if let Some(default) = &self.default {
            self.check_value(default)
                .map_err(|refusal| format!("property {name:?}: default {}", refusal.rule))?;
        }
        Ok(())
    }
}

fn as_f64(number: &Number) -> f64 {
    number.as_f64().unwrap_or(f64::NAN)
}

/// Equal as JSON values, numbers by value (`3` equals `3.0`).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => as_f64(x) == as_f64(y),
        _ => a == b,
    }
}

fn join_values(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A form: a flat JSON Schema object (C26). In JSON it is written as JSON
/// Schema: `{"type": "object", "properties": {...}, "required": [...]}`,
/// properties in the order given. Reading refuses anything outside the
/// subset (nesting, another type, an unknown keyword) naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormSpec {
    /// The form's title.
    pub title: Option<String>,
    /// The form's help text.
    pub description: Option<String>,
    /// The properties, in order.
    pub fields: Vec<FormField>,
    /// The names of the fields an answer must have.
    pub required: Vec<String>,
}

impl FormSpec {
    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&FormField> {
        self.fields.iter().find(|field| field.name == name)
    }

    /// Whether field `name` is required.
    pub fn is_required(&self, name: &str) -> bool {
        self.required.iter().any(|one| one == name)
    }

    /// An answer from `NAME=VALUE` texts (the command line's `--set`, a
    /// page's form), each typed by its field. Later texts of a name replace
    /// earlier ones; an empty text of a field that is not required leaves
    /// it out. The answer is not checked against the rules here.
    ///
    /// # Errors
    /// [`AnswerRefusal`] for a name the form lacks or a text of the wrong
    /// type.
    pub fn answer_from_texts<'a>(
        &self,
        texts: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Answer, AnswerRefusal> {
        let mut object = Map::new();
        for (name, text) in texts {
            let Some(field) = self.field(name) else {
                return Err(AnswerRefusal::field(
                    name,
                    "is not a field of the form".into(),
                ));
            };
            if text.is_empty() && field.kind != FieldKind::String && !self.is_required(name) {
                object.remove(name);
                continue;
            }
            object.insert(name.to_string(), field.parse_text(text)?);
        }
        Ok(Answer(Value::Object(object)))
    }

    fn check_spec(&self) -> Result<(), String> {
        if self.fields.is_empty() || self.fields.len() > MAX_FORM_PROPERTIES {
            return Err(format!(
                "a form has 1 to {MAX_FORM_PROPERTIES} properties, not {}",
                self.fields.len()
            ));
        }
        if let Some(title) = &self.title {
            check_label("form title", title)?;
        }
        if let Some(description) = &self.description {
            check_prose("form description", description, MAX_DESCRIPTION_BYTES)?;
        }
        let mut names = BTreeSet::new();
        for field in &self.fields {
            if !names.insert(field.name.as_str()) {
                return Err(format!("form property {:?} is listed twice", field.name));
            }
            field.check_spec()?;
        }
        let mut required = BTreeSet::new();
        for name in &self.required {
            if !names.contains(name.as_str()) {
                return Err(format!("required names {name:?}, which is not a property"));
            }
            if !required.insert(name.as_str()) {
                return Err(format!("required lists {name:?} twice"));
            }
        }
        Ok(())
    }

    fn check_answer(&self, answer: &Value) -> Result<(), AnswerRefusal> {
        let Value::Object(object) = answer else {
            return Err(AnswerRefusal::whole(format!(
                "must be an object of the form's fields, not {}",
                FieldKind::describe(answer)
            )));
        };
        for name in object.keys() {
            if self.field(name).is_none() {
                return Err(AnswerRefusal::field(
                    name,
                    "is not a field of the form".into(),
                ));
            }
        }
        for field in &self.fields {
            match object.get(&field.name) {
                Some(value) => field.check_value(value)?,
                None if self.is_required(&field.name) => {
                    return Err(AnswerRefusal::field(&field.name, "is required".into()));
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The JSON Schema form of this spec.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for FormSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", "object")?;
        if let Some(title) = &self.title {
            map.serialize_entry("title", title)?;
        }
        if let Some(description) = &self.description {
            map.serialize_entry("description", description)?;
        }
        map.serialize_entry("properties", &Properties(&self.fields))?;
        if !self.required.is_empty() {
            map.serialize_entry("required", &self.required)?;
        }
        map.end()
    }
}

struct Properties<'a>(&'a [FormField]);

impl Serialize for Properties<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for field in self.0 {
            map.serialize_entry(&field.name, &FieldSchema(field))?;
        }
        map.end()
    }
}

struct FieldSchema<'a>(&'a FormField);

impl Serialize for FieldSchema<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let field = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", field.kind.as_str())?;
        if let Some(title) = &field.title {
            map.serialize_entry("title", title)?;
        }
        if let Some(description) = &field.description {
            map.serialize_entry("description", description)?;
        }
        if let Some(default) = &field.default {
            map.serialize_entry("default", default)?;
        }
        if let Some(allowed) = &field.allowed {
            map.serialize_entry("enum", allowed)?;
        }
        if let Some(min) = field.min_length {
            map.serialize_entry("minLength", &min)?;
        }
        if let Some(max) = field.max_length {
            map.serialize_entry("maxLength", &max)?;
        }
        if let Some(min) = &field.minimum {
            map.serialize_entry("minimum", min)?;
        }
        if let Some(max) = &field.maximum {
            map.serialize_entry("maximum", max)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for FormSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FormVisitor)
    }
}

struct FormVisitor;

impl<'de> Visitor<'de> for FormVisitor {
    type Value = FormSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a form: a JSON Schema object with flat properties")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FormSpec, A::Error> {
        let mut form = FormSpec {
            title: None,
            description: None,
            fields: Vec::new(),
            required: Vec::new(),
        };
        let mut typed = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "type" => {
                    let kind: String = map.next_value()?;
                    if kind != "object" {
                        return Err(de::Error::custom(format!(
                            "a form's type must be \"object\", not {kind:?}"
                        )));
                    }
                    typed = true;
                }
                "title" => form.title = Some(map.next_value()?),
                "description" => form.description = Some(map.next_value()?),
                "required" => form.required = map.next_value()?,
                "properties" => {
                    let OrderedProperties(properties) = map.next_value()?;
                    for (name, schema) in properties {
                        form.fields
                            .push(field_from_schema(name, schema).map_err(de::Error::custom)?);
                    }
                }
                "$schema" => {
                    let _: de::IgnoredAny = map.next_value()?;
                }
                other => {
                    return Err(de::Error::custom(format!(
                        "a form may not use {other:?}: it takes type, title, description, \
                         properties and required"
                    )))
                }
            }
        }
        if !typed {
            return Err(de::Error::custom("a form must say \"type\": \"object\""));
        }
        Ok(form)
    }
}

/// A JSON object's entries in document order.
struct OrderedProperties(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for OrderedProperties {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Ordered;
        impl<'de> Visitor<'de> for Ordered {
            type Value = OrderedProperties;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of properties")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(String, Value)> = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, Value>()? {
                    if entries.iter().any(|(seen, _)| *seen == name) {
                        return Err(de::Error::custom(format!(
                            "form property {name:?} is listed twice"
                        )));
                    }
                    if entries.len() >= MAX_FORM_PROPERTIES {
                        return Err(de::Error::custom(format!(
                            "a form has at most {MAX_FORM_PROPERTIES} properties"
                        )));
                    }
                    entries.push((name, value));
                }
                Ok(OrderedProperties(entries))
            }
        }
        deserializer.deserialize_map(Ordered)
    }
}

/// A property's schema, read strictly.
fn field_from_schema(name: String, schema: Value) -> Result<FormField, String> {
    let Value::Object(schema) = schema else {
        return Err(format!("property {name:?} must be a schema object"));
    };
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => FieldKind::parse(kind).ok_or_else(|| {
            format!(
                "property {name:?} has type {kind:?}: a form's fields are string, integer, \
                 number or boolean (no nesting)"
            )
        })?,
        Some(other) => {
            return Err(format!(
                "property {name:?} has type {other}: give one of string, integer, number, boolean"
            ))
        }
        None => return Err(format!("property {name:?} must say its type")),
    };
    let mut field = FormField {
        name: name.clone(),
        kind,
        title: None,
        description: None,
        default: None,
        allowed: None,
        min_length: None,
        max_length: None,
        minimum: None,
        maximum: None,
    };
    let text = |key: &str, value: &Value| match value {
        Value::String(text) => Ok(text.clone()),
        _ => Err(format!("property {name:?}: {key} must be text")),
    };
    let count = |key: &str, value: &Value| {
        value
            .as_u64()
            .ok_or_else(|| format!("property {name:?}: {key} must be a whole number >= 0"))
    };
    let number = |key: &str, value: &Value| match value {
        Value::Number(n) => Ok(n.clone()),
        _ => Err(format!("property {name:?}: {key} must be a number")),
    };
    for (key, value) in &schema {
        match key.as_str() {
            "type" => {}
            "title" => field.title = Some(text(key, value)?),
            "description" => field.description = Some(text(key, value)?),
            "default" => field.default = Some(value.clone()),
            "enum" => match value {
                Value::Array(values) => field.allowed = Some(values.clone()),
                _ => return Err(format!("property {name:?}: enum must be a list")),
            },
            "minLength" => field.min_length = Some(count(key, value)?),
            "maxLength" => field.max_length = Some(count(key, value)?),
            "minimum" => field.minimum = Some(number(key, value)?),
            "maximum" => field.maximum = Some(number(key, value)?),
            other => {
                return Err(format!(
                    "property {name:?} may not use {other:?}: a field takes type, title, \
                     description, default, enum, minLength, maxLength, minimum and maximum"
                ))
            }
        }
    }
    Ok(field)
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

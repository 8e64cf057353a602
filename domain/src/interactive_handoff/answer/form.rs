//! A form (C26): a flat JSON Schema object, read strictly in document
//! order and written back the same way, and the checks of a form answer.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

use super::{
    check_label, check_prose, Answer, AnswerRefusal, MAX_DESCRIPTION_BYTES, MAX_ENUM_VALUES,
    MAX_FORM_PROPERTIES,
};

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
    pub(super) fn describe(value: &Value) -> &'static str {
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

    pub(super) fn check_spec(&self) -> Result<(), String> {
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

    pub(super) fn check_answer(&self, answer: &Value) -> Result<(), AnswerRefusal> {
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

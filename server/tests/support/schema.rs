//! Checks a JSON value against a schema of the OpenAPI document: the
//! keywords the document uses (`$ref`, `type`, `properties`, `required`,
//! `additionalProperties`, `propertyNames`, `items`, `enum`, `oneOf`,
//! `allOf`, `minimum`, `format: date-time`), and more strictly than JSON
//! Schema itself: an object may hold only the properties its schema names
//! (with `allOf`, those of all its parts), so a field the service sends
//! but the document does not describe is found. `pattern` is not checked
//! (no regular expressions here). A keyword it does not know fails the
//! check, so nothing is skipped unnoticed.

use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;

const IGNORED: [&str; 3] = ["description", "pattern", "title"];

/// Checks `value` against `schema`, resolving `$ref`s in `document`.
pub fn check(document: &Value, schema: &Value, value: &Value) -> Result<(), String> {
    validate(document, schema, value, true, "$")
}

fn resolve<'a>(document: &'a Value, schema: &'a Value) -> Result<&'a Value, String> {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference
                .strip_prefix("#/components/schemas/")
                .ok_or(format!("unknown reference {reference}"))?;
            let target = &document["components"]["schemas"][name];
            if target.is_null() {
                return Err(format!("{reference} is not in the document"));
            }
            resolve(document, target)
        }
        None => Ok(schema),
    }
}

/// The properties `schema` names, through `$ref` and `allOf`.
fn properties(document: &Value, schema: &Value) -> Result<Option<Vec<String>>, String> {
    let schema = resolve(document, schema)?;
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        let mut all = Vec::new();
        for part in parts {
            match properties(document, part)? {
                Some(names) => all.extend(names),
                None => return Ok(None),
            }
        }
        return Ok(Some(all));
    }
    if schema.get("additionalProperties").is_some() {
        return Ok(None);
    }
    Ok(schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|map| map.keys().cloned().collect()))
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

fn validate(
    document: &Value,
    schema: &Value,
    value: &Value,
    strict: bool,
    at: &str,
) -> Result<(), String> {
    let schema = resolve(document, schema)?;
    let Some(map) = schema.as_object() else {
        return Err(format!("{at}: the schema is not an object"));
    };
    for key in map.keys() {
        let known = [
            "$ref",
            "type",
            "properties",
            "required",
            "additionalProperties",
            "propertyNames",
            "items",
            "enum",
            "oneOf",
            "allOf",
            "minimum",
            "format",
        ];
        if !known.contains(&key.as_str()) && !IGNORED.contains(&key.as_str()) {
            return Err(format!("{at}: the checker does not know the keyword {key}"));
        }
    }
    if let Some(kind) = map.get("type") {
        let names: Vec<&str> = match kind {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: a type that is neither a name nor a list")),
        };
        if !names.iter().any(|name| type_matches(name, value)) {
            return Err(format!("{at}: {value} is not of type {kind}"));
        }
    }
    if let Some(Value::Array(allowed)) = map.get("enum") {
        if !allowed.contains(value) {
            return Err(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    if let (Some(minimum), Some(number)) =
        (map.get("minimum").and_then(Value::as_f64), value.as_f64())
    {
        if number < minimum {
            return Err(format!("{at}: {number} is below {minimum}"));
        }
    }
    if let (Some("date-time"), Some(text)) =
        (map.get("format").and_then(Value::as_str), value.as_str())
    {
        time::OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|e| format!("{at}: {text:?} is not a date-time: {e}"))?;
    }
    if let Some(Value::Array(parts)) = map.get("allOf") {
        for part in parts {
            validate(document, part, value, false, at)?;
        }
        if strict {
            check_known(document, schema, value, at)?;
        }
    }
    if let Some(Value::Array(choices)) = map.get("oneOf") {
        let passing = choices
            .iter()
            .filter(|choice| validate(document, choice, value, strict, at).is_ok())
            .count();
        if passing != 1 {
            let reasons: Vec<String> = choices
                .iter()
                .filter_map(|choice| validate(document, choice, value, strict, at).err())
                .collect();
            return Err(format!(
                "{at}: {passing} of the oneOf choices fit {value}: {reasons:?}"
            ));
        }
    }
    if let Value::Object(object) = value {
        if let Some(Value::Array(required)) = map.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(format!("{at}: the required property {name} is missing"));
                }
            }
        }
        let named = map.get("properties").and_then(Value::as_object);
        for (key, inner) in object {
            let path = format!("{at}.{key}");
            match (
                named.and_then(|n| n.get(key)),
                map.get("additionalProperties"),
            ) {
                (Some(property), _) => validate(document, property, inner, true, &path)?,
                (None, Some(extra)) => validate(document, extra, inner, true, &path)?,
                (None, None) => {}
            }
        }
        if strict
            && map.get("allOf").is_none()
            && named.is_some()
            && map.get("additionalProperties").is_none()
        {
            check_keys(object, named, at)?;
        }
    }
    if let (Value::Array(items), Some(schema)) = (value, map.get("items")) {
        for (index, item) in items.iter().enumerate() {
            validate(document, schema, item, true, &format!("{at}[{index}]"))?;
        }
    }
    Ok(())
}

fn check_keys(
    object: &Map<String, Value>,
    named: Option<&Map<String, Value>>,
    at: &str,
) -> Result<(), String> {
    for key in object.keys() {
        if !named.is_some_and(|n| n.contains_key(key)) {
            return Err(format!("{at}: the property {key} is not in the document"));
        }
    }
    Ok(())
}

fn check_known(document: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let (Some(names), Value::Object(object)) = (properties(document, schema)?, value) else {
        return Ok(());
    };
    for key in object.keys() {
        if !names.contains(key) {
            return Err(format!("{at}: the property {key} is not in the document"));
        }
    }
    Ok(())
}

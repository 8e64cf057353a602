//! Reading a request body strictly: JSON that parses into the route's
//! type with no field left over.
//!
//! serde ignores fields a type does not know unless the type says
//! `deny_unknown_fields`, which the domain's types (also read from
//! stores) cannot say, and which does not combine with `flatten`. So a
//! body is read as a JSON value and, from its bytes, as the type, which is
//! converted back; every object key of the value must be in what came
//! back: a field the type dropped is named in the error. The type is read
//! from the bytes, not from the value, whose objects sort their keys: a
//! form's properties (C26) keep the order the body gives them. serde_json's own limits hold
//! on the way: invalid UTF-8, nesting deeper than 128 and numbers out of
//! range are refused as what they are.

use lf_handoff_application::{StoreError, StoreResult};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Parses `body` as a `T`, refusing anything it does not take whole.
///
/// # Errors
/// `InvalidInput` saying what is wrong: not JSON (with the line and
/// column), not valid UTF-8, nested too deeply, a value of the wrong type
/// or out of range, a field missing, or a field `T` does not know (named
/// by its path, such as `pr.labels`).
pub fn from_slice<T: DeserializeOwned + Serialize>(body: &[u8]) -> StoreResult<T> {
    if let Err(error) = std::str::from_utf8(body) {
        return Err(StoreError::InvalidInput(format!(
            "the request body is not valid UTF-8: {error}"
        )));
    }
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        StoreError::InvalidInput(format!("the request body is not valid JSON: {error}"))
    })?;
    let parsed: T = serde_json::from_slice(body).map_err(|error| {
        StoreError::InvalidInput(format!("the request body does not fit: {error}"))
    })?;
    refuse_unknown_fields(&value, &parsed)?;
    Ok(parsed)
}

/// Converts `value` into a `T`, refusing a field `T` does not know. A
/// value's objects have sorted keys, so a type whose fields keep an
/// order (a form's properties) gets them sorted: read a body with
/// [`from_slice`].
///
/// # Errors
/// As [`from_slice`].
pub fn from_value<T: DeserializeOwned + Serialize>(value: Value) -> StoreResult<T> {
    let parsed: T = serde_json::from_value(value.clone()).map_err(|error| {
        StoreError::InvalidInput(format!("the request body does not fit: {error}"))
    })?;
    refuse_unknown_fields(&value, &parsed)?;
    Ok(parsed)
}

/// Refuses `value` when `parsed`, read from it, dropped one of its fields.
fn refuse_unknown_fields<T: Serialize>(value: &Value, parsed: &T) -> StoreResult<()> {
    let back = serde_json::to_value(parsed).map_err(|error| {
        StoreError::InvalidInput(format!("the request body cannot be read back: {error}"))
    })?;
    match unknown_field(value, &back, String::new()) {
        Some(path) => Err(StoreError::InvalidInput(format!(
            "the request body has a field this route does not take: {path}"
        ))),
        None => Ok(()),
    }
}

/// The path of the first key of `given` that `kept` lacks.
fn unknown_field(given: &Value, kept: &Value, path: String) -> Option<String> {
    match (given, kept) {
        (Value::Object(given), Value::Object(kept)) => given.iter().find_map(|(key, value)| {
            let inner = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match kept.get(key) {
                None => Some(inner),
                Some(kept) => unknown_field(value, kept, inner),
            }
        }),
        (Value::Array(given), Value::Array(kept)) => {
            given
                .iter()
                .zip(kept)
                .enumerate()
                .find_map(|(index, (given, kept))| {
                    unknown_field(given, kept, format!("{path}[{index}]"))
                })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Inner {
        n: u32,
    }

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Outer {
        name: String,
        #[serde(default)]
        items: Vec<Inner>,
        #[serde(flatten)]
        inner: Inner,
    }

    #[test]
    fn a_whole_body_is_taken() {
        let outer: Outer = from_slice(br#"{"name":"a","items":[{"n":1}],"n":2}"#).unwrap();
        assert_eq!(outer.inner.n, 2);
    }

    #[test]
    fn unknown_fields_are_named_by_path() {
        for (body, path) in [
            (r#"{"name":"a","n":1,"colour":"red"}"#, "colour"),
            (
                r#"{"name":"a","n":1,"items":[{"n":1},{"n":2,"x":0}]}"#,
                "items[1].x",
            ),
        ] {
            let error = from_slice::<Outer>(body.as_bytes()).unwrap_err();
            assert!(error.message().ends_with(path), "{error}");
        }
    }

    #[test]
    fn a_form_keeps_the_order_of_its_properties() {
        let form: lf_handoff_domain::interactive_handoff::FormSpec = from_slice(
            br#"{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}"#,
        )
        .unwrap();
        let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha"]);
    }

    #[test]
    fn hostile_bodies_are_invalid_input() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let bodies: Vec<Vec<u8>> = vec![
            b"{".to_vec(),
            b"".to_vec(),
            b"{\"name\":\"\xff\",\"n\":1}".to_vec(),
            deep.into_bytes(),
            br#"{"name":"a","n":1e400}"#.to_vec(),
            br#"{"name":"a","n":99999999999999999999999}"#.to_vec(),
            br#"{"name":"a","n":4294967296}"#.to_vec(),
            br#"{"name":"a","n":-1}"#.to_vec(),
            br#"{"name":"a"}"#.to_vec(),
            br#"[]"#.to_vec(),
        ];
        for body in bodies {
            let error = from_slice::<Outer>(&body).unwrap_err();
            assert!(error.is_invalid_input(), "{error}");
        }
    }
}

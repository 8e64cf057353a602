//! The text pieces of store URLs and config files that every backend's
//! config reads: the query split, percent escapes, durations (the one
//! grammar of `lf_handoff_api::duration`, in its setting form), absolute
//! paths and `key=value` options.
//!
//! The low-level pieces know nothing of stores: each failure is a
//! [`TextError`]. The pieces a backend's config calls ([`parse_duration`],
//! [`decode_option`], [`query_pairs`], [`decode_absolute`]) turn it into
//! `StoreError::InvalidInput` naming the URL or option they were reading.
//! This module imports no backend, so the backends' configs can use it
//! while `config` names their configs.

// A build without every backend leaves some of these helpers unused.
#![cfg_attr(
    not(all(
        feature = "sqlite",
        feature = "postgres",
        feature = "sled",
        feature = "http"
    )),
    allow(dead_code)
)]

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lf_handoff_api::duration;
use lf_handoff_application::{StoreError, StoreResult};

/// Why a piece of text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TextError {
    /// A `%` that does not start a two-digit hex escape.
    #[error("`%` must start an escape like %20")]
    BadEscape,
    /// Text whose escapes decode to bytes that are not UTF-8.
    #[error("escapes must decode to UTF-8")]
    NotUtf8,
}

/// Splits `rest` at its first `?` into what comes before and the query.
pub(crate) fn split_query(rest: &str) -> (&str, &str) {
    rest.split_once('?').unwrap_or((rest, ""))
}

/// Decodes `%XX` escapes (in either case) into bytes.
pub(crate) fn percent_decode(text: &str) -> Result<Vec<u8>, TextError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let byte = bytes
                .get(index + 1..index + 3)
                .and_then(|pair| std::str::from_utf8(pair).ok())
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or(TextError::BadEscape)?;
            out.push(byte);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    Ok(out)
}

/// Decodes `%XX` escapes into text, which must be UTF-8.
pub(crate) fn percent_decode_utf8(text: &str) -> Result<String, TextError> {
    String::from_utf8(percent_decode(text)?).map_err(|_| TextError::NotUtf8)
}

/// Escapes every byte of `path` that is not safe in a URL path.
pub(crate) fn encode_path(path: &Path) -> String {
    let mut out = String::new();
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~+,=@:".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Parses a setting's duration: the one grammar of durations
/// (`lf_handoff_api::duration`) in its setting form, such as `30s`,
/// `500ms`, `2m`, `1h` or `1m30s`; a bare number is seconds, and zero is
/// a duration.
///
/// # Errors
/// `InvalidInput` naming the accepted forms.
pub fn parse_duration(text: &str) -> StoreResult<Duration> {
    duration::parse_as(text, &duration::SETTING).map_err(|e| invalid(e.message(&duration::SETTING)))
}

/// The option `name`'s `value`, a whole number of at least 1.
pub(crate) fn at_least_one(name: &str, value: &str) -> StoreResult<u32> {
    value
        .parse::<u32>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            invalid(format!(
                "{name} must be a whole number of at least 1, got {value:?}"
            ))
        })
}

/// The error of a store URL or option that can never work.
pub(crate) fn invalid(message: String) -> StoreError {
    StoreError::InvalidInput(message)
}

/// Decodes one query key or value of the store URL `shown` (the URL as a
/// message may show it, without its password).
pub(crate) fn decode_option(shown: &str, raw: &str) -> StoreResult<String> {
    percent_decode_utf8(raw).map_err(|e| match e {
        TextError::NotUtf8 => invalid(format!("store URL {shown:?}: options must be UTF-8")),
        other => invalid(format!("store URL {shown:?}: {other}")),
    })
}

/// The decoded `key=value` pairs of the query of `url`, each key once.
pub(crate) fn query_pairs(url: &str, query: &str) -> StoreResult<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid(format!(
                "store URL {url:?}: option {pair:?} must be key=value"
            )));
        };
        let key = decode_option(url, key)?;
        let value = decode_option(url, value)?;
        if pairs.iter().any(|(seen, _)| seen == &key) {
            return Err(invalid(format!(
                "store URL {url:?}: option {key:?} is given twice"
            )));
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// Decodes the path of a URL, which must be absolute and free of NUL bytes.
pub(crate) fn decode_absolute(url: &str, encoded: &str, example: &str) -> StoreResult<PathBuf> {
    let bytes = percent_decode(encoded).map_err(|e| invalid(format!("store URL {url:?}: {e}")))?;
    if bytes.contains(&0) {
        return Err(invalid(format!(
            "store URL {url:?}: the path holds a NUL byte"
        )));
    }
    let path = PathBuf::from(OsString::from_vec(bytes));
    if !path.is_absolute() {
        return Err(invalid(format!(
            "store URL {url:?} must name an absolute path, as in {example}"
        )));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_durations_parse_in_common_forms_or_are_refused_as_invalid_input() {
        assert_eq!(parse_duration("30s").ok(), Some(Duration::from_secs(30)));
        assert_eq!(
            parse_duration("500ms").ok(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_duration("1m30s").ok(), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("45").ok(), Some(Duration::from_secs(45)));
        assert_eq!(
            parse_duration(" 45s ").ok(),
            Some(Duration::ZERO + Duration::from_secs(45))
        );
        for bad in [
            "",
            "s",
            "10x",
            "-1s",
            "1.5s",
            "99999999999999999999h",
            "10 s",
            "18446744073709552",
        ] {
            let refused = parse_duration(bad).unwrap_err();
            assert!(refused.is_invalid_input(), "{bad:?}: {refused}");
            let message = refused.to_string();
            assert!(
                message.contains("500ms, 30s") || message.contains("is too long"),
                "{bad:?}: {message}"
            );
        }
        let long = parse_duration(" 18446744073709552s").unwrap_err();
        assert!(
            long.to_string()
                .contains("\"18446744073709552s\" is too long"),
            "{long}"
        );
    }

    #[test]
    fn escapes_decode_in_either_case_and_bad_ones_are_refused() {
        assert_eq!(percent_decode("a%20b%2fc%2F"), Ok(b"a b/c/".to_vec()));
        assert_eq!(percent_decode("%ff%00"), Ok(vec![0xff, 0]));
        for bad in ["%", "%2", "%zz", "a%g0", "%\u{e9}"] {
            assert_eq!(percent_decode(bad), Err(TextError::BadEscape), "{bad:?}");
        }
        assert_eq!(percent_decode_utf8("caf%C3%A9"), Ok("café".to_string()));
        assert_eq!(percent_decode_utf8("%ff"), Err(TextError::NotUtf8));
    }

    #[test]
    fn encoded_paths_decode_back_to_the_same_bytes() {
        let bytes: Vec<u8> = (1..=255).collect();
        let path = OsString::from_vec(bytes.clone());
        let encoded = encode_path(Path::new(&path));
        assert!(encoded.is_ascii() && !encoded.contains(['?', '#', '&', ' ']));
        assert_eq!(percent_decode(&encoded), Ok(bytes));
    }

    #[test]
    fn the_query_starts_at_the_first_question_mark() {
        assert_eq!(split_query("/a?b=1?c"), ("/a", "b=1?c"));
        assert_eq!(split_query("/a"), ("/a", ""));
    }
}

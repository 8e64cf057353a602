//! Step keys (contract C12): a body's stable name for the interactive step
//! it is at, so a replaced body that re-runs the step finds the handoff it
//! opened before instead of asking a person again.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{DomainError, DomainResult};

/// The longest step key, in bytes.
pub const MAX_STEP_BYTES: usize = 200;

/// A validated step key: not blank, at most [`MAX_STEP_BYTES`] bytes, no
/// control characters. It prints and serialises as the text it parsed from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "String", into = "String")]
pub struct StepKey(String);

impl StepKey {
    /// Parses a step key such as `oauth-login@turn-17`.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for a blank key, one longer than
    /// [`MAX_STEP_BYTES`], or one holding a control character.
    pub fn parse(text: &str) -> DomainResult<Self> {
        if text.trim().is_empty() {
            return Err(DomainError::invalid("step key must not be blank"));
        }
        if text.len() > MAX_STEP_BYTES {
            return Err(DomainError::invalid(format!(
                "step key is {} bytes long; the limit is {MAX_STEP_BYTES}",
                text.len()
            )));
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(DomainError::invalid(format!(
                "step key must not contain control characters (found {c:?})"
            )));
        }
        Ok(Self(text.to_string()))
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StepKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for StepKey {
    type Error = DomainError;

    fn try_from(text: String) -> DomainResult<Self> {
        Self::parse(&text)
    }
}

impl From<StepKey> for String {
    fn from(step: StepKey) -> Self {
        step.0
    }
}

impl std::str::FromStr for StepKey {
    type Err = DomainError;

    fn from_str(text: &str) -> DomainResult<Self> {
        Self::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_prints_as_it_parses() {
        let step = StepKey::parse("oauth-login@turn-17").unwrap();
        assert_eq!(step.to_string(), "oauth-login@turn-17");
        assert_eq!(
            serde_json::to_string(&step).unwrap(),
            "\"oauth-login@turn-17\""
        );
    }

    #[test]
    fn blank_long_and_control_keys_are_invalid() {
        for bad in [
            String::new(),
            " \t".into(),
            "a\nb".into(),
            "tab\there".into(),
            "\u{7f}".into(),
            "x".repeat(MAX_STEP_BYTES + 1),
        ] {
            assert!(StepKey::parse(&bad).is_err(), "{bad:?}");
            assert!(serde_json::from_value::<StepKey>(bad.clone().into()).is_err());
        }
        assert!(StepKey::parse(&"é".repeat(MAX_STEP_BYTES / 2)).is_ok());
        assert!(StepKey::parse(&"é".repeat(MAX_STEP_BYTES / 2 + 1)).is_err());
    }
}

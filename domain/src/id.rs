//! Prefixed identifiers: a short kind prefix and a UUID.
//!
//! Ids are `wv_` (wave), `ps_` (project session), `ts_` (task session),
//! `pr_` (task PR) and `ih_` (interactive handoff) followed by a hyphenated
//! UUID. Generated ids are UUID v7, so they sort by creation time; the
//! generator lives in the application layer because it reads the clock and
//! a random source, which the domain never does. Parsing accepts either case
//! and keeps the canonical lowercase form, so `parse(id.as_str()) == id`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

use crate::error::DomainError;

macro_rules! prefixed_id {
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $what:literal) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// Builds the id from a UUID.
            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(format!("{}{}", $prefix, uuid.hyphenated()))
            }

            /// Parses `text`, refusing a wrong prefix or a malformed UUID.
            ///
            /// # Errors
            /// [`DomainError::InvalidInput`] naming what was expected.
            pub fn parse(text: &str) -> Result<Self, DomainError> {
                parse_prefixed(text, $prefix, $what).map(Self::from_uuid)
            }

            /// The canonical text form, `prefix` + hyphenated lowercase UUID.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The UUID part.
            pub fn uuid(&self) -> Uuid {
                // The field is only ever built from a UUID, so this parse
                // cannot fail; fall back to nil rather than panic.
                Uuid::parse_str(&self.0[$prefix.len()..]).unwrap_or_default()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl FromStr for $name {
            type Err = DomainError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Self::parse(text)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Self::parse(&text).map_err(serde::de::Error::custom)
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::openapi::text_schema(
                    concat!("A ", $what, " id: `", $prefix, "` and a hyphenated UUID."),
                    Some(concat!("^", $prefix, "[0-9a-fA-F-]{36}$")),
                )
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

fn parse_prefixed(text: &str, prefix: &str, what: &str) -> Result<Uuid, DomainError> {
    let Some(rest) = text.strip_prefix(prefix) else {
        return Err(DomainError::invalid(format!(
            "{what} id must start with `{prefix}`, got {text:?}"
        )));
    };
    // Only the hyphenated 36-character form is accepted, so every id has one
    // spelling (up to case).
    if rest.len() != 36 {
        return Err(malformed(text, what));
    }
    Uuid::try_parse(rest).map_err(|_| malformed(text, what))
}

fn malformed(text: &str, what: &str) -> DomainError {
    DomainError::invalid(format!(
        "{what} id {text:?} is malformed: expected a prefix and a hyphenated UUID"
    ))
}

prefixed_id!(
    /// Identifies a [`Wave`](crate::wave::Wave): `wv_<uuid>`.
    WaveId, "wv_", "wave"
);
prefixed_id!(
    /// Identifies a [`ProjectSession`](crate::project_session::ProjectSession): `ps_<uuid>`.
    ProjectSessionId, "ps_", "project session"
);
prefixed_id!(
    /// Identifies a [`TaskSession`](crate::task::TaskSession): `ts_<uuid>`.
    TaskSessionId, "ts_", "task session"
);
prefixed_id!(
    /// Identifies a [`TaskPr`](crate::task::TaskPr): `pr_<uuid>`.
    TaskPrId, "pr_", "task PR"
);
prefixed_id!(
    /// Identifies an [`InteractiveHandoff`](crate::interactive_handoff::InteractiveHandoff): `ih_<uuid>`.
    InteractiveHandoffId, "ih_", "interactive handoff"
);

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn parse_accepts_the_canonical_form_and_round_trips() {
        let id = WaveId::parse(&format!("wv_{UUID}")).unwrap();
        assert_eq!(id.as_str(), format!("wv_{UUID}"));
        assert_eq!(WaveId::parse(id.as_str()).unwrap(), id);
        assert_eq!(id.to_string(), id.as_str());
    }

    #[test]
    fn parse_canonicalises_case() {
        let upper = format!("ih_{}", UUID.to_uppercase());
        let id = InteractiveHandoffId::parse(&upper).unwrap();
        assert_eq!(id.as_str(), format!("ih_{UUID}"));
    }

    #[test]
    fn parse_refuses_a_wrong_prefix() {
        let err = WaveId::parse(&format!("ts_{UUID}")).unwrap_err();
        assert!(err.to_string().contains("must start with `wv_`"), "{err}");
    }

    #[test]
    fn parse_refuses_malformed_uuids() {
        for bad in [
            "ts_".to_string(),
            "ts_not-a-uuid".to_string(),
            format!("ts_{}", UUID.replace('-', "")),
            format!("ts_{{{UUID}}}"),
            format!("ts_{UUID}0"),
            format!("ts_{}", &UUID[..35]),
        ] {
            assert!(TaskSessionId::parse(&bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn serde_uses_the_text_form_and_validates() {
        let id = TaskPrId::parse(&format!("pr_{UUID}")).unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"pr_{UUID}\""));
        assert_eq!(serde_json::from_str::<TaskPrId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<TaskPrId>(&format!("\"wv_{UUID}\"")).is_err());
    }
}

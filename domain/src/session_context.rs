//! What a session was launched for: snapshots of the planning tool's
//! project and issue, taken when the session started.

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::DomainError;
use crate::text::check_non_blank;

macro_rules! external_id {
    ($(#[$meta:meta])* $name:ident, $what:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps an id from the planning tool; it must not be blank.
            ///
            /// # Errors
            /// [`DomainError::InvalidInput`] for a blank id or one with a NUL byte.
            pub fn new(id: impl Into<String>) -> Result<Self, DomainError> {
                let id = id.into();
                check_non_blank($what, &id)?;
                Ok(Self(id))
            }

            /// The id text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                Self::new(String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
            }
        }
    };
}

external_id!(
    /// A Linear project id.
    LinearProjectId, "Linear project id"
);
external_id!(
    /// A Linear issue id.
    LinearIssueId, "Linear issue id"
);

/// A Linear project as it was when a session launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LinearProjectSnapshot {
    /// The project id.
    pub id: LinearProjectId,
    /// The URL slug.
    pub slug: String,
    /// The display name.
    pub name: String,
    /// Standing instructions given to every body of the project.
    pub prompt_context: String,
}

/// A Linear issue as it was when a task launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LinearIssueSnapshot {
    /// The issue id.
    pub id: LinearIssueId,
    /// The human identifier, such as `W2-175`.
    pub identifier: String,
    /// The issue title.
    pub title: String,
    /// The issue body.
    pub description: String,
}

/// What a project session was launched with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProjectLaunchReceipt {
    /// The project snapshot.
    pub project: LinearProjectSnapshot,
    /// When the snapshot was synced, as Unix seconds.
    pub pm_snapshot_synced_at: i64,
}

/// What a task session was launched with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskLaunchReceipt {
    /// The issue the task works on.
    pub issue: LinearIssueSnapshot,
    /// The project the issue belongs to.
    pub project: LinearProjectSnapshot,
    /// When the snapshot was synced, as Unix seconds.
    pub pm_snapshot_synced_at: i64,
}

//! Read-only views of a handoff: the census row and the attach descriptor.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{Answer, InteractiveHandoff, InteractiveHandoffId, InteractiveHandoffStatus, StepKey};
use crate::id::WaveId;

/// One line of the census. It never carries the environment or the attach
/// argv, which may hold secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InteractiveHandoffListRow {
    /// The handoff id, under the name every other JSON shape gives it.
    pub id: InteractiveHandoffId,
    /// The handoff id again, under its old name: kept for one release so
    /// scripts that read it go on working; read `id`.
    pub session_id: InteractiveHandoffId,
    /// `wave`, `project` or `task`.
    pub parent_kind: String,
    /// The parent's id.
    pub parent_id: String,
    /// The owning wave.
    pub wave_id: WaveId,
    /// Where the handoff is in its life.
    pub status: InteractiveHandoffStatus,
    /// The model provider.
    pub provider: String,
    /// The provider's conversation id.
    pub provider_session_id: Option<String>,
    /// The home, in canonical form.
    pub home: String,
    /// The directory to attach in.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cwd: PathBuf,
    /// Why a person is needed.
    pub reason: String,
    /// When it was opened.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// Whole seconds since `updated_at`; never negative.
    pub age_secs: Option<i64>,
    /// The body's step key, if it opened the handoff at one (C12).
    #[serde(default)]
    pub step: Option<StepKey>,
    /// The deadline, if it has one (C14).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    /// Whether it was due when the row was made: active, deadline passed.
    #[serde(default)]
    pub due: bool,
    /// What it asks for (C26), in words: `allow | deny`, `form: a, b`.
    #[serde(default)]
    pub asks: Option<String>,
    /// The answer it ended with (C26).
    #[serde(default)]
    pub answer: Option<Answer>,
}

/// Everything a terminal needs to join the work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttachDescriptor {
    /// The handoff id, under the name every other JSON shape gives it.
    pub id: InteractiveHandoffId,
    /// The handoff id again, under its old name: kept for one release so
    /// scripts that read it go on working; read `id`.
    pub session_id: InteractiveHandoffId,
    /// Where the handoff is in its life.
    pub status: InteractiveHandoffStatus,
    /// The directory to run the command in.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cwd: PathBuf,
    /// `localhost` for a local home, the SSH host otherwise.
    pub host: String,
    /// Environment to add.
    pub environment: BTreeMap<String, String>,
    /// The command to run, without a shell.
    pub argv: Vec<String>,
}

impl InteractiveHandoff {
    /// The census row as seen at `now`.
    pub fn list_row(&self, now: OffsetDateTime) -> InteractiveHandoffListRow {
        let age = (now - self.updated_at).whole_seconds().max(0);
        InteractiveHandoffListRow {
            id: self.id.clone(),
            session_id: self.id.clone(),
            parent_kind: self.parent.kind().to_string(),
            parent_id: self.parent.id_str().to_string(),
            wave_id: self.wave_id.clone(),
            status: self.status,
            provider: self.provider.clone(),
            provider_session_id: self.provider_session_id.clone(),
            home: self.home.to_string(),
            cwd: self.cwd.clone(),
            reason: self.reason.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            age_secs: Some(age),
            step: self.step.clone(),
            expires_at: self.expires_at,
            due: self.is_due(now),
            asks: self
                .answer_spec()
                .ok()
                .flatten()
                .map(|spec| spec.describe()),
            answer: self.answer.clone(),
        }
    }

    /// What a person needs to attach.
    pub fn attach_descriptor(&self) -> AttachDescriptor {
        AttachDescriptor {
            id: self.id.clone(),
            session_id: self.id.clone(),
            status: self.status,
            cwd: self.cwd.clone(),
            host: self.home.host().to_string(),
            environment: self.environment.clone(),
            argv: self.attach_argv.clone(),
        }
    }
}

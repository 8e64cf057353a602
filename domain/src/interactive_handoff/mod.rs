//! The interactive handoff: its record, its state machine and its views.
//!
//! A body that needs a person opens a handoff and parks. A person attaches,
//! does the work and finishes it; the parent's next body claims the wake
//! exactly once. This module owns every rule of that life:
//!
//! - the record ([`InteractiveHandoff`]) and the open request
//!   ([`OpenInteractiveHandoff`]);
//! - the transitions ([`decide_open`], [`open`], [`replay`], [`attach`],
//!   [`finish`], [`claim_wake`]), each a pure function of the current record,
//!   the request and `now`;
//! - deadlines ([`expire_if_due`], [`extend`], contract C14) and the
//!   history event each change appends ([`HandoffChange`], contract C15);
//! - the invariants I1-I7 ([`InteractiveHandoff::validate`],
//!   [`check_one_active_per_parent`]);
//! - the answer spec a handoff may ask with and the checker of answers
//!   ([`AnswerSpec`], contract C26);
//! - the environment names an attach command may not carry
//!   ([`check_attach_environment`], contract C29);
//! - the census row and the attach descriptor.

mod answer;
#[cfg(feature = "openapi")]
mod answer_schema;
mod deadline;
mod environment;
mod history;
mod invariant;
mod step;
mod transition;
mod view;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::{DomainError, DomainResult};
pub use crate::id::InteractiveHandoffId;
use crate::id::{ProjectSessionId, TaskSessionId, WaveId};
use crate::text::{check_absolute_path, check_non_blank, check_text, MAX_ITEMS};
use crate::wave_home::WaveHome;

pub use answer::{
    Answer, AnswerRefusal, AnswerSpec, Choice, FieldKind, FormField, FormSpec, MAX_ANSWER_BYTES,
    MAX_CHOICES, MAX_CHOICE_VALUE_BYTES, MAX_FORM_PROPERTIES, MIN_CHOICES,
};
pub use deadline::{expire_if_due, extend};
pub use environment::{
    check_attach_environment, refused_env_reason, REFUSED_ENV_NAMES, REFUSED_ENV_PREFIXES,
};
pub use history::{Actor, HandoffChange, HandoffEvent, HandoffEventKind, MAX_ACTOR_BYTES};
pub use invariant::{check_one_active_per_parent, Invariant, InvariantViolation};
pub use step::{StepKey, MAX_STEP_BYTES};
pub use transition::{
    attach, check_claim_generation, check_finish_answer, check_outcome_answer,
    check_person_outcome, claim_wake, claim_wake_for_parent, decide_open, decide_open_with, finish,
    open, replay, OpenDecision, OpenOptions, Transition, WakeClaim,
};
pub use view::{AttachDescriptor, InteractiveHandoffListRow};

/// The parent a handoff belongs to, written `wave:<id>`, `project:<id>` or
/// `task:<id>`. In JSON it is `{"kind": "task", "id": "ts_..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum InteractiveHandoffParent {
    /// A wave.
    Wave(WaveId),
    /// A project session.
    Project(ProjectSessionId),
    /// A task session.
    Task(TaskSessionId),
}

impl InteractiveHandoffParent {
    /// `wave`, `project` or `task`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Wave(_) => "wave",
            Self::Project(_) => "project",
            Self::Task(_) => "task",
        }
    }

    /// The parent's id text.
    pub fn id_str(&self) -> &str {
        match self {
            Self::Wave(id) => id.as_str(),
            Self::Project(id) => id.as_str(),
            Self::Task(id) => id.as_str(),
        }
    }

    /// Parses a bare prefixed id (`wv_...`, `ps_...` or `ts_...`): its
    /// prefix names the kind.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for another prefix or a malformed id.
    pub fn parse_id(text: &str) -> DomainResult<Self> {
        if text.starts_with(WaveId::PREFIX) {
            WaveId::parse(text).map(Self::Wave)
        } else if text.starts_with(ProjectSessionId::PREFIX) {
            ProjectSessionId::parse(text).map(Self::Project)
        } else if text.starts_with(TaskSessionId::PREFIX) {
            TaskSessionId::parse(text).map(Self::Task)
        } else {
            Err(DomainError::invalid(format!(
                "{text:?} is not a parent id: use wv_..., ps_... or ts_..."
            )))
        }
    }

    /// Parses `wave:<id>`, `project:<id>` or `task:<id>`.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for an unknown kind or a malformed id.
    pub fn parse(text: &str) -> DomainResult<Self> {
        let Some((kind, id)) = text.split_once(':') else {
            return Err(DomainError::invalid(format!(
                "parent {text:?} must be wave:<id>, project:<id> or task:<id>"
            )));
        };
        match kind {
            "wave" => WaveId::parse(id).map(Self::Wave),
            "project" => ProjectSessionId::parse(id).map(Self::Project),
            "task" => TaskSessionId::parse(id).map(Self::Task),
            _ => Err(DomainError::invalid(format!(
                "parent kind {kind:?} is unknown: use wave, project or task"
            ))),
        }
    }
}

impl fmt::Display for InteractiveHandoffParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind(), self.id_str())
    }
}

impl FromStr for InteractiveHandoffParent {
    type Err = DomainError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Where a handoff is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InteractiveHandoffStatus {
    /// Opened; nobody has attached yet.
    Waiting,
    /// A person has attached at least once.
    Attached,
    /// Finished: the person did the work (terminal).
    Completed,
    /// Finished: handed back to the agent with a summary (terminal).
    HandedBack,
    /// Finished: it could not be done (terminal).
    Failed,
    /// Its deadline passed before anyone finished it (terminal, C14).
    Expired,
}

impl InteractiveHandoffStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 6] = [
        Self::Waiting,
        Self::Attached,
        Self::Completed,
        Self::HandedBack,
        Self::Failed,
        Self::Expired,
    ];

    /// Returns true if and only if no further transition but the wake claim
    /// can happen.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::HandedBack | Self::Failed | Self::Expired
        )
    }

    /// The snake_case name used in JSON and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Attached => "attached",
            Self::Completed => "completed",
            Self::HandedBack => "handed_back",
            Self::Failed => "failed",
            Self::Expired => "expired",
        }
    }

    /// The inverse of [`as_str`](Self::as_str).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }

    /// Words for people: "waiting", "handed back", ...
    pub fn describe(self) -> &'static str {
        match self {
            Self::HandedBack => "handed back",
            other => other.as_str(),
        }
    }
}

impl fmt::Display for InteractiveHandoffStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a handoff ended. The text of a person's outcome is never blank; an
/// expiry has none.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InteractiveHandoffOutcome {
    /// The person did the work.
    Completed {
        /// What was done.
        summary: String,
    },
    /// The person hands the work back; the agent continues from the summary.
    HandedBack {
        /// What the agent should continue with.
        summary: String,
    },
    /// The work could not be done.
    Failed {
        /// Why.
        reason: String,
    },
    /// Nobody finished it before its deadline (C14). Only an expiry records
    /// it; a person cannot finish a handoff with it.
    Expired,
}

impl InteractiveHandoffOutcome {
    /// The terminal status this outcome puts a handoff in.
    pub fn status(&self) -> InteractiveHandoffStatus {
        match self {
            Self::Completed { .. } => InteractiveHandoffStatus::Completed,
            Self::HandedBack { .. } => InteractiveHandoffStatus::HandedBack,
            Self::Failed { .. } => InteractiveHandoffStatus::Failed,
            Self::Expired => InteractiveHandoffStatus::Expired,
        }
    }

    /// The summary or reason; empty for an expiry.
    pub fn text(&self) -> &str {
        match self {
            Self::Completed { summary } | Self::HandedBack { summary } => summary,
            Self::Failed { reason } => reason,
            Self::Expired => "",
        }
    }

    /// Rebuilds an outcome from its status and text (the storage form).
    /// `None` when `status` is not terminal.
    pub fn from_parts(status: InteractiveHandoffStatus, text: String) -> Option<Self> {
        match status {
            InteractiveHandoffStatus::Completed => Some(Self::Completed { summary: text }),
            InteractiveHandoffStatus::HandedBack => Some(Self::HandedBack { summary: text }),
            InteractiveHandoffStatus::Failed => Some(Self::Failed { reason: text }),
            InteractiveHandoffStatus::Expired => Some(Self::Expired),
            InteractiveHandoffStatus::Waiting | InteractiveHandoffStatus::Attached => None,
        }
    }

    /// Checks that the text is not blank (an expiry has none).
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for blank text or text with a NUL byte.
    pub fn validate(&self) -> DomainResult<()> {
        let field = match self {
            Self::Expired => return Ok(()),
            Self::Failed { .. } => "failure reason",
            _ => "summary",
        };
        check_non_blank(field, self.text())
    }
}

/// What a body sends to open a handoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpenInteractiveHandoff {
    /// The parent that is waiting.
    pub parent: InteractiveHandoffParent,
    /// Where the work runs.
    pub home: WaveHome,
    /// The directory to attach in; for a task parent, its worktree.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cwd: PathBuf,
    /// The model provider; must be the parent's.
    pub provider: String,
    /// The provider's conversation id; must be the parent's when it has one.
    pub provider_session_id: Option<String>,
    /// The generation of the body opening the handoff; must be the parent's current one.
    pub body_generation: u32,
    /// Why a person is needed.
    pub reason: String,
    /// Environment to add when attaching; a name that changes how
    /// programs load or start (`LD_*`, `BASH_ENV`, `PATH`, ...) is refused
    /// (contract C29).
    pub environment: BTreeMap<String, String>,
    /// The command a person runs to attach, as an argument vector.
    pub attach_argv: Vec<String>,
    /// The step, the deadline and the answer spec, each optional (C12,
    /// C14, C26).
    #[serde(flatten)]
    pub options: OpenOptions,
}

impl OpenInteractiveHandoff {
    /// Checks the request on its own (contract C1, invariant I5), and its
    /// environment against the attach boundary (contract C29), which a
    /// request must keep but a stored record of an earlier release may not.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] naming the first field that is wrong,
    /// or every environment name the attach boundary refuses.
    pub fn validate(&self) -> DomainResult<()> {
        check_fields(&fields_of!(self))?;
        check_attach_environment(&self.environment)?;
        self.options.check_answer_spec()
    }
}

/// A handoff record: everything needed to find, join and finish the work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InteractiveHandoff {
    /// The handoff id (`ih_...`).
    pub id: InteractiveHandoffId,
    /// The parent that is waiting.
    pub parent: InteractiveHandoffParent,
    /// The owning wave.
    pub wave_id: WaveId,
    /// Where the work runs.
    pub home: WaveHome,
    /// The directory to attach in.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cwd: PathBuf,
    /// The model provider.
    pub provider: String,
    /// The provider's conversation id.
    pub provider_session_id: Option<String>,
    /// The body generation that opened the handoff.
    pub body_generation: u32,
    /// Why a person is needed.
    pub reason: String,
    /// Environment added when attaching.
    pub environment: BTreeMap<String, String>,
    /// The attach command.
    pub attach_argv: Vec<String>,
    /// Where the handoff is in its life.
    pub status: InteractiveHandoffStatus,
    /// How it ended, once terminal.
    pub outcome: Option<InteractiveHandoffOutcome>,
    /// When it was opened.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// When it was first attached.
    #[serde(with = "time::serde::rfc3339::option")]
    pub attached_at: Option<OffsetDateTime>,
    /// When it was finished.
    #[serde(with = "time::serde::rfc3339::option")]
    pub terminal_at: Option<OffsetDateTime>,
    /// When the wake was claimed.
    #[serde(with = "time::serde::rfc3339::option")]
    pub wake_claimed_at: Option<OffsetDateTime>,
    /// The body generation that claimed the wake.
    pub wake_claimed_by_generation: Option<u32>,
    /// The body's name for the step it opened this handoff at (C12); a
    /// parent has at most one handoff per step, ever.
    #[serde(default)]
    pub step: Option<StepKey>,
    /// The deadline (C14): once it has passed, a handoff that is still
    /// active is due and expires at the next write or sweep. `None`: it
    /// waits for ever.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    /// The answers a person picks from (C26), when it asks with choices.
    #[serde(default)]
    pub choices: Option<Vec<Choice>>,
    /// The form a person fills in (C26), when it asks with a form.
    #[serde(default)]
    pub form: Option<FormSpec>,
    /// The answer it ends with when its deadline passes (C26).
    #[serde(default)]
    pub on_expiry: Option<Answer>,
    /// The answer it ended with (C26): a person's, given with the finish,
    /// or `on_expiry` when it expired. `None` while active.
    #[serde(default)]
    pub answer: Option<Answer>,
}

impl InteractiveHandoff {
    /// What the handoff asks a person for: its choices or its form (C26).
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] when a record names both (damage).
    pub fn answer_spec(&self) -> DomainResult<Option<AnswerSpec<'_>>> {
        AnswerSpec::of(self.choices.as_ref(), self.form.as_ref())
    }

    /// Returns true if and only if the handoff is not terminal.
    pub fn is_active(&self) -> bool {
        !self.status.is_terminal()
    }

    /// Returns true if and only if the handoff is active and its deadline
    /// is at or before `now` (C14): it can only expire.
    pub fn is_due(&self, now: OffsetDateTime) -> bool {
        self.is_active() && self.expires_at.is_some_and(|deadline| deadline <= now)
    }
}

/// The [`Fields`] of a request or a record (which name them alike): the
/// one list of what I5 checks in both.
macro_rules! fields_of {
    ($value:expr) => {
        Fields {
            cwd: &$value.cwd,
            provider: &$value.provider,
            provider_session_id: $value.provider_session_id.as_deref(),
            body_generation: $value.body_generation,
            reason: &$value.reason,
            environment: &$value.environment,
            attach_argv: &$value.attach_argv,
        }
    };
}
use fields_of;

/// The fields I5 constrains, shared by the request and the record.
struct Fields<'a> {
    cwd: &'a std::path::Path,
    provider: &'a str,
    provider_session_id: Option<&'a str>,
    body_generation: u32,
    reason: &'a str,
    environment: &'a BTreeMap<String, String>,
    attach_argv: &'a [String],
}

fn check_fields(fields: &Fields<'_>) -> DomainResult<()> {
    check_non_blank("provider", fields.provider)?;
    if let Some(session) = fields.provider_session_id {
        check_non_blank("provider session id", session)?;
    }
    if fields.body_generation == 0 {
        return Err(DomainError::invalid("body generation must be at least 1"));
    }
    check_non_blank("reason", fields.reason)?;
    check_absolute_path("cwd", fields.cwd)?;
    if fields.attach_argv.is_empty() {
        return Err(DomainError::invalid(
            "attach argv must name a command to run",
        ));
    }
    if fields.attach_argv.len() > MAX_ITEMS {
        return Err(DomainError::invalid(format!(
            "attach argv has {} arguments; the limit is {MAX_ITEMS}",
            fields.attach_argv.len()
        )));
    }
    for (index, argument) in fields.attach_argv.iter().enumerate() {
        if argument.is_empty() {
            return Err(DomainError::invalid(format!(
                "attach argv argument {index} is empty"
            )));
        }
        check_text("attach argv argument", argument)?;
    }
    if fields.environment.len() > MAX_ITEMS {
        return Err(DomainError::invalid(format!(
            "environment has {} entries; the limit is {MAX_ITEMS}",
            fields.environment.len()
        )));
    }
    for (key, value) in fields.environment {
        check_env_key(key)?;
        check_text("environment value", value)?;
    }
    Ok(())
}

/// Checks an environment variable name: not blank, no `=`, no NUL.
///
/// # Errors
/// [`DomainError::InvalidInput`] naming the problem.
pub fn check_env_key(key: &str) -> DomainResult<()> {
    check_non_blank("environment key", key)?;
    if key.contains('=') {
        return Err(DomainError::invalid(format!(
            "environment key {key:?} must not contain `=`"
        )));
    }
    Ok(())
}

//! The parents a handoff can belong to, and the rules they impose on it.
//!
//! Every parent records the generation of its current body process. A
//! handoff may only be opened by that body (contract C2), and a new body is
//! recorded only with a higher generation (contract C10).

use std::path::Path;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::child_session::ChildProcessGeneration;
use crate::error::{ConflictKind, DomainError, DomainResult};
use crate::id::{ProjectSessionId, WaveId};
use crate::interactive_handoff::{InteractiveHandoffParent, OpenInteractiveHandoff};
use crate::project_session::ProjectSession;
use crate::task::{TaskPr, TaskSession};
use crate::text::{check_absolute_path, check_non_blank, normalize_lexically};
use crate::timestamp::truncate_to_micros;
use crate::wave::{Wave, WaveStatus};

/// The kind of a parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ParentKind {
    /// A wave.
    Wave,
    /// A project session.
    Project,
    /// A task session.
    Task,
}

impl ParentKind {
    /// Every kind.
    pub const ALL: [Self; 3] = [Self::Wave, Self::Project, Self::Task];

    /// `wave`, `project` or `task`: the kind's name in a reference
    /// (`wave:wv_...`) and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wave => "wave",
            Self::Project => "project",
            Self::Task => "task",
        }
    }

    /// The kind named `text`.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for another name.
    pub fn parse(text: &str) -> DomainResult<Self> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| {
                DomainError::invalid(format!(
                    "parent kind {text:?} is unknown: use wave, project or task"
                ))
            })
    }
}

impl std::fmt::Display for ParentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A wave, project session or task session.
// Parents are loaded one at a time and passed by reference, so the size
// difference between a wave and a session costs nothing worth a `Box`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Parent {
    /// A wave.
    Wave(Wave),
    /// A project session.
    Project(ProjectSession),
    /// A task session.
    Task(TaskSession),
}

impl Parent {
    /// The reference a handoff uses to point at this parent.
    pub fn reference(&self) -> InteractiveHandoffParent {
        match self {
            Self::Wave(wave) => InteractiveHandoffParent::Wave(wave.id().clone()),
            Self::Project(project) => InteractiveHandoffParent::Project(project.id.clone()),
            Self::Task(task) => InteractiveHandoffParent::Task(task.id.clone()),
        }
    }

    /// The owning wave (a wave owns itself).
    pub fn wave_id(&self) -> &WaveId {
        match self {
            Self::Wave(wave) => wave.id(),
            Self::Project(project) => &project.wave_id,
            Self::Task(task) => &task.wave_id,
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ParentKind {
        match self {
            Self::Wave(_) => ParentKind::Wave,
            Self::Project(_) => ParentKind::Project,
            Self::Task(_) => ParentKind::Task,
        }
    }

    /// The owning project session: a project owns itself, a task belongs
    /// to its project, a wave to none.
    pub fn project_id(&self) -> Option<&ProjectSessionId> {
        match self {
            Self::Wave(_) => None,
            Self::Project(project) => Some(&project.id),
            Self::Task(task) => Some(&task.project_session_id),
        }
    }

    /// What people call it: the wave's name, the project's name, the
    /// title of the task's issue.
    pub fn name(&self) -> &str {
        match self {
            Self::Wave(wave) => wave.name(),
            Self::Project(project) => &project.launch.project.name,
            Self::Task(task) => &task.launch.issue.title,
        }
    }

    /// Returns true if and only if the parent will never run a body again.
    pub fn is_terminal(&self) -> bool {
        match self {
            Self::Wave(wave) => wave.status() == WaveStatus::Closed,
            Self::Project(project) => project.status.is_terminal(),
            Self::Task(task) => task.status.is_terminal(),
        }
    }

    /// The current body process, if one was recorded.
    pub fn latest_process(&self) -> Option<&ChildProcessGeneration> {
        match self {
            Self::Wave(wave) => wave.latest_process(),
            Self::Project(project) => project.latest_process.as_ref(),
            Self::Task(task) => task.latest_process.as_ref(),
        }
    }

    /// The generation of the current body. A parent with no recorded body is
    /// at generation 1: its first body needs no record to open a handoff.
    pub fn body_generation(&self) -> u32 {
        self.latest_process()
            .map_or(1, |process| process.generation)
    }

    /// The provider a handoff must name: the session's provider, or for a
    /// wave the provider of its recorded body (none when it has no body).
    pub fn provider(&self) -> Option<&str> {
        match self {
            Self::Wave(wave) => wave
                .latest_process()
                .map(|process| process.provider.as_str()),
            Self::Project(project) => Some(&project.provider),
            Self::Task(task) => Some(&task.provider),
        }
    }

    /// The provider conversation a handoff must carry, when there is one.
    pub fn provider_session_id(&self) -> Option<&str> {
        match self {
            Self::Wave(wave) => wave
                .latest_process()
                .and_then(|process| process.provider_session_id.as_deref()),
            Self::Project(project) => project.provider_session_id.as_deref(),
            Self::Task(task) => task.provider_session_id.as_deref(),
        }
    }

    /// The worktree a task's handoffs must run in.
    pub fn worktree(&self) -> Option<&Path> {
        match self {
            Self::Task(task) => Some(&task.worktree),
            Self::Wave(_) | Self::Project(_) => None,
        }
    }

    /// Checks an open request against this parent (contract C2).
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] if the request names another parent;
    /// [`DomainError::Conflict`] naming the rule: terminal parent, stale or
    /// future body generation, other provider, lost provider history, or a
    /// cwd that is not the task's worktree.
    pub fn check_open(&self, request: &OpenInteractiveHandoff) -> DomainResult<()> {
        let reference = self.reference();
        if request.parent != reference {
            return Err(DomainError::invalid(format!(
                "request is for {}, not {reference}",
                request.parent
            )));
        }
        if self.is_terminal() {
            return Err(DomainError::conflict(
                ConflictKind::ParentFinished,
                format!("parent {reference} is terminal; it cannot open a handoff"),
            ));
        }
        let current = self.body_generation();
        if request.body_generation != current {
            let (kind, age) = if request.body_generation < current {
                (ConflictKind::StaleGeneration, "stale")
            } else {
                (ConflictKind::GenerationNotRecorded, "not recorded yet")
            };
            return Err(DomainError::conflict(
                kind,
                format!(
                    "body generation {} is {age}: parent {reference} is at generation {current}",
                    request.body_generation
                ),
            ));
        }
        if let Some(provider) = self.provider() {
            if request.provider != provider {
                return Err(DomainError::conflict(
                    ConflictKind::ProviderMismatch,
                    format!(
                        "provider {:?} differs from parent {reference}'s provider {provider:?}",
                        request.provider
                    ),
                ));
            }
        }
        if let Some(session) = self.provider_session_id() {
            if request.provider_session_id.as_deref() != Some(session) {
                return Err(DomainError::conflict(
            ConflictKind::HistoryMismatch,
            format!(
                    "provider history must be preserved: parent {reference} continues provider session {session:?}"
                )));
            }
        }
        if let Some(worktree) = self.worktree() {
            if normalize_lexically(&request.cwd) != normalize_lexically(worktree) {
                return Err(DomainError::conflict(
                    ConflictKind::WorktreeMismatch,
                    format!(
                        "cwd {} is not the worktree {} of task {}",
                        request.cwd.display(),
                        worktree.display(),
                        reference.id_str()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks a parent before it is first stored.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for a blank name or provider, a relative
    /// or non-UTF-8 worktree, or a body generation of 0.
    pub fn validate_new(&self) -> DomainResult<()> {
        match self {
            Self::Wave(wave) => {
                check_non_blank("wave name", wave.name())?;
                check_non_blank("wave repo", wave.repo())?;
            }
            Self::Project(project) => check_non_blank("provider", &project.provider)?,
            Self::Task(task) => {
                check_non_blank("provider", &task.provider)?;
                check_absolute_path("worktree", &task.worktree)?;
            }
        }
        if let Some(session) = self.provider_session_id() {
            check_non_blank("provider session id", session)?;
        }
        if let Some(process) = self.latest_process() {
            check_process(process)?;
        }
        Ok(())
    }

    /// Records `process` as the parent's new body (contract C10).
    ///
    /// The generation must be higher than the current one (a parent with no
    /// recorded body is at 0 here). For a session the provider must be the
    /// session's, and when the session already continues a provider
    /// conversation the new body must continue the same one (or name none,
    /// inheriting it); a session without one adopts the body's.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] for generation 0 or a blank provider;
    /// [`DomainError::Conflict`] naming the rule broken.
    pub fn record_body(
        &self,
        process: ChildProcessGeneration,
        now: OffsetDateTime,
    ) -> DomainResult<Parent> {
        check_process(&process)?;
        let reference = self.reference();
        if self.is_terminal() {
            return Err(DomainError::conflict(
                ConflictKind::ParentFinished,
                format!("parent {reference} is terminal; it cannot record a new body"),
            ));
        }
        let current = self.latest_process().map_or(0, |p| p.generation);
        if process.generation <= current {
            return Err(DomainError::conflict(
                ConflictKind::GenerationNotNewer,
                format!(
                "generations only increase: parent {reference} is at generation {current}, got {}",
                process.generation
            ),
            ));
        }
        if let Self::Project(ProjectSession { provider, .. })
        | Self::Task(TaskSession { provider, .. }) = self
        {
            if &process.provider != provider {
                return Err(DomainError::conflict(
                    ConflictKind::ProviderMismatch,
                    format!(
                        "provider {:?} differs from parent {reference}'s provider {provider:?}",
                        process.provider
                    ),
                ));
            }
        }
        let session = self.provider_session_id().map(str::to_string);
        if let (Some(current), Some(new)) = (&session, &process.provider_session_id) {
            if current != new && !matches!(self, Self::Wave(_)) {
                return Err(DomainError::conflict(
            ConflictKind::HistoryMismatch,
            format!(
                    "provider history must be preserved: parent {reference} continues provider session {current:?}, not {new:?}"
                )));
            }
        }
        let mut process = process;
        if process.provider_session_id.is_none() && !matches!(self, Self::Wave(_)) {
            process.provider_session_id = session;
        }
        let now = truncate_to_micros(now);
        Ok(match self.clone() {
            Self::Wave(wave) => Self::Wave(wave.with_latest_process(process)),
            Self::Project(mut project) => {
                project.provider_session_id = process.provider_session_id.clone();
                project.latest_process = Some(process);
                project.updated_at = project.updated_at.max(now);
                Self::Project(project)
            }
            Self::Task(mut task) => {
                task.provider_session_id = process.provider_session_id.clone();
                task.latest_process = Some(process);
                task.updated_at = task.updated_at.max(now);
                Self::Task(task)
            }
        })
    }

    /// Returns true if and only if `process` (after inheriting the parent's
    /// provider session when it names none) is already the current body, so
    /// recording it again is a replay that must write nothing.
    pub fn is_current_body(&self, process: &ChildProcessGeneration) -> bool {
        let Some(current) = self.latest_process() else {
            return false;
        };
        if process.provider_session_id.is_none() && !matches!(self, Self::Wave(_)) {
            let mut inherited = process.clone();
            inherited.provider_session_id = self.provider_session_id().map(str::to_string);
            current == &inherited
        } else {
            current == process
        }
    }
}

/// Checks that a task's first PR belongs to it.
///
/// # Errors
/// [`DomainError::InvalidInput`] when `pr.task_session_id` is not `task.id`.
pub fn check_task_pr(task: &TaskSession, pr: &TaskPr) -> DomainResult<()> {
    if pr.task_session_id != task.id {
        return Err(DomainError::invalid(format!(
            "PR {} belongs to task {}, not {}",
            pr.id, pr.task_session_id, task.id
        )));
    }
    Ok(())
}

fn check_process(process: &ChildProcessGeneration) -> DomainResult<()> {
    if process.generation == 0 {
        return Err(DomainError::invalid("body generation must be at least 1"));
    }
    check_non_blank("provider", &process.provider)?;
    if let Some(session) = &process.provider_session_id {
        check_non_blank("provider session id", session)?;
    }
    Ok(())
}

//! Test fixtures shared by every test crate of the workspace (the domain's
//! own tests, the service's, the adapters', the conformance suite, the
//! harnesses and the benchmark): an open-request builder with defaults a
//! parent accepts, body processes, and project and task parents.
//!
//! Only with the `testing` feature (and in this crate's unit tests); a test
//! crate turns it on in its `[dev-dependencies]`:
//!
//! ```toml
//! lf-handoff-domain = { workspace = true, features = ["testing"] }
//! ```
//!
//! Everything here is pure, like the rest of the domain: ids and times are
//! the caller's (or the fixed [`T0`]); `lf_handoff_application::testing`
//! re-exports this module and adds parents with fresh ids.
//!
//! ```
//! use lf_handoff_domain::id::WaveId;
//! use lf_handoff_domain::testing::OpenRequest;
//! use lf_handoff_domain::wave::Wave;
//!
//! let wave = Wave::new(WaveId::from_uuid(uuid::Uuid::from_u128(1)), "w".into(), "/src/w".into());
//! let request = OpenRequest::on_wave(&wave).cwd("/src/w").reason("a login").build();
//! assert_eq!(request.body_generation, 1);
//! assert_eq!(request.reason, "a login");
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use time::macros::datetime;
use time::OffsetDateTime;

use crate::child_session::{ChildLeaseState, ChildProcessGeneration};
use crate::id::{ProjectSessionId, TaskPrId, TaskSessionId, WaveId};
use crate::interactive_handoff::{
    Answer, Choice, FormSpec, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffParent, OpenInteractiveHandoff, OpenOptions, StepKey,
};
use crate::parent::Parent;
use crate::project_session::{ProjectSession, ProjectSessionStatus};
use crate::session_context::{
    LinearIssueId, LinearIssueSnapshot, LinearProjectId, LinearProjectSnapshot,
    ProjectLaunchReceipt, TaskLaunchReceipt,
};
use crate::task::{
    PmWritebackState, TaskLifecyclePhase, TaskLifecyclePlan, TaskPr, TaskSession, TaskSessionStatus,
};
use crate::wave::Wave;
use crate::wave_home::WaveHome;

/// The fixed instant fixtures are stamped with: 2026-12-02 12:00 UTC.
pub const T0: OffsetDateTime = datetime!(2026-12-02 12:00:00 UTC);

/// Where a wave's or a project's handoffs run unless a test says otherwise.
pub const DEFAULT_CWD: &str = "/src/product";

/// An open request under construction: defaults that its parent accepts,
/// a setter per field a test varies, and the options of C12 and C14.
///
/// [`build`](Self::build) gives the request, options included:
/// `store.open_interactive_handoff(OpenRequest::on_wave(&wave).at_step(step).build())`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct OpenRequest {
    request: OpenInteractiveHandoff,
}

impl OpenRequest {
    /// A request on `parent` that a parent with no recorded body accepts:
    /// body generation 1, provider `codex`, no provider conversation; home
    /// `jack@local`, cwd [`DEFAULT_CWD`], a reason, one environment
    /// variable (`LF_HOME=/tmp/lf`) and `tmux attach-session -t lf-body`.
    pub fn new(parent: &InteractiveHandoffParent) -> Self {
        Self {
            request: OpenInteractiveHandoff {
                parent: parent.clone(),
                home: WaveHome::Local {
                    user: "jack".to_string(),
                },
                cwd: PathBuf::from(DEFAULT_CWD),
                provider: "codex".to_string(),
                provider_session_id: None,
                body_generation: 1,
                reason: "OAuth login requires a human".to_string(),
                environment: BTreeMap::from([("LF_HOME".to_string(), "/tmp/lf".to_string())]),
                attach_argv: ["tmux", "attach-session", "-t", "lf-body"]
                    .map(str::to_string)
                    .to_vec(),
                options: OpenOptions::default(),
            },
        }
    }

    /// A request that `parent` accepts: [`new`](Self::new) with the
    /// parent's provider, provider conversation and current body
    /// generation, and for a task its worktree as the cwd.
    pub fn on(parent: &Parent) -> Self {
        let mut built = Self::new(&parent.reference());
        let request = &mut built.request;
        if let Some(worktree) = parent.worktree() {
            request.cwd = worktree.to_path_buf();
        }
        if let Some(provider) = parent.provider() {
            request.provider = provider.to_string();
        }
        request.provider_session_id = parent.provider_session_id().map(str::to_string);
        request.body_generation = parent.body_generation();
        built
    }

    /// [`on`](Self::on) the wave.
    pub fn on_wave(wave: &Wave) -> Self {
        Self::on(&Parent::Wave(wave.clone()))
    }

    /// [`on`](Self::on) the task: in its worktree, at its body generation.
    pub fn on_task(task: &TaskSession) -> Self {
        Self::on(&Parent::Task(task.clone()))
    }

    /// The request that opened `handoff` (its parent, home, cwd, provider,
    /// generation, reason, environment and attach command), without its
    /// step or deadline.
    pub fn like(handoff: &InteractiveHandoff) -> Self {
        Self {
            request: OpenInteractiveHandoff {
                parent: handoff.parent.clone(),
                home: handoff.home.clone(),
                cwd: handoff.cwd.clone(),
                provider: handoff.provider.clone(),
                provider_session_id: handoff.provider_session_id.clone(),
                body_generation: handoff.body_generation,
                reason: handoff.reason.clone(),
                environment: handoff.environment.clone(),
                attach_argv: handoff.attach_argv.clone(),
                options: OpenOptions::default(),
            },
        }
    }

    /// Where the work runs.
    pub fn home(mut self, home: WaveHome) -> Self {
        self.request.home = home;
        self
    }

    /// The directory to attach in.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.request.cwd = cwd.into();
        self
    }

    /// The model provider.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.request.provider = provider.into();
        self
    }

    /// The provider's conversation id.
    pub fn provider_session_id(mut self, id: Option<&str>) -> Self {
        self.request.provider_session_id = id.map(str::to_string);
        self
    }

    /// The generation of the body opening the handoff.
    pub fn body_generation(mut self, generation: u32) -> Self {
        self.request.body_generation = generation;
        self
    }

    /// Why a person is needed.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.request.reason = reason.into();
        self
    }

    /// The environment to add when attaching (replacing the default one).
    pub fn environment(mut self, environment: BTreeMap<String, String>) -> Self {
        self.request.environment = environment;
        self
    }

    /// The command a person runs to attach.
    pub fn attach_argv(mut self, argv: Vec<String>) -> Self {
        self.request.attach_argv = argv;
        self
    }

    /// The body's step (C12).
    pub fn at_step(mut self, step: StepKey) -> Self {
        self.request.options.step = Some(step);
        self
    }

    /// The deadline (C14).
    pub fn expires_at(mut self, deadline: OffsetDateTime) -> Self {
        self.request.options.expires_at = Some(deadline);
        self
    }

    /// The choices a person picks from (C26), each `value` or
    /// `value=Label`.
    ///
    /// # Panics
    /// On a choice that [`Choice::parse`] refuses (a test's mistake).
    pub fn choices(mut self, choices: &[&str]) -> Self {
        let parsed = choices
            .iter()
            .map(|text| Choice::parse(text).unwrap_or_else(|e| panic!("choice {text:?}: {e}")))
            .collect();
        self.request.options.choices = Some(parsed);
        self
    }

    /// The form a person fills in (C26).
    pub fn form(mut self, form: FormSpec) -> Self {
        self.request.options.form = Some(form);
        self
    }

    /// The answer the deadline gives (C26).
    pub fn on_expiry(mut self, answer: Answer) -> Self {
        self.request.options.on_expiry = Some(answer);
        self
    }

    /// The request.
    pub fn build(self) -> OpenInteractiveHandoff {
        self.request
    }
}

impl From<OpenRequest> for OpenInteractiveHandoff {
    fn from(built: OpenRequest) -> Self {
        built.request
    }
}

/// A request to open a handoff on `wave` (no recorded body: generation 1)
/// in `cwd`, with the [`OpenRequest`] defaults.
pub fn wave_request(wave: &Wave, cwd: &Path) -> OpenInteractiveHandoff {
    OpenRequest::on_wave(wave).cwd(cwd).build()
}

/// A request that `task` accepts, with the [`OpenRequest`] defaults.
pub fn task_request(task: &TaskSession) -> OpenInteractiveHandoff {
    OpenRequest::on_task(task).build()
}

/// A body process of `generation` talking to codex, started at [`T0`].
pub fn body(generation: u32, provider_session_id: Option<&str>) -> ChildProcessGeneration {
    ChildProcessGeneration {
        generation,
        pid: Some(4242),
        process_group_id: Some(4242),
        tmux_name: format!("lf-body-{generation}"),
        agent: "codex".to_string(),
        provider: "codex".to_string(),
        provider_session_id: provider_session_id.map(str::to_string),
        started_at: T0,
        state: ChildLeaseState::Active,
        outcome: None,
    }
}

/// The Linear project every fixture parent belongs to.
fn linear_project() -> LinearProjectSnapshot {
    LinearProjectSnapshot {
        id: linear_id(LinearProjectId::new("project-1")),
        slug: "loopflow-api".to_string(),
        name: "Loopflow API".to_string(),
        prompt_context: "Keep one model everywhere.".to_string(),
    }
}

/// A constant, valid Linear id: its parse cannot fail.
fn linear_id<T>(parsed: Result<T, crate::DomainError>) -> T {
    match parsed {
        Ok(id) => id,
        Err(error) => unreachable!("a fixture's Linear id is valid: {error}"),
    }
}

/// A running project session `id` under `wave` at body generation 1 (with
/// a provider conversation), stamped [`T0`].
pub fn project(id: ProjectSessionId, wave: &WaveId) -> ProjectSession {
    ProjectSession {
        id,
        launch: ProjectLaunchReceipt {
            project: linear_project(),
            pm_snapshot_synced_at: T0.unix_timestamp(),
        },
        wave_id: wave.clone(),
        current_directive_version: 1,
        incorporated_directive_version: 1,
        status: ProjectSessionStatus::Running,
        status_reason: "project body active".to_string(),
        status_at: T0,
        iteration: 1,
        observation_cursor: 7,
        last_state_fingerprint: Some("fp-1".to_string()),
        agent: "codex".to_string(),
        provider: "codex".to_string(),
        provider_session_id: Some("project-thread".to_string()),
        latest_process: Some(body(1, Some("project-thread"))),
        execution: None,
        abandon_intent: None,
        created_at: T0,
        updated_at: T0,
    }
}

/// A running task session `id` under `project`, in `worktree`, at body
/// generation 4 (with a provider conversation), stamped [`T0`].
pub fn task(id: TaskSessionId, project: &ProjectSession, worktree: &Path) -> TaskSession {
    TaskSession {
        id,
        launch: TaskLaunchReceipt {
            issue: LinearIssueSnapshot {
                id: linear_id(LinearIssueId::new("issue-1")),
                identifier: "W2-175".to_string(),
                title: "Hand interactive work to a human".to_string(),
                description: "Preserve the same provider history.".to_string(),
            },
            project: linear_project(),
            pm_snapshot_synced_at: T0.unix_timestamp(),
        },
        pm_writeback: PmWritebackState::Pending,
        wave_id: project.wave_id.clone(),
        project_session_id: project.id.clone(),
        current_directive_version: 2,
        incorporated_directive_version: 1,
        status: TaskSessionStatus::Running,
        status_reason: "task body active".to_string(),
        status_at: T0,
        worktree: worktree.to_path_buf(),
        workspace_slug: "interactive-handoff".to_string(),
        lifecycle: TaskLifecyclePlan::standard("task"),
        lifecycle_phase: TaskLifecyclePhase::Iterate,
        phase_epoch: 1,
        phase_cursor: 0,
        phase_iteration: 3,
        gate_cycle: 0,
        gate_proposal: None,
        agent: "codex".to_string(),
        provider: "codex".to_string(),
        provider_session_id: Some("task-thread".to_string()),
        latest_process: Some(body(4, Some("task-thread"))),
        execution: None,
        abandon_intent: None,
        created_at: T0,
        updated_at: T0,
    }
}

/// The first PR `id` of `task`, stamped [`T0`].
pub fn task_pr(id: TaskPrId, task: &TaskSession) -> TaskPr {
    TaskPr {
        id,
        task_session_id: task.id.clone(),
        sequence: 1,
        slug: "interactive-handoff".to_string(),
        branch: "jack/interactive-handoff".to_string(),
        base_commit: "deadbeef".to_string(),
        parent_pr_id: None,
        publication: None,
        merge_commit: None,
        abandoned_at: None,
        ci_observation: None,
        created_at: T0,
        updated_at: T0,
    }
}

/// The three outcome kinds with distinct texts, chosen by `n`.
pub fn outcome(n: usize) -> InteractiveHandoffOutcome {
    match n % 3 {
        0 => InteractiveHandoffOutcome::Completed {
            summary: format!("finished by {n}"),
        },
        1 => InteractiveHandoffOutcome::HandedBack {
            summary: format!("handed back by {n}"),
        },
        _ => InteractiveHandoffOutcome::Failed {
            reason: format!("failed by {n}"),
        },
    }
}

/// The JSON Schema of [`sample_form`].
pub const SAMPLE_FORM: &str = r#"{
    "type": "object",
    "title": "Deploy settings",
    "properties": {
        "budget": {"type": "integer", "title": "Budget (EUR)", "minimum": 0, "maximum": 1000,
                   "description": "What the run may spend"},
        "branch": {"type": "string", "minLength": 1, "maxLength": 20},
        "env": {"type": "string", "enum": ["staging", "prod"], "default": "staging"},
        "ratio": {"type": "number", "minimum": 0.5},
        "notify": {"type": "boolean", "default": false}
    },
    "required": ["budget", "branch"]
}"#;

/// A form of every field type and rule (C26): `budget` (integer 0-1000,
/// required), `branch` (string of 1-20 characters, required), `env`
/// (`staging` or `prod`), `ratio` (number, at least 0.5) and `notify`
/// (boolean), in that order.
///
/// # Panics
/// Never: [`SAMPLE_FORM`] is a valid form.
pub fn sample_form() -> FormSpec {
    serde_json::from_str(SAMPLE_FORM).unwrap_or_else(|e| panic!("sample form: {e}"))
}

/// An answer that fits [`sample_form`].
pub fn sample_form_answer() -> Answer {
    Answer(serde_json::json!({"budget": 250, "branch": "release/1.2", "notify": true}))
}

//! Building and storing parents from the few flags the command line takes:
//! `wave create`, `project create`, `task create` and `task body`; and
//! listing them: `parents`.
//!
//! The command line knows less than an orchestrator does (no planning-tool
//! snapshot, no tmux session, no PR branch), so every field the flags do
//! not give gets a neutral value; `docs/CLI.md` lists them. The rules that
//! matter (provider, provider history, generations, worktree) are the
//! domain's, applied by the store.

use lf_handoff_adapters::{GenerateId, ParentQuery, Store, StoreError, StoreResult};
use lf_handoff_domain::child_session::{ChildLeaseState, ChildProcessGeneration};
use lf_handoff_domain::id::{ProjectSessionId, TaskPrId, TaskSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::{ProjectSession, ProjectSessionStatus};
use lf_handoff_domain::session_context::{
    LinearIssueId, LinearIssueSnapshot, LinearProjectId, LinearProjectSnapshot,
    ProjectLaunchReceipt, TaskLaunchReceipt,
};
use lf_handoff_domain::task::{
    PmWritebackState, TaskLifecyclePhase, TaskLifecyclePlan, TaskPr, TaskSession, TaskSessionStatus,
};
use lf_handoff_domain::timestamp::truncate_to_micros;
use lf_handoff_domain::wave::Wave;
use time::OffsetDateTime;

use crate::args::{ParentsArgs, ProjectCreateArgs, SessionBodyArgs, TaskBodyArgs, TaskCreateArgs};
use crate::context::Context;
use crate::error::CliResult;
use crate::output::{cut, emit, emit_json, note, note_next_page, printable, terminal_width};

/// `parents`: the parents the filters select, in id order, as a table
/// or (`--json`) an array of `{"kind": ..., "value": <the record>}`.
///
/// # Errors
/// As `Store::list_parents`: `NotFound` for an unknown `--wave` or
/// `--project`.
pub async fn list(ctx: &Context, args: ParentsArgs) -> CliResult<()> {
    let filtered = args.kind.is_some() || args.wave.is_some() || args.project.is_some();
    let query = ParentQuery {
        kind: args.kind,
        wave: args.wave,
        project: args.project,
        after: args.after,
        limit: args.limit,
    };
    let parents = ctx
        .store
        .list_parents(query.clone())
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return emit_json(&parents);
    }
    if parents.is_empty() {
        note(match (&query.after, filtered) {
            (Some(_), _) => "no more parents",
            (None, true) => "no parents match",
            (None, false) => "no parents",
        });
        return Ok(());
    }
    emit(&parent_table(&parents, terminal_width()))?;
    let last = parents.last().map(Parent::reference);
    let last = last.as_ref().map(InteractiveHandoffParent::id_str);
    note_next_page(query.limit, parents.len(), last, "");
    Ok(())
}

/// The table of `parents`: one row each, the name last, cut to `width`.
fn parent_table(parents: &[Parent], width: Option<usize>) -> String {
    let header = ["ID", "KIND", "WAVE", "PROJECT", "BODY", "STATUS"];
    let cells: Vec<[String; 6]> = parents
        .iter()
        .map(|parent| {
            [
                parent.reference().id_str().to_string(),
                parent.kind().to_string(),
                parent.wave_id().to_string(),
                match parent {
                    Parent::Task(task) => task.project_session_id.to_string(),
                    Parent::Wave(_) | Parent::Project(_) => "-".to_string(),
                },
                parent.body_generation().to_string(),
                status_name(parent),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let prefix: usize = widths.iter().map(|w| w + 2).sum();
    let line = |fields: &[&str], name: &str| {
        let mut text = String::new();
        for (field, width) in fields.iter().zip(&widths) {
            text.push_str(&format!("{field:<width$}  "));
        }
        match width {
            Some(width) => text.push_str(&cut(name, width.saturating_sub(prefix))),
            None => text.push_str(name),
        }
        format!("{}\n", text.trim_end())
    };
    let mut out = line(&header, "NAME");
    for (parent, row) in parents.iter().zip(&cells) {
        let fields: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&fields, &printable(parent.name())));
    }
    out
}

/// The parent's status as its JSON names it (`active`, `running`, ...).
fn status_name(parent: &Parent) -> String {
    let status = match parent {
        Parent::Wave(wave) => serde_json::to_value(wave.status()),
        Parent::Project(project) => serde_json::to_value(project.status),
        Parent::Task(task) => serde_json::to_value(task.status),
    };
    status
        .ok()
        .and_then(|value| value.as_str().map(str::to_string))
        .unwrap_or_else(|| "-".to_string())
}

/// Creates and returns a wave.
///
/// # Errors
/// As `Store::create_wave`.
pub async fn create_wave(store: &Store, name: &str, repo: &str) -> StoreResult<Wave> {
    let wave = Wave::new(WaveId::new(), name.to_string(), repo.to_string());
    store.create_wave(&wave).await?;
    Ok(wave)
}

/// Creates and returns a project session under an existing wave.
///
/// # Errors
/// `NotFound` for an unknown wave; otherwise as
/// `Store::create_project_session`.
pub async fn create_project(
    store: &Store,
    args: &ProjectCreateArgs,
) -> StoreResult<ProjectSession> {
    let now = now(store);
    let id = ProjectSessionId::new();
    let process = first_body(&args.body, now);
    let project = ProjectSession {
        launch: ProjectLaunchReceipt {
            project: project_snapshot(&id, &args.name)?,
            pm_snapshot_synced_at: now.unix_timestamp(),
        },
        id,
        wave_id: args.wave.clone(),
        current_directive_version: 0,
        incorporated_directive_version: 0,
        status: ProjectSessionStatus::Running,
        status_reason: "created with lf-handoff project create".to_string(),
        status_at: now,
        iteration: 0,
        observation_cursor: 0,
        last_state_fingerprint: None,
        agent: args.body.provider.clone(),
        provider: args.body.provider.clone(),
        provider_session_id: args.body.provider_session.clone(),
        latest_process: Some(process),
        execution: None,
        abandon_intent: None,
        created_at: now,
        updated_at: now,
    };
    store.create_project_session(&project).await?;
    Ok(project)
}

/// Creates and returns a task session (with its first PR) under an existing
/// project session; the task inherits the project's planning snapshot.
///
/// # Errors
/// `NotFound` for an unknown project; otherwise as
/// `Store::create_task_session`.
pub async fn create_task(store: &Store, args: &TaskCreateArgs) -> StoreResult<TaskSession> {
    let project = match store
        .get_parent(&InteractiveHandoffParent::Project(args.project.clone()))
        .await?
    {
        Some(Parent::Project(project)) => project,
        _ => {
            return Err(StoreError::NotFound(format!(
                "project session {} does not exist",
                args.project
            )))
        }
    };
    let now = now(store);
    let id = TaskSessionId::new();
    let identifier = args.identifier.clone().unwrap_or_default();
    let issue_id = if identifier.trim().is_empty() {
        id.to_string()
    } else {
        identifier.clone()
    };
    let workspace_slug = slug(
        if identifier.trim().is_empty() {
            args.worktree
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default()
        } else {
            &identifier
        },
        "task",
    );
    let process = first_body(&args.body, now);
    let task = TaskSession {
        id: id.clone(),
        launch: TaskLaunchReceipt {
            issue: LinearIssueSnapshot {
                id: LinearIssueId::new(issue_id)?,
                identifier,
                title: args.title.clone().unwrap_or_default(),
                description: String::new(),
            },
            project: project.launch.project.clone(),
            pm_snapshot_synced_at: now.unix_timestamp(),
        },
        pm_writeback: PmWritebackState::Current,
        wave_id: project.wave_id.clone(),
        project_session_id: project.id.clone(),
        current_directive_version: 0,
        incorporated_directive_version: 0,
        status: TaskSessionStatus::Running,
        status_reason: "created with lf-handoff task create".to_string(),
        status_at: now,
        worktree: args.worktree.clone(),
        workspace_slug: workspace_slug.clone(),
        lifecycle: TaskLifecyclePlan::standard("task"),
        lifecycle_phase: TaskLifecyclePhase::Plan,
        phase_epoch: 0,
        phase_cursor: 0,
        phase_iteration: 0,
        gate_cycle: 0,
        gate_proposal: None,
        agent: args.body.provider.clone(),
        provider: args.body.provider.clone(),
        provider_session_id: args.body.provider_session.clone(),
        latest_process: Some(process),
        execution: None,
        abandon_intent: None,
        created_at: now,
        updated_at: now,
    };
    let pr = TaskPr {
        id: TaskPrId::new(),
        task_session_id: id,
        sequence: 1,
        slug: workspace_slug,
        branch: String::new(),
        base_commit: String::new(),
        parent_pr_id: None,
        publication: None,
        merge_commit: None,
        abandoned_at: None,
        ci_observation: None,
        created_at: now,
        updated_at: now,
    };
    store.create_task_session(&task, &pr).await?;
    Ok(task)
}

/// What `task body` did.
#[derive(Debug)]
pub struct RecordedBody {
    /// The parent as stored.
    pub parent: Parent,
    /// False when the parent was already at this body (a replay).
    pub changed: bool,
}

/// Records a new body for a parent. Asking again for the generation the
/// parent is already at, with the same provider and conversation, is a
/// replay that writes nothing, so a retried command succeeds.
///
/// # Errors
/// `NotFound` for an unknown parent; `InvalidInput` when a wave without a
/// body is given no provider; otherwise as `Store::record_body`.
pub async fn record_body(store: &Store, args: &TaskBodyArgs) -> StoreResult<RecordedBody> {
    let current = store
        .get_parent(&args.parent)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("parent {} does not exist", args.parent)))?;
    if let Some(latest) = current.latest_process() {
        let same_provider = args.provider.as_ref().is_none_or(|p| p == &latest.provider);
        let same_session =
            args.provider_session.is_none() || args.provider_session == latest.provider_session_id;
        if latest.generation == args.generation && same_provider && same_session {
            return Ok(RecordedBody {
                parent: current,
                changed: false,
            });
        }
    }
    let Some(provider) = args
        .provider
        .clone()
        .or_else(|| current.provider().map(str::to_string))
    else {
        return Err(StoreError::InvalidInput(format!(
            "{} has no body yet, so it has no provider to inherit; pass --provider",
            args.parent
        )));
    };
    let agent = current
        .latest_process()
        .map_or_else(|| provider.clone(), |latest| latest.agent.clone());
    let process = body(
        args.generation,
        &agent,
        &provider,
        args.provider_session.clone(),
        now(store),
    );
    let parent = store.record_body(&args.parent, process).await?;
    Ok(RecordedBody {
        parent,
        changed: true,
    })
}

/// The body process a new session starts with, as `args` describe it
/// (the agent is the provider).
fn first_body(args: &SessionBodyArgs, now: OffsetDateTime) -> ChildProcessGeneration {
    body(
        args.generation,
        &args.provider,
        &args.provider,
        args.provider_session.clone(),
        now,
    )
}

/// A running body process of `generation`. The command line does not know
/// the process id or tmux session, so those are left empty.
pub fn body(
    generation: u32,
    agent: &str,
    provider: &str,
    provider_session_id: Option<String>,
    now: OffsetDateTime,
) -> ChildProcessGeneration {
    ChildProcessGeneration {
        generation,
        pid: None,
        process_group_id: None,
        tmux_name: String::new(),
        agent: agent.to_string(),
        provider: provider.to_string(),
        provider_session_id,
        started_at: now,
        state: ChildLeaseState::Active,
        outcome: None,
    }
}

/// The project snapshot of a project created from the command line: there
/// is no planning-tool project, so its id is the session's own id.
fn project_snapshot(id: &ProjectSessionId, name: &str) -> StoreResult<LinearProjectSnapshot> {
    if name.trim().is_empty() {
        return Err(StoreError::InvalidInput(
            "project name must not be blank".to_string(),
        ));
    }
    Ok(LinearProjectSnapshot {
        id: LinearProjectId::new(id.to_string())?,
        slug: slug(name, "project"),
        name: name.to_string(),
        prompt_context: String::new(),
    })
}

/// The store's clock, at the precision every backend keeps, so the value
/// printed equals the value a later read returns.
fn now(store: &Store) -> OffsetDateTime {
    truncate_to_micros(store.now())
}

/// A URL slug: lowercase ASCII letters and digits, other runs as `-`;
/// `fallback` when nothing is left.
fn slug(text: &str, fallback: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        fallback.to_string()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_lowercase_words_joined_by_dashes() {
        assert_eq!(slug("Loopflow API", "p"), "loopflow-api");
        assert_eq!(slug("W2-175", "t"), "w2-175");
        assert_eq!(slug("  --x__y--  ", "t"), "x-y");
        assert_eq!(slug("ü", "task"), "task");
    }
}

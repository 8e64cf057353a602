//! What a hook does for each event (C27):
//!
//! - **Permission request**: ends what the session left open (the person
//!   went on at the terminal), opens a handoff with the choices allow and
//!   deny under the session's parent, and waits for a person at most the
//!   configured bound. A decision prints; no decision in time prints
//!   nothing and leaves the handoff open.
//! - **Idle** (Claude Code's `idle_prompt` notification, Codex's turn
//!   end): opens a handoff with the attach command, unless one waits
//!   already.
//! - **Prompt** (the person typed at the agent's terminal): ends what the
//!   session left open, as the actor `terminal`.
//! - **Session end**: ends what the session left open.
//!
//! Every failure is a [`HookError`]; the caller logs it and decides
//! nothing.

use std::time::Duration;

use lf_handoff_application::{ConflictKind, Store, StoreError, Waited};
use lf_handoff_domain::interactive_handoff::{
    Actor, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
};
use time::OffsetDateTime;

use crate::config::HookConfig;
use crate::decision::Decision;
use crate::describe::{
    base_is_identified, idle_reason, permission_reason, request_base, session_prefix,
    session_wave_id,
};
use crate::input::{EventKind, HookError, HookEvent, PermissionRequest};
use crate::registry::{
    decision_of, end_as_terminal, open, parent_of, session_open, Opening, ANSWERED_AT_TERMINAL,
    SESSION_ENDED,
};
use crate::tmux::attach_argv;

/// How long a hook may take beyond its wait, for opening the store,
/// reading and writing: after it, the hook gives up and decides nothing.
pub const MARGIN: Duration = Duration::from_secs(5);

/// What a hook ends with: what it prints for the agent (nothing, or a
/// decision) and a line for its log, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The decision to print, if a person made one.
    pub decision: Option<Decision>,
    /// What to log on stderr (why nothing was decided, or what was done).
    pub note: Option<String>,
}

impl Outcome {
    fn note(note: impl Into<String>) -> Self {
        Self {
            decision: None,
            note: Some(note.into()),
        }
    }
}

/// Handles `event` on `store`, within the wait and [`MARGIN`]; `lookup`
/// reads the environment (`TMUX`, `TMUX_PANE`).
///
/// # Errors
/// A [`HookError`] naming why nothing was decided: a store error, or the
/// time running out.
pub async fn handle(
    store: &Store,
    event: &HookEvent,
    config: &HookConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Outcome, HookError> {
    // The history names the agent session as the opener (a served store
    // names the token instead).
    let name: String = format!("{} {}", event.agent, event.session)
        .chars()
        .take(100)
        .collect();
    let store = &match Actor::parse(&name) {
        Ok(actor) => store.with_actor(actor),
        Err(_) => store.clone(),
    };
    let limit = match event.kind {
        EventKind::Permission(_) => config.wait + MARGIN,
        _ => MARGIN,
    };
    match tokio::time::timeout(limit, dispatch(store, event, config, lookup)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(HookError::new(format!(
            "gave up after {}s without a decision",
            limit.as_secs()
        ))),
    }
}

async fn dispatch(
    store: &Store,
    event: &HookEvent,
    config: &HookConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Outcome, HookError> {
    match &event.kind {
        EventKind::Permission(request) => permission(store, event, request, config, lookup).await,
        EventKind::Idle { message } => idle(store, event, message.as_deref(), config, lookup).await,
        EventKind::Prompt => {
            let outcome = InteractiveHandoffOutcome::HandedBack {
                summary: ANSWERED_AT_TERMINAL.into(),
            };
            end_session(store, event, config, &outcome).await
        }
        EventKind::SessionEnd { reason } => {
            let reason = match reason {
                Some(reason) => format!("{SESSION_ENDED} ({reason})"),
                None => SESSION_ENDED.to_string(),
            };
            end_session(
                store,
                event,
                config,
                &InteractiveHandoffOutcome::Failed { reason },
            )
            .await
        }
        EventKind::Ignored(what) => Ok(Outcome::note(format!("nothing to do for {what}"))),
    }
}

async fn permission(
    store: &Store,
    event: &HookEvent,
    request: &PermissionRequest,
    config: &HookConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Outcome, HookError> {
    let parent = parent_of(store, event, config).await.map_err(store_error)?;
    let reference = parent.reference();
    let prefix = session_prefix(event.agent, &event.session);
    let base = request_base(request);
    let key = format!("{prefix}{base}");
    // A hook of this very call already waits (the agent ran it again):
    // wait on the same handoff.
    let open_ones = left_open(store, &reference, &prefix).await?;
    if let Some(same) = open_ones.iter().find(|h| same_request(h, &key)) {
        return wait(store, same, config).await;
    }
    end_left_open(store, &open_ones).await?;
    let step = if base_is_identified(&base) {
        key.clone()
    } else {
        format!("{key}:{}", unique())
    };
    let now = store.now();
    let opening = Opening {
        event,
        parent: &parent,
        reason: permission_reason(event.agent, request),
        attach_argv: attach_argv(event.agent, &event.cwd, lookup).0,
        step,
        choices: true,
    };
    match open(store, opening, config, now).await? {
        Ok((handoff, created)) => {
            if !created && !handoff.is_active() {
                // The same call again, already answered.
                return Ok(answered(&handoff, config));
            }
            wait(store, &handoff, config).await
        }
        Err(error) if error.conflict_kind() == Some(ConflictKind::ParentBusy) => {
            // Another hook of this call opened first, or the parent waits
            // on someone else's handoff.
            let open_ones = left_open(store, &reference, &prefix).await?;
            match open_ones.iter().find(|h| same_request(h, &key)) {
                Some(same) => wait(store, same, config).await,
                None => Err(busy(error)),
            }
        }
        Err(error) => Err(store_error(error)),
    }
}

/// Waits for a person on `handoff`, at most the configured bound.
async fn wait(
    store: &Store,
    handoff: &InteractiveHandoff,
    config: &HookConfig,
) -> Result<Outcome, HookError> {
    match store
        .wait(&handoff.id, Some(config.wait))
        .await
        .map_err(store_error)?
    {
        Waited::Ended(finished) => Ok(answered(&finished, config)),
        Waited::TimedOut(open) => Ok(Outcome::note(format!(
            "no answer within {}s; handoff {} stays open, and the agent asks at its own prompt",
            config.wait.as_secs(),
            open.id
        ))),
    }
}

fn answered(handoff: &InteractiveHandoff, config: &HookConfig) -> Outcome {
    match decision_of(handoff, config) {
        Some(decision) => Outcome {
            decision: Some(decision),
            note: None,
        },
        None => Outcome::note(format!(
            "handoff {} ended {} without a decision for the agent",
            handoff.id, handoff.status
        )),
    }
}

async fn idle(
    store: &Store,
    event: &HookEvent,
    message: Option<&str>,
    config: &HookConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Outcome, HookError> {
    let parent = parent_of(store, event, config).await.map_err(store_error)?;
    let prefix = session_prefix(event.agent, &event.session);
    let idle_key = format!("{prefix}idle");
    let open_ones = left_open(store, &parent.reference(), &prefix).await?;
    if let Some(waiting) = open_ones.iter().find(|h| same_request(h, &idle_key)) {
        return Ok(Outcome::note(format!(
            "handoff {} already waits for this session's next prompt",
            waiting.id
        )));
    }
    end_left_open(store, &open_ones).await?;
    let now = store.now();
    let opening = Opening {
        event,
        parent: &parent,
        reason: idle_reason(event, message),
        attach_argv: attach_argv(event.agent, &event.cwd, lookup).0,
        step: format!("{idle_key}:{}", unique()),
        choices: false,
    };
    let (handoff, _) =
        open(store, opening, config, now)
            .await?
            .map_err(|error| match error.conflict_kind() {
                Some(ConflictKind::ParentBusy) => busy(error),
                _ => store_error(error),
            })?;
    Ok(Outcome::note(format!(
        "opened handoff {} until the session's next prompt",
        handoff.id
    )))
}

/// Ends what the session left open with `outcome` (nothing to do when
/// the session never opened anything: no wave is made for it).
async fn end_session(
    store: &Store,
    event: &HookEvent,
    config: &HookConfig,
    outcome: &InteractiveHandoffOutcome,
) -> Result<Outcome, HookError> {
    let reference = match &config.parent {
        Some(parent) => parent.clone(),
        None => InteractiveHandoffParent::Wave(session_wave_id(event.agent, &event.session)),
    };
    let prefix = session_prefix(event.agent, &event.session);
    let open_ones = match session_open(store, &reference, &prefix).await {
        Ok(open_ones) => open_ones,
        Err(StoreError::NotFound(_)) => Vec::new(),
        Err(error) => return Err(store_error(error)),
    };
    let ended = end_as_terminal(store, &open_ones, outcome)
        .await
        .map_err(store_error)?;
    Ok(Outcome {
        decision: None,
        note: (ended > 0).then(|| format!("ended {ended} handoff(s) the session left open")),
    })
}

/// The handoffs the session left open under `reference`. A served store
/// lists handoffs only to a token of scope person: with an agent token
/// alone the hook sees none (and can end none), and asks all the same.
async fn left_open(
    store: &Store,
    reference: &InteractiveHandoffParent,
    prefix: &str,
) -> Result<Vec<InteractiveHandoff>, HookError> {
    match session_open(store, reference, prefix).await {
        Ok(open_ones) => Ok(open_ones),
        Err(error) if error.is_denied() => Ok(Vec::new()),
        Err(error) => Err(store_error(error)),
    }
}

/// The parent waits on another handoff: one the session left open that
/// this hook could not see or end, or someone else's.
fn busy(error: StoreError) -> HookError {
    HookError::new(format!(
        "store: {error} (through a service, give the hook's token the person scope as well as \
         agent, so it can end what the session left open)"
    ))
}

/// Ends the session's `open_ones` as answered at the terminal: the
/// session went on, so a person answered there.
async fn end_left_open(store: &Store, open_ones: &[InteractiveHandoff]) -> Result<(), HookError> {
    let outcome = InteractiveHandoffOutcome::HandedBack {
        summary: ANSWERED_AT_TERMINAL.into(),
    };
    end_as_terminal(store, open_ones, &outcome)
        .await
        .map(|_| ())
        .map_err(store_error)
}

/// Whether `handoff` was opened for `key`: its step is `key`, or `key`
/// and a unique suffix (`key:...`).
fn same_request(handoff: &InteractiveHandoff, key: &str) -> bool {
    handoff.step.as_ref().is_some_and(|step| {
        let step = step.as_str();
        step == key
            || step
                .strip_prefix(key)
                .is_some_and(|rest| rest.starts_with(':'))
    })
}

/// A suffix that makes a step key new: the current time in nanoseconds and
/// this process's id, in hex.
fn unique() -> String {
    let nanos = OffsetDateTime::now_utc().unix_timestamp_nanos();
    format!("{nanos:x}{:x}", std::process::id())
}

fn store_error(error: StoreError) -> HookError {
    HookError::new(format!("store: {error}"))
}

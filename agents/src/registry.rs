//! Every store call a hook makes, in one place: the session's wave (made
//! idempotently), the handoffs the session left open, opening a handoff
//! with the choices allow and deny (C26), ending what the session left
//! open as the actor `terminal`, and reading a person's decision from a
//! finished handoff.

use std::collections::BTreeMap;

use lf_handoff_application::ports::ListQuery;
use lf_handoff_application::{Store, StoreError, StoreResult};
use lf_handoff_domain::interactive_handoff::{
    Actor, Answer, Choice, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, OpenInteractiveHandoff, OpenOptions, StepKey,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use time::OffsetDateTime;

use crate::config::{Behavior, HookConfig};
use crate::decision::Decision;
use crate::describe::{session_wave_id, session_wave_name};
use crate::input::{HookError, HookEvent};

/// The actor the history names for what the hook ends because the person
/// went on at the agent's own terminal.
pub const TERMINAL_ACTOR: &str = "terminal";
/// The summary of a handoff ended because the person answered at the
/// agent's own terminal (its next prompt, or its next request).
pub const ANSWERED_AT_TERMINAL: &str = "lf-handoff hook: answered at the agent's own terminal";
/// The reason of a handoff ended because the agent's session ended.
pub const SESSION_ENDED: &str = "lf-handoff hook: the agent's session ended";

/// The message of a deny the deadline answered (`on_expiry`).
const EXPIRY_DENIES: &str = "Nobody answered before the handoff's deadline, which denies.";

/// The parent a hook opens under: the one the configuration names, else
/// the session's own wave, created when missing. Two hooks racing to
/// create the wave end with one: the id is the session's, and the loser
/// reads the winner's.
///
/// # Errors
/// `NotFound` for a configured parent that does not exist; what the store
/// returns otherwise.
pub async fn parent_of(
    store: &Store,
    event: &HookEvent,
    config: &HookConfig,
) -> StoreResult<Parent> {
    if let Some(reference) = &config.parent {
        return store
            .get_parent(reference)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("parent {reference} does not exist")));
    }
    let id = session_wave_id(event.agent, &event.session);
    let reference = InteractiveHandoffParent::Wave(id.clone());
    if let Some(parent) = store.get_parent(&reference).await? {
        return Ok(parent);
    }
    let wave = Wave::new(
        id,
        session_wave_name(event.agent, &event.session),
        event.cwd.display().to_string(),
    );
    match store.create_wave(&wave).await {
        Ok(()) => Ok(Parent::Wave(wave)),
        Err(error) if error.is_conflict() => store.get_parent(&reference).await?.ok_or(error),
        Err(error) => Err(error),
    }
}

/// The handoffs of `parent` the session left open: active, with a step
/// key under `prefix`.
///
/// # Errors
/// What the store returns.
pub async fn session_open(
    store: &Store,
    parent: &InteractiveHandoffParent,
    prefix: &str,
) -> StoreResult<Vec<InteractiveHandoff>> {
    let query = ListQuery {
        active_only: true,
        ..ListQuery::from(parent)
    };
    let handoffs = store.list_interactive_handoffs(query).await?;
    Ok(handoffs
        .into_iter()
        .filter(|handoff| {
            handoff
                .step
                .as_ref()
                .is_some_and(|step| step.as_str().starts_with(prefix))
        })
        .collect())
}

/// Ends `handoffs` as the actor `terminal` with `outcome`, each once: one
/// a person finished meanwhile keeps the person's outcome.
///
/// # Errors
/// What the store returns, but a conflict (finished meanwhile).
pub async fn end_as_terminal(
    store: &Store,
    handoffs: &[InteractiveHandoff],
    outcome: &InteractiveHandoffOutcome,
) -> StoreResult<usize> {
    let Ok(actor) = Actor::parse(TERMINAL_ACTOR) else {
        return Ok(0);
    };
    let terminal = store.with_actor(actor);
    let mut ended = 0;
    for handoff in handoffs {
        match terminal
            .finish_interactive_handoff(&handoff.id, outcome, None)
            .await
        {
            Ok(_) => ended += 1,
            Err(error) if error.is_conflict() => {}
            Err(error) => return Err(error),
        }
    }
    Ok(ended)
}

/// What a hook opens: the request with the session's facts and `step`.
#[derive(Debug)]
pub struct Opening<'a> {
    /// The hook's event.
    pub event: &'a HookEvent,
    /// Where it opens.
    pub parent: &'a Parent,
    /// The reason a person reads.
    pub reason: String,
    /// The attach command.
    pub attach_argv: Vec<String>,
    /// The step key.
    pub step: String,
    /// Whether to ask allow or deny (a permission request).
    pub choices: bool,
}

/// Opens the handoff `opening` describes (or gets the one of its step
/// back): its parent's provider and session when the parent has them
/// (else the agent's), the parent's body generation, the configured
/// deadline and, for a permission request, the choices allow and deny
/// with the configured expiry answer (C26).
///
/// # Errors
/// A [`HookError`] for a step key or request that does not validate;
/// what the store returns otherwise (as a `StoreError`).
pub async fn open(
    store: &Store,
    opening: Opening<'_>,
    config: &HookConfig,
    now: OffsetDateTime,
) -> Result<StoreResult<(InteractiveHandoff, bool)>, HookError> {
    let event = opening.event;
    let step = StepKey::parse(&opening.step)
        .map_err(|e| HookError::new(format!("step key {:?}: {e}", opening.step)))?;
    let expires_at = config
        .expires_in
        .and_then(|after| lf_handoff_api::duration::after(now, after));
    let provider = opening
        .parent
        .provider()
        .unwrap_or(event.agent.as_str())
        .to_string();
    let provider_session_id = opening
        .parent
        .provider_session_id()
        .unwrap_or(&event.session)
        .to_string();
    let request = OpenInteractiveHandoff {
        parent: opening.parent.reference(),
        home: home()?,
        cwd: event.cwd.clone(),
        provider,
        provider_session_id: Some(provider_session_id),
        body_generation: opening.parent.body_generation(),
        reason: opening.reason,
        environment: BTreeMap::new(),
        attach_argv: opening.attach_argv,
        options: OpenOptions {
            step: Some(step),
            expires_at,
            ..OpenOptions::default()
        },
    };
    let request = with_answer_spec(request, opening.choices, config);
    Ok(store.open_interactive_handoff(request).await)
}

/// The request with the choices allow and deny and the configured expiry
/// answer (C26), for a permission request.
fn with_answer_spec(
    mut request: OpenInteractiveHandoff,
    choices: bool,
    config: &HookConfig,
) -> OpenInteractiveHandoff {
    if choices {
        request.options.choices = Some(vec![
            Choice::new(Behavior::Allow.as_str(), "Allow"),
            Choice::new(Behavior::Deny.as_str(), "Deny"),
        ]);
        request.options.on_expiry = config
            .on_expiry
            .map(|behavior| Answer::choice(behavior.as_str()));
    }
    request
}

/// The person's choice on a finished handoff (C26's answer), if it has
/// one: `allow` or `deny`.
fn answer_choice(handoff: &InteractiveHandoff) -> Option<Behavior> {
    handoff
        .answer
        .as_ref()
        .and_then(Answer::as_choice)
        .and_then(Behavior::parse)
}

/// The decision a finished permission handoff carries, if a person (or
/// its expiry answer) made one:
///
/// - an answer `allow` or `deny` is that decision (a deny's message is
///   the outcome's text when the person gave one);
/// - a hand-back denies with its summary as the message, a failure with
///   its reason;
/// - a completion without an answer allows (the person did what was
///   asked);
/// - an expiry answers its `on_expiry` (stores that keep no answer: the
///   hook's own `on_expiry`); without one, like what the hook ended (answered at the
///   terminal, session ended) and an active handoff decide nothing.
pub fn decision_of(handoff: &InteractiveHandoff, config: &HookConfig) -> Option<Decision> {
    if handoff.is_active() {
        return None;
    }
    let text = handoff
        .outcome
        .as_ref()
        .map(|outcome| outcome.text().trim().to_string())
        .unwrap_or_default();
    if text.starts_with("lf-handoff hook:") {
        return None;
    }
    // `lf-handoff answer` without --summary says only what was answered:
    // no message of the person's.
    let text = match &handoff.answer {
        Some(answer) if text == answer.default_summary() => String::new(),
        _ => text,
    };
    let deny = |fallback: &str| Decision::Deny {
        message: if text.is_empty() {
            fallback.to_string()
        } else {
            text.clone()
        },
    };
    let expired = handoff.status == InteractiveHandoffStatus::Expired;
    if let Some(choice) = answer_choice(handoff) {
        return Some(match (choice, expired) {
            (Behavior::Allow, _) => Decision::Allow,
            (Behavior::Deny, true) => deny(EXPIRY_DENIES),
            (Behavior::Deny, false) => deny("A person denied this through lf-handoff."),
        });
    }
    match handoff.status {
        InteractiveHandoffStatus::Completed => Some(Decision::Allow),
        InteractiveHandoffStatus::HandedBack => Some(deny("A person handed this back.")),
        InteractiveHandoffStatus::Failed => Some(deny("A person denied this through lf-handoff.")),
        InteractiveHandoffStatus::Expired => config.on_expiry.map(|behavior| match behavior {
            Behavior::Allow => Decision::Allow,
            Behavior::Deny => Decision::Deny {
                message: EXPIRY_DENIES.into(),
            },
        }),
        InteractiveHandoffStatus::Waiting | InteractiveHandoffStatus::Attached => None,
    }
}

/// Where the agent's work runs: `$USER@local` (or `$LOGNAME`), else
/// `agent@local`.
fn home() -> Result<WaveHome, HookError> {
    let user = ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|user| !user.is_empty());
    user.and_then(|user| WaveHome::parse(&format!("{user}@local")).ok())
        .map_or_else(|| WaveHome::parse("agent@local"), Ok)
        .map_err(|e| HookError::new(format!("home: {e}")))
}

//! The handoff commands that read or change one record and print it:
//! `open`, `list`, `status`, `complete` / `back` / `fail` and `claim-wake`.
//!
//! Human output puts data on stdout and narration on stderr: `open` prints
//! the handoff id on stdout and says "opened" or "reused" on stderr, so
//! `H=$(lf-handoff open ...)` captures the id while a person still sees
//! what happened. `--json` prints the shapes docs/CONTRACT.md gives (the
//! command line).

use std::collections::BTreeMap;

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent, OpenInteractiveHandoff,
};
use lf_handoff_adapters::ListQuery;
use serde::Serialize;

use crate::args::OpenArgs;
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{emit, emit_json, note, printable, status_block, table, terminal_width};

/// The JSON of `open`.
#[derive(Debug, Serialize)]
pub struct Opened<'a> {
    /// True if and only if this call created the handoff.
    pub created: bool,
    /// The parent's active handoff.
    pub handoff: &'a InteractiveHandoff,
}

/// The JSON of `claim-wake`.
#[derive(Debug, Serialize)]
pub struct Claimed<'a> {
    /// True if and only if the given generation holds the wake.
    pub claimed: bool,
    /// The generation that holds the wake after the claim: the given one,
    /// another one, or (never after a claim that returned) none.
    pub holder: Option<u32>,
    /// The handoff after the claim.
    pub handoff: &'a InteractiveHandoff,
}

/// Builds the open request from the flags (the step travels beside it).
///
/// # Errors
/// Exit 2 when an environment key is given twice.
pub fn open_request(args: OpenArgs) -> CliResult<OpenInteractiveHandoff> {
    let mut environment = BTreeMap::new();
    for (key, value) in args.env {
        if environment.contains_key(&key) {
            return Err(CliError::usage(format!(
                "--env {key} is given twice; give each key once"
            )));
        }
        environment.insert(key, value);
    }
    Ok(OpenInteractiveHandoff {
        parent: args.parent,
        home: args.home,
        cwd: args.cwd,
        provider: args.provider,
        provider_session_id: args.provider_session,
        body_generation: args.generation,
        reason: args.reason,
        environment,
        attach_argv: args.argv,
    })
}

/// `open`: opens a handoff, or returns the parent's active one; with
/// `--step`, returns the parent's handoff for that step whatever its status
/// (C12).
pub async fn open(ctx: &Context, mut args: OpenArgs) -> CliResult<()> {
    let step = args.step.take();
    let request = open_request(args)?;
    let opened = match &step {
        Some(step) => {
            ctx.store
                .open_interactive_handoff_at_step(request, step)
                .await
        }
        None => ctx.store.open_interactive_handoff(request).await,
    };
    let (handoff, created) = opened.map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return emit_json(&Opened {
            created,
            handoff: &handoff,
        });
    }
    if created {
        note(&format!(
            "opened: {} is waiting for a person",
            handoff.parent
        ));
    } else if let Some(step) = &step {
        note(&format!(
            "reused: {}'s handoff for step {} is {}; nothing was changed",
            handoff.parent,
            printable(step.as_str()),
            handoff.status.describe()
        ));
    } else {
        note(&format!(
            "reused: {} already has this {} handoff; nothing was changed",
            handoff.parent,
            handoff.status.describe()
        ));
    }
    emit(&format!("{}\n", handoff.id))
}

/// `list`: the census, oldest first.
pub async fn list(
    ctx: &Context,
    parent: Option<InteractiveHandoffParent>,
    active: bool,
) -> CliResult<()> {
    let handoffs = ctx
        .store
        .query_interactive_handoffs(&ListQuery {
            parent,
            active_only: active,
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    let now = ctx.store.now();
    let rows: Vec<_> = handoffs.iter().map(|h| h.list_row(now)).collect();
    if ctx.json {
        return emit_json(&rows);
    }
    if rows.is_empty() {
        note(if active {
            "no active handoffs"
        } else {
            "no handoffs"
        });
        return Ok(());
    }
    emit(&table(&rows, terminal_width()))
}

/// Loads a handoff, or fails with "not found" (exit 3).
pub async fn load(ctx: &Context, id: &InteractiveHandoffId) -> CliResult<InteractiveHandoff> {
    ctx.store
        .get_interactive_handoff(id)
        .await
        .map_err(|e| ctx.fail(e))?
        .ok_or_else(|| ctx.missing_handoff(id))
}

/// Prints one handoff: the JSON record, or the labelled block.
pub fn print_handoff(ctx: &Context, handoff: &InteractiveHandoff) -> CliResult<()> {
    if ctx.json {
        emit_json(handoff)
    } else {
        emit(&status_block(handoff, ctx.store.now()))
    }
}

/// `status`.
pub async fn status(ctx: &Context, id: &InteractiveHandoffId) -> CliResult<()> {
    let handoff = load(ctx, id).await?;
    print_handoff(ctx, &handoff)
}

/// `complete`, `back` and `fail`.
pub async fn finish(
    ctx: &Context,
    id: &InteractiveHandoffId,
    outcome: InteractiveHandoffOutcome,
) -> CliResult<()> {
    let handoff = ctx
        .store
        .finish_interactive_handoff(id, &outcome)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return emit_json(&handoff);
    }
    let shown = handoff
        .outcome
        .as_ref()
        .map_or_else(String::new, |o| format!(": {}", printable(o.text())));
    emit(&format!(
        "{} {}{shown}\n",
        handoff.id,
        handoff.status.describe()
    ))
}

/// `claim-wake`: exits 0 whether or not this generation won.
pub async fn claim_wake(
    ctx: &Context,
    id: &InteractiveHandoffId,
    generation: u32,
) -> CliResult<()> {
    let (claimed, handoff) = ctx
        .store
        .claim_interactive_handoff_wake_with_record(id, generation)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return emit_json(&Claimed {
            claimed,
            holder: handoff.wake_claimed_by_generation,
            handoff: &handoff,
        });
    }
    emit(&claim_message(claimed, generation, &handoff))
}

/// The human line of a claim.
pub fn claim_message(claimed: bool, generation: u32, handoff: &InteractiveHandoff) -> String {
    let holder = handoff.wake_claimed_by_generation.map_or_else(
        || "no generation".to_string(),
        |g| format!("generation {g}"),
    );
    if claimed {
        format!(
            "claimed: generation {generation} holds the wake of {}\n",
            handoff.id
        )
    } else {
        format!(
            "not claimed: {holder} already holds the wake of {}, not generation {generation}\n",
            handoff.id
        )
    }
}

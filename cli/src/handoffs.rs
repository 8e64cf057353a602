//! The handoff commands that read or change records and print them:
//! `open`, `list`, `status`, `complete` / `back` / `fail`, `claim-wake`,
//! the deadline and history commands `extend`, `expire` and `history`, and
//! `prune`.
//!
//! Human output puts data on stdout and narration on stderr: `open` prints
//! the handoff id on stdout and says "opened" or "reused" on stderr, so
//! `H=$(lf-handoff open ...)` captures the id while a person still sees
//! what happened. `--json` prints the shapes docs/CONTRACT.md gives (the
//! command line): the API crate's types, which the service answers with
//! too.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use lf_handoff_adapters::{ListQuery, PruneOptions};
use lf_handoff_api::{Claimed, HandoffJson, Opened, Pruned};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Answer, InteractiveHandoff, InteractiveHandoffOutcome, OpenInteractiveHandoff, OpenOptions,
};
use time::OffsetDateTime;

use crate::answers;
use crate::args::{Cutoff, ExtendArgs, LinkArgs, ListArgs, OpenArgs, PruneArgs};
use crate::context::Context;
use crate::duration;
use crate::error::{CliError, CliResult};
use crate::output::{
    deadline_phrase, emit, emit_json, history_table, note, note_next_page, printable, status_block,
    table, terminal_width, timestamp,
};

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
        options: OpenOptions::default(),
    })
}

/// The deadline `span` from the store's clock now.
///
/// # Errors
/// Exit 2 when it lies past what a timestamp holds (not for a span
/// [`duration::parse`] accepted).
fn deadline_after(ctx: &Context, span: Duration) -> CliResult<OffsetDateTime> {
    duration::after(ctx.store.now(), span).ok_or_else(|| {
        CliError::usage(format!(
            "a deadline {} from now is past the last time a timestamp can hold",
            duration::format(span)
        ))
    })
}

/// `now` moved by `span` (`shift`: [`duration::before`] or
/// [`duration::after`]), the bound a flag given as a span from now stands
/// for.
///
/// # Errors
/// Exit 2, naming `flag`, when it lies outside what a timestamp holds.
fn shifted(
    flag: &str,
    now: OffsetDateTime,
    span: Duration,
    shift: fn(OffsetDateTime, Duration) -> Option<OffsetDateTime>,
) -> CliResult<OffsetDateTime> {
    shift(now, span).ok_or_else(|| {
        CliError::usage(format!(
            "{flag} {} reaches past the times a timestamp can hold",
            duration::format(span)
        ))
    })
}

/// `open`: opens a handoff, or returns the parent's active one; with
/// `--step`, returns the parent's handoff for that step whatever its status
/// (C12). `--expires-in` / `--expires-at` give a new handoff its deadline
/// (C14); a reused one keeps its own.
pub async fn open(ctx: &Context, mut args: OpenArgs) -> CliResult<()> {
    let step = args.step.take();
    let choices = std::mem::take(&mut args.choices);
    let form = args.form.take();
    let on_expiry = args.on_expiry.take();
    let expires_at = match (args.expires_in.take(), args.expires_at.take()) {
        (Some(span), _) => Some(deadline_after(ctx, span)?),
        (None, at) => at,
    };
    let request = open_request(args)?;
    let options = OpenOptions {
        step: step.clone(),
        expires_at,
        ..OpenOptions::default()
    };
    let options = answers::with_spec(ctx, options, choices, form.as_deref(), on_expiry.as_deref())?;
    let (handoff, created) = ctx
        .store
        .open_interactive_handoff(request.with_options(options.clone()))
        .await
        .map_err(|e| ctx.fail(e))?;
    let now = ctx.store.now();
    if ctx.json {
        return emit_json(&Opened {
            created,
            handoff: HandoffJson::new(handoff, now),
        });
    }
    if created {
        let deadline = handoff.expires_at.map_or_else(String::new, |at| {
            format!(
                "; it {} ({})",
                deadline_phrase(&handoff, now),
                timestamp(at)
            )
        });
        note(&format!(
            "opened: {} is waiting for a person{deadline}",
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
    if !created && expires_at.is_some() && handoff.is_active() {
        let kept = handoff.expires_at.map_or_else(
            || "none".to_string(),
            |at| format!("{}, {}", timestamp(at), deadline_phrase(&handoff, now)),
        );
        note(&format!(
            "the deadline given was not applied: a reused handoff keeps its own ({kept}); \
             `lf-handoff extend {}` moves it",
            handoff.id
        ));
    }
    emit(&format!("{}\n", handoff.id))
}

/// `list`: the census, oldest first (or newest first), filtered (the
/// filters are and-ed) and paged (`--limit`, `--after`). A full page says
/// on stderr where the next one starts.
///
/// # Errors
/// Exit 3 when `--after` names no handoff.
pub async fn list(ctx: &Context, args: ListArgs) -> CliResult<()> {
    let now = ctx.store.now();
    let created_before = args
        .older_than
        .map(|span| shifted("--older-than", now, span, duration::before))
        .transpose()?;
    let due_by = args
        .due_within
        .map(|span| shifted("--due-within", now, span, duration::after))
        .transpose()?;
    let filtered = args.parent.is_some()
        || args.active
        || !args.status.is_empty()
        || args.home.is_some()
        || created_before.is_some()
        || due_by.is_some();
    let query = ListQuery {
        parent: args.parent,
        active_only: args.active,
        statuses: args.status,
        home: args.home,
        created_before,
        due_by,
        after: args.after,
        limit: args.limit,
        newest_first: args.newest_first,
    };
    let handoffs = ctx
        .store
        .list_interactive_handoffs(query.clone())
        .await
        .map_err(|e| ctx.fail(e))?;
    let rows: Vec<_> = handoffs.iter().map(|h| h.list_row(now)).collect();
    if ctx.json {
        return emit_json(&rows);
    }
    if rows.is_empty() {
        note(match (&query.after, query.active_only, filtered) {
            (Some(_), _, _) => "no more handoffs",
            (None, true, _) => "no active handoffs",
            (None, false, true) => "no handoffs match",
            (None, false, false) => "no handoffs",
        });
        return Ok(());
    }
    emit(&table(&rows, now, terminal_width()))?;
    let order = match query.newest_first {
        true => " --newest-first",
        false => "",
    };
    let last = handoffs.last().map(|handoff| handoff.id.as_str());
    note_next_page(query.limit, handoffs.len(), last, order);
    Ok(())
}

/// `prune`: removes the finished handoffs whose wake was claimed, finished
/// before the cutoff, with their history (C17), and prints how many; with
/// `--dry-run`, only how many it would.
///
/// # Errors
/// Exit 2 for a cutoff in the future.
pub async fn prune(ctx: &Context, args: PruneArgs) -> CliResult<()> {
    let now = ctx.store.now();
    let cutoff = match args.finished_before {
        Cutoff::Ago(span) => shifted("--finished-before", now, span, duration::before)?,
        Cutoff::At(at) if at > now => {
            return Err(CliError::usage(format!(
                "--finished-before {} is in the future; to prune every handoff whose wake \
                 is claimed, give a duration such as 1s",
                timestamp(at)
            )))
        }
        Cutoff::At(at) => at,
    };
    let count = ctx
        .store
        .prune(PruneOptions {
            dry_run: args.dry_run,
            ..PruneOptions::finished_before(cutoff)
        })
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return emit_json(&Pruned {
            handoffs: count.handoffs,
            events: count.events,
            dry_run: args.dry_run,
            finished_before: cutoff.to_offset(time::UtcOffset::UTC),
        });
    }
    note(&format!(
        "finished before {} with their wake claimed",
        timestamp(cutoff)
    ));
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    emit(&format!(
        "{verb} {} and {}\n",
        counted(count.handoffs, "handoff"),
        counted(count.events, "event")
    ))
}

/// `1 handoff`, `2 handoffs`.
fn counted(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Loads a handoff, or fails with "not found" (exit 3).
pub async fn load(ctx: &Context, id: &InteractiveHandoffId) -> CliResult<InteractiveHandoff> {
    ctx.store
        .get_interactive_handoff(id)
        .await
        .map_err(|e| ctx.fail(e))?
        .ok_or_else(|| ctx.missing_handoff(id))
}

/// Prints one handoff: the JSON record (with `due`), or the labelled
/// block.
pub fn print_handoff(ctx: &Context, handoff: &InteractiveHandoff) -> CliResult<()> {
    let now = ctx.store.now();
    if ctx.json {
        emit_json(&HandoffJson::new(handoff.clone(), now))
    } else {
        emit(&status_block(handoff, now))
    }
}

/// `status`.
pub async fn status(ctx: &Context, id: &InteractiveHandoffId) -> CliResult<()> {
    let handoff = load(ctx, id).await?;
    print_handoff(ctx, &handoff)
}

/// `complete`, `back`, `fail` and `answer`: the outcome, and the answer
/// when the handoff asks for one (C26).
pub async fn finish(
    ctx: &Context,
    id: &InteractiveHandoffId,
    outcome: InteractiveHandoffOutcome,
    answer: Option<Answer>,
) -> CliResult<()> {
    let handoff = ctx
        .store
        .finish_interactive_handoff(id, &outcome, answer.as_ref())
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return emit_json(&HandoffJson::new(handoff, ctx.store.now()));
    }
    let shown = handoff
        .outcome
        .as_ref()
        .map_or_else(String::new, |o| format!(": {}", printable(o.text())));
    let answered = handoff.answer.as_ref().map_or_else(String::new, |answer| {
        format!(" (answer: {})", printable(&answer.to_string()))
    });
    emit(&format!(
        "{} {}{shown}{answered}\n",
        handoff.id,
        handoff.status.describe()
    ))
}

/// `claim-wake`: exits 0 whether or not this generation won, unless
/// `require`, when a lost claim is exit 4 of kind `not_claimed` with the
/// same line as the error. The answer says who holds the wake, from the
/// handoff as the claim's own change left it.
pub async fn claim_wake(
    ctx: &Context,
    id: &InteractiveHandoffId,
    generation: u32,
    require: bool,
) -> CliResult<()> {
    let answer = ctx
        .store
        .claim_interactive_handoff_wake(id, generation)
        .await
        .map_err(|e| ctx.fail(e))?;
    if require && !answer.claimed {
        return Err(CliError::not_claimed(claim_message(
            false,
            generation,
            &answer.handoff,
        )));
    }
    if ctx.json {
        let now = ctx.store.now();
        return emit_json(&Claimed::new(
            answer.claimed,
            generation,
            Some(answer.handoff),
            now,
        ));
    }
    emit(&claim_message(answer.claimed, generation, &answer.handoff))
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

/// `extend`: moves the deadline of an active handoff to `--until`, or to
/// `--by` from now (not from the old deadline, so a retried command sets
/// the same deadline). A deadline moved earlier is said on stderr.
///
/// # Errors
/// Exit 2 for a deadline not later than now; 3 for an unknown id; 4 (kind
/// `expired`) when the deadline has already passed, which expires the
/// handoff, or `already_finished` for a finished one.
pub async fn extend(ctx: &Context, args: ExtendArgs) -> CliResult<()> {
    let until = match (args.by, args.until) {
        (Some(span), _) => deadline_after(ctx, span)?,
        (None, Some(until)) => until,
        (None, None) => return Err(CliError::usage("give --by DURATION or --until TIME")),
    };
    // Read only to say when the deadline moves earlier; JSON says nothing.
    let previous = if ctx.json {
        None
    } else {
        load(ctx, &args.id).await?.expires_at
    };
    let handoff = ctx
        .store
        .extend_interactive_handoff(&args.id, until)
        .await
        .map_err(|e| ctx.fail(e))?;
    let now = ctx.store.now();
    if let (Some(previous), Some(current)) = (previous, handoff.expires_at) {
        if current < previous {
            note(&format!(
                "the deadline moved earlier, from {}: --by counts from now, not from the old \
                 deadline",
                timestamp(previous)
            ));
        }
    }
    if ctx.json {
        return emit_json(&HandoffJson::new(handoff, now));
    }
    let at = handoff
        .expires_at
        .map_or_else(|| "-".to_string(), timestamp);
    emit(&format!(
        "{} {} ({at})\n",
        handoff.id,
        deadline_phrase(&handoff, now)
    ))
}

/// `expire`: expires every due handoff (C14) and prints those this call
/// expired: one line each, or with `--json` their census rows, as `list
/// --json` prints them.
pub async fn expire(ctx: &Context) -> CliResult<()> {
    let expired = ctx.store.expire_due().await.map_err(|e| ctx.fail(e))?;
    let now = ctx.store.now();
    if ctx.json {
        let rows: Vec<_> = expired.iter().map(|h| h.list_row(now)).collect();
        return emit_json(&rows);
    }
    if expired.is_empty() {
        note("nothing was due");
        return Ok(());
    }
    let mut text = String::new();
    for handoff in &expired {
        let deadline = handoff
            .expires_at
            .map_or_else(|| "-".to_string(), timestamp);
        let _ = writeln!(
            text,
            "{}  {}  expired (deadline {deadline})",
            handoff.id, handoff.parent
        );
    }
    emit(&text)
}

/// `history`: a handoff's events, oldest first (C15): a table, or with
/// `--json` the events as the library gives them.
///
/// # Errors
/// Exit 3 for an unknown id.
pub async fn history(ctx: &Context, id: &InteractiveHandoffId) -> CliResult<()> {
    let events = ctx.store.history(id).await.map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return emit_json(&events);
    }
    if events.is_empty() {
        note(&format!(
            "no history recorded for {id}: a release without history stored it, and it has not \
             changed since"
        ));
        return Ok(());
    }
    emit(&history_table(&events))
}

/// Who a link signed here with the secret file is for when `--for` names
/// no one.
const LOCAL_LINK_HOLDER: &str = "person";

/// `link`: a signed link to a handoff that exists, made with the secret
/// of the `serve` that will answer it.
pub async fn link(ctx: &Context, args: LinkArgs) -> CliResult<()> {
    use lf_handoff_server::links::{link_expiry, LinkSecret};
    let (Some(secret_file), Some(url)) = (&args.link_secret, &args.public_url) else {
        return Err(CliError::usage(
            "link needs --link-secret FILE and --public-url URL (the serve's), or an http:// or \
             https:// store, whose service makes the link",
        ));
    };
    let url = url.trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(['?', '#']) {
        return Err(CliError::from(
            lf_handoff_adapters::StoreError::InvalidInput(format!(
                "--public-url {url:?} is not an http:// or https:// URL without a query"
            )),
        ));
    }
    let secret = LinkSecret::load(secret_file).map_err(CliError::from)?;
    let handoff = load(ctx, &args.id).await?;
    let now = ctx.store.now();
    let expires = link_expiry(handoff.expires_at, now, args.valid_for).map_err(CliError::from)?;
    let holder = args.holder.as_deref().unwrap_or(LOCAL_LINK_HOLDER);
    let link = secret
        .sign(&handoff.id, holder, expires)
        .map_err(CliError::from)?;
    let text = link.url(url);
    if ctx.json {
        return emit_json(&lf_handoff_api::LinkJson {
            id: handoff.id.to_string(),
            link: text,
            holder: holder.to_string(),
            expires: time::OffsetDateTime::from_unix_timestamp(link.expires).unwrap_or(expires),
        });
    }
    emit(&format!("{text}\n"))
}

/// `link` over a service: the service signs the link with its secret, for
/// the token's name (a `--for` naming anyone else is refused there).
pub async fn link_through_service(
    http: &lf_handoff_adapters::HttpConfig,
    args: &LinkArgs,
    json: bool,
) -> CliResult<()> {
    let request = lf_handoff_api::requests::LinkRequest {
        holder: args.holder.clone(),
        valid_for: args
            .valid_for
            .map(|span| format!("{}s", span.as_secs().max(1))),
    };
    let made = lf_handoff_adapters::http::make_link(http, &args.id, &request)
        .await
        .map_err(CliError::from)?;
    if json {
        return emit_json(&made);
    }
    emit(&format!("{}\n", made.link))
}

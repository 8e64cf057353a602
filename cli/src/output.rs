//! Everything the command prints: JSON, the labelled blocks, and (in
//! `table` and `shell`) the census and history tables and shell quoting.
//!
//! Text that came from a body (reasons, summaries, paths) is printed with
//! control characters escaped, so a handoff cannot send escape sequences to
//! the terminal of the person reading it. JSON is printed as serde gives it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use lf_handoff_domain::interactive_handoff::{
    AnswerSpec, AttachDescriptor, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffStatus,
};
use lf_handoff_domain::timestamp::approximate;
use lf_handoff_domain::wave_home::WaveHome;
use serde::Serialize;
use time::format_description::FormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

use crate::error::{CliError, CliResult};
use lf_handoff_adapters::UnavailableKind;

mod shell;
mod table;

pub use shell::{quote, shell_line, shell_words};
pub use table::{cut, history_table, status_change, table, terminal_width};

/// Writes `text` to stdout. A closed pipe (`lf-handoff list | head -1`) is
/// not an error: the reader has what it wanted.
pub fn emit(text: &str) -> CliResult<()> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(CliError::unavailable(
            UnavailableKind::of_io_error(&error),
            format!("cannot write to stdout: {error}"),
        )),
    }
}

/// Writes `value` to stdout as pretty JSON followed by a newline.
pub fn emit_json(value: &impl Serialize) -> CliResult<()> {
    emit(&(to_json(value)? + "\n"))
}

/// `value` as pretty JSON.
pub fn to_json(value: &impl Serialize) -> CliResult<String> {
    serde_json::to_string_pretty(value).map_err(|error| {
        CliError::unavailable(
            UnavailableKind::Other,
            format!("cannot encode JSON: {error}"),
        )
    })
}

/// Notes where the next page starts when a page came back full: `shown`
/// rows of at most `limit`, the last one `last`; `flags` are the other
/// flags the next page needs (such as ` --newest-first`).
pub fn note_next_page(limit: Option<usize>, shown: usize, last: Option<&str>, flags: &str) {
    if let (Some(limit), Some(last)) = (limit, last) {
        if shown == limit {
            note(&format!(
                "{limit} shown; the next page starts after the last: --after {last}{flags}"
            ));
        }
    }
}

/// Writes a note for people to stderr (never data: data goes to stdout).
pub fn note(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}

/// `text` with control characters escaped (`\n`, `\u{1b}`, ...).
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// An age for people: `42s`, `3m`, `2h`, `5d`.
pub fn age(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

const WHEN: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");

/// A timestamp for people: `2025-05-01 12:00:03 UTC`.
pub fn timestamp(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(WHEN)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// A timestamp for people, with its age: `2025-05-01 12:00:03 UTC (3m ago)`.
pub fn when(at: OffsetDateTime, now: OffsetDateTime) -> String {
    format!(
        "{} ({} ago)",
        timestamp(at),
        age((now - at).whole_seconds())
    )
}

/// Where a handoff stands against its deadline (C14), for people, or
/// `None` without one: `expires in 1h 12m` (rounded up to the second, so a
/// fresh `--expires-in 2h` reads `2h 0m`), `overdue by 4m 10s` (due: only
/// an expiry can still happen to it), `expired`, or `finished in time`.
pub fn deadline_state(
    expires_at: Option<OffsetDateTime>,
    status: InteractiveHandoffStatus,
    now: OffsetDateTime,
) -> Option<String> {
    let at = expires_at?;
    Some(if status == InteractiveHandoffStatus::Expired {
        "expired".to_string()
    } else if status.is_terminal() {
        "finished in time".to_string()
    } else if at <= now {
        format!("overdue by {}", approximate(now - at))
    } else {
        let left = at - now;
        let rounded = time::Duration::seconds(
            left.whole_seconds() + i64::from(left.subsec_nanoseconds() > 0),
        );
        format!("expires in {}", approximate(rounded))
    })
}

/// [`deadline_state`] of a handoff, `no deadline` without one.
pub fn deadline_phrase(handoff: &InteractiveHandoff, now: OffsetDateTime) -> String {
    deadline_state(handoff.expires_at, handoff.status, now)
        .unwrap_or_else(|| "has no deadline".to_string())
}

/// A labelled block: one `label  value` line per field, labels aligned.
pub fn block(fields: &[(&str, String)]) -> String {
    let width = fields
        .iter()
        .map(|(label, _)| label.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (label, value) in fields {
        let _ = writeln!(out, "{label:<width$}  {value}");
    }
    out
}

/// The outcome for people: `handed back: <summary>`, or `expired`.
pub fn outcome(outcome: &InteractiveHandoffOutcome) -> String {
    if outcome.text().is_empty() {
        return outcome.status().describe().to_string();
    }
    format!(
        "{}: {}",
        outcome.status().describe(),
        printable(outcome.text())
    )
}

/// The `status` block of one handoff.
pub fn status_block(handoff: &InteractiveHandoff, now: OffsetDateTime) -> String {
    let optional =
        |at: Option<OffsetDateTime>| at.map_or_else(|| "-".to_string(), |at| when(at, now));
    let environment = if handoff.environment.is_empty() {
        "-".to_string()
    } else {
        format!(
            "{} (values hidden; see --json)",
            environment_names(&handoff.environment)
        )
    };
    let wake = match (handoff.wake_claimed_by_generation, handoff.wake_claimed_at) {
        (Some(generation), Some(at)) => {
            format!("claimed by generation {generation} at {}", when(at, now))
        }
        _ if handoff.is_active() => "-".to_string(),
        _ => "not claimed yet".to_string(),
    };
    let deadline = handoff.expires_at.map_or_else(
        || "-".to_string(),
        |at| format!("{} ({})", timestamp(at), deadline_phrase(handoff, now)),
    );
    let mut fields = vec![
        ("id", handoff.id.to_string()),
        ("status", handoff.status.describe().to_string()),
        ("deadline", deadline),
        ("parent", handoff.parent.to_string()),
        ("wave", handoff.wave_id.to_string()),
        ("home", handoff.home.to_string()),
        (
            "cwd",
            printable(&handoff.cwd.display().to_string()).into_owned(),
        ),
        ("provider", printable(&handoff.provider).into_owned()),
        (
            "provider session",
            handoff
                .provider_session_id
                .as_deref()
                .map_or_else(|| "-".to_string(), |s| printable(s).into_owned()),
        ),
        ("body generation", handoff.body_generation.to_string()),
        (
            "step",
            handoff
                .step
                .as_ref()
                .map_or_else(|| "-".to_string(), |s| printable(s.as_str()).into_owned()),
        ),
        ("reason", printable(&handoff.reason).into_owned()),
        ("command", shell_words(&handoff.attach_argv)),
        ("environment", environment),
        ("created", when(handoff.created_at, now)),
        ("updated", when(handoff.updated_at, now)),
        ("attached", optional(handoff.attached_at)),
        ("finished", optional(handoff.terminal_at)),
        (
            "outcome",
            handoff
                .outcome
                .as_ref()
                .map_or_else(|| "-".to_string(), outcome),
        ),
        ("wake", wake),
    ];
    // What a handoff asks (C26), shown only on handoffs that ask.
    if let Ok(Some(spec)) = handoff.answer_spec() {
        let at = fields.len() - 3;
        fields.insert(at, ("asks", asks(spec)));
        if let Some(on_expiry) = &handoff.on_expiry {
            fields.insert(
                at + 1,
                ("on expiry", printable(&on_expiry.to_string()).into_owned()),
            );
        }
        let answer = handoff.answer.as_ref().map_or_else(
            || "-".to_string(),
            |answer| printable(&answer.to_string()).into_owned(),
        );
        let at = fields.len() - 1;
        fields.insert(at, ("answer", answer));
    }
    block(&fields)
}

/// What a handoff asks for, for people: each choice's value with its
/// label, or the form's fields with their types (`*` marks required).
fn asks(spec: AnswerSpec<'_>) -> String {
    match spec {
        AnswerSpec::Choices(choices) => choices
            .iter()
            .map(|choice| {
                if choice.label == choice.value {
                    printable(&choice.value).into_owned()
                } else {
                    format!(
                        "{} ({})",
                        printable(&choice.value),
                        printable(&choice.label)
                    )
                }
            })
            .collect::<Vec<_>>()
            .join(" | "),
        AnswerSpec::Form(form) => {
            let fields: Vec<String> = form
                .fields
                .iter()
                .map(|field| {
                    let required = if form.is_required(&field.name) {
                        "*"
                    } else {
                        ""
                    };
                    format!(
                        "{}{required}: {}",
                        printable(&field.name),
                        field.kind.as_str()
                    )
                })
                .collect();
            format!("form ({}); answer with --set NAME=VALUE", fields.join(", "))
        }
    }
}

/// The block `attach --print` shows: everything needed to join the work,
/// environment values included, and a line to paste into a shell.
pub fn descriptor_block(descriptor: &AttachDescriptor, home: &WaveHome) -> String {
    descriptor_block_running(descriptor, shell_line(descriptor, home))
}

/// The names of an environment, printable, in order, joined with commas.
pub fn environment_names(environment: &BTreeMap<String, String>) -> String {
    let names: Vec<Cow<'_, str>> = environment.keys().map(|k| printable(k)).collect();
    names.join(", ")
}

/// [`descriptor_block`] whose `run` line is `run` (what `attach` runs from
/// where the person is, inside tmux a `switch-client`).
pub fn descriptor_block_running(descriptor: &AttachDescriptor, run: String) -> String {
    let environment = if descriptor.environment.is_empty() {
        "-".to_string()
    } else {
        descriptor
            .environment
            .iter()
            .map(|(key, value)| quote(&format!("{key}={value}")).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    block(&[
        ("id", descriptor.id.to_string()),
        ("status", descriptor.status.describe().to_string()),
        ("host", descriptor.host.clone()),
        (
            "cwd",
            printable(&descriptor.cwd.display().to_string()).into_owned(),
        ),
        ("environment", environment),
        ("command", shell_words(&descriptor.argv)),
        ("run", run),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_use_the_largest_whole_unit() {
        assert_eq!(age(-5), "0s");
        assert_eq!(age(59), "59s");
        assert_eq!(age(180), "3m");
        assert_eq!(age(7_300), "2h");
        assert_eq!(age(3 * 86_400 + 5), "3d");
    }

    #[test]
    fn deadlines_read_for_people() {
        use lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus as S;
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(10);
        let state =
            |offset: time::Duration, status| deadline_state(Some(now + offset), status, now);
        // A fresh `--expires-in 2h` read a moment later.
        let fresh = time::Duration::hours(2) - time::Duration::milliseconds(3);
        assert_eq!(state(fresh, S::Waiting).unwrap(), "expires in 2h 0m");
        assert_eq!(
            state(time::Duration::ZERO, S::Attached).unwrap(),
            "overdue by 0s"
        );
        assert_eq!(
            state(-time::Duration::days(2), S::Expired).unwrap(),
            "expired"
        );
        assert_eq!(
            state(time::Duration::days(2), S::HandedBack).unwrap(),
            "finished in time"
        );
        assert_eq!(deadline_state(None, S::Waiting, now), None);
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain"), "plain");
        assert_eq!(printable("a\nb\x1b[2J"), "a\\nb\\u{1b}[2J");
    }
}

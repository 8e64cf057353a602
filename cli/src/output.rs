//! Everything the command prints: JSON, the census table, the labelled
//! blocks, and shell quoting.
//!
//! Text that came from a body (reasons, summaries, paths) is printed with
//! control characters escaped, so a handoff cannot send escape sequences to
//! the terminal of the person reading it. JSON is printed as serde gives it.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};

use lf_handoff_adapters::domain::interactive_handoff::{
    AttachDescriptor, HandoffEvent, InteractiveHandoff, InteractiveHandoffListRow,
    InteractiveHandoffOutcome, InteractiveHandoffStatus,
};
use lf_handoff_adapters::domain::timestamp::approximate;
use lf_handoff_adapters::domain::wave_home::WaveHome;
use serde::Serialize;
use time::format_description::FormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

use crate::error::{CliError, CliResult};
use lf_handoff_adapters::UnavailableKind;

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

/// The width to cut table lines to: `COLUMNS` when set, else the terminal's
/// when stdout is one; `None` (no cutting) when stdout is a pipe or file.
pub fn terminal_width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
    {
        return Some(columns);
    }
    if !io::stdout().is_terminal() {
        return None;
    }
    terminal_size::terminal_size_of(io::stdout()).map(|(width, _)| usize::from(width.0))
}

/// The census as an aligned table: id, parent, status, age, the deadline
/// (at `now`) when a listed handoff has one, the step when a listed
/// handoff has one, and the reason. With a `width`, lines are cut to it: a
/// step is cut to [`MAX_STEP`] characters, the reason is cut next, and
/// when fewer than [`MIN_REASON`] characters would be left for it the
/// parent column is shortened, then the step column (ids stay whole, so
/// they can be copied). It never shows the environment or the attach
/// command (the rows do not carry them).
pub fn table(
    rows: &[InteractiveHandoffListRow],
    now: OffsetDateTime,
    width: Option<usize>,
) -> String {
    let with_deadline = rows.iter().any(|row| row.expires_at.is_some());
    let with_step = rows.iter().any(|row| row.step.is_some());
    let mut header = vec!["ID", "PARENT", "STATUS", "AGE"];
    if with_deadline {
        header.push("DEADLINE");
    }
    let step_column = header.len();
    if with_step {
        header.push("STEP");
    }
    let mut cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let mut cells = vec![
                row.session_id.to_string(),
                format!("{}:{}", row.parent_kind, row.parent_id),
                row.status.as_str().to_string(),
                age(row.age_secs.unwrap_or(0)),
            ];
            if with_deadline {
                cells.push(deadline_cell(row, now));
            }
            if with_step {
                cells.push(row.step.as_ref().map_or_else(
                    || "-".to_string(),
                    |step| {
                        let step = printable(step.as_str());
                        match width {
                            Some(_) => cut(&step, MAX_STEP),
                            None => step.into_owned(),
                        }
                    },
                ));
            }
            cells
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|title| title.len()).collect();
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    if let Some(width) = width {
        // The parent gives way first, then the step, each down to its
        // narrowest, so the reason keeps MIN_REASON characters if it can.
        let shrinkable: [(usize, usize, Shorten, bool); 2] = [
            (PARENT, MIN_PARENT, shorten_parent, true),
            (step_column, MIN_STEP, cut, with_step),
        ];
        for (column, narrowest, shorten, shown) in shrinkable {
            if !shown {
                continue;
            }
            let others: usize = widths.iter().map(|w| w + 2).sum::<usize>() - widths[column];
            let room = width.saturating_sub(others + MIN_REASON);
            if room < widths[column] {
                widths[column] = room.max(narrowest).min(widths[column]);
                for row in &mut cells {
                    row[column] = shorten(&row[column], widths[column]);
                }
            }
        }
    }
    let prefix: usize = widths.iter().map(|w| w + 2).sum();
    let mut out = String::new();
    let mut line = |fields: &[&str], reason: &str| {
        let mut text = String::new();
        for (field, width) in fields.iter().zip(&widths) {
            let _ = write!(text, "{field:<width$}  ");
        }
        match width {
            Some(width) => text.push_str(&cut(reason, width.saturating_sub(prefix))),
            None => text.push_str(reason),
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header, "REASON");
    for (row, cell) in rows.iter().zip(&cells) {
        let fields: Vec<&str> = cell.iter().map(String::as_str).collect();
        line(&fields, &printable(&row.reason));
    }
    out
}

/// How a column's cells are cut to a width.
type Shorten = fn(&str, usize) -> String;

/// The parent column of [`table`].
const PARENT: usize = 1;

/// The deadline cell of a census row made at `now`: [`deadline_state`],
/// with `-` for a handoff finished in time, like one without a deadline.
fn deadline_cell(row: &InteractiveHandoffListRow, now: OffsetDateTime) -> String {
    match deadline_state(row.expires_at, row.status, now) {
        Some(state)
            if !row.status.is_terminal() || row.status == InteractiveHandoffStatus::Expired =>
        {
            state
        }
        _ => "-".to_string(),
    }
}

/// An event's status column: `waiting -> attached`, or one status when it
/// did not change.
pub fn status_change(event: &HandoffEvent) -> String {
    match event.status_before {
        Some(before) if before != event.status_after => {
            format!("{} -> {}", before.as_str(), event.status_after.as_str())
        }
        _ => event.status_after.as_str().to_string(),
    }
}

/// Events as an aligned table, oldest first: `TIME`, `EVENT`, `STATUS`
/// (`waiting -> attached`; one status when it did not change), `ACTOR`,
/// and `DETAIL` when an event has one (the deadline set, the generation
/// holding the wake).
pub fn history_table(events: &[HandoffEvent]) -> String {
    let with_detail = events.iter().any(|event| event.detail.is_some());
    let mut header = vec!["TIME", "EVENT", "STATUS", "ACTOR"];
    if with_detail {
        header.push("DETAIL");
    }
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|event| {
            let mut row = vec![
                timestamp(event.at),
                event.kind.as_str().to_string(),
                status_change(event),
                printable(event.actor.as_str()).into_owned(),
            ];
            if with_detail {
                row.push(
                    event
                        .detail
                        .as_deref()
                        .map_or_else(|| "-".to_string(), |d| printable(d).into_owned()),
                );
            }
            row
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|title| title.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(ToString::to_string).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A parent reference cut to `max` characters in the middle, keeping the
/// kind and the end of the id (`task:…4c031002983d`): UUID v7 ids made
/// close together share their beginning, not their end.
fn shorten_parent(parent: &str, max: usize) -> String {
    let count = parent.chars().count();
    if count <= max {
        return parent.to_string();
    }
    let kind = parent.find(':').map_or(0, |colon| colon + 1);
    let tail = max.saturating_sub(kind + 1);
    let mut out: String = parent.chars().take(kind).collect();
    out.push('…');
    out.extend(parent.chars().skip(count - tail));
    out
}

/// The fewest reason characters a cut table line keeps before it shortens
/// the parent column.
pub const MIN_REASON: usize = 24;

/// The narrowest the parent column gets (`task:ts_019…`).
const MIN_PARENT: usize = 12;

/// The most characters of a step key a cut table line shows.
pub const MAX_STEP: usize = 24;

/// The narrowest the step column gets (`oauth-l…`).
const MIN_STEP: usize = 8;

/// `text` cut to at most `max` characters, ending in `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
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
        let names: Vec<Cow<'_, str>> = handoff.environment.keys().map(|k| printable(k)).collect();
        format!("{} (values hidden; see --json)", names.join(", "))
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
    block(&[
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
    ])
}

/// The block `attach --print` shows: everything needed to join the work,
/// environment values included, and a line to paste into a shell.
pub fn descriptor_block(descriptor: &AttachDescriptor, home: &WaveHome) -> String {
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
        ("id", descriptor.session_id.to_string()),
        ("status", descriptor.status.describe().to_string()),
        ("host", descriptor.host.clone()),
        (
            "cwd",
            printable(&descriptor.cwd.display().to_string()).into_owned(),
        ),
        ("environment", environment),
        ("command", shell_words(&descriptor.argv)),
        ("run", shell_line(descriptor, home)),
    ])
}

/// A line a person can paste into a shell to attach: for a local home
/// `cd DIR && env K=V ARGV...`, for a remote one the `ssh` command that does
/// the same there. Every word is quoted, so nothing in it is re-parsed.
pub fn shell_line(descriptor: &AttachDescriptor, home: &WaveHome) -> String {
    match home {
        WaveHome::Local { .. } => local_command(descriptor, false, quote),
        WaveHome::Ssh { user, host, port } => {
            let mut words = vec!["ssh".to_string(), "-t".to_string()];
            if let Some(port) = port {
                words.push("-p".to_string());
                words.push(port.to_string());
            }
            words.push(format!("{user}@{host}"));
            words.push("--".to_string());
            let mut line = shell_words(&words);
            line.push(' ');
            // The far side runs the command with the account's login shell,
            // which may be a plain POSIX sh (dash): quote it for any POSIX
            // shell there. Only the outer word, read by the shell the person
            // pastes into, may use `$'...'` escapes.
            line.push_str(&quote(&local_command(descriptor, true, quote_posix)));
            line
        }
    }
}

/// `cd -- DIR && [exec] [env K=V...] ARGV...`, every word quoted with
/// `quote_word`.
fn local_command(
    descriptor: &AttachDescriptor,
    exec: bool,
    quote_word: fn(&str) -> Cow<'_, str>,
) -> String {
    let quote = quote_word;
    let mut line = format!("cd -- {} && ", quote(&descriptor.cwd.display().to_string()));
    if exec {
        line.push_str("exec ");
    }
    if !descriptor.environment.is_empty() {
        line.push_str("env ");
        for (key, value) in &descriptor.environment {
            line.push_str(&quote(&format!("{key}={value}")));
            line.push(' ');
        }
    }
    let words: Vec<Cow<'_, str>> = descriptor.argv.iter().map(|word| quote(word)).collect();
    line.push_str(&words.join(" "));
    line
}

/// The words quoted for a POSIX shell and joined with spaces.
pub fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|word| quote(word.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One word quoted for any POSIX shell (dash included): left bare when it
/// holds only characters no shell treats specially, else single-quoted,
/// with control characters kept as they are inside the quotes.
fn quote_posix(word: &str) -> Cow<'_, str> {
    if is_plain(word) {
        return Cow::Borrowed(word);
    }
    Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
}

fn is_plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b))
}

/// One word quoted for a shell: left bare when it holds only characters no
/// shell treats specially, else single-quoted. A word holding control
/// characters uses `$'...'` escapes instead (bash, zsh, ksh and POSIX
/// 2024 shells), so the printed line stays correct and never sends a raw
/// control character to the terminal.
pub fn quote(word: &str) -> Cow<'_, str> {
    if is_plain(word) {
        return Cow::Borrowed(word);
    }
    if !word.chars().any(char::is_control) {
        // Double quotes read better around a word holding single quotes,
        // and are as safe when nothing in it is special inside them.
        if word.contains('\'') && !word.contains(['$', '`', '"', '\\', '!']) {
            return Cow::Owned(format!("\"{word}\""));
        }
        return Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\'' => out.push_str(r"\'"),
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            '\r' => out.push_str(r"\r"),
            c if c.is_control() => {
                let mut bytes = [0u8; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(out, "\\x{byte:02x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
    fn quoting_leaves_plain_words_and_wraps_the_rest() {
        assert_eq!(quote("tmux"), "tmux");
        assert_eq!(quote("/a/b-c.d"), "/a/b-c.d");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "\"it's\"");
        assert_eq!(quote("it's $HOME"), r"'it'\''s $HOME'");
        assert_eq!(quote("$(x);`y`"), "'$(x);`y`'");
        assert_eq!(quote("a\nb'\x1b"), r"$'a\nb\'\x1b'");
    }

    #[test]
    fn posix_quoting_keeps_control_characters_inside_single_quotes() {
        assert_eq!(quote_posix("tmux"), "tmux");
        assert_eq!(quote_posix(""), "''");
        assert_eq!(quote_posix("it's"), r"'it'\''s'");
        assert_eq!(quote_posix("a\nb\x1b"), "'a\nb\x1b'");
    }

    /// What `shell -c "printf %s WORD"` prints.
    fn echoed(shell: &str, quoted: &str) -> String {
        let output = std::process::Command::new(shell)
            .arg("-c")
            .arg(format!("printf %s {quoted}"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{shell} refused {quoted:?}: {output:?}"
        );
        String::from_utf8(output.stdout).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Any word (no NUL: an argument cannot hold one) comes back from a
        /// POSIX sh exactly as quoted by `quote_posix`, and from bash as
        /// quoted by `quote`.
        #[test]
        fn quoted_words_reach_the_shell_exactly(
            word in any::<String>().prop_filter("no NUL", |w| !w.contains('\0'))
        ) {
            prop_assert_eq!(echoed("sh", &quote_posix(&word)), word.clone());
            prop_assert_eq!(echoed("bash", &quote(&word)), word);
        }
    }

    #[test]
    fn cutting_marks_the_cut() {
        assert_eq!(cut("abcdef", 10), "abcdef");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcdef", 0), "…");
    }

    #[test]
    fn parents_are_shortened_in_the_middle() {
        let parent = "task:ts_01a23770-d145-7233-b23a-4c031002983d";
        assert_eq!(shorten_parent(parent, 100), parent);
        assert_eq!(shorten_parent(parent, 18), "task:…4c031002983d");
        assert_eq!(shorten_parent(parent, 18).chars().count(), 18);
    }

    fn row(step: Option<&str>) -> InteractiveHandoffListRow {
        use lf_handoff_adapters::domain::id::{InteractiveHandoffId, WaveId};
        use lf_handoff_adapters::domain::interactive_handoff::{InteractiveHandoffStatus, StepKey};
        let at = OffsetDateTime::UNIX_EPOCH;
        InteractiveHandoffListRow {
            session_id: InteractiveHandoffId::parse("ih_01a23770-d145-7233-b23a-4c031002983d")
                .unwrap(),
            parent_kind: "task".into(),
            parent_id: "ts_01a23770-d145-7233-b23a-4c031002983e".into(),
            wave_id: WaveId::parse("wv_01a23770-d145-7233-b23a-4c031002983f").unwrap(),
            status: InteractiveHandoffStatus::Waiting,
            provider: "codex".into(),
            provider_session_id: None,
            home: "jack@local".into(),
            cwd: "/w".into(),
            reason: "a credential is needed for the login".into(),
            created_at: at,
            updated_at: at,
            age_secs: Some(5),
            step: step.map(|s| StepKey::parse(s).unwrap()),
            expires_at: None,
            due: false,
        }
    }

    #[test]
    fn the_step_column_shows_only_when_a_handoff_has_a_step() {
        let plain = table(&[row(None)], OffsetDateTime::UNIX_EPOCH, None);
        assert!(!plain.contains("STEP"), "{plain}");
        let long = format!("oauth-login@{}", "turn-".repeat(20));
        let rows = [row(None), row(Some(&long))];
        let whole = table(&rows, OffsetDateTime::UNIX_EPOCH, None);
        let lines: Vec<&str> = whole.lines().collect();
        let column = lines[0].find("STEP").unwrap();
        assert!(lines[1][column..].starts_with("-  "), "{whole}");
        assert!(
            lines[2][column..].starts_with(&long),
            "not cut in a pipe: {whole}"
        );

        let wide = table(&rows, OffsetDateTime::UNIX_EPOCH, Some(200));
        let lines: Vec<&str> = wide.lines().collect();
        let shown: String = lines[2][column..].chars().take(MAX_STEP).collect();
        assert_eq!(shown, cut(&long, MAX_STEP), "{wide}");
        assert!(lines[2].ends_with("a credential is needed for the login"));

        // Narrow: the parent gives way, then the step, so the reason keeps
        // MIN_REASON characters (ids stay whole).
        for width in [90, 100, 120] {
            let narrow = table(&rows, OffsetDateTime::UNIX_EPOCH, Some(width));
            for line in narrow.lines() {
                assert!(line.chars().count() <= width, "{width}: {line:?}");
            }
            let last = narrow.lines().nth(2).unwrap();
            assert!(last.starts_with("ih_01a23770-d145-7233-b23a-4c031002983d  task:…"));
            assert!(last.contains("  oauth-l"), "{width}: {last}");
            assert!(last.contains("  a credenti"), "{width}: {last}");
        }
    }

    #[test]
    fn the_deadline_column_shows_only_when_a_handoff_has_a_deadline() {
        use lf_handoff_adapters::domain::interactive_handoff::InteractiveHandoffStatus as S;
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(10);
        let with = |status, expires_at: Option<OffsetDateTime>, step| {
            let mut row = row(step);
            row.status = status;
            row.expires_at = expires_at;
            row.due = status == S::Waiting && expires_at.is_some_and(|at| at <= now);
            row
        };
        let plain = table(&[with(S::Waiting, None, None)], now, None);
        assert!(!plain.contains("DEADLINE"), "{plain}");
        let rows = [
            with(
                S::Waiting,
                Some(now + time::Duration::minutes(72)),
                Some("s"),
            ),
            with(S::Waiting, Some(now - time::Duration::seconds(250)), None),
            with(S::Expired, Some(now - time::Duration::hours(1)), None),
            with(S::Completed, Some(now + time::Duration::hours(1)), None),
            with(S::Waiting, None, None),
        ];
        let shown = table(&rows, now, None);
        let lines: Vec<&str> = shown.lines().collect();
        let column = lines[0].find("DEADLINE").unwrap();
        assert!(lines[0].find("STEP").unwrap() > column, "{shown}");
        let cells: Vec<&str> = lines[1..]
            .iter()
            .map(|line| line[column..].split("  ").next().unwrap())
            .collect();
        assert_eq!(
            cells,
            [
                "expires in 1h 12m",
                "overdue by 4m 10s",
                "expired",
                "-",
                "-"
            ],
            "{shown}"
        );
        for width in [110, 130] {
            let narrow = table(&rows, now, Some(width));
            for line in narrow.lines() {
                assert!(line.chars().count() <= width, "{width}: {line:?}");
            }
            assert!(narrow.contains("expires in 1h 12m"), "{narrow}");
        }
    }

    #[test]
    fn deadlines_read_for_people() {
        use lf_handoff_adapters::domain::interactive_handoff::InteractiveHandoffStatus as S;
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
    fn history_tables_show_the_change_and_who_made_it() {
        use lf_handoff_adapters::domain::id::InteractiveHandoffId;
        use lf_handoff_adapters::domain::interactive_handoff::{
            Actor, HandoffEventKind as K, InteractiveHandoffStatus as S,
        };
        let id = InteractiveHandoffId::parse("ih_01a23770-d145-7233-b23a-4c031002983d").unwrap();
        let at = OffsetDateTime::UNIX_EPOCH;
        let event =
            |seq: u64, kind, before, after, actor: &str, detail: Option<&str>| HandoffEvent {
                position: seq,
                handoff_id: id.clone(),
                seq,
                at,
                kind,
                status_before: before,
                status_after: after,
                actor: Actor::parse(actor).unwrap(),
                detail: detail.map(ToString::to_string),
            };
        let events = [
            event(
                1,
                K::Opened,
                None,
                S::Waiting,
                "bot@ci (pid 7)",
                Some("expires 1970-01-01T01:00:00Z"),
            ),
            event(2, K::Attached, Some(S::Waiting), S::Attached, "alice", None),
            event(
                3,
                K::Finished,
                Some(S::Attached),
                S::Completed,
                "alice",
                None,
            ),
            event(
                4,
                K::WakeClaimed,
                Some(S::Completed),
                S::Completed,
                "bot@ci (pid 9)",
                Some("generation 2"),
            ),
        ];
        let shown = history_table(&events);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 5, "{shown}");
        for title in ["TIME", "EVENT", "STATUS", "ACTOR", "DETAIL"] {
            assert!(lines[0].contains(title), "{shown}");
        }
        assert!(
            lines[1].starts_with("1970-01-01 00:00:00 UTC  opened"),
            "{shown}"
        );
        assert!(lines[1].contains("  waiting  "), "{shown}");
        assert!(
            lines[1].ends_with("expires 1970-01-01T01:00:00Z"),
            "{shown}"
        );
        assert!(lines[2].contains("  waiting -> attached  "), "{shown}");
        assert!(lines[2].contains("  alice  "), "{shown}");
        assert!(lines[3].contains("attached -> completed"), "{shown}");
        assert!(lines[3].ends_with('-'), "{shown}");
        assert!(lines[4].contains("wake_claimed"), "{shown}");
        assert!(lines[4].contains("  completed  "), "{shown}");
        assert!(lines[4].ends_with("generation 2"), "{shown}");
        let plain = history_table(&events[1..3]);
        assert!(!plain.contains("DETAIL"), "{plain}");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain"), "plain");
        assert_eq!(printable("a\nb\x1b[2J"), "a\\nb\\u{1b}[2J");
    }
}

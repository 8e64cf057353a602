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
    AttachDescriptor, InteractiveHandoff, InteractiveHandoffListRow, InteractiveHandoffOutcome,
};
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

/// A timestamp for people, with its age: `2025-05-01 12:00:03 UTC (3m ago)`.
pub fn when(at: OffsetDateTime, now: OffsetDateTime) -> String {
    let shown = at
        .format(WHEN)
        .unwrap_or_else(|_| at.unix_timestamp().to_string());
    format!("{shown} ({} ago)", age((now - at).whole_seconds()))
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

/// The census as an aligned table: id, parent, status, age, the step when
/// a listed handoff has one, and the reason. With a `width`, lines are cut
/// to it: a step is cut to [`MAX_STEP`] characters, the reason is cut
/// next, and when fewer than [`MIN_REASON`] characters would be left for it
/// the parent column is shortened, then the step column (ids stay whole, so
/// they can be copied). It never shows the environment or the attach
/// command (the rows do not carry them).
pub fn table(rows: &[InteractiveHandoffListRow], width: Option<usize>) -> String {
    let with_step = rows.iter().any(|row| row.step.is_some());
    let mut header = vec!["ID", "PARENT", "STATUS", "AGE"];
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
        let shrinkable: [(usize, usize, Shorten); 2] =
            [(PARENT, MIN_PARENT, shorten_parent), (STEP, MIN_STEP, cut)];
        for (column, narrowest, shorten) in shrinkable {
            if column >= widths.len() {
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

/// The step column of [`table`], when it has one.
const STEP: usize = 4;

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

/// The outcome for people: `handed back: <summary>`.
pub fn outcome(outcome: &InteractiveHandoffOutcome) -> String {
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
    block(&[
        ("id", handoff.id.to_string()),
        ("status", handoff.status.describe().to_string()),
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
        }
    }

    #[test]
    fn the_step_column_shows_only_when_a_handoff_has_a_step() {
        let plain = table(&[row(None)], None);
        assert!(!plain.contains("STEP"), "{plain}");
        let long = format!("oauth-login@{}", "turn-".repeat(20));
        let rows = [row(None), row(Some(&long))];
        let whole = table(&rows, None);
        let lines: Vec<&str> = whole.lines().collect();
        let column = lines[0].find("STEP").unwrap();
        assert!(lines[1][column..].starts_with("-  "), "{whole}");
        assert!(
            lines[2][column..].starts_with(&long),
            "not cut in a pipe: {whole}"
        );

        let wide = table(&rows, Some(200));
        let lines: Vec<&str> = wide.lines().collect();
        let shown: String = lines[2][column..].chars().take(MAX_STEP).collect();
        assert_eq!(shown, cut(&long, MAX_STEP), "{wide}");
        assert!(lines[2].ends_with("a credential is needed for the login"));

        // Narrow: the parent gives way, then the step, so the reason keeps
        // MIN_REASON characters (ids stay whole).
        for width in [90, 100, 120] {
            let narrow = table(&rows, Some(width));
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
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain"), "plain");
        assert_eq!(printable("a\nb\x1b[2J"), "a\\nb\\u{1b}[2J");
    }
}

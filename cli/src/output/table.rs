//! The census and history tables, cut to the terminal's width.

use std::fmt::Write as _;
use std::io::{self, IsTerminal};

use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, InteractiveHandoffListRow, InteractiveHandoffStatus,
};
use time::OffsetDateTime;

use super::{age, deadline_state, printable, timestamp};

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

/// A row's answer (C26): the answer once it ended with one, `? ` and what
/// it asks while it waits for one, `-` otherwise; cut to [`MAX_STEP`]
/// characters when lines are cut.
fn answer_cell(row: &InteractiveHandoffListRow, cutting: bool) -> String {
    let text = match (&row.answer, &row.asks) {
        (Some(answer), _) => printable(&answer.to_string()).into_owned(),
        (None, Some(_)) if row.status.is_terminal() => "-".to_string(),
        (None, Some(asks)) => format!("? {}", printable(asks)),
        (None, None) => "-".to_string(),
    };
    if cutting {
        cut(&text, MAX_STEP)
    } else {
        text
    }
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
    // CHANGED: how long ago the handoff last changed (opened, attached,
    // finished, extended), not how long it has existed.
    let mut header = vec!["ID", "PARENT", "STATUS", "CHANGED"];
    if with_deadline {
        header.push("DEADLINE");
    }
    let step_column = header.len();
    if with_step {
        header.push("STEP");
    }
    let with_answer = rows
        .iter()
        .any(|row| row.asks.is_some() || row.answer.is_some());
    if with_answer {
        header.push("ANSWER");
    }
    let mut cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let mut cells = vec![
                row.id.to_string(),
                format!("{}:{}", row.parent_kind, row.parent_id),
                row.status.as_str().to_string(),
                format!("{} ago", age(row.age_secs.unwrap_or(0))),
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
            if with_answer {
                cells.push(answer_cell(row, width.is_some()));
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
/// holding the wake, the answer a finish or expiry recorded).
pub fn history_table(events: &[HandoffEvent]) -> String {
    let with_detail = events
        .iter()
        .any(|event| event.detail.is_some() || event.answer.is_some());
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
                let answer = event
                    .answer
                    .as_ref()
                    .map(|answer| format!("answer: {answer}"));
                let detail = match (event.detail.as_deref(), answer) {
                    (Some(detail), Some(answer)) => format!("{detail}; {answer}"),
                    (Some(detail), None) => detail.to_string(),
                    (None, Some(answer)) => answer,
                    (None, None) => "-".to_string(),
                };
                row.push(printable(&detail).into_owned());
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

#[cfg(test)]
mod tests {
    use super::*;

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
        use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
        use lf_handoff_domain::interactive_handoff::{InteractiveHandoffStatus, StepKey};
        let at = OffsetDateTime::UNIX_EPOCH;
        let id = InteractiveHandoffId::parse("ih_01a23770-d145-7233-b23a-4c031002983d").unwrap();
        InteractiveHandoffListRow {
            id: id.clone(),
            session_id: id,
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
            asks: None,
            answer: None,
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
        // MIN_REASON characters (ids stay whole). The narrowest width is 4
        // more than when the CHANGED column was AGE.
        for width in [94, 100, 120] {
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
        use lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus as S;
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
    fn history_tables_show_the_change_and_who_made_it() {
        use lf_handoff_domain::id::InteractiveHandoffId;
        use lf_handoff_domain::interactive_handoff::{
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
                answer: None,
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
}

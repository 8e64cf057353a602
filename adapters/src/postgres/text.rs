//! Rewriting a statement's text for a server reached through a connection
//! pooler (contract C25): naming the store's schema in every table it
//! reads or writes ([`qualify`]), and writing its parameters' values into
//! it as literals ([`inline`]), for a pooler in transaction mode, which
//! can give each statement of one client another server session, so
//! that neither a `search_path` nor a prepared statement can be relied
//! on.
//!
//! Both walk the text with one small scanner that knows what PostgreSQL
//! does not read as code: string literals (`'...'`, `E'...'`), quoted
//! identifiers (`"..."`), dollar-quoted strings (`$tag$...$tag$`) and
//! comments (`--`, `/* */`). The shared statements (`sql/statements.rs`
//! and the others) are written for this: their tables are named bare, each
//! where a table goes, and their parameters are `$1`, `$2`, ...

use std::fmt::Write as _;

use crate::sql::driver::Param;

/// One piece of a statement's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece<'a> {
    /// A name: a keyword, a table, a column, a function.
    Word(&'a str),
    /// `$` and a number.
    Placeholder(usize),
    /// A literal string, quoted identifier, dollar-quoted string or
    /// comment, kept as it is.
    Opaque(&'a str),
    /// Anything else: spaces, punctuation, numbers, operators.
    Other(&'a str),
}

/// Splits `sql` into pieces whose texts, joined, are `sql`.
fn pieces(sql: &str) -> Vec<Piece<'_>> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        let byte = bytes[at];
        let next = bytes.get(at + 1).copied();
        if byte == b'\'' || ((byte == b'E' || byte == b'e') && next == Some(b'\'')) {
            // A string: `''` is a quote inside it; in an E string a
            // backslash escapes the next byte.
            let escapes = byte != b'\'';
            at += if escapes { 2 } else { 1 };
            while at < bytes.len() {
                match bytes[at] {
                    b'\\' if escapes => at += 2,
                    b'\'' if bytes.get(at + 1) == Some(&b'\'') => at += 2,
                    b'\'' => {
                        at += 1;
                        break;
                    }
                    _ => at += 1,
                }
            }
            out.push(Piece::Opaque(&sql[start..at.min(bytes.len())]));
        } else if byte == b'"' {
            at += 1;
            while at < bytes.len() {
                if bytes[at] == b'"' {
                    if bytes.get(at + 1) == Some(&b'"') {
                        at += 2;
                        continue;
                    }
                    at += 1;
                    break;
                }
                at += 1;
            }
            out.push(Piece::Opaque(&sql[start..at.min(bytes.len())]));
        } else if byte == b'-' && next == Some(b'-') {
            at = sql[at..].find('\n').map_or(bytes.len(), |end| at + end);
            out.push(Piece::Opaque(&sql[start..at]));
        } else if byte == b'/' && next == Some(b'*') {
            at = sql[at + 2..]
                .find("*/")
                .map_or(bytes.len(), |end| at + 2 + end + 2);
            out.push(Piece::Opaque(&sql[start..at]));
        } else if byte == b'$' && next.is_some_and(|b| b.is_ascii_digit()) {
            at += 1;
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                at += 1;
            }
            match sql[start + 1..at].parse() {
                Ok(number) => out.push(Piece::Placeholder(number)),
                Err(_) => out.push(Piece::Other(&sql[start..at])),
            }
        } else if byte == b'$' {
            // A dollar quote `$tag$ ... $tag$`, or a lone `$`.
            let tag_end = sql[at + 1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map(|end| at + 1 + end);
            match tag_end {
                Some(end) if bytes[end] == b'$' => {
                    let tag = &sql[at..=end];
                    at = sql[end + 1..]
                        .find(tag)
                        .map_or(bytes.len(), |close| end + 1 + close + tag.len());
                    out.push(Piece::Opaque(&sql[start..at]));
                }
                _ => {
                    at += 1;
                    out.push(Piece::Other(&sql[start..at]));
                }
            }
        } else if byte.is_ascii_alphabetic() || byte == b'_' {
            while at < bytes.len()
                && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_' || bytes[at] == b'$')
            {
                at += 1;
            }
            out.push(Piece::Word(&sql[start..at]));
        } else {
            at += 1;
            while at < bytes.len() {
                let b = bytes[at];
                if b.is_ascii_alphabetic() || b"_'\"$-/".contains(&b) {
                    break;
                }
                at += 1;
            }
            out.push(Piece::Other(&sql[start..at]));
        }
    }
    out
}

/// `sql` with every bare name of one of `tables` that stands for a table
/// written as `"schema".table`: every such name not already qualified
/// (after a `.`), not a qualifier itself (before a `.`, as in
/// `handoffs.id`) and not a column alias (after `AS`); and the argument
/// of `to_regclass('table')` likewise. Nothing inside a literal, quoted
/// identifier or comment is touched otherwise.
pub(crate) fn qualify(sql: &str, schema: &str, tables: &[&str]) -> String {
    let pieces = pieces(sql);
    let mut out = String::with_capacity(sql.len() + 64);
    for (index, piece) in pieces.iter().enumerate() {
        match *piece {
            Piece::Word(word) if tables.contains(&word) => {
                let before = neighbour(&pieces, index, true);
                let after = neighbour(&pieces, index, false);
                let named = matches!(before, Some((_, Piece::Other("."))))
                    || matches!(after, Some((_, Piece::Other("."))))
                    || matches!(before, Some((_, Piece::Word(w))) if w.eq_ignore_ascii_case("as"));
                if !named {
                    let _ = write!(out, "\"{schema}\".");
                }
                out.push_str(word);
            }
            Piece::Opaque(text) if text.len() > 2 && text.starts_with('\'') => {
                let table = &text[1..text.len() - 1];
                let in_regclass = match neighbour(&pieces, index, true) {
                    Some((open, Piece::Other("("))) => matches!(
                        neighbour(&pieces, open, true),
                        Some((_, Piece::Word(w))) if w.eq_ignore_ascii_case("to_regclass")
                    ),
                    _ => false,
                };
                if in_regclass && tables.contains(&table) {
                    let _ = write!(out, "'\"{schema}\".{table}'");
                } else {
                    out.push_str(text);
                }
            }
            Piece::Word(text) | Piece::Opaque(text) | Piece::Other(text) => out.push_str(text),
            Piece::Placeholder(number) => {
                let _ = write!(out, "${number}");
            }
        }
    }
    out
}

/// The significant piece (not spaces or a comment) before (`back`) or
/// after the one at `index`, with its index; of punctuation, the one
/// character next to it.
fn neighbour<'a>(pieces: &[Piece<'a>], index: usize, back: bool) -> Option<(usize, Piece<'a>)> {
    let mut at = index;
    loop {
        at = if back { at.checked_sub(1)? } else { at + 1 };
        match *pieces.get(at)? {
            Piece::Other(text) if text.trim().is_empty() => continue,
            Piece::Opaque(text) if text.starts_with("--") || text.starts_with("/*") => continue,
            Piece::Other(text) => {
                let text = text.trim();
                let first = &text[..text.chars().next().map_or(0, char::len_utf8)];
                let last = &text[text.char_indices().last().map_or(0, |(at, _)| at)..];
                return Some((at, Piece::Other(if back { last } else { first })));
            }
            piece => return Some((at, piece)),
        }
    }
}

/// Why a statement's values cannot be written into its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InlineError {
    /// A text value holds a NUL byte, which PostgreSQL cannot store in a
    /// text value (as a bound parameter, it refuses it the same way).
    #[error("a text value holds a NUL byte, which PostgreSQL cannot store")]
    Nul,
    /// The statement names a placeholder beyond its parameters.
    #[error("the statement uses ${0} but has {1} parameters")]
    Missing(usize, usize),
}

/// `sql` with each placeholder `$n` replaced by the literal of
/// `params[n - 1]`: text as an escape string (`E'...'`, whose meaning
/// does not depend on `standard_conforming_strings`), numbers as they
/// are, and `NULL`. The result needs no bound parameter, so it can be
/// sent as a simple query, which prepares nothing on the server.
///
/// # Errors
/// [`InlineError`] for a text value holding a NUL byte, or a placeholder
/// beyond `params`.
pub(crate) fn inline(sql: &str, params: &[Param<'_>]) -> Result<String, InlineError> {
    if params.is_empty() && !sql.contains('$') {
        return Ok(sql.to_string());
    }
    let mut out = String::with_capacity(sql.len() + 32 * params.len());
    for piece in pieces(sql) {
        match piece {
            Piece::Placeholder(number) => {
                let param = number
                    .checked_sub(1)
                    .and_then(|at| params.get(at))
                    .ok_or(InlineError::Missing(number, params.len()))?;
                match *param {
                    Param::Text(text) | Param::OptText(Some(text)) => literal(&mut out, text)?,
                    Param::Int(number) | Param::OptInt(Some(number)) => {
                        // A negative number is one token with its sign
                        // only in parentheses (`x-$1` must not become
                        // `x--1`, a comment).
                        let _ = write!(out, "({number})::bigint");
                    }
                    Param::OptText(None) | Param::OptInt(None) => out.push_str("NULL"),
                }
            }
            Piece::Word(text) | Piece::Opaque(text) | Piece::Other(text) => out.push_str(text),
        }
    }
    Ok(out)
}

/// Writes `text` as an escape string literal.
fn literal(out: &mut String, text: &str) -> Result<(), InlineError> {
    out.push_str("E'");
    for c in text.chars() {
        match c {
            '\0' => return Err(InlineError::Nul),
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLES: &[&str] = &["handoffs", "handoff_events", "parents", "task_prs"];

    #[test]
    fn tables_where_a_table_goes_are_qualified_and_nothing_else() {
        for (sql, expected) in [
            (
                "SELECT id FROM handoffs WHERE id = $1",
                r#"SELECT id FROM "s".handoffs WHERE id = $1"#,
            ),
            (
                "WITH h AS (UPDATE handoffs SET version = $2 RETURNING *) \
                 INSERT INTO handoff_events (handoff_id) SELECT id FROM h",
                r#"WITH h AS (UPDATE "s".handoffs SET version = $2 RETURNING *) INSERT INTO "s".handoff_events (handoff_id) SELECT id FROM h"#,
            ),
            (
                "LOCK TABLE parents, task_prs, handoffs, handoff_events IN EXCLUSIVE MODE",
                r#"LOCK TABLE "s".parents, "s".task_prs, "s".handoffs, "s".handoff_events IN EXCLUSIVE MODE"#,
            ),
            (
                "SELECT count(*) AS handoffs, handoffs.id FROM handoffs JOIN parents p ON TRUE",
                r#"SELECT count(*) AS handoffs, handoffs.id FROM "s".handoffs JOIN "s".parents p ON TRUE"#,
            ),
            (
                "SELECT 'handoffs', \"handoffs\", x.handoffs -- handoffs\n FROM other.handoffs",
                "SELECT 'handoffs', \"handoffs\", x.handoffs -- handoffs\n FROM other.handoffs",
            ),
            (
                "SELECT to_regclass('handoff_events'), to_regclass('other')",
                r#"SELECT to_regclass('"s".handoff_events'), to_regclass('other')"#,
            ),
            (
                "SELECT $$ FROM handoffs $$, $q$handoffs$q$ FROM /* handoffs */ parents",
                r#"SELECT $$ FROM handoffs $$, $q$handoffs$q$ FROM /* handoffs */ "s".parents"#,
            ),
            (
                "SELECT handoffs_by_created, handoffsx FROM handoffs_archive",
                "SELECT handoffs_by_created, handoffsx FROM handoffs_archive",
            ),
        ] {
            assert_eq!(qualify(sql, "s", TABLES), expected, "{sql}");
        }
    }

    #[test]
    fn values_are_written_as_literals_that_read_back_exactly() {
        let sql =
            "UPDATE t SET a = $1, b = $2, c = $3, d = $4, e = $10 WHERE f = '$1' AND g = x-$5";
        let params = [
            Param::Text("it's a \\ back'slash"),
            Param::OptText(None),
            Param::Int(-42),
            Param::OptInt(None),
            Param::Int(7),
            Param::Int(6),
            Param::Int(7),
            Param::Int(8),
            Param::Int(9),
            Param::OptText(Some("ten")),
        ];
        assert_eq!(
            inline(sql, &params).unwrap(),
            "UPDATE t SET a = E'it''s a \\\\ back''slash', b = NULL, c = (-42)::bigint, d = NULL, \
             e = E'ten' WHERE f = '$1' AND g = x-(7)::bigint"
        );
        assert_eq!(
            inline("SELECT $1", &[Param::Text("a\0b")]),
            Err(InlineError::Nul)
        );
        assert_eq!(
            inline("SELECT $2", &[Param::Int(1)]),
            Err(InlineError::Missing(2, 1))
        );
        assert_eq!(inline("SELECT 1", &[]).unwrap(), "SELECT 1");
    }
}

//! `token create|list|revoke`: the tokens file of `serve --tokens FILE`
//! (C20). A token is printed once, when it is made; the file keeps only
//! its hash. `--json` prints the token's name, scopes and creation time
//! (and, for `create`, the token).

use std::fmt::Write as _;
use std::path::Path;

use lf_handoff_api::Scope;
use lf_handoff_server::tokens::{self, TokenEntry};
use serde::Serialize;
use time::OffsetDateTime;

use crate::args::TokenCommand;
use crate::error::{CliError, CliResult};
use crate::output::{emit, emit_json, note, printable, timestamp};

/// A token as `--json` prints it. Its `Debug` hides the token.
#[derive(Serialize)]
struct TokenJson<'a> {
    name: &'a str,
    scopes: &'a [Scope],
    #[serde(with = "time::serde::rfc3339")]
    created: OffsetDateTime,
    /// Only when it is made.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
}

impl std::fmt::Debug for TokenJson<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenJson")
            .field("name", &self.name)
            .field("scopes", &self.scopes)
            .field("created", &self.created)
            .field("token", &self.token.map(|_| "<redacted>"))
            .finish()
    }
}

impl<'a> TokenJson<'a> {
    fn of(entry: &'a TokenEntry, token: Option<&'a str>) -> Self {
        Self {
            name: entry.caller.name.as_str(),
            scopes: &entry.caller.scopes,
            created: entry.created,
            token,
        }
    }
}

/// Runs a `token` command.
///
/// # Errors
/// Exit 2 for a bad name; 3 for a missing file or name; 4 for a name
/// already taken; 5 when the file cannot be read or written.
pub fn run(command: TokenCommand, json: bool) -> CliResult<()> {
    match command {
        TokenCommand::Create {
            name,
            scope,
            tokens: path,
        } => create(&path, &name, &scope, json),
        TokenCommand::List { tokens: path } => list(&path, json),
        TokenCommand::Revoke { name, tokens: path } => {
            let removed = tokens::revoke(&path, &name).map_err(CliError::from)?;
            if json {
                return emit_json(&TokenJson::of(&removed, None));
            }
            note(&format!(
                "revoked {:?} in {}; a running serve drops it on SIGHUP (kill -HUP PID)",
                removed.caller.name.as_str(),
                path.display()
            ));
            Ok(())
        }
    }
}

fn create(path: &Path, name: &str, scopes: &[Scope], json: bool) -> CliResult<()> {
    let made =
        tokens::create(path, name, scopes, OffsetDateTime::now_utc()).map_err(CliError::from)?;
    if json {
        return emit_json(&TokenJson::of(&made.entry, Some(&made.token)));
    }
    let scopes: Vec<&str> = made
        .entry
        .caller
        .scopes
        .iter()
        .map(|s| s.as_str())
        .collect();
    note(&format!(
        "created token {:?} ({}) in {}; it is shown only now: keep it where its user can read \
         it (LF_HANDOFF_TOKEN)",
        made.entry.caller.name.as_str(),
        scopes.join(", "),
        path.display()
    ));
    emit(&format!("{}\n", made.token))
}

fn list(path: &Path, json: bool) -> CliResult<()> {
    let entries = tokens::read_file(path).map_err(CliError::from)?;
    if json {
        let rows: Vec<_> = entries.iter().map(|e| TokenJson::of(e, None)).collect();
        return emit_json(&rows);
    }
    if entries.is_empty() {
        note("no tokens");
        return Ok(());
    }
    let width = entries
        .iter()
        .map(|e| printable(e.caller.name.as_str()).chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut text = format!("{:<width$}  {:<22}  CREATED\n", "NAME", "SCOPES");
    for entry in &entries {
        let scopes: Vec<&str> = entry.caller.scopes.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            text,
            "{:<width$}  {:<22}  {}",
            printable(entry.caller.name.as_str()),
            scopes.join(","),
            timestamp(entry.created)
        );
    }
    emit(&text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_tokens_json_debug_hides_the_token() {
        let made = lf_handoff_server::tokens::make_token(
            "alice",
            &[Scope::Person],
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap();
        let json = TokenJson::of(&made.entry, Some(&made.token));
        let shown = format!("{json:?}");
        assert!(!shown.contains(&made.token[4..]), "{shown}");
        assert!(
            shown.contains("alice") && shown.contains("<redacted>"),
            "{shown}"
        );
    }
}

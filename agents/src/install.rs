//! `hook install` and `hook uninstall`: the hook entries in the agent's
//! settings file, merged with what is there.
//!
//! Claude Code reads hooks from `~/.claude/settings.json` (a user's; its
//! directory moves with `CLAUDE_CONFIG_DIR`) and `.claude/settings.json`
//! (a project's); Codex from `hooks.json` beside its `config.toml`:
//! `$CODEX_HOME/hooks.json` (default `~/.codex`) and a project's
//! `.codex/hooks.json`. Both files have the same shape, `{"hooks":
//! {EVENT: [{"matcher": ..., "hooks": [{"type": "command", "command":
//! ..., "timeout": SECONDS}]}]}}`.
//!
//! An entry is ours when its command runs `lf-handoff hook AGENT`.
//! Installing adds a group per event, or updates our entry in place;
//! installing twice changes nothing. Uninstalling removes our entries
//! only, and the groups and events they leave empty. Everything else in
//! the file stays, in its order. A file that is not a JSON object, or
//! whose `hooks` is not of that shape, is refused and left as it is.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::input::Agent;
use crate::ordered::Json;

/// Whose settings: the user's (every session) or the current project's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's settings file.
    User,
    /// The project's, under the current directory.
    Project,
}

/// Why a settings file was left as it is.
#[derive(Debug)]
pub enum InstallError {
    /// The file is not what the agent reads (not JSON, not an object, a
    /// `hooks` of another shape), or no place for it is known.
    Invalid(String),
    /// The file could not be read or written.
    Io(String, std::io::Error),
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(message) => f.write_str(message),
            Self::Io(message, error) => write!(f, "{message}: {error}"),
        }
    }
}

impl std::error::Error for InstallError {}

/// The hook timeout of the quick events (a prompt, the idle notification,
/// the session's end), in seconds.
pub const QUICK_TIMEOUT_SECS: u64 = 10;

/// One hook entry: the event, its matcher, the command, its timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The agent's event name (`PermissionRequest`, ...).
    pub event: &'static str,
    /// The matcher (`idle_prompt`), or none: every occurrence.
    pub matcher: Option<&'static str>,
    /// The command the agent runs, through its shell.
    pub command: String,
    /// The agent's timeout for it, in seconds.
    pub timeout: u64,
}

/// The entries `agent` needs, running `program` (the `lf-handoff` binary,
/// quoted for a shell); `wait`, when given, is passed as `--wait` and the
/// permission request's timeout is 10 s more (by default 60 s, for the
/// default wait of 50 s).
pub fn entries(agent: Agent, program: &str, wait: Option<Duration>) -> Vec<Entry> {
    let base = format!("{program} hook {agent}");
    let (permission_command, permission_timeout) = match wait {
        Some(wait) => (
            format!("{base} --wait {}s", wait.as_secs()),
            wait.as_secs() + 10,
        ),
        None => (base.clone(), crate::config::DEFAULT_WAIT.as_secs() + 10),
    };
    let permission = Entry {
        event: "PermissionRequest",
        matcher: None,
        command: permission_command,
        timeout: permission_timeout,
    };
    let quick = |event, matcher| Entry {
        event,
        matcher,
        command: base.clone(),
        timeout: QUICK_TIMEOUT_SECS,
    };
    match agent {
        Agent::ClaudeCode => vec![
            permission,
            quick("Notification", Some("idle_prompt")),
            quick("UserPromptSubmit", None),
            quick("SessionEnd", None),
        ],
        Agent::Codex => vec![
            permission,
            quick("UserPromptSubmit", None),
            quick("Stop", None),
        ],
    }
}

/// The settings file of `agent` for `scope`: `lookup` reads the
/// environment (`HOME`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`); `cwd` is the
/// project's root.
///
/// # Errors
/// [`InstallError::Invalid`] when the user's file has no known place
/// (`HOME` unset).
pub fn settings_path(
    agent: Agent,
    scope: Scope,
    cwd: &Path,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, InstallError> {
    let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
    let home = || {
        var("HOME").map(PathBuf::from).ok_or_else(|| {
            InstallError::Invalid("HOME is not set: no place for the user's settings".into())
        })
    };
    Ok(match (agent, scope) {
        (Agent::ClaudeCode, Scope::User) => match var("CLAUDE_CONFIG_DIR") {
            Some(dir) => PathBuf::from(dir).join("settings.json"),
            None => home()?.join(".claude").join("settings.json"),
        },
        (Agent::ClaudeCode, Scope::Project) => cwd.join(".claude").join("settings.json"),
        (Agent::Codex, Scope::User) => match var("CODEX_HOME") {
            Some(dir) => PathBuf::from(dir).join("hooks.json"),
            None => home()?.join(".codex").join("hooks.json"),
        },
        (Agent::Codex, Scope::Project) => cwd.join(".codex").join("hooks.json"),
    })
}

/// Whether `command` runs `lf-handoff hook AGENT`.
pub fn is_ours(command: &str, agent: Agent) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.windows(3).any(|w| {
        let program = w[0].trim_matches(|c| c == '\'' || c == '"');
        (program == "lf-handoff" || program.ends_with("/lf-handoff"))
            && w[1] == "hook"
            && w[2] == agent.as_str()
    })
}

/// The file's text after installing `entries`, and a line per change
/// (none: it holds them already). `text` is the file's text, `None` when
/// it does not exist.
///
/// # Errors
/// [`InstallError::Invalid`] for a file that is not of the settings'
/// shape.
pub fn install(
    text: Option<&str>,
    agent: Agent,
    entries: &[Entry],
) -> Result<(String, Vec<String>), InstallError> {
    let mut root = parse(text)?;
    let mut changes = Vec::new();
    if root.get("hooks").is_none() {
        root.set("hooks", Json::Object(Vec::new()));
    }
    let Some(hooks) = root.get_mut("hooks") else {
        return Err(InstallError::Invalid("no hooks table".into()));
    };
    for entry in entries {
        if hooks.get(entry.event).is_none() {
            hooks.set(entry.event, Json::Array(Vec::new()));
        }
        let Some(Json::Array(groups)) = hooks.get_mut(entry.event) else {
            return Err(shape(&format!("hooks.{} is not an array", entry.event)));
        };
        let handler = Json::object(vec![
            ("type", Json::string("command")),
            ("command", Json::string(entry.command.clone())),
            ("timeout", Json::Number(entry.timeout.into())),
        ]);
        let mut found = false;
        let mut changed = false;
        for group in groups.iter_mut() {
            if group.get("matcher").and_then(Json::as_str) != entry.matcher {
                continue;
            }
            let Some(Json::Array(handlers)) = group.get_mut("hooks") else {
                continue;
            };
            for existing in handlers.iter_mut() {
                let ours = existing
                    .get("command")
                    .and_then(Json::as_str)
                    .is_some_and(|command| is_ours(command, agent));
                if !ours {
                    continue;
                }
                if found {
                    // A second copy of ours: drop it below.
                    *existing = Json::Null;
                    changed = true;
                    continue;
                }
                found = true;
                if *existing != handler {
                    *existing = handler.clone();
                    changed = true;
                }
            }
            handlers.retain(|handler| *handler != Json::Null);
        }
        if !found {
            let mut group = Vec::new();
            if let Some(matcher) = entry.matcher {
                group.push(("matcher", Json::string(matcher)));
            }
            group.push(("hooks", Json::Array(vec![handler])));
            groups.push(Json::object(group));
            changes.push(format!("added {}", describe(entry)));
        } else if changed {
            changes.push(format!("updated {}", describe(entry)));
        }
    }
    Ok((render(&root)?, changes))
}

/// The file's text after removing `agent`'s entries, and a line per
/// removal.
///
/// # Errors
/// [`InstallError::Invalid`] for a file that is not of the settings'
/// shape.
pub fn uninstall(text: Option<&str>, agent: Agent) -> Result<(String, Vec<String>), InstallError> {
    let mut root = parse(text)?;
    let mut changes = Vec::new();
    if let Some(Json::Object(events)) = root.get_mut("hooks") {
        for (event, groups) in events.iter_mut() {
            let Json::Array(groups) = groups else {
                continue;
            };
            for group in groups.iter_mut() {
                let Some(Json::Array(handlers)) = group.get_mut("hooks") else {
                    continue;
                };
                handlers.retain(|handler| {
                    let ours = handler
                        .get("command")
                        .and_then(Json::as_str)
                        .filter(|command| is_ours(command, agent));
                    if let Some(command) = ours {
                        changes.push(format!("removed {event}: {command}"));
                    }
                    ours.is_none()
                });
            }
            groups.retain(|group| {
                !matches!(group.get("hooks"), Some(Json::Array(handlers)) if handlers.is_empty())
            });
        }
        events.retain(|(_, groups)| !matches!(groups, Json::Array(groups) if groups.is_empty()));
    }
    if matches!(root.get("hooks"), Some(Json::Object(events)) if events.is_empty()) {
        root.remove("hooks");
    }
    Ok((render(&root)?, changes))
}

fn describe(entry: &Entry) -> String {
    let matcher = entry.matcher.map(|m| format!(" ({m})")).unwrap_or_default();
    format!(
        "{}{matcher}: {} (timeout {}s)",
        entry.event, entry.command, entry.timeout
    )
}

fn parse(text: Option<&str>) -> Result<Json, InstallError> {
    let Some(text) = text.filter(|text| !text.trim().is_empty()) else {
        return Ok(Json::Object(Vec::new()));
    };
    let root: Json = serde_json::from_str(text)
        .map_err(|e| InstallError::Invalid(format!("not valid JSON: {e}")))?;
    if !matches!(root, Json::Object(_)) {
        return Err(shape("the file is not a JSON object"));
    }
    match root.get("hooks") {
        None | Some(Json::Object(_)) => {}
        Some(_) => return Err(shape("`hooks` is not an object")),
    }
    Ok(root)
}

fn shape(what: &str) -> InstallError {
    InstallError::Invalid(format!("{what}; the agent would not read it either"))
}

fn render(root: &Json) -> Result<String, InstallError> {
    serde_json::to_string_pretty(root)
        .map(|text| text + "\n")
        .map_err(|e| InstallError::Invalid(format!("cannot write JSON: {e}")))
}

/// Reads the settings file at `path`: its text, `None` when it does not
/// exist.
///
/// # Errors
/// [`InstallError::Io`] when it exists but cannot be read.
pub fn read_settings(path: &Path) -> Result<Option<String>, InstallError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(InstallError::Io(
            format!("cannot read {}", path.display()),
            error,
        )),
    }
}

/// Writes `after` to `path` in place of `before` (its text when it
/// existed): the old file is kept beside it as `NAME.lf-handoff.bak`
/// first, and the new one appears whole (written beside, then renamed),
/// with the old one's permissions. Returns the backup's path, if any.
///
/// # Errors
/// [`InstallError::Io`] naming the file that could not be written.
pub fn write_settings(
    path: &Path,
    before: Option<&str>,
    after: &str,
) -> Result<Option<PathBuf>, InstallError> {
    let io = |what: &str, path: &Path| {
        let message = format!("cannot {what} {}", path.display());
        move |error| InstallError::Io(message, error)
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("create the directory", dir))?;
    }
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings.json".into());
    let backup = match before {
        Some(text) => {
            let backup = path.with_file_name(format!("{name}.lf-handoff.bak"));
            std::fs::write(&backup, text).map_err(io("write the backup", &backup))?;
            Some(backup)
        }
        None => None,
    };
    let temporary = path.with_file_name(format!(".{name}.lf-handoff.{}", std::process::id()));
    std::fs::write(&temporary, after).map_err(io("write", &temporary))?;
    if let Ok(metadata) = std::fs::metadata(path) {
        // Keep the file's own permissions; the new file has the umask's.
        let _ = std::fs::set_permissions(&temporary, metadata.permissions());
    }
    std::fs::rename(&temporary, path).map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        InstallError::Io(format!("cannot replace {}", path.display()), error)
    })?;
    Ok(backup)
}

/// Quotes `text` for a POSIX shell when it needs it.
pub fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude() -> Vec<Entry> {
        entries(Agent::ClaudeCode, "/usr/bin/lf-handoff", None)
    }

    #[test]
    fn installing_keeps_what_is_there_and_twice_is_once() {
        let before = r#"{"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Bash",
            "hooks": [{"type": "command", "command": "audit.sh"}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "log.sh"}]}]},
            "env": {"A": "1"}}"#;
        let (after, changes) = install(Some(before), Agent::ClaudeCode, &claude()).unwrap();
        assert_eq!(changes.len(), 4, "{changes:?}");
        assert!(after.find("\"model\"") < after.find("\"hooks\""));
        assert!(after.contains("audit.sh") && after.contains("log.sh"));
        assert!(after.contains("\"env\""));
        let (again, changes) = install(Some(&after), Agent::ClaudeCode, &claude()).unwrap();
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(again, after);
        let (removed, changes) = uninstall(Some(&after), Agent::ClaudeCode).unwrap();
        assert_eq!(changes.len(), 4, "{changes:?}");
        let original: serde_json::Value = serde_json::from_str(before).unwrap();
        let removed: serde_json::Value = serde_json::from_str(&removed).unwrap();
        assert_eq!(removed, original);
    }

    #[test]
    fn a_changed_wait_updates_the_entry_in_place() {
        let (first, _) = install(
            None,
            Agent::Codex,
            &entries(Agent::Codex, "lf-handoff", None),
        )
        .unwrap();
        let longer = entries(Agent::Codex, "lf-handoff", Some(Duration::from_secs(100)));
        let (second, changes) = install(Some(&first), Agent::Codex, &longer).unwrap();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(second.contains("--wait 100s") && second.contains("110"));
        assert_eq!(second.matches("lf-handoff hook codex --wait").count(), 1);
    }

    #[test]
    fn files_of_another_shape_are_refused() {
        for text in [
            "{",
            "[]",
            r#"{"hooks": []}"#,
            r#"{"hooks": {"PermissionRequest": {}}}"#,
        ] {
            assert!(
                matches!(
                    install(Some(text), Agent::ClaudeCode, &claude()),
                    Err(InstallError::Invalid(_))
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn ours_is_recognised_by_program_and_agent() {
        assert!(is_ours("/x/lf-handoff hook codex --wait 5s", Agent::Codex));
        assert!(is_ours("'/a b/lf-handoff' hook codex", Agent::Codex));
        assert!(!is_ours("/x/lf-handoff hook claude-code", Agent::Codex));
        assert!(!is_ours("other hook codex", Agent::Codex));
        assert_eq!(shell_quote("/a b/x"), "'/a b/x'");
        assert_eq!(shell_quote("/usr/bin/lf-handoff"), "/usr/bin/lf-handoff");
    }
}

//! What an agent passes its hook, read into one [`HookEvent`].
//!
//! Both agents write a JSON object on the hook's standard input with
//! `hook_event_name`, `session_id` and `cwd` (docs/HOOKS.md cites the
//! published formats); Codex's older `notify` program gets its JSON as its
//! last argument instead (`"type": "agent-turn-complete"`). Only the
//! fields the hook uses are read, and each is checked, so anything else
//! the agents add later is ignored. An input that is not what this agent
//! sends (another agent's shape, an unknown event, a missing field) is a
//! [`HookError`] naming why: the hook then decides nothing.

use std::fmt;
use std::path::PathBuf;

use serde_json::{Map, Value};

/// The agents whose hooks `lf-handoff hook` speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    /// Anthropic's Claude Code.
    ClaudeCode,
    /// OpenAI's Codex.
    Codex,
}

impl Agent {
    /// The name on the command line and in step keys: `claude-code`, `codex`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
        }
    }

    /// The name people read: `Claude Code`, `Codex`.
    pub fn display_name(self) -> &'static str {
        match self {
            Self::ClaudeCode => "Claude Code",
            Self::Codex => "Codex",
        }
    }

    /// The other agent, for messages about an input of the wrong shape.
    fn other(self) -> Self {
        match self {
            Self::ClaudeCode => Self::Codex,
            Self::Codex => Self::ClaudeCode,
        }
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the hook decides nothing: the one line it logs on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookError(pub String);

impl HookError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HookError {}

/// The longest agent session id accepted, in bytes.
pub const MAX_SESSION_BYTES: usize = 200;
/// The largest hook input read, in bytes (a tool input may carry a whole
/// file to write).
pub const MAX_INPUT_BYTES: usize = 8 * 1024 * 1024;

/// What happened in the agent, as far as the hook cares.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEvent {
    /// Which agent sent it.
    pub agent: Agent,
    /// The agent's session (Codex: its thread) id.
    pub session: String,
    /// The agent's working directory, absolute.
    pub cwd: PathBuf,
    /// What happened.
    pub kind: EventKind,
}

/// The events the hook acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// The agent asks a person whether a tool may run.
    Permission(PermissionRequest),
    /// The agent sits idle, waiting for the person's next prompt.
    Idle {
        /// What the agent says, if anything (its notification text).
        message: Option<String>,
    },
    /// The person submitted a prompt at the agent's own terminal.
    Prompt,
    /// The agent's session ended.
    SessionEnd {
        /// The agent's reason, if it gave one (`clear`, `logout`, ...).
        reason: Option<String>,
    },
    /// An event the hook has nothing to do for (named in the log line).
    Ignored(String),
}

/// A permission request: the tool, what it would do and what identifies
/// the call.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    /// The tool (`Bash`, `Write`, `NetworkAccess`, ...).
    pub tool_name: String,
    /// The tool's input as the agent sent it.
    pub tool_input: Value,
    /// The tool call's id, when the agent sends one.
    pub tool_call_id: Option<String>,
    /// The agent's turn id, when it sends one (Codex does).
    pub turn_id: Option<String>,
}

/// Reads the input `agent` passed: `stdin`, or for Codex's `notify` the
/// JSON given as the last argument (`argument`).
///
/// # Errors
/// A [`HookError`] naming what is wrong: not JSON, not an object, an
/// unknown event, a missing or malformed field, or the other agent's
/// shape.
pub fn parse(agent: Agent, stdin: &str, argument: Option<&str>) -> Result<HookEvent, HookError> {
    let text = match argument {
        Some(argument) => argument,
        None => stdin,
    };
    if text.trim().is_empty() {
        return Err(HookError::new(format!(
            "no hook input: {} passes a JSON object on standard input",
            agent.display_name()
        )));
    }
    if text.len() > MAX_INPUT_BYTES {
        return Err(HookError::new(format!(
            "hook input is {} bytes; the limit is {MAX_INPUT_BYTES}",
            text.len()
        )));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| HookError::new(format!("hook input is not JSON: {e}")))?;
    let Value::Object(object) = value else {
        return Err(HookError::new("hook input is not a JSON object"));
    };
    if let Some(kind) = object.get("type").and_then(Value::as_str) {
        return notify(agent, &object, kind);
    }
    let event = string(&object, "hook_event_name")?;
    match agent {
        Agent::ClaudeCode => claude_code(&object, &event),
        Agent::Codex => codex(&object, &event),
    }
}

fn claude_code(object: &Map<String, Value>, event: &str) -> Result<HookEvent, HookError> {
    let agent = Agent::ClaudeCode;
    if object.contains_key("turn_id") {
        return Err(other_shape(agent, "it carries `turn_id`"));
    }
    let kind = match event {
        "PermissionRequest" => EventKind::Permission(permission(object, None)?),
        "Notification" => match optional_string(object, "notification_type")?.as_deref() {
            Some("idle_prompt") => EventKind::Idle {
                message: optional_string(object, "message")?,
            },
            other => EventKind::Ignored(format!(
                "a Notification of type {}",
                other.map_or_else(|| "(none)".into(), |t| format!("{t:?}"))
            )),
        },
        "UserPromptSubmit" => EventKind::Prompt,
        "SessionEnd" => EventKind::SessionEnd {
            reason: optional_string(object, "reason")?,
        },
        other => return Err(unknown_event(agent, other)),
    };
    event_of(agent, object, kind)
}

fn codex(object: &Map<String, Value>, event: &str) -> Result<HookEvent, HookError> {
    let agent = Agent::Codex;
    let kind = match event {
        "PermissionRequest" => {
            let turn = string(object, "turn_id").map_err(|_| {
                other_shape(
                    agent,
                    "its PermissionRequest has no `turn_id`, which Codex sends",
                )
            })?;
            EventKind::Permission(permission(object, Some(turn))?)
        }
        "UserPromptSubmit" => EventKind::Prompt,
        "Stop" => EventKind::Idle {
            message: optional_string(object, "last_assistant_message")?,
        },
        "Notification" | "SessionEnd" => {
            return Err(other_shape(agent, &format!("Codex sends no {event} event")))
        }
        other => return Err(unknown_event(agent, other)),
    };
    event_of(agent, object, kind)
}

/// Codex's `notify` payload (`agent-turn-complete`): the turn ended and
/// the agent waits for the person.
fn notify(agent: Agent, object: &Map<String, Value>, kind: &str) -> Result<HookEvent, HookError> {
    if agent != Agent::Codex {
        return Err(other_shape(agent, "it is Codex's `notify` payload"));
    }
    if kind != "agent-turn-complete" {
        return Err(HookError::new(format!(
            "Codex notify type {kind:?} is unknown; the hook acts on agent-turn-complete"
        )));
    }
    let session = session_id(object, "thread-id")?;
    let cwd = cwd(object)?;
    Ok(HookEvent {
        agent,
        session,
        cwd,
        kind: EventKind::Idle {
            message: optional_string(object, "last-assistant-message")?,
        },
    })
}

fn permission(
    object: &Map<String, Value>,
    turn_id: Option<String>,
) -> Result<PermissionRequest, HookError> {
    let tool_name = string(object, "tool_name")?;
    if tool_name.trim().is_empty() {
        return Err(HookError::new("hook input field `tool_name` is blank"));
    }
    let Some(tool_input) = object.get("tool_input") else {
        return Err(HookError::new("hook input has no `tool_input`"));
    };
    let tool_call_id = optional_string(object, "tool_use_id")?.filter(|id| valid_id(id));
    Ok(PermissionRequest {
        tool_name,
        tool_input: tool_input.clone(),
        tool_call_id,
        turn_id: turn_id.filter(|id| valid_id(id)),
    })
}

fn event_of(
    agent: Agent,
    object: &Map<String, Value>,
    kind: EventKind,
) -> Result<HookEvent, HookError> {
    Ok(HookEvent {
        agent,
        session: session_id(object, "session_id")?,
        cwd: cwd(object)?,
        kind,
    })
}

/// An id fit for a step key: 1 to 100 bytes, no control characters.
fn valid_id(id: &str) -> bool {
    !id.trim().is_empty() && id.len() <= 100 && !id.chars().any(char::is_control)
}

fn session_id(object: &Map<String, Value>, field: &str) -> Result<String, HookError> {
    let session = string(object, field)?;
    if session.trim().is_empty()
        || session.len() > MAX_SESSION_BYTES
        || session.chars().any(char::is_control)
    {
        return Err(HookError::new(format!(
            "hook input field `{field}` must be 1 to {MAX_SESSION_BYTES} bytes without control \
             characters"
        )));
    }
    Ok(session)
}

fn cwd(object: &Map<String, Value>) -> Result<PathBuf, HookError> {
    let cwd = PathBuf::from(string(object, "cwd")?);
    if !cwd.is_absolute() {
        return Err(HookError::new(format!(
            "hook input field `cwd` is not an absolute path: {}",
            cwd.display()
        )));
    }
    Ok(cwd)
}

fn string(object: &Map<String, Value>, field: &str) -> Result<String, HookError> {
    match object.get(field) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(HookError::new(format!(
            "hook input field `{field}` is not a string"
        ))),
        None => Err(HookError::new(format!("hook input has no `{field}`"))),
    }
}

fn optional_string(object: &Map<String, Value>, field: &str) -> Result<Option<String>, HookError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(HookError::new(format!(
            "hook input field `{field}` is not a string"
        ))),
    }
}

fn unknown_event(agent: Agent, event: &str) -> HookError {
    HookError::new(format!(
        "{} hook event {event:?} is not one the hook acts on (see docs/HOOKS.md)",
        agent.display_name()
    ))
}

fn other_shape(agent: Agent, why: &str) -> HookError {
    HookError::new(format!(
        "this is not {}'s hook input ({why}); is it {}'s? use `lf-handoff hook {}`",
        agent.display_name(),
        agent.other().display_name(),
        agent.other()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_code_permission_request_reads_its_fields() {
        let input = r#"{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/w",
            "permission_mode":"default","hook_event_name":"PermissionRequest",
            "tool_name":"Bash","tool_input":{"command":"ls"}}"#;
        let event = parse(Agent::ClaudeCode, input, None).unwrap();
        assert_eq!(event.session, "s1");
        let EventKind::Permission(request) = event.kind else {
            panic!("{event:?}")
        };
        assert_eq!(request.tool_name, "Bash");
        assert_eq!(request.turn_id, None);
    }

    #[test]
    fn each_agent_refuses_the_others_shape() {
        let codex = r#"{"session_id":"s","turn_id":"t","cwd":"/w","model":"m",
            "hook_event_name":"PermissionRequest","tool_name":"Bash",
            "tool_input":{"command":"ls"}}"#;
        let error = parse(Agent::ClaudeCode, codex, None).unwrap_err();
        assert!(error.0.contains("hook codex"), "{error}");
        let claude = r#"{"session_id":"s","cwd":"/w","hook_event_name":"PermissionRequest",
            "tool_name":"Bash","tool_input":{"command":"ls"}}"#;
        let error = parse(Agent::Codex, claude, None).unwrap_err();
        assert!(error.0.contains("hook claude-code"), "{error}");
        let notify = r#"{"type":"agent-turn-complete","thread-id":"t","turn-id":"1","cwd":"/w"}"#;
        assert!(parse(Agent::ClaudeCode, notify, None).is_err());
        assert!(matches!(
            parse(Agent::Codex, "", Some(notify)).unwrap().kind,
            EventKind::Idle { .. }
        ));
    }

    #[test]
    fn malformed_inputs_name_their_cause() {
        for (input, cause) in [
            ("", "no hook input"),
            ("[1]", "not a JSON object"),
            ("{", "not JSON"),
            (
                r#"{"hook_event_name":"Bogus","session_id":"s","cwd":"/w"}"#,
                "Bogus",
            ),
            (
                r#"{"hook_event_name":"UserPromptSubmit","cwd":"/w"}"#,
                "session_id",
            ),
            (
                r#"{"hook_event_name":"UserPromptSubmit","session_id":"s","cwd":"rel"}"#,
                "absolute",
            ),
            (
                r#"{"hook_event_name":"UserPromptSubmit","session_id":7,"cwd":"/w"}"#,
                "string",
            ),
        ] {
            let error = parse(Agent::ClaudeCode, input, None).unwrap_err();
            assert!(error.0.contains(cause), "{input}: {error}");
        }
    }
}

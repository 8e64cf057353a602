//! What the hook writes into a handoff: the reason a person reads, the
//! step key that finds the same handoff again, and the wave made for an
//! agent session, each derived from the hook input alone.

use ring::digest::{digest, SHA256};
use serde_json::Value;
use uuid::Uuid;

use lf_handoff_domain::id::WaveId;

use crate::input::{Agent, HookEvent, PermissionRequest};

/// The longest description of what a tool would do, in characters, before
/// it is cut with `…`.
pub const MAX_WHAT_CHARS: usize = 300;

/// The reason of a permission handoff: the agent, the tool and what it
/// would do, e.g. `Claude Code asks to run Bash: cargo test --workspace`.
pub fn permission_reason(agent: Agent, request: &PermissionRequest) -> String {
    let what = what_it_would_do(&request.tool_name, &request.tool_input);
    format!(
        "{} asks to run {}: {}",
        agent.display_name(),
        one_line(&request.tool_name, 80),
        what
    )
}

/// The reason of an idle handoff.
pub fn idle_reason(event: &HookEvent, message: Option<&str>) -> String {
    let said = message
        .map(|text| one_line(text, MAX_WHAT_CHARS))
        .filter(|text| !text.is_empty())
        .map(|text| format!(" ({text})"))
        .unwrap_or_default();
    format!(
        "{} waits for your next prompt in {}{said}",
        event.agent.display_name(),
        event.cwd.display()
    )
}

/// What a tool would do, from its input: the command, the file, the URL,
/// the query; otherwise the input as compact JSON. One line, cut to
/// [`MAX_WHAT_CHARS`] characters.
pub fn what_it_would_do(tool: &str, input: &Value) -> String {
    let field = |name: &str| input.get(name).and_then(Value::as_str);
    let what = match (tool, field("command")) {
        (_, Some(command)) => {
            let mut text = command.to_string();
            if let Some(description) = field("description").filter(|d| !d.trim().is_empty()) {
                text = format!("{text}  ({description})");
            }
            text
        }
        _ => {
            let first = [
                "file_path",
                "notebook_path",
                "path",
                "url",
                "query",
                "pattern",
            ]
            .into_iter()
            .find_map(|name| field(name).map(|value| (name, value)));
            match first {
                Some((name, value)) => format!("{name} {value}"),
                None => input.to_string(),
            }
        }
    };
    one_line(&what, MAX_WHAT_CHARS)
}

/// `text` on one line (each run of whitespace and control characters
/// becomes one space), cut to `max` characters with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let mut line = String::with_capacity(text.len().min(max * 4));
    let mut count = 0;
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
            continue;
        }
        if space {
            line.push(' ');
            count += 1;
            space = false;
        }
        if count + 1 > max {
            line.push('…');
            return line;
        }
        line.push(c);
        count += 1;
    }
    line
}

/// A short, stable hash of `parts`: 12 hex digits of their SHA-256.
pub fn short_hash(parts: &[&[u8]]) -> String {
    let mut joined = Vec::new();
    for part in parts {
        joined.extend_from_slice(&(part.len() as u64).to_be_bytes());
        joined.extend_from_slice(part);
    }
    let hash = digest(&SHA256, &joined);
    hash.as_ref()[..6]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The prefix of every step key of one agent session:
/// `claude-code:<session>:` (a session id over 64 bytes is replaced by its
/// hash, so every key fits the step key's 200 bytes).
pub fn session_prefix(agent: Agent, session: &str) -> String {
    let session = if session.len() > 64 {
        format!("h{}", short_hash(&[session.as_bytes()]))
    } else {
        session.to_string()
    };
    format!("{agent}:{session}:")
}

/// What identifies a permission request within its session: the tool
/// call's id (`call:<id>`) when the agent sends one, else the turn id and
/// a hash of the tool and its input (`turn:<turn>:<hash>`), else the hash
/// alone (`req:<hash>`). Two hooks for the same call get the same base.
pub fn request_base(request: &PermissionRequest) -> String {
    let input = request.tool_input.to_string();
    let hash = short_hash(&[request.tool_name.as_bytes(), input.as_bytes()]);
    match (&request.tool_call_id, &request.turn_id) {
        (Some(call), _) => format!("call:{call}"),
        (None, Some(turn)) => format!("turn:{turn}:{hash}"),
        (None, None) => format!("req:{hash}"),
    }
}

/// Returns true if and only if `base` names the call by an id the agent
/// gave (a tool call id or a turn id), so a finished handoff found under
/// it is an answer to this very call.
pub fn base_is_identified(base: &str) -> bool {
    base.starts_with("call:") || base.starts_with("turn:")
}

/// The wave made for an agent session: its id is derived from the agent
/// and the session id (a version 8 UUID of their SHA-256), so every hook
/// of the session, in any process, names the same wave.
pub fn session_wave_id(agent: Agent, session: &str) -> WaveId {
    let hash = digest(
        &SHA256,
        format!("lf-handoff hook wave\0{agent}\0{session}").as_bytes(),
    );
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash.as_ref()[..16]);
    // Version 8 (custom), RFC 9562 variant.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    WaveId::from_uuid(Uuid::from_bytes(bytes))
}

/// The name of that wave: `claude-code session 1a2b3c4d`.
pub fn session_wave_name(agent: Agent, session: &str) -> String {
    let short: String = session.chars().take(8).collect();
    format!("{agent} session {short}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn what_a_tool_would_do_is_one_readable_line() {
        assert_eq!(
            what_it_would_do("Bash", &json!({"command": "cargo test\n  --workspace"})),
            "cargo test --workspace"
        );
        assert_eq!(
            what_it_would_do("Write", &json!({"file_path": "/a/b.rs", "content": "x"})),
            "file_path /a/b.rs"
        );
        assert_eq!(what_it_would_do("Odd", &json!({"n": 1})), r#"{"n":1}"#);
        let long = what_it_would_do("Bash", &json!({"command": "x".repeat(1000)}));
        assert_eq!(long.chars().count(), MAX_WHAT_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn the_session_wave_is_the_same_for_the_same_session_only() {
        let a = session_wave_id(Agent::ClaudeCode, "s1");
        assert_eq!(a, session_wave_id(Agent::ClaudeCode, "s1"));
        assert_ne!(a, session_wave_id(Agent::ClaudeCode, "s2"));
        assert_ne!(a, session_wave_id(Agent::Codex, "s1"));
        assert_eq!(WaveId::parse(a.as_str()).unwrap(), a);
    }

    #[test]
    fn request_bases_prefer_the_call_id_then_the_turn() {
        let mut request = PermissionRequest {
            tool_name: "Bash".into(),
            tool_input: json!({"command": "ls"}),
            tool_call_id: None,
            turn_id: None,
        };
        let bare = request_base(&request);
        assert!(bare.starts_with("req:") && !base_is_identified(&bare));
        request.turn_id = Some("t1".into());
        assert!(request_base(&request).starts_with("turn:t1:"));
        request.tool_call_id = Some("toolu_1".into());
        assert_eq!(request_base(&request), "call:toolu_1");
        let long = session_prefix(Agent::Codex, &"x".repeat(200));
        assert!(long.len() < 40, "{long}");
    }
}

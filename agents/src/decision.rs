//! The answer a permission hook prints: the JSON object both agents read
//! on the hook's standard output, `hookSpecificOutput.decision` with
//! `behavior` `allow` or `deny` and, for a deny, the `message` the agent
//! reads. Claude Code documents it; Codex publishes its JSON Schema
//! (docs/HOOKS.md); both accept the same object. No decision prints
//! nothing, which both read as "show your own prompt".

use serde_json::{json, Value};

use crate::config::Behavior;

/// A person's decision on a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The tool may run.
    Allow,
    /// The tool may not run; the agent reads `message`.
    Deny {
        /// Why, in the person's words.
        message: String,
    },
}

impl Decision {
    /// The decision's behavior.
    pub fn behavior(&self) -> Behavior {
        match self {
            Self::Allow => Behavior::Allow,
            Self::Deny { .. } => Behavior::Deny,
        }
    }

    /// The JSON object the agent reads.
    pub fn to_json(&self) -> Value {
        let decision = match self {
            Self::Allow => json!({ "behavior": "allow" }),
            Self::Deny { message } => json!({ "behavior": "deny", "message": message }),
        };
        json!({
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": decision,
            }
        })
    }

    /// What the hook prints: the object on one line, then a newline.
    pub fn render(&self) -> String {
        format!("{}\n", self.to_json())
    }
}

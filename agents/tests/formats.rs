//! The hooks against the agents' published formats (fixtures and their
//! sources: `tests/fixtures/SOURCES.md`): every example input reads as
//! the event it is, each agent refuses the other's, and every answer the
//! hook prints validates against the agents' output schemas.

// Test code: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use lf_handoff_agents::{parse, Agent, Decision, EventKind};
use serde_json::Value;

fn fixture(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn json(path: &str) -> Value {
    serde_json::from_str(&fixture(path)).unwrap()
}

fn assert_valid(schema: &str, instance: &Value) {
    let validator = jsonschema::validator_for(&json(schema)).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{schema}: {instance}: {errors:#?}");
}

#[test]
fn the_codex_examples_fit_codex_schemas() {
    for (example, schema) in [
        (
            "codex/permission-request.input.json",
            "codex/permission-request.command.input.schema.json",
        ),
        (
            "codex/user-prompt-submit.input.json",
            "codex/user-prompt-submit.command.input.schema.json",
        ),
        (
            "codex/stop.input.json",
            "codex/stop.command.input.schema.json",
        ),
    ] {
        assert_valid(schema, &json(example));
    }
}

#[test]
fn every_example_input_reads_as_its_event() {
    let kind = |agent, path: &str| {
        let text = fixture(path);
        let event = match path.ends_with("notify-agent-turn-complete.json") {
            true => parse(agent, "", Some(&text)),
            false => parse(agent, &text, None),
        };
        event.unwrap_or_else(|e| panic!("{path}: {e}")).kind
    };
    let claude = Agent::ClaudeCode;
    assert!(matches!(
        kind(claude, "claude-code/permission-request.input.json"),
        EventKind::Permission(ref request) if request.tool_name == "Bash"
            && request.tool_call_id.is_none() && request.turn_id.is_none()
    ));
    assert!(matches!(
        kind(claude, "claude-code/notification-idle.input.json"),
        EventKind::Idle { .. }
    ));
    assert!(matches!(
        kind(claude, "claude-code/notification-permission.input.json"),
        EventKind::Ignored(_)
    ));
    assert_eq!(
        kind(claude, "claude-code/user-prompt-submit.input.json"),
        EventKind::Prompt
    );
    assert_eq!(
        kind(claude, "claude-code/session-end.input.json"),
        EventKind::SessionEnd {
            reason: Some("other".into())
        }
    );
    let codex = Agent::Codex;
    assert!(matches!(
        kind(codex, "codex/permission-request.input.json"),
        EventKind::Permission(ref request) if request.turn_id.as_deref() == Some("turn-3")
    ));
    assert_eq!(
        kind(codex, "codex/user-prompt-submit.input.json"),
        EventKind::Prompt
    );
    assert!(matches!(
        kind(codex, "codex/stop.input.json"),
        EventKind::Idle { .. }
    ));
    assert!(matches!(
        kind(codex, "codex/notify-agent-turn-complete.json"),
        EventKind::Idle { .. }
    ));
}

#[test]
fn each_agent_refuses_the_others_inputs() {
    for path in [
        "codex/permission-request.input.json",
        "codex/user-prompt-submit.input.json",
        "codex/stop.input.json",
    ] {
        let error = parse(Agent::ClaudeCode, &fixture(path), None).unwrap_err();
        assert!(error.0.contains("hook codex"), "{path}: {error}");
    }
    for path in [
        "claude-code/permission-request.input.json",
        "claude-code/notification-idle.input.json",
        "claude-code/session-end.input.json",
    ] {
        let error = parse(Agent::Codex, &fixture(path), None).unwrap_err();
        assert!(error.0.contains("hook claude-code"), "{path}: {error}");
    }
    let notify = fixture("codex/notify-agent-turn-complete.json");
    assert!(parse(Agent::ClaudeCode, "", Some(&notify)).is_err());
}

#[test]
fn every_answer_fits_both_agents_output_schemas() {
    for decision in [
        Decision::Allow,
        Decision::Deny {
            message: "not on a Friday".into(),
        },
    ] {
        let printed: Value = serde_json::from_str(decision.render().trim()).unwrap();
        assert_valid(
            "codex/permission-request.command.output.schema.json",
            &printed,
        );
        assert_valid(
            "claude-code/permission-request.output.schema.json",
            &printed,
        );
    }
}

#[test]
fn the_schemas_refuse_what_the_hook_must_not_print() {
    let validator =
        jsonschema::validator_for(&json("codex/permission-request.command.output.schema.json"))
            .unwrap();
    let wrong = serde_json::json!({
        "hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "ask"}}
    });
    assert!(!validator.is_valid(&wrong));
}

//! A question with a shape (C26) on the command line: `open --choices`,
//! `--form FILE`, `--on-expiry`; `answer`, and `complete`/`back` with
//! `--choice`, `--set NAME=VALUE` and `--answer-json`; what `status`,
//! `list`, `history` and `wait` show; and the refusals (exit 2, nothing
//! written).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::Sandbox;

const FORM: &str = r#"{
    "type": "object",
    "title": "Deploy settings",
    "properties": {
        "budget": {"type": "integer", "minimum": 0, "maximum": 1000, "description": "EUR"},
        "branch": {"type": "string", "maxLength": 10},
        "env": {"type": "string", "enum": ["staging", "prod"]},
        "notify": {"type": "boolean"}
    },
    "required": ["budget", "branch"]
}"#;

fn id_of(handoff: &Value) -> String {
    handoff["id"].as_str().unwrap().to_string()
}

/// A handoff asking allow or deny, denying at its deadline.
fn allow_deny(sandbox: &Sandbox) -> Value {
    sandbox.open_with(&["--choices", "allow=Allow it,deny", "--on-expiry", "deny"])
}

fn with_form(sandbox: &Sandbox) -> Value {
    let path = sandbox.path("form.json");
    std::fs::write(&path, FORM).unwrap();
    sandbox.open_with(&["--form", path.to_str().unwrap()])
}

/// Everything `status --json` and `history --json` say of `id`: what a
/// refused command must leave as it was.
fn state(sandbox: &Sandbox, id: &str) -> (Value, Value) {
    let mut status = sandbox.json(&["status", id]);
    status["due"] = Value::Null;
    (status, sandbox.json(&["history", id]))
}

#[test]
fn open_with_choices_shows_them_and_answer_completes_with_one() {
    let sandbox = Sandbox::new();
    let handoff = allow_deny(&sandbox);
    assert_eq!(
        handoff["choices"],
        json!([{"value": "allow", "label": "Allow it"}, {"value": "deny", "label": "deny"}])
    );
    assert_eq!(handoff["on_expiry"], "deny");
    assert_eq!(handoff["answer"], Value::Null);
    let id = id_of(&handoff);
    let block = sandbox.ok(&["status", &id]);
    assert!(block.contains("allow (Allow it) | deny"), "{block}");
    let rows = sandbox.json(&["list"]);
    assert_eq!(rows[0]["asks"], "allow | deny");
    let table = sandbox.ok(&["list"]);
    assert!(table.contains("? allow | deny"), "{table}");

    let line = sandbox.ok(&["answer", &id, "--choice", "allow"]);
    assert!(
        line.contains("completed: answered allow (answer: allow)"),
        "{line}"
    );
    let done = sandbox.json(&["status", &id]);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["answer"], "allow");
    assert_eq!(done["outcome"]["summary"], "answered allow");
    assert_eq!(sandbox.json(&["list"])[0]["answer"], "allow");
    let history = sandbox.json(&["history", &id]);
    assert_eq!(history[1]["kind"], "finished");
    assert_eq!(history[1]["answer"], "allow");
    assert!(sandbox.ok(&["history", &id]).contains("answer: allow"));
    // The same answer again changes nothing; another is a conflict.
    sandbox.ok(&["answer", &id, "--choice", "allow"]);
    sandbox.fails(&["answer", &id, "--choice", "deny"], 4, "other_outcome");
}

#[test]
fn answers_that_do_not_fit_are_exit_2_and_write_nothing() {
    let sandbox = Sandbox::new();
    let id = id_of(&allow_deny(&sandbox));
    let before = state(&sandbox, &id);
    let message = sandbox.fails(&["answer", &id, "--choice", "maybe"], 2, "invalid_input");
    assert!(
        message.contains("\"maybe\" is not one of the choices (allow, deny)"),
        "{message}"
    );
    let message = sandbox.fails(&["complete", &id, "--summary", "done"], 2, "invalid_input");
    assert!(
        message.contains("asks for an answer (allow | deny)"),
        "{message}"
    );
    let message = sandbox.fails(&["answer", &id, "--set", "a=1"], 2, "invalid_input");
    assert!(message.contains("asks with no form"), "{message}");
    sandbox.fails(
        &["answer", &id, "--answer-json", "{not json"],
        2,
        "invalid_input",
    );
    sandbox.fails(&["answer", &id], 2, "usage");
    sandbox.fails(
        &[
            "answer",
            &id,
            "--choice",
            "allow",
            "--answer-json",
            "\"allow\"",
        ],
        2,
        "usage",
    );
    assert_eq!(
        state(&sandbox, &id),
        before,
        "a refused answer wrote something"
    );
    // A failure takes no answer, and needs none.
    sandbox.fails(
        &["fail", &id, "--reason", "no", "--choice", "deny"],
        2,
        "usage",
    );
    sandbox.ok(&["fail", &id, "--reason", "no"]);
    assert_eq!(sandbox.json(&["status", &id])["answer"], Value::Null);
}

#[test]
fn a_form_is_answered_with_typed_set_flags_or_json() {
    let sandbox = Sandbox::new();
    let handoff = with_form(&sandbox);
    let id = id_of(&handoff);
    assert_eq!(handoff["form"]["properties"]["budget"]["maximum"], 1000);
    let block = sandbox.ok(&["status", &id]);
    assert!(
        block.contains("form (budget*: integer, branch*: string, env: string, notify: boolean)"),
        "{block}"
    );
    let before = state(&sandbox, &id);
    for (args, needle) in [
        (
            vec!["--set", "budget=2000", "--set", "branch=main"],
            "\"budget\" 2000 is above its maximum 1000",
        ),
        (
            vec!["--set", "budget=ten", "--set", "branch=main"],
            "\"budget\" \"ten\" is not a whole number",
        ),
        (vec!["--set", "branch=main"], "\"budget\" is required"),
        (
            vec!["--set", "budget=1", "--set", "branch=a-long-branch"],
            "maxLength is 10",
        ),
        (
            vec!["--set", "budget=1", "--set", "branch=m", "--set", "env=dev"],
            "not one of the allowed values",
        ),
        (
            vec![
                "--set",
                "budget=1",
                "--set",
                "branch=m",
                "--set",
                "colour=red",
            ],
            "\"colour\" is not a field of the form",
        ),
        (
            vec![
                "--set",
                "budget=1",
                "--set",
                "branch=m",
                "--set",
                "notify=maybe",
            ],
            "is not true or false",
        ),
        (
            vec!["--answer-json", "\"allow\""],
            "must be an object of the form's fields",
        ),
    ] {
        let mut command = vec!["answer", id.as_str()];
        command.extend(args);
        let message = sandbox.fails(&command, 2, "invalid_input");
        assert!(message.contains(needle), "{command:?}: {message}");
    }
    assert_eq!(
        state(&sandbox, &id),
        before,
        "a refused answer wrote something"
    );

    sandbox.ok(&[
        "complete",
        &id,
        "--summary",
        "set up",
        "--set",
        "budget=300",
        "--set",
        "branch=main",
        "--set",
        "notify=yes",
    ]);
    let done = sandbox.json(&["status", &id]);
    assert_eq!(
        done["answer"],
        json!({"budget": 300, "branch": "main", "notify": true})
    );
    assert_eq!(done["outcome"]["summary"], "set up");

    let other = with_form(&sandbox);
    let other_id = id_of(&other);
    sandbox.ok(&[
        "back",
        &other_id,
        "--summary",
        "over to you",
        "--answer-json",
        r#"{"budget": 5, "branch": "dev"}"#,
    ]);
    let back = sandbox.json(&["status", &other_id]);
    assert_eq!(back["status"], "handed_back");
    assert_eq!(back["answer"], json!({"budget": 5, "branch": "dev"}));
}

#[test]
fn open_refuses_specs_outside_the_subset_with_exit_2() {
    let sandbox = Sandbox::new();
    let parent = format!("wave:{}", sandbox.wave());
    let bad = sandbox.path("bad.json");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--choices".into(), "allow".into()],
            "give 2 to 10, not 1",
        ),
        (
            vec!["--choices".into(), "a,b,c,d,e,f,g,h,i,j,k".into()],
            "give 2 to 10, not 11",
        ),
        (
            vec!["--choices".into(), "a,a".into()],
            "value \"a\" is given twice",
        ),
        (vec!["--choices".into(), "two words,b".into()], "holds ' '"),
        (
            vec!["--form".into(), bad.display().to_string()],
            "type \"array\"",
        ),
        (
            vec!["--form".into(), "/nonexistent/form.json".into()],
            "cannot read it",
        ),
        (
            vec!["--on-expiry".into(), "deny".into()],
            "on_expiry needs choices or a form",
        ),
        (
            vec![
                "--choices".into(),
                "allow,deny".into(),
                "--on-expiry".into(),
                "later".into(),
            ],
            "not one of the choices",
        ),
        (
            vec![
                "--choices".into(),
                "a,b".into(),
                "--form".into(),
                bad.display().to_string(),
            ],
            "cannot be used with",
        ),
    ];
    std::fs::write(
        &bad,
        r#"{"type": "object", "properties": {"a": {"type": "array"}}}"#,
    )
    .unwrap();
    for (extra, needle) in cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let args = sandbox.open_args(&parent, &extra);
        let run = sandbox.run(&args);
        assert_eq!(run.code, 2, "{extra:?}: {run:?}");
        assert!(run.stderr.contains(needle), "{extra:?}: {}", run.stderr);
    }
    assert_eq!(
        sandbox.json(&["list"]),
        json!([]),
        "a refused open wrote a handoff"
    );
}

#[test]
fn the_deadline_ends_a_handoff_with_its_on_expiry_answer() {
    let sandbox = Sandbox::new();
    let handoff = sandbox.open_with(&[
        "--choices",
        "allow,deny",
        "--on-expiry",
        "deny",
        "--expires-in",
        "1s",
    ]);
    let id = id_of(&handoff);
    std::thread::sleep(Duration::from_millis(1_300));
    sandbox.ok(&["expire"]);
    let expired = sandbox.json(&["status", &id]);
    assert_eq!(expired["status"], "expired");
    assert_eq!(expired["answer"], "deny");
    let history = sandbox.json(&["history", &id]);
    assert_eq!(history[1]["kind"], "expired");
    assert_eq!(history[1]["answer"], "deny");
}

#[test]
fn wait_and_claim_wake_return_the_answer() {
    let sandbox = Sandbox::new();
    let id = id_of(&allow_deny(&sandbox));
    let waiter = sandbox
        .command(&["--json", "wait", &id, "--timeout", "30s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sandbox.ok(&["answer", &id, "--choice", "deny"]);
    let output = waiter.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let waited: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(waited["answer"], "deny", "{waited}");
    let claimed = sandbox.json(&["claim-wake", &id, "--generation", "1"]);
    assert_eq!(claimed["handoff"]["answer"], "deny", "{claimed}");
}

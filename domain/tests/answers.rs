//! A question with a shape (C26): the spec an open may carry, the answer
//! a finish may carry, `on_expiry`, and the checker's refusals, each
//! naming the field and the rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_domain::interactive_handoff::{
    decide_open, expire_if_due, finish, Answer, Choice, FormSpec, HandoffChange, HandoffEventKind,
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffStatus, OpenDecision,
    OpenInteractiveHandoff, Transition,
};
use lf_handoff_domain::{ConflictKind, DomainError};
use proptest::prelude::*;
use serde_json::{json, Value};
use support::*;

fn open(request: OpenInteractiveHandoff) -> Result<InteractiveHandoff, DomainError> {
    let parent = task_parent();
    decide_open(&request, &parent, None, handoff_id(1), T0).map(|decision| match decision {
        OpenDecision::Create(handoff) => handoff,
        OpenDecision::Replay(_) => panic!("a parent without a handoff replayed"),
    })
}

fn request() -> OpenRequest {
    OpenRequest::on(&task_parent())
}

fn refusal(result: Result<impl std::fmt::Debug, DomainError>) -> String {
    match result {
        Err(DomainError::InvalidInput(message)) => message,
        other => panic!("expected invalid input, got {other:?}"),
    }
}

fn completed() -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Completed {
        summary: "done".into(),
    }
}

fn form(json: Value) -> Result<FormSpec, String> {
    serde_json::from_value(json).map_err(|e| e.to_string())
}

fn allow_deny() -> InteractiveHandoff {
    open(request().choices(&["allow=Allow", "deny=Deny"]).build()).unwrap()
}

fn with_form() -> InteractiveHandoff {
    open(request().form(sample_form()).build()).unwrap()
}

fn changed(transition: Transition) -> InteractiveHandoff {
    assert!(transition.is_changed(), "{transition:?}");
    transition.into_handoff()
}

#[test]
fn c26_a_choice_answer_is_recorded_in_the_record_and_the_finish_event() {
    let handoff = allow_deny();
    assert_eq!(
        handoff.choices.as_ref().unwrap()[1],
        Choice::new("deny", "Deny")
    );
    let done =
        changed(finish(&handoff, &completed(), Some(&Answer::choice("deny")), at(5)).unwrap());
    assert_eq!(done.answer, Some(Answer::choice("deny")));
    done.validate().unwrap();
    let change = HandoffChange::between(Some(&handoff), &done).unwrap();
    assert_eq!(change.kind, HandoffEventKind::Finished);
    assert_eq!(change.answer, Some(Answer::choice("deny")));
    assert_eq!(done.list_row(at(6)).answer, Some(Answer::choice("deny")));
    assert_eq!(done.list_row(at(6)).asks.as_deref(), Some("allow | deny"));
}

#[test]
fn c26_finishing_again_with_the_same_answer_changes_nothing_and_another_conflicts() {
    let handoff = allow_deny();
    let allow = Answer::choice("allow");
    let done = changed(finish(&handoff, &completed(), Some(&allow), at(5)).unwrap());
    assert_eq!(
        finish(&done, &completed(), Some(&allow), at(6)).unwrap(),
        Transition::Unchanged(done.clone())
    );
    match finish(&done, &completed(), Some(&Answer::choice("deny")), at(6)) {
        Err(DomainError::Conflict { kind, .. }) => assert_eq!(kind, ConflictKind::OtherOutcome),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn c26_answers_that_do_not_fit_are_refused_naming_the_field_and_the_rule() {
    let choices = allow_deny();
    let message = refusal(finish(
        &choices,
        &completed(),
        Some(&Answer::choice("maybe")),
        at(1),
    ));
    assert!(
        message.contains("\"maybe\" is not one of the choices (allow, deny)"),
        "{message}"
    );
    let message = refusal(finish(&choices, &completed(), None, at(1)));
    assert!(
        message.contains("asks for an answer (allow | deny)"),
        "{message}"
    );
    let message = refusal(finish(
        &choices,
        &completed(),
        Some(&Answer(json!(1))),
        at(1),
    ));
    assert!(message.contains("1 is not one of the choices"), "{message}");

    let form = with_form();
    let cases = [
        (json!({"branch": "main"}), "\"budget\" is required"),
        (
            json!({"budget": "3", "branch": "main"}),
            "\"budget\" must be an integer, not a string",
        ),
        (
            json!({"budget": 2.5, "branch": "main"}),
            "\"budget\" must be an integer, not a number",
        ),
        (
            json!({"budget": 1001, "branch": "main"}),
            "1001 is above its maximum 1000",
        ),
        (
            json!({"budget": -1, "branch": "main"}),
            "-1 is below its minimum 0",
        ),
        (
            json!({"budget": 1, "branch": ""}),
            "has 0 characters; minLength is 1",
        ),
        (
            json!({"budget": 1, "branch": "b".repeat(21)}),
            "has 21 characters; maxLength is 20",
        ),
        (
            json!({"budget": 1, "branch": "m", "env": "dev"}),
            "\"dev\" is not one of the allowed values (\"staging\", \"prod\")",
        ),
        (
            json!({"budget": 1, "branch": "m", "ratio": 0.1}),
            "0.1 is below its minimum 0.5",
        ),
        (
            json!({"budget": 1, "branch": "m", "notify": "yes"}),
            "\"notify\" must be a boolean",
        ),
        (
            json!({"budget": 1, "branch": "m", "colour": "red"}),
            "\"colour\" is not a field of the form",
        ),
        (
            json!(["budget"]),
            "must be an object of the form's fields, not an array",
        ),
        (
            json!({"budget": 1, "branch": "a\u{0}b"}),
            "must not contain a NUL byte",
        ),
    ];
    for (answer, expected) in cases {
        let message = refusal(finish(
            &form,
            &completed(),
            Some(&Answer(answer.clone())),
            at(1),
        ));
        assert!(message.contains(expected), "{answer}: {message}");
    }
    // The biggest answer: 64 KiB of JSON.
    let huge = Answer(json!({"budget": 1, "branch": "x".repeat(70_000)}));
    let message = refusal(finish(&form, &completed(), Some(&huge), at(1)));
    assert!(message.contains("the limit is 65536"), "{message}");
}

#[test]
fn c26_a_whole_integer_written_as_a_float_fits_and_is_kept_as_given() {
    let form = with_form();
    let answer = Answer(json!({"budget": 3.0, "branch": "main"}));
    let done = changed(finish(&form, &completed(), Some(&answer), at(1)).unwrap());
    assert_eq!(done.answer, Some(answer));
}

#[test]
fn c26_a_failure_carries_no_answer_and_a_handoff_without_a_spec_takes_none() {
    let failed = InteractiveHandoffOutcome::Failed {
        reason: "no".into(),
    };
    let message = refusal(finish(
        &allow_deny(),
        &failed,
        Some(&Answer::choice("deny")),
        at(1),
    ));
    assert!(message.contains("a failure carries no answer"), "{message}");
    changed(finish(&allow_deny(), &failed, None, at(1)).unwrap());

    let plain = waiting();
    let message = refusal(finish(
        &plain,
        &completed(),
        Some(&Answer::choice("allow")),
        at(1),
    ));
    assert!(message.contains("asks for no answer"), "{message}");
    let done = changed(finish(&plain, &completed(), None, at(1)).unwrap());
    assert_eq!(done.answer, None);
}

#[test]
fn c26_a_hand_back_may_carry_an_answer_or_none() {
    let back = InteractiveHandoffOutcome::HandedBack {
        summary: "over to you".into(),
    };
    let none = changed(finish(&allow_deny(), &back, None, at(1)).unwrap());
    assert_eq!(none.answer, None);
    let deny = changed(finish(&allow_deny(), &back, Some(&Answer::choice("deny")), at(1)).unwrap());
    assert_eq!(deny.answer, Some(Answer::choice("deny")));
}

#[test]
fn c26_on_expiry_is_the_answer_the_deadline_records() {
    let handoff = open(
        request()
            .choices(&["allow", "deny"])
            .on_expiry(Answer::choice("deny"))
            .expires_at(at(60))
            .build(),
    )
    .unwrap();
    assert_eq!(handoff.on_expiry, Some(Answer::choice("deny")));
    let expired = changed(expire_if_due(&handoff, at(61)));
    assert_eq!(expired.status, InteractiveHandoffStatus::Expired);
    assert_eq!(expired.outcome, Some(InteractiveHandoffOutcome::Expired));
    assert_eq!(expired.answer, Some(Answer::choice("deny")));
    expired.validate().unwrap();
    let change = HandoffChange::between(Some(&handoff), &expired).unwrap();
    assert_eq!(change.kind, HandoffEventKind::Expired);
    assert_eq!(change.answer, Some(Answer::choice("deny")));

    // Without on_expiry, an expiry records no answer.
    let silent = open(
        request()
            .choices(&["allow", "deny"])
            .expires_at(at(60))
            .build(),
    )
    .unwrap();
    assert_eq!(changed(expire_if_due(&silent, at(61))).answer, None);
}

#[test]
fn c26_on_expiry_must_fit_the_spec_and_needs_one() {
    let message = refusal(open(
        request()
            .choices(&["allow", "deny"])
            .on_expiry(Answer::choice("later"))
            .build(),
    ));
    assert!(
        message.contains("on_expiry: answer \"later\" is not one of the choices"),
        "{message}"
    );
    let message = refusal(open(request().on_expiry(Answer::choice("deny")).build()));
    assert!(
        message.contains("on_expiry needs choices or a form"),
        "{message}"
    );
    let message = refusal(open(
        request()
            .form(sample_form())
            .on_expiry(Answer(json!({"budget": 5})))
            .build(),
    ));
    assert!(message.contains("\"branch\" is required"), "{message}");
}

#[test]
fn c26_specs_outside_the_subset_are_refused_naming_the_rule() {
    let one = ["allow"];
    let message = refusal(open(request().choices(&one).build()));
    assert!(message.contains("give 2 to 10, not 1"), "{message}");
    let eleven: Vec<String> = (0..11).map(|n| format!("c{n}")).collect();
    let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
    let message = refusal(open(request().choices(&eleven).build()));
    assert!(message.contains("give 2 to 10, not 11"), "{message}");
    let message = refusal(open(request().choices(&["a=One", "a=Two"]).build()));
    assert!(message.contains("value \"a\" is given twice"), "{message}");
    let message = refusal(Choice::parse("two words"));
    assert!(message.contains("holds ' '"), "{message}");
    let message = refusal(Choice::parse("ok="));
    assert!(message.contains("must not be blank"), "{message}");
    let both = request().choices(&["a", "b"]).form(sample_form()).build();
    assert!(refusal(open(both)).contains("not both"));

    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"type": "object"}}}),
            "type \"object\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array"}}}),
            "no nesting",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "items": {}}}}),
            "may not use \"items\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "strin"}}}),
            "has type \"strin\"",
        ),
        (json!({"type": "array"}), "must be \"object\""),
        (
            json!({"properties": {"a": {"type": "string"}}}),
            "must say \"type\": \"object\"",
        ),
        (
            json!({"type": "object", "properties": {}, "oneOf": []}),
            "may not use \"oneOf\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}}),
            "must say its type",
        ),
    ];
    for (schema, expected) in cases {
        let message = form(schema.clone()).unwrap_err();
        assert!(message.contains(expected), "{schema}: {message}");
    }
    let many: serde_json::Map<String, Value> = (0..21)
        .map(|n| (format!("f{n}"), json!({"type": "string"})))
        .collect();
    let message = form(json!({"type": "object", "properties": many})).unwrap_err();
    assert!(message.contains("at most 20 properties"), "{message}");

    let checked = [
        (
            json!({"type": "object", "properties": {}}),
            "1 to 20 properties, not 0",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
            "required names \"b\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "minLength": 1}}}),
            "apply to strings only",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "maximum": 1}}}),
            "apply to numbers only",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}}),
            "minimum 5 is above maximum 1",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", 1]}}}),
            "enum value 1 is not string",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "x"]}}}),
            "enum lists \"x\" twice",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}}),
            "default must be an integer",
        ),
        (
            json!({"type": "object", "properties": {"a b": {"type": "string"}}}),
            "holds ' '",
        ),
    ];
    for (schema, expected) in checked {
        let spec = form(schema.clone()).unwrap();
        let message = refusal(open(request().form(spec).build()));
        assert!(message.contains(expected), "{schema}: {message}");
    }
}

#[test]
fn c26_a_form_keeps_its_property_order_through_json() {
    let spec = sample_form();
    let names: Vec<&str> = spec.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["budget", "branch", "env", "ratio", "notify"]);
    let text = serde_json::to_string(&spec).unwrap();
    assert_eq!(serde_json::from_str::<FormSpec>(&text).unwrap(), spec);
    assert!(
        text.find("\"budget\"").unwrap() < text.find("\"notify\"").unwrap(),
        "{text}"
    );
}

#[test]
fn c26_typed_texts_make_a_form_answer() {
    let spec = sample_form();
    let answer = spec
        .answer_from_texts([
            ("budget", "12"),
            ("branch", "main"),
            ("notify", "yes"),
            ("ratio", "0.75"),
        ])
        .unwrap();
    assert_eq!(
        answer.0,
        json!({"budget": 12, "branch": "main", "notify": true, "ratio": 0.75})
    );
    let refused = spec.answer_from_texts([("budget", "twelve")]).unwrap_err();
    assert_eq!(refused.field.as_deref(), Some("budget"));
    assert!(
        refused.to_string().contains("is not a whole number"),
        "{refused}"
    );
    let unknown = spec.answer_from_texts([("colour", "red")]).unwrap_err();
    assert_eq!(unknown.field.as_deref(), Some("colour"));
}

#[test]
fn c26_choices_read_bare_or_with_labels() {
    let choices: Vec<Choice> = serde_json::from_value(
        json!(["allow", {"value": "deny", "label": "Deny it"}, {"value": "ask"}]),
    )
    .unwrap();
    assert_eq!(
        choices,
        [
            Choice::new("allow", "allow"),
            Choice::new("deny", "Deny it"),
            Choice::new("ask", "ask")
        ]
    );
}

/// Any answer the checker accepts is recorded exactly as given (and
/// round-trips through JSON unchanged); any it refuses changes nothing.
fn arbitrary_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z/._ -]{0,24}".prop_map(Value::from),
        prop_oneof![Just("staging"), Just("prod"), Just("allow"), Just("deny")]
            .prop_map(Value::from),
    ];
    let field = prop_oneof![
        Just("budget"),
        Just("branch"),
        Just("env"),
        Just("ratio"),
        Just("notify"),
        Just("other")
    ];
    prop_oneof![
        leaf.clone(),
        proptest::collection::btree_map(field, leaf, 0..6).prop_map(|fields| {
            Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        }),
    ]
}

proptest! {
    #[test]
    fn c26_an_accepted_answer_is_kept_exactly_and_a_refused_one_writes_nothing(
        value in arbitrary_value(),
        use_form in any::<bool>(),
    ) {
        let handoff = if use_form { with_form() } else { allow_deny() };
        let answer = Answer(value);
        match finish(&handoff, &completed(), Some(&answer), at(3)) {
            Ok(transition) => {
                let done = transition.into_handoff();
                prop_assert_eq!(done.answer.as_ref(), Some(&answer));
                done.validate().unwrap();
                let text = serde_json::to_string(&done).unwrap();
                let back: InteractiveHandoff = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(back, done);
            }
            Err(DomainError::InvalidInput(message)) => {
                prop_assert!(message.starts_with("answer"), "{}", message);
            }
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }
}

//! Scenarios for a question with a shape (contract C26): a handoff asks
//! with choices or a form; the answer a finish carries is stored when it
//! fits and every read returns it (`get`, the census row, the history,
//! `watch`, `wait`, the wake's claim); one that does not fit is refused as
//! invalid input naming the field and the rule, with nothing written; a
//! deadline ends a handoff with its `on_expiry` answer; export and import
//! carry specs and answers, and an export of a build before answers
//! imports.

use std::time::Duration as StdDuration;

use lf_handoff_adapters::{
    open_store, ConflictKind, ListQuery, Store, StoreError, Waited, WatchFilter, WatchFrom,
};
use lf_handoff_domain::interactive_handoff::{
    Answer, AnswerSpec, Choice, FormSpec, HandoffEvent, HandoffEventKind, InteractiveHandoff,
    InteractiveHandoffOutcome, InteractiveHandoffStatus, MAX_ANSWER_BYTES,
};
use serde_json::{json, Value};
use tempfile::TempDir;
use time::{Duration, OffsetDateTime};

use crate::archive::{assert_same_export, export, other, questions};
use crate::contract::{fresh, handles};
use crate::fixtures::{ask, new_wave, sample_form, sample_form_answer, OpenRequest, SAMPLE_FORM};
use crate::rng::Rng;
use crate::upgrade::{fixtures, Release};
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! answers_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [answers];
            AnyBackend: [
                c26_a_spec_round_trips_and_its_answer_reaches_every_reader,
                c26_a_spec_outside_the_subset_is_refused_at_open_and_writes_nothing,
                c26_an_answer_that_does_not_fit_is_refused_naming_the_field_and_writes_nothing,
                c26_a_deadline_ends_a_handoff_with_its_on_expiry_answer,
                c26_export_and_import_carry_specs_and_answers,
                c26_an_export_of_a_build_before_answers_imports,
                c26_random_answers_are_stored_exactly_when_they_fit_and_never_otherwise,
            ],
        );
    };
}

/// How long a scenario waits for an event or a waiter.
const PATIENCE: StdDuration = StdDuration::from_secs(30);

async fn get(store: &Store, handoff: &InteractiveHandoff) -> InteractiveHandoff {
    store
        .get_interactive_handoff(&handoff.id)
        .await
        .unwrap()
        .unwrap()
}

/// The census row of `handoff`, as `list` gives it.
async fn row(store: &Store, handoff: &InteractiveHandoff) -> Value {
    let listed = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    let found = listed.iter().find(|h| h.id == handoff.id).unwrap();
    serde_json::to_value(found.list_row(OffsetDateTime::now_utc())).unwrap()
}

/// The record and the history of `handoff`, to check that a refused call
/// wrote nothing.
async fn state(
    store: &Store,
    handoff: &InteractiveHandoff,
) -> (InteractiveHandoff, Vec<HandoffEvent>) {
    (
        get(store, handoff).await,
        store.history(&handoff.id).await.unwrap(),
    )
}

fn completed(summary: &str) -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Completed {
        summary: summary.into(),
    }
}

fn handed_back(summary: &str) -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::HandedBack {
        summary: summary.into(),
    }
}

fn failed(reason: &str) -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Failed {
        reason: reason.into(),
    }
}

/// Asserts `result` is `InvalidInput` whose message names `needle`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(result: Result<T, StoreError>, needle: &str, what: &str) {
    match result {
        Err(StoreError::InvalidInput(message)) => assert!(
            message.contains(needle),
            "{what}: the refusal {message:?} does not name {needle:?}"
        ),
        other => panic!("{what}: expected InvalidInput naming {needle:?}, got {other:?}"),
    }
}

/// The next event of `watcher`.
async fn next(watcher: &mut lf_handoff_adapters::Watcher, what: &str) -> HandoffEvent {
    match tokio::time::timeout(PATIENCE, watcher.next()).await {
        Ok(Ok(event)) => event,
        Ok(Err(error)) => panic!("watching for {what}: {error}"),
        Err(_) => panic!("no event within {PATIENCE:?} while watching for {what}"),
    }
}

/// The next event of `watcher` about `handoff`, skipping the others.
async fn next_of(
    watcher: &mut lf_handoff_adapters::Watcher,
    handoff: &InteractiveHandoff,
    what: &str,
) -> HandoffEvent {
    loop {
        let event = next(watcher, what).await;
        if event.handoff_id == handoff.id {
            return event;
        }
    }
}

/// C26: a spec (choices with labels, the sample form) is stored as given
/// and the census row says what it asks; the answer of a completion and
/// of a hand-back is in the record, the census row, the finish event (as
/// `history` and `watch` give it), the result of a `wait` that was
/// waiting, and the wake's claim; a replay with the same answer writes
/// nothing, another answer is a conflict.
pub async fn c26_a_spec_round_trips_and_its_answer_reaches_every_reader(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let other = handles(backend, &dir, 1).await.remove(0);
    let choices = ask(&store, dir.path(), |r| {
        r.choices(&["allow=Allow the deploy «prod» ✓", "deny"])
    })
    .await;
    assert_eq!(
        choices.choices,
        Some(vec![
            Choice::new("allow", "Allow the deploy «prod» ✓"),
            Choice::new("deny", "deny"),
        ])
    );
    assert_eq!((&choices.form, &choices.answer), (&None, &None));
    let form = ask(&store, dir.path(), |r| r.form(sample_form())).await;
    assert_eq!(form.form, Some(sample_form()));
    assert_eq!(form.choices, None);
    // The form reads back as the JSON Schema it was given.
    let schema: Value = serde_json::from_str(SAMPLE_FORM).unwrap();
    assert_eq!(
        serde_json::to_value(get(&store, &form).await.form).unwrap(),
        schema
    );
    for asked in [&choices, &form] {
        assert_eq!(&get(&store, asked).await, asked, "the spec is stored");
        let read = other.get_interactive_handoff(&asked.id).await.unwrap();
        assert_eq!(read.as_ref(), Some(asked), "another handle reads it");
    }
    assert_eq!(row(&store, &choices).await["asks"], json!("allow | deny"));
    assert_eq!(
        row(&store, &form).await["asks"],
        json!("form: budget, branch, env, ratio, notify")
    );
    // A replay of the open returns the handoff, spec and all.
    let replay = OpenRequest::like(&choices).choices(&["allow=Allow the deploy «prod» ✓", "deny"]);
    let (again, created) = store
        .open_interactive_handoff(replay.build())
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again, choices);

    let mut watcher = store
        .watch(WatchFrom::Now, WatchFilter::default())
        .await
        .unwrap();
    let waiters: Vec<_> = [&choices, &form]
        .into_iter()
        .map(|asked| {
            let store = store.clone();
            let id = asked.id.clone();
            tokio::spawn(async move { store.wait(&id, Some(PATIENCE)).await })
        })
        .collect();
    tokio::time::sleep(StdDuration::from_millis(150)).await;

    other.attach_interactive_handoff(&choices.id).await.unwrap();
    let deny = Answer::choice("deny");
    let done = other
        .finish_interactive_handoff(&choices.id, &completed("denied ✓"), Some(&deny))
        .await
        .unwrap();
    assert_eq!(done.answer.as_ref(), Some(&deny));
    assert_eq!(done.status, InteractiveHandoffStatus::Completed);
    let filled = sample_form_answer();
    let back = other
        .finish_interactive_handoff(&form.id, &handed_back("budget set"), Some(&filled))
        .await
        .unwrap();
    assert_eq!(back.answer.as_ref(), Some(&filled));
    assert_eq!(back.status, InteractiveHandoffStatus::HandedBack);

    for (waiter, finished) in waiters.into_iter().zip([&done, &back]) {
        match waiter.await.unwrap().unwrap() {
            Waited::Ended(ended) => assert_eq!(&ended, finished, "the wait's result"),
            other => panic!("the wait did not see the finish: {other:?}"),
        }
    }
    for (finished, answer) in [(&done, &deny), (&back, &filled)] {
        assert_eq!(&get(&store, finished).await, finished);
        assert_eq!(
            row(&store, finished).await["answer"],
            answer.0,
            "the census row"
        );
        let history = store.history(&finished.id).await.unwrap();
        let (last, earlier) = history.split_last().unwrap();
        assert_eq!(last.kind, HandoffEventKind::Finished);
        assert_eq!(last.answer.as_ref(), Some(answer), "the finish event");
        assert!(earlier.iter().all(|event| event.answer.is_none()));
    }
    let attached = next_of(&mut watcher, &choices, "the attach").await;
    assert_eq!(
        (attached.kind, &attached.answer),
        (HandoffEventKind::Attached, &None)
    );
    let event = next_of(&mut watcher, &choices, "the completion").await;
    assert_eq!(
        (event.kind, event.answer.as_ref()),
        (HandoffEventKind::Finished, Some(&deny))
    );
    let event = next_of(&mut watcher, &form, "the hand-back").await;
    assert_eq!(
        (event.kind, event.answer.as_ref()),
        (HandoffEventKind::Finished, Some(&filled))
    );

    // The wake's claim carries the answer the agent goes on with.
    for (finished, answer) in [(&done, &deny), (&back, &filled)] {
        let claim = store
            .claim_interactive_handoff_wake(&finished.id, 1)
            .await
            .unwrap();
        assert!(claim.claimed);
        assert_eq!(claim.handoff.answer.as_ref(), Some(answer), "the claim");
    }

    // The same finish again writes nothing; another answer is refused.
    let before = state(&store, &done).await;
    let replayed = store
        .finish_interactive_handoff(&done.id, &completed("denied ✓"), Some(&deny))
        .await
        .unwrap();
    assert_eq!(replayed, before.0);
    match store
        .finish_interactive_handoff(
            &done.id,
            &completed("denied ✓"),
            Some(&Answer::choice("allow")),
        )
        .await
    {
        Err(StoreError::Conflict { .. }) => {}
        other => panic!("another answer after the first: {other:?}"),
    }
    assert_eq!(state(&store, &done).await, before);
}

/// C26: an open whose spec breaks the subset (too few or too many
/// choices, a value twice, a bad value, both choices and a form, a form of
/// too many properties, an `on_expiry` without a spec or that does not fit
/// it) is invalid input naming the rule, and creates nothing.
pub async fn c26_a_spec_outside_the_subset_is_refused_at_open_and_writes_nothing(
    backend: &dyn Backend,
) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let base = || OpenRequest::on_wave(&wave).cwd(dir.path());
    let eleven: Vec<String> = (0..11).map(|n| format!("c{n}")).collect();
    let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
    let mut wide = serde_json::Map::new();
    for n in 0..21 {
        wide.insert(format!("f{n}"), json!({"type": "string"}));
    }
    let cases: Vec<(OpenRequest, &str, &str)> = vec![
        (base().choices(&["only"]), "choices", "one choice"),
        (base().choices(&eleven), "choices", "eleven choices"),
        (
            base().choices(&["allow", "allow"]),
            "twice",
            "a value twice",
        ),
        (
            base().choices(&["allow", "deny"]).form(sample_form()),
            "not both",
            "choices and a form",
        ),
        (
            base().on_expiry(Answer::choice("deny")),
            "on_expiry",
            "on_expiry without a spec",
        ),
        (
            base()
                .choices(&["allow", "deny"])
                .on_expiry(Answer::choice("maybe")),
            "on_expiry",
            "on_expiry among no choice",
        ),
        (
            base()
                .form(sample_form())
                .on_expiry(Answer(json!({"budget": 1}))),
            "\"branch\"",
            "on_expiry without a required field",
        ),
    ];
    let mut cases = cases;
    if let Ok(form) =
        serde_json::from_value::<FormSpec>(json!({"type": "object", "properties": wide}))
    {
        // A form of 21 properties, if the type reads one at all.
        cases.push((base().form(form), "form", "21 properties"));
    }
    let mut bad_value = base().build();
    bad_value.options.choices = Some(vec![
        Choice::new("allow now", "Allow"),
        Choice::new("deny", "Deny"),
    ]);
    for (request, needle, what) in cases {
        assert_refused(
            store.open_interactive_handoff(request.build()).await,
            needle,
            what,
        );
    }
    assert_refused(
        store.open_interactive_handoff(bad_value).await,
        "choice value",
        "a value with a space",
    );
    let listed = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert!(listed.is_empty(), "a refused open created {listed:?}");
    // The same wave then opens a handoff that asks well.
    let (fine, created) = store
        .open_interactive_handoff(
            base()
                .choices(&["allow", "deny"])
                .on_expiry(Answer::choice("deny"))
                .build(),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(fine.on_expiry, Some(Answer::choice("deny")));
}

/// C26: every answer that does not fit (not among the choices, of the
/// wrong type, a required field missing, a string over its `maxLength`, a
/// number out of its bounds, a value not in the field's `enum`, a field
/// the form has not, over 64 KiB), a completion without an answer, a
/// failure with one, and an answer to a handoff that asks for none, is
/// invalid input naming the field (or the rule) and writes nothing: the
/// record and the history are as they were, and the handoff then takes a
/// fitting answer.
pub async fn c26_an_answer_that_does_not_fit_is_refused_naming_the_field_and_writes_nothing(
    backend: &dyn Backend,
) {
    let (dir, store) = fresh(backend).await;
    let choices = ask(&store, dir.path(), |r| r.choices(&["allow", "deny"])).await;
    let form = ask(&store, dir.path(), |r| r.form(sample_form())).await;
    let plain = ask(&store, dir.path(), |r| r).await;
    for handoff in [&choices, &form, &plain] {
        store.attach_interactive_handoff(&handoff.id).await.unwrap();
    }
    let big = "x".repeat(MAX_ANSWER_BYTES);
    let fitting = |extra: Value| {
        let mut answer = json!({"budget": 250, "branch": "main"});
        for (name, value) in extra.as_object().unwrap() {
            answer[name] = value.clone();
        }
        Some(Answer(answer))
    };
    let cases: Vec<(
        &InteractiveHandoff,
        InteractiveHandoffOutcome,
        Option<Answer>,
        &str,
        &str,
    )> = vec![
        (
            &choices,
            completed("ok"),
            Some(Answer::choice("maybe")),
            "not one of the choices",
            "a value not among the choices",
        ),
        (
            &choices,
            completed("ok"),
            Some(Answer(json!(1))),
            "not one of the choices",
            "a number for a choice",
        ),
        (
            &choices,
            handed_back("ok"),
            Some(Answer(json!(["allow"]))),
            "not one of the choices",
            "a list for a choice",
        ),
        (
            &choices,
            completed("ok"),
            None,
            "asks for an answer",
            "a completion without an answer",
        ),
        (
            &choices,
            failed("no"),
            Some(Answer::choice("deny")),
            "failure carries no answer",
            "a failure with an answer",
        ),
        (
            &choices,
            completed("ok"),
            Some(Answer(json!(big))),
            "limit",
            "an answer over 64 KiB",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"budget": "250"})),
            "\"budget\"",
            "a string for an integer",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"budget": 2.5})),
            "\"budget\"",
            "a fraction for an integer",
        ),
        (
            &form,
            completed("ok"),
            Some(Answer(json!({"budget": 250}))),
            "\"branch\"",
            "a required field missing",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"branch": "b".repeat(21)})),
            "\"branch\"",
            "over maxLength",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"branch": ""})),
            "\"branch\"",
            "under minLength",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"budget": 1001})),
            "\"budget\"",
            "over maximum",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"budget": -1})),
            "\"budget\"",
            "under minimum",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"ratio": 0.25})),
            "\"ratio\"",
            "a number under its minimum",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"env": "dev"})),
            "\"env\"",
            "a value not in the enum",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"notify": "yes"})),
            "\"notify\"",
            "a string for a boolean",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"extra": 1})),
            "\"extra\"",
            "a field the form has not",
        ),
        (
            &form,
            handed_back("ok"),
            fitting(json!({"budget": null})),
            "\"budget\"",
            "null for a field",
        ),
        (
            &form,
            completed("ok"),
            Some(Answer::choice("allow")),
            "object",
            "a choice for a form",
        ),
        (
            &form,
            completed("ok"),
            None,
            "asks for an answer",
            "a completion of a form without an answer",
        ),
        (
            &form,
            completed("ok"),
            fitting(json!({"branch": big})),
            "limit",
            "a form answer over 64 KiB",
        ),
        (
            &plain,
            completed("ok"),
            Some(Answer::choice("allow")),
            "asks for no answer",
            "an answer to no question",
        ),
        (
            &plain,
            handed_back("ok"),
            Some(Answer(json!({"a": 1}))),
            "asks for no answer",
            "a hand-back's answer to no question",
        ),
    ];
    for (handoff, outcome, answer, needle, what) in cases {
        let before = state(&store, handoff).await;
        assert_refused(
            store
                .finish_interactive_handoff(&handoff.id, &outcome, answer.as_ref())
                .await,
            needle,
            what,
        );
        assert_eq!(
            state(&store, handoff).await,
            before,
            "{what} wrote something"
        );
    }
    // Each still takes what fits.
    let allow = Answer::choice("allow");
    let done = store
        .finish_interactive_handoff(&choices.id, &completed("ok"), Some(&allow))
        .await
        .unwrap();
    assert_eq!(done.answer, Some(allow));
    let filled = fitting(json!({"env": "prod", "ratio": 0.5, "notify": false}));
    let done = store
        .finish_interactive_handoff(&form.id, &completed("ok"), filled.as_ref())
        .await
        .unwrap();
    assert_eq!(done.answer, filled);
    // A hand-back of a question may carry no answer, a failure never does.
    let third = ask(&store, dir.path(), |r| r.choices(&["allow", "deny"])).await;
    let back = store
        .finish_interactive_handoff(&third.id, &handed_back("over to you"), None)
        .await
        .unwrap();
    assert_eq!(
        (back.status, back.answer),
        (InteractiveHandoffStatus::HandedBack, None)
    );
    let done = store
        .finish_interactive_handoff(&plain.id, &failed("no"), None)
        .await
        .unwrap();
    assert_eq!(done.answer, None);
}

/// C26: a handoff's `on_expiry` answer is what it ends with at its
/// deadline, whoever comes first: a write after the deadline (the
/// person's late answer is refused as expired) or a sweep; the expired
/// event, `watch`, `wait` and the wake's claim carry it. A handoff
/// answered in time keeps the person's answer, and one without
/// `on_expiry` expires without an answer.
pub async fn c26_a_deadline_ends_a_handoff_with_its_on_expiry_answer(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    // Each deadline is 400 ms after its handoff's request is made, so a
    // slow store never makes a deadline that has passed already.
    let soon = || OffsetDateTime::now_utc() + Duration::milliseconds(400);
    let deny = Answer::choice("deny");
    let default_form = Answer(json!({"budget": 0, "branch": "main"}));
    let ask_until = |dir: &TempDir, answer: Option<Answer>, form: bool| {
        let store = store.clone();
        let path = dir.path().to_path_buf();
        async move {
            ask(&store, &path, |r| {
                let r = r.expires_at(soon());
                let r = if form {
                    r.form(sample_form())
                } else {
                    r.choices(&["allow", "deny"])
                };
                match answer {
                    Some(answer) => r.on_expiry(answer),
                    None => r,
                }
            })
            .await
        }
    };
    let late = ask_until(&dir, Some(deny.clone()), false).await;
    let swept = ask_until(&dir, Some(deny.clone()), false).await;
    let formed = ask_until(&dir, Some(default_form.clone()), true).await;
    let silent = ask_until(&dir, None, false).await;
    let in_time = ask_until(&dir, Some(deny.clone()), false).await;
    let waited = ask_until(&dir, Some(deny.clone()), false).await;
    assert_eq!(get(&store, &late).await.on_expiry, Some(deny.clone()));
    assert_eq!(formed.on_expiry, Some(default_form.clone()));
    assert_eq!(
        late.answer, None,
        "on_expiry is no answer before the deadline"
    );

    let allow = Answer::choice("allow");
    store
        .finish_interactive_handoff(&in_time.id, &completed("in time"), Some(&allow))
        .await
        .unwrap();
    let waiter = {
        let store = store.clone();
        let id = waited.id.clone();
        tokio::spawn(async move { store.wait(&id, Some(PATIENCE)).await })
    };
    let mut watcher = store
        .watch(WatchFrom::Now, WatchFilter::default())
        .await
        .unwrap();
    let last = [&late, &swept, &formed, &silent, &waited]
        .iter()
        .filter_map(|h| h.expires_at)
        .max()
        .unwrap();
    let left = last - OffsetDateTime::now_utc() + Duration::milliseconds(30);
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }

    // A person's answer after the deadline: expired, with on_expiry's.
    match store
        .finish_interactive_handoff(&late.id, &completed("too late"), Some(&allow))
        .await
    {
        Err(StoreError::Conflict {
            kind: ConflictKind::Expired,
            ..
        }) => {}
        other => panic!("a finish after the deadline: {other:?}"),
    }
    let expired = get(&store, &late).await;
    assert_eq!(expired.status, InteractiveHandoffStatus::Expired);
    assert_eq!(expired.answer, Some(deny.clone()));

    // The waiter sees the deadline's answer.
    match waiter.await.unwrap().unwrap() {
        Waited::Ended(ended) => {
            assert_eq!(ended.status, InteractiveHandoffStatus::Expired);
            assert_eq!(ended.answer, Some(deny.clone()), "the wait's result");
        }
        other => panic!("the deadline passed while waiting: {other:?}"),
    }

    let mut by_sweep = store.expire_due().await.unwrap();
    // The expired events, as a watcher sees them (in commit order).
    let mut expiries = std::collections::BTreeMap::new();
    while expiries.len() < 5 {
        let event = next(&mut watcher, "the expiries").await;
        if event.kind == HandoffEventKind::Expired {
            expiries.insert(event.handoff_id.clone(), event);
        }
    }
    by_sweep.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    let ids: Vec<_> = by_sweep.iter().map(|h| h.id.clone()).collect();
    assert_eq!(
        ids,
        vec![swept.id.clone(), formed.id.clone(), silent.id.clone()]
    );
    for (handoff, answer) in [
        (&late, Some(&deny)),
        (&swept, Some(&deny)),
        (&formed, Some(&default_form)),
        (&silent, None),
        (&waited, Some(&deny)),
    ] {
        let stored = get(&store, handoff).await;
        assert_eq!(
            stored.status,
            InteractiveHandoffStatus::Expired,
            "{}",
            handoff.id
        );
        assert_eq!(stored.outcome, Some(InteractiveHandoffOutcome::Expired));
        assert_eq!(stored.answer.as_ref(), answer, "{}", handoff.id);
        let last = store.history(&handoff.id).await.unwrap().pop().unwrap();
        assert_eq!(last.kind, HandoffEventKind::Expired);
        assert_eq!(
            last.answer.as_ref(),
            answer,
            "the expired event of {}",
            handoff.id
        );
        let event = &expiries[&handoff.id];
        assert_eq!(event, &last, "the watched expiry of {}", handoff.id);
        assert_eq!(row(&store, handoff).await["answer"], json!(answer));
        let claim = store
            .claim_interactive_handoff_wake(&handoff.id, 1)
            .await
            .unwrap();
        assert!(claim.claimed);
        assert_eq!(claim.handoff.answer.as_ref(), answer, "the claim");
    }
    let kept = get(&store, &in_time).await;
    assert_eq!(
        (kept.status, kept.answer),
        (InteractiveHandoffStatus::Completed, Some(allow))
    );
}

/// Every handoff of `store` with its history.
async fn everything(store: &Store) -> Vec<(InteractiveHandoff, Vec<HandoffEvent>)> {
    let mut all = Vec::new();
    for handoff in store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
    {
        let history = store.history(&handoff.id).await.unwrap();
        all.push((handoff, history));
    }
    all
}

/// C26 with C17: an export carries every spec, `on_expiry`, answer and
/// event answer; imported into an empty store of the same backend, every
/// record and history reads the same, and its export is the same bytes.
pub async fn c26_export_and_import_carry_specs_and_answers(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    questions(&store, dir.path()).await;
    let file = export(&store).await;
    let text = std::str::from_utf8(&file).unwrap();
    for needle in [
        "\"choices\":[{\"value\":\"allow\",\"label\":\"Allow «prod» ✓\"}",
        "\"answer\":\"allow\"",
        "\"on_expiry\":\"deny\"",
        "\"budget\":250",
        "3.3000000000000003",
    ] {
        assert!(text.contains(needle), "the export lacks {needle}:\n{text}");
    }
    let answered_events = text
        .lines()
        .filter(|line| line.starts_with("{\"event\"") && !line.contains("\"answer\":null"))
        .count();
    assert_eq!(
        answered_events, 3,
        "the finish and expiry events with answers"
    );

    let (_, copy) = other(backend, &dir, "copy").await;
    copy.import(&mut file.as_slice(), None).await.unwrap();
    assert_same_export(&export(&copy).await, &file, "export, import, export");
    assert_eq!(everything(&copy).await, everything(&store).await);
    // The imported question goes on: the attached one takes its answer.
    let attached = everything(&copy)
        .await
        .into_iter()
        .map(|(handoff, _)| handoff)
        .find(|h| h.status == InteractiveHandoffStatus::Attached)
        .unwrap();
    let b = Answer::choice("b");
    let done = copy
        .finish_interactive_handoff(&attached.id, &completed("b it is"), Some(&b))
        .await
        .unwrap();
    assert_eq!(done.answer, Some(b.clone()));
    let last = copy.history(&attached.id).await.unwrap().pop().unwrap();
    assert_eq!(last.answer, Some(b));
}

/// C26 with C17: the export an earlier build wrote (the 0.3 series' last,
/// `tests/fixtures/v4/sqlite.export.jsonl`), whose records have no
/// answer fields, imports into an empty store of each backend: every
/// handoff reads as that build's `status --json` printed it, with no
/// spec and no answer, and its events have no answer.
pub async fn c26_an_export_of_a_build_before_answers_imports(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let path = fixtures(Release::V4).join("sqlite.export.jsonl");
    let file = std::fs::read(&path).unwrap();
    assert!(
        !std::str::from_utf8(&file).unwrap().contains("\"answer\""),
        "{} was written before answers",
        path.display()
    );
    let config = backend.other_config("before", dir.path().join("before"));
    let store = open_store(&config).await.unwrap();
    let summary = store.import(&mut file.as_slice(), None).await.unwrap();
    assert_eq!((summary.handoffs, summary.events), (6, 17));
    let manifest: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(fixtures(Release::V4).join("sqlite.handoffs.json")).unwrap(),
    )
    .unwrap();
    let imported = everything(&store).await;
    assert_eq!(imported.len(), manifest.len());
    for ((handoff, history), expected) in imported.iter().zip(&manifest) {
        let mut stored = serde_json::to_value(handoff).unwrap();
        let fields = stored.as_object_mut().unwrap();
        for (field, upgraded) in Release::V4.later_handoff_fields() {
            assert_eq!(
                fields.remove(field),
                Some(upgraded),
                "{field} of {}",
                handoff.id
            );
        }
        let mut expected = expected.clone();
        expected.as_object_mut().unwrap().remove("due");
        assert_eq!(stored, expected, "handoff {}", handoff.id);
        assert!(history.iter().all(|event| event.answer.is_none()));
    }
    assert!(imported.iter().any(|(_, history)| !history.is_empty()));
}

/// One random answer for `spec`: often one that fits, often one that
/// breaks one rule, sometimes anything at all.
fn random_answer(rng: &mut Rng, spec: AnswerSpec<'_>) -> Answer {
    match spec {
        AnswerSpec::Choices(_) => {
            let pool = [
                json!("allow"),
                json!("deny"),
                json!("later"),
                json!("allow"),
                json!("deny"),
                json!("maybe"),
                json!("Allow"),
                json!(""),
                json!(1),
                json!(null),
                json!(true),
                json!(["allow"]),
                json!({"value": "allow"}),
            ];
            Answer(pool[rng.index(pool.len())].clone())
        }
        AnswerSpec::Form(_) => {
            if rng.chance(1, 12) {
                let pool = [json!("allow"), json!([]), json!(null), json!(7)];
                return Answer(pool[rng.index(pool.len())].clone());
            }
            let mut answer = serde_json::Map::new();
            let mut field =
                |rng: &mut Rng, name: &str, good: Vec<Value>, bad: Vec<Value>| match rng.below(8) {
                    0 => {}
                    1 => {
                        answer.insert(name.into(), bad[rng.index(bad.len())].clone());
                    }
                    _ => {
                        answer.insert(name.into(), good[rng.index(good.len())].clone());
                    }
                };
            let budget = rng.below(1001);
            field(
                rng,
                "budget",
                vec![json!(budget), json!(0), json!(1000)],
                vec![
                    json!(1001),
                    json!(-1),
                    json!("250"),
                    json!(2.5),
                    json!(null),
                ],
            );
            let letters = ["a", "é", "✓", "/", "-", "Z", "日", " "];
            let len = 1 + rng.index(20);
            let branch: String = (0..len)
                .map(|_| letters[rng.index(letters.len())])
                .collect();
            let long: String = "b".repeat(21 + rng.index(10));
            field(
                rng,
                "branch",
                vec![json!(branch), json!("release/1.2")],
                vec![json!(""), json!(long), json!(5)],
            );
            field(
                rng,
                "env",
                vec![json!("staging"), json!("prod")],
                vec![json!("dev"), json!(1), json!("Prod")],
            );
            let ratio = 0.5 + f64::from(u32::try_from(rng.below(1000)).unwrap()) / 7.0;
            field(
                rng,
                "ratio",
                vec![json!(ratio), json!(0.5), json!(3), json!(0.1 + 0.2 + 0.5)],
                vec![json!(0.4999), json!("1"), json!(-1), json!(false)],
            );
            field(
                rng,
                "notify",
                vec![json!(true), json!(false)],
                vec![json!("true"), json!(0)],
            );
            if rng.chance(1, 10) {
                answer.insert("extra".into(), json!("x"));
            }
            Answer(Value::Object(answer))
        }
    }
}

/// C26, property-style: random answers (from a fixed seed) against
/// choices and the sample form, each on a handoff of its own, completed or
/// handed back: the backend accepts exactly the answers the domain's
/// checker accepts, returns each accepted one unchanged (record, history,
/// the same JSON text), and writes nothing for a refused one.
pub async fn c26_random_answers_are_stored_exactly_when_they_fit_and_never_otherwise(
    backend: &dyn Backend,
) {
    const ANSWERS: usize = 60;
    let (dir, store) = fresh(backend).await;
    let mut rng = Rng::new(0x0c26_a45e);
    let choices = [
        Choice::new("allow", "Allow"),
        Choice::new("deny", "Deny"),
        Choice::new("later", "Later"),
    ];
    let form = sample_form();
    let (mut accepted, mut refused) = (0, 0);
    for n in 0..ANSWERS {
        let spec = if n % 2 == 0 {
            AnswerSpec::Choices(&choices)
        } else {
            AnswerSpec::Form(&form)
        };
        let answer = random_answer(&mut rng, spec);
        let handoff = ask(&store, dir.path(), |r| match spec {
            AnswerSpec::Choices(_) => r.choices(&["allow=Allow", "deny=Deny", "later=Later"]),
            AnswerSpec::Form(form) => r.form(form.clone()),
        })
        .await;
        let outcome = if rng.chance(1, 3) {
            handed_back("random")
        } else {
            completed("random")
        };
        let fits = spec.check(&answer).is_ok();
        let before = state(&store, &handoff).await;
        let result = store
            .finish_interactive_handoff(&handoff.id, &outcome, Some(&answer))
            .await;
        if fits {
            accepted += 1;
            let finished = result.unwrap_or_else(|e| panic!("{} fits, yet: {e}", answer.to_json()));
            let stored = get(&store, &handoff).await;
            assert_eq!(stored, finished);
            let back = stored.answer.unwrap();
            assert_eq!(back, answer);
            assert_eq!(back.to_json(), answer.to_json(), "the same JSON text");
            let last = store.history(&handoff.id).await.unwrap().pop().unwrap();
            assert_eq!(last.answer.as_ref(), Some(&answer));
        } else {
            refused += 1;
            match result {
                Err(StoreError::InvalidInput(_)) => {}
                other => panic!("{} does not fit, yet: {other:?}", answer.to_json()),
            }
            assert_eq!(
                state(&store, &handoff).await,
                before,
                "{}",
                answer.to_json()
            );
        }
    }
    println!("random answers: {accepted} accepted, {refused} refused");
    assert!(
        accepted >= 8 && refused >= 8,
        "{accepted} accepted, {refused} refused"
    );
}

//! Scenarios for deadlines (contract C14): a handoff nobody finishes in
//! time expires; once its deadline has passed its end is decided, whoever
//! comes first (a sweep, an attach, a finish, an extension), and racing
//! writers never both extend and expire it.

use crate::fixtures::waited_now;
use lf_handoff_adapters::ListQuery;
use std::collections::BTreeSet;
use std::time::Duration as StdDuration;

use lf_handoff_adapters::{ConflictKind, GenerateId, Store, StoreError};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEventKind, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffStatus,
    OpenOptions,
};
use tempfile::TempDir;
use time::{Duration, OffsetDateTime};

use crate::contract::{assert_invalid, fresh, handles};
use crate::fixtures::{location, new_wave, outcome, wave_request};
use crate::worker::race_at;
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! deadlines_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [deadlines];
            AnyBackend: [
                c14_a_handoff_expires_only_when_due,
                c14_writes_on_a_due_handoff_expire_it,
                c14_extend_moves_the_deadline,
                c14_racing_sweepers_expire_each_handoff_once,
                c14_expire_complete_and_extend_race_on_handles,
            ],
            SeveralProcesses: [
                c14_expire_complete_and_extend_race_across_processes,
            ],
        );
    };
}

/// A handoff on a new wave whose deadline is `after` from now.
pub(crate) async fn open_due_in(
    store: &Store,
    dir: &TempDir,
    after: Duration,
) -> InteractiveHandoff {
    let wave = new_wave(store, dir.path()).await;
    let options = OpenOptions {
        step: None,
        expires_at: Some(OffsetDateTime::now_utc() + after),
        ..OpenOptions::default()
    };
    let (opened, created) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()).with_options(options.clone()))
        .await
        .unwrap();
    assert!(created);
    opened
}

/// Sleeps until every deadline of `handoffs` has passed.
pub(crate) async fn until_due(handoffs: &[&InteractiveHandoff]) {
    let last = handoffs
        .iter()
        .filter_map(|h| h.expires_at)
        .max()
        .expect("a deadline");
    let left = last - OffsetDateTime::now_utc() + Duration::milliseconds(20);
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
}

#[track_caller]
fn assert_expired_conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::Conflict {
            kind: ConflictKind::Expired,
            ..
        }) => {}
        other => panic!("{what}: expected an `expired` conflict, got {other:?}"),
    }
}

fn kinds(events: &[lf_handoff_domain::interactive_handoff::HandoffEvent]) -> Vec<HandoffEventKind> {
    events.iter().map(|event| event.kind).collect()
}

async fn get(store: &Store, id: &InteractiveHandoffId) -> InteractiveHandoff {
    store.get_interactive_handoff(id).await.unwrap().unwrap()
}

/// C14: a handoff expires only once its deadline has passed; reads never
/// write; a sweep expires it once; its wake is then claimed like any other.
pub async fn c14_a_handoff_expires_only_when_due(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let opened = open_due_in(&store, &dir, Duration::milliseconds(400)).await;
    let deadline = opened.expires_at.unwrap();
    assert!(!opened.is_due(OffsetDateTime::now_utc()));
    assert_eq!(
        get(&store, &opened.id).await,
        opened,
        "the deadline is stored"
    );
    assert!(
        store.expire_due().await.unwrap().is_empty(),
        "nothing is due yet"
    );
    let row = opened.list_row(OffsetDateTime::now_utc());
    assert_eq!((row.expires_at, row.due), (Some(deadline), false));

    until_due(&[&opened]).await;
    let read = get(&store, &opened.id).await;
    assert_eq!(
        read.status,
        InteractiveHandoffStatus::Waiting,
        "reads never write"
    );
    assert!(read.list_row(OffsetDateTime::now_utc()).due);
    let listed = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(listed, vec![read.clone()]);

    let expired = store.expire_due().await.unwrap();
    assert_eq!(expired.len(), 1);
    let expired = &expired[0];
    assert_eq!(expired.id, opened.id);
    assert_eq!(expired.status, InteractiveHandoffStatus::Expired);
    assert_eq!(expired.outcome, Some(InteractiveHandoffOutcome::Expired));
    assert!(expired.terminal_at.unwrap() >= deadline);
    assert_eq!(&get(&store, &opened.id).await, expired);
    assert!(store.expire_due().await.unwrap().is_empty(), "expired once");
    assert_eq!(
        waited_now(&store, &opened.id).await,
        *expired,
        "expiring again changes nothing"
    );

    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let events = store.history(&opened.id).await.unwrap();
    assert_eq!(
        kinds(&events),
        [
            HandoffEventKind::Opened,
            HandoffEventKind::Expired,
            HandoffEventKind::WakeClaimed
        ]
    );
    assert_eq!(
        events[1].status_before,
        Some(InteractiveHandoffStatus::Waiting)
    );
    assert_eq!(events[1].status_after, InteractiveHandoffStatus::Expired);
    // A sweep with nothing due and a store with no deadline at all.
    let (_other_dir, other) = fresh(backend).await;
    assert!(other.expire_due().await.unwrap().is_empty());
}

/// C14: attaching, finishing or extending a due handoff expires it and
/// answers `expired`; an expired one refuses them and nothing is written.
pub async fn c14_writes_on_a_due_handoff_expire_it(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let short = Duration::milliseconds(300);
    let attached = open_due_in(&store, &dir, short).await;
    let finished = open_due_in(&store, &dir, short).await;
    let extended = open_due_in(&store, &dir, short).await;
    let waited = open_due_in(&store, &dir, short).await;
    store
        .attach_interactive_handoff(&finished.id)
        .await
        .unwrap();
    until_due(&[&attached, &finished, &extended, &waited]).await;

    assert_expired_conflict(
        store.attach_interactive_handoff(&attached.id).await,
        "attach on a due handoff",
    );
    assert_expired_conflict(
        store
            .finish_interactive_handoff(&finished.id, &outcome(1), None)
            .await,
        "finish on a due handoff",
    );
    let later = OffsetDateTime::now_utc() + Duration::hours(1);
    assert_expired_conflict(
        store.extend_interactive_handoff(&extended.id, later).await,
        "extend on a due handoff",
    );
    let waited = waited_now(&store, &waited.id).await;
    for id in [&attached.id, &finished.id, &extended.id, &waited.id] {
        let stored = get(&store, id).await;
        assert_eq!(stored.status, InteractiveHandoffStatus::Expired, "{id}");
        assert_eq!(
            kinds(&store.history(id).await.unwrap()).last(),
            Some(&HandoffEventKind::Expired)
        );
    }
    assert!(
        get(&store, &finished.id).await.attached_at.is_some(),
        "expiring keeps the attach"
    );
    // Nothing left to sweep: each was expired once, by the refused write.
    assert!(store.expire_due().await.unwrap().is_empty());

    // An expired handoff refuses every write but the wake claim, writing
    // nothing.
    let before = store.history(&attached.id).await.unwrap();
    assert_expired_conflict(
        store.attach_interactive_handoff(&attached.id).await,
        "attach on an expired handoff",
    );
    assert_expired_conflict(
        store
            .finish_interactive_handoff(&attached.id, &outcome(2), None)
            .await,
        "finish on an expired handoff",
    );
    assert_expired_conflict(
        store.extend_interactive_handoff(&attached.id, later).await,
        "extend on an expired handoff",
    );
    assert_eq!(store.history(&attached.id).await.unwrap(), before);
    // Nobody can give the expiry as an outcome.
    assert_invalid(
        store
            .finish_interactive_handoff(&extended.id, &InteractiveHandoffOutcome::Expired, None)
            .await,
        "finishing as expired",
    );
}

/// C14: a deadline is later than now; extending moves it either way, to
/// the same instant writes nothing; a finished handoff has none to move.
pub async fn c14_extend_moves_the_deadline(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let past = OffsetDateTime::now_utc() - Duration::seconds(1);
    assert_invalid(
        store
            .open_interactive_handoff(wave_request(&wave, dir.path()).with_options(OpenOptions {
                step: None,
                expires_at: Some(past),
                ..OpenOptions::default()
            }))
            .await,
        "a deadline in the past",
    );
    let (opened, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert_eq!(opened.expires_at, None, "no deadline: it waits for ever");

    let in_an_hour = OffsetDateTime::now_utc() + Duration::hours(1);
    let extended = store
        .extend_interactive_handoff(&opened.id, in_an_hour)
        .await
        .unwrap();
    let deadline = extended.expires_at.unwrap();
    assert!((deadline - in_an_hour).abs() < Duration::microseconds(1));
    assert_eq!(get(&store, &opened.id).await, extended);
    let again = store
        .extend_interactive_handoff(&opened.id, deadline)
        .await
        .unwrap();
    assert_eq!(again, extended, "the same deadline again changes nothing");
    let sooner = deadline - Duration::minutes(30);
    let moved = store
        .extend_interactive_handoff(&opened.id, sooner)
        .await
        .unwrap();
    assert_eq!(
        moved.expires_at,
        Some(sooner),
        "a deadline may move earlier"
    );
    assert_invalid(
        store.extend_interactive_handoff(&opened.id, past).await,
        "extending into the past",
    );
    let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
    assert_eq!(
        attached.expires_at,
        Some(sooner),
        "attach keeps the deadline"
    );
    let done = store
        .finish_interactive_handoff(&opened.id, &outcome(1), None)
        .await
        .unwrap();
    match store.extend_interactive_handoff(&opened.id, deadline).await {
        Err(StoreError::Conflict {
            kind: ConflictKind::AlreadyFinished,
            ..
        }) => {}
        other => panic!("extending a finished handoff: {other:?}"),
    }
    assert!(store.expire_due().await.unwrap().is_empty());
    assert_eq!(get(&store, &opened.id).await, done);
    assert_eq!(
        kinds(&store.history(&opened.id).await.unwrap()),
        [
            HandoffEventKind::Opened,
            HandoffEventKind::Extended,
            HandoffEventKind::Extended,
            HandoffEventKind::Attached,
            HandoffEventKind::Finished
        ]
    );
    match store
        .extend_interactive_handoff(&InteractiveHandoffId::new(), deadline)
        .await
    {
        Err(StoreError::NotFound(_)) => {}
        other => panic!("extending an unknown handoff: {other:?}"),
    }
}

/// C14: sweepers on separate handles racing over the same due handoffs
/// expire each exactly once, and each expiry is reported by one of them.
pub async fn c14_racing_sweepers_expire_each_handoff_once(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let mut opened = Vec::new();
    for _ in 0..12 {
        opened.push(open_due_in(&store, &dir, Duration::milliseconds(300)).await);
    }
    let not_due = open_due_in(&store, &dir, Duration::hours(1)).await;
    until_due(&opened.iter().collect::<Vec<_>>()).await;
    let sweepers = handles(backend, &dir, 4).await;
    let sweeps: Vec<_> = sweepers
        .into_iter()
        .map(|sweeper| tokio::spawn(async move { sweeper.expire_due().await }))
        .collect();
    let mut reported = Vec::new();
    for sweep in sweeps {
        reported.extend(sweep.await.unwrap().unwrap().into_iter().map(|h| h.id));
    }
    let unique: BTreeSet<_> = reported.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        reported.len(),
        "an expiry reported twice: {reported:?}"
    );
    let expected: BTreeSet<_> = opened.iter().map(|h| h.id.clone()).collect();
    assert_eq!(unique, expected);
    for handoff in &opened {
        let events = store.history(&handoff.id).await.unwrap();
        assert_eq!(
            kinds(&events),
            [HandoffEventKind::Opened, HandoffEventKind::Expired],
            "{}",
            handoff.id
        );
    }
    assert_eq!(get(&store, &not_due.id).await, not_due);
}

/// Checks the end of a handoff that sweeps, finishes and extensions raced
/// over: one terminal outcome, recorded once; never both extended and
/// expired; and each writer's answer agrees with the record.
async fn assert_one_end(store: &Store, id: &InteractiveHandoffId, answers: &[&str]) {
    let handoff = get(store, id).await;
    let events = kinds(&store.history(id).await.unwrap());
    let ends = events
        .iter()
        .filter(|k| matches!(k, HandoffEventKind::Finished | HandoffEventKind::Expired))
        .count();
    assert_eq!(ends, 1, "{id}: {events:?}");
    let extended = events.contains(&HandoffEventKind::Extended);
    let expired = events.contains(&HandoffEventKind::Expired);
    assert!(
        !(extended && expired),
        "{id} both extended and expired: {events:?}"
    );
    assert_eq!(
        expired,
        handoff.status == InteractiveHandoffStatus::Expired,
        "{id}: {events:?}"
    );
    let finishers = answers.iter().filter(|a| a.starts_with("ok")).count();
    assert_eq!(finishers, usize::from(!expired), "{id}: {answers:?}");
    if answers.contains(&"extended") {
        assert!(extended && !expired, "{id}: {answers:?} {events:?}");
    }
}

/// C14: sweeps, finishes and extensions on separate handles race over
/// handoffs whose deadlines pass while they run.
pub async fn c14_expire_complete_and_extend_race_on_handles(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let start = OffsetDateTime::now_utc();
    let mut opened = Vec::new();
    for i in 0..8 {
        opened.push(open_due_in(&store, &dir, Duration::milliseconds(600 + 15 * i)).await);
    }
    let others = handles(backend, &dir, 6).await;
    let wait =
        (start + Duration::milliseconds(650) - OffsetDateTime::now_utc()).max(Duration::ZERO);
    tokio::time::sleep(wait.unsigned_abs()).await;
    let ids: Vec<InteractiveHandoffId> = opened.iter().map(|h| h.id.clone()).collect();
    let runs = others.into_iter().enumerate().map(|(n, handle)| {
        let ids = ids.clone();
        tokio::spawn(async move {
            let mut answers = Vec::new();
            match n % 3 {
                0 => {
                    let expired: BTreeSet<_> = handle
                        .expire_due()
                        .await
                        .unwrap()
                        .into_iter()
                        .map(|h| h.id)
                        .collect();
                    for id in &ids {
                        answers.push(if expired.contains(id) { "expired" } else { "-" });
                    }
                }
                1 => {
                    for id in &ids {
                        answers.push(
                            match handle
                                .finish_interactive_handoff(id, &outcome(n), None)
                                .await
                            {
                                Ok(_) => "ok",
                                Err(StoreError::Conflict {
                                    kind: ConflictKind::Expired,
                                    ..
                                }) => "expired",
                                Err(StoreError::Conflict {
                                    kind: ConflictKind::OtherOutcome,
                                    ..
                                }) => "conflict",
                                Err(e) => panic!("finish: {e}"),
                            },
                        );
                    }
                }
                _ => {
                    let later = OffsetDateTime::now_utc() + Duration::hours(1);
                    for id in &ids {
                        answers.push(match handle.extend_interactive_handoff(id, later).await {
                            Ok(_) => "extended",
                            Err(StoreError::Conflict {
                                kind: ConflictKind::Expired,
                                ..
                            }) => "expired",
                            Err(StoreError::Conflict {
                                kind: ConflictKind::AlreadyFinished,
                                ..
                            }) => "finished",
                            Err(e) => panic!("extend: {e}"),
                        });
                    }
                }
            }
            answers
        })
    });
    let mut answers = Vec::new();
    for run in runs.collect::<Vec<_>>() {
        answers.push(run.await.unwrap());
    }
    // Whatever is still active was extended and is not due: finish it so
    // every handoff has its end.
    for (i, id) in ids.iter().enumerate() {
        let per_handoff: Vec<&str> = answers.iter().map(|a| a[i]).collect();
        let handoff = get(&store, id).await;
        if handoff.is_active() {
            assert!(
                per_handoff.contains(&"extended"),
                "{id} active: {per_handoff:?}"
            );
            store
                .finish_interactive_handoff(id, &outcome(0), None)
                .await
                .unwrap();
            assert_one_end(&store, id, &[&per_handoff[..], &["ok"]].concat()).await;
        } else {
            assert_one_end(&store, id, &per_handoff).await;
        }
    }
}

/// C14 across processes: sweeping, finishing and extending workers race
/// over handoffs whose deadlines pass while they run.
pub async fn c14_expire_complete_and_extend_race_across_processes(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let url = backend.config(location(dir.path())).url();
    let start = OffsetDateTime::now_utc();
    let mut opened = Vec::new();
    for i in 0..8 {
        opened.push(open_due_in(&store, &dir, Duration::milliseconds(1500 + 25 * i)).await);
    }
    let ids: Vec<String> = opened.iter().map(|h| h.id.to_string()).collect();
    let mut runs = Vec::new();
    for n in 0..6 {
        let op = ["expire", "finish-each", "extend-each"][n % 3];
        let mut args = vec![op.to_string(), n.to_string()];
        args.extend(ids.iter().cloned());
        runs.push(args);
    }
    let go_at = start + Duration::milliseconds(1600);
    let results = race_at(&url, &runs, go_at).await;
    for (i, handoff) in opened.iter().enumerate() {
        let id = &handoff.id;
        let per_handoff: Vec<String> = results
            .iter()
            .map(|lines| {
                lines
                    .iter()
                    .find(|line| line.starts_with(id.as_str()))
                    .map(|line| line[id.as_str().len()..].trim().to_string())
                    .unwrap_or_else(|| "-".to_string())
            })
            .collect();
        let per_handoff: Vec<&str> = per_handoff.iter().map(String::as_str).collect();
        let _ = i;
        let current = get(&store, id).await;
        if current.is_active() {
            assert!(
                per_handoff.iter().any(|a| a.starts_with("extended")),
                "{id}: {per_handoff:?}"
            );
            store
                .finish_interactive_handoff(id, &outcome(0), None)
                .await
                .unwrap();
            assert_one_end(&store, id, &[&per_handoff[..], &["ok"]].concat()).await;
        } else {
            assert_one_end(&store, id, &per_handoff).await;
        }
    }
    // Give the OS a moment to reap the workers before the directory goes.
    tokio::time::sleep(StdDuration::from_millis(10)).await;
}

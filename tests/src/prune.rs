//! Scenarios for listing a large registry and pruning it (contract C17):
//! every list filter alone and combined, paging with `limit` and `after`,
//! and `prune`, which removes only terminal handoffs whose wake is claimed
//! and that finished before the cutoff, with their history, in batches,
//! also while claims, lists and other prunes race with it.

use lf_handoff_adapters::PruneOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use lf_handoff_adapters::ports::PruneCount;
use lf_handoff_adapters::{GenerateId, ListQuery, Store, StoreError};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, InteractiveHandoff, InteractiveHandoffParent, InteractiveHandoffStatus,
    OpenOptions, StepKey,
};
use lf_handoff_domain::timestamp::to_unix_micros;
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use tempfile::TempDir;
use time::{Duration, OffsetDateTime};
use tokio::sync::Barrier;

use crate::contract::{assert_invalid, fresh, handles};
use crate::fixtures::{body, location, new_wave, outcome, wave_request};
use crate::worker::race_all;
use crate::Backend;

use InteractiveHandoffStatus::{Attached, Completed, Expired, Failed, HandedBack, Waiting};

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! prune_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [prune];
            AnyBackend: [
                c17_list_filters_alone_and_combined,
                c17_paging_yields_each_handoff_once_in_order,
                c17_newest_first_lists_backwards_and_pages_towards_older,
                c17_a_deadline_bound_lists_the_handoffs_due_by_it,
                c17_prune_removes_only_claimed_finished_old_handoffs,
                c17_prune_removes_batch_after_batch,
                c17_prune_races_claims_and_lists_on_handles,
            ],
            SeveralProcesses: [
                c17_prune_races_claims_across_processes,
            ],
        );
    };
}

fn remote() -> WaveHome {
    WaveHome::parse("ssh://jill@build.example:2222").unwrap()
}

fn local() -> WaveHome {
    WaveHome::parse("jack@local").unwrap()
}

fn wave_ref(wave: &Wave) -> InteractiveHandoffParent {
    InteractiveHandoffParent::Wave(wave.id().clone())
}

/// Opens a handoff on `wave` at `home`, with `options`.
async fn open_at(
    store: &Store,
    dir: &TempDir,
    wave: &Wave,
    home: WaveHome,
    options: &OpenOptions,
) -> InteractiveHandoff {
    let mut request = wave_request(wave, dir.path());
    request.home = home;
    let (opened, created) = store
        .open_interactive_handoff(request.with_options(options.clone()))
        .await
        .unwrap();
    assert!(created);
    opened
}

async fn get(store: &Store, id: &InteractiveHandoffId) -> Option<InteractiveHandoff> {
    store.get_interactive_handoff(id).await.unwrap()
}

async fn list(store: &Store, query: &ListQuery) -> Vec<InteractiveHandoffId> {
    store
        .list_interactive_handoffs(query.clone())
        .await
        .unwrap()
        .into_iter()
        .map(|handoff| handoff.id)
        .collect()
}

/// A handoff's history, checked: seq 1, 2, 3, ... of that handoff.
async fn history(store: &Store, id: &InteractiveHandoffId) -> Vec<HandoffEvent> {
    let events = store.history(id).await.unwrap();
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event.seq, n as u64 + 1, "{events:#?}");
        assert_eq!(event.handoff_id, *id);
    }
    events
}

#[track_caller]
fn assert_not_found<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::NotFound(_)) => {}
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
}

/// Sleeps past the clock's current microsecond, so what happens next is
/// strictly later than what happened before.
async fn tick() {
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
}

/// Seven handoffs on three waves, in creation order, with every status and
/// two homes:
///
/// | name | wave | home   | status      |
/// | ---- | ---- | ------ | ----------- |
/// | a1   | a    | local  | completed   |
/// | b1   | b    | remote | handed_back |
/// | a2   | a    | remote | failed      |
/// | b2   | b    | local  | expired     |
/// | c1   | c    | remote | waiting     |
/// | a3   | a    | local  | waiting     |
/// | b3   | b    | remote | attached    |
async fn registry(
    store: &Store,
    dir: &TempDir,
) -> (BTreeMap<&'static str, InteractiveHandoff>, [Wave; 3]) {
    let none = OpenOptions::default();
    let [a, b, c] = [
        new_wave(store, dir.path()).await,
        new_wave(store, dir.path()).await,
        new_wave(store, dir.path()).await,
    ];
    let mut named = BTreeMap::new();
    named.insert("a1", open_at(store, dir, &a, local(), &none).await);
    named.insert("b1", open_at(store, dir, &b, remote(), &none).await);
    for (name, n) in [("a1", 0), ("b1", 1)] {
        store
            .finish_interactive_handoff(&named[name].id, &outcome(n), None)
            .await
            .unwrap();
    }
    named.insert("a2", open_at(store, dir, &a, remote(), &none).await);
    store
        .finish_interactive_handoff(&named["a2"].id, &outcome(2), None)
        .await
        .unwrap();
    let deadline = OpenOptions {
        step: None,
        expires_at: Some(OffsetDateTime::now_utc() + Duration::milliseconds(300)),
        ..OpenOptions::default()
    };
    named.insert("b2", open_at(store, dir, &b, local(), &deadline).await);
    named.insert("c1", open_at(store, dir, &c, remote(), &none).await);
    named.insert("a3", open_at(store, dir, &a, local(), &none).await);
    crate::deadlines::until_due(&[&named["b2"]]).await;
    let expired: Vec<_> = store
        .expire_due()
        .await
        .unwrap()
        .into_iter()
        .map(|handoff| handoff.id)
        .collect();
    assert_eq!(expired, vec![named["b2"].id.clone()]);
    named.insert("b3", open_at(store, dir, &b, remote(), &none).await);
    store
        .attach_interactive_handoff(&named["b3"].id)
        .await
        .unwrap();
    // Every record as it now is.
    for handoff in named.values_mut() {
        *handoff = get(store, &handoff.id).await.unwrap();
    }
    (named, [a, b, c])
}

const CREATED: [&str; 7] = ["a1", "b1", "a2", "b2", "c1", "a3", "b3"];

/// C17: `list` filters by status (one or several), home, parent, activity
/// and creation, each alone and combined (and-ed), always in creation
/// order; `limit` keeps the first ones.
pub async fn c17_list_filters_alone_and_combined(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let (named, [a, b, _c]) = registry(&store, &dir).await;
    let ids = |names: &[&str]| -> Vec<InteractiveHandoffId> {
        names.iter().map(|name| named[name].id.clone()).collect()
    };
    let all = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|h| h.id.clone()).collect::<Vec<_>>(),
        ids(&CREATED)
    );
    let expected_statuses = [
        ("a1", Completed),
        ("b1", HandedBack),
        ("a2", Failed),
        ("b2", Expired),
        ("c1", Waiting),
        ("a3", Waiting),
        ("b3", Attached),
    ];
    for (name, status) in expected_statuses {
        assert_eq!(named[name].status, status, "{name}");
    }

    let q = |edit: &dyn Fn(&mut ListQuery)| {
        let mut query = ListQuery::default();
        edit(&mut query);
        query
    };
    let cases: Vec<(ListQuery, Vec<&str>)> = vec![
        (q(&|q| q.statuses = vec![Waiting]), vec!["c1", "a3"]),
        (q(&|q| q.statuses = vec![Attached]), vec!["b3"]),
        (q(&|q| q.statuses = vec![Completed]), vec!["a1"]),
        (q(&|q| q.statuses = vec![HandedBack]), vec!["b1"]),
        (q(&|q| q.statuses = vec![Failed]), vec!["a2"]),
        (q(&|q| q.statuses = vec![Expired]), vec!["b2"]),
        (
            q(&|q| q.statuses = vec![Attached, Waiting]),
            vec!["c1", "a3", "b3"],
        ),
        (
            q(&|q| q.statuses = vec![Expired, Completed, Failed]),
            vec!["a1", "a2", "b2"],
        ),
        (
            q(&|q| q.statuses = vec![Waiting, Failed]),
            vec!["a2", "c1", "a3"],
        ),
        (q(&|q| q.active_only = true), vec!["c1", "a3", "b3"]),
        (
            q(&|q| q.home = Some(remote())),
            vec!["b1", "a2", "c1", "b3"],
        ),
        (q(&|q| q.home = Some(local())), vec!["a1", "b2", "a3"]),
        (
            q(&|q| q.parent = Some(wave_ref(&a))),
            vec!["a1", "a2", "a3"],
        ),
        (
            q(&|q| q.created_before = Some(named["b2"].created_at)),
            vec!["a1", "b1", "a2"],
        ),
        (
            q(&|q| q.created_before = Some(named["a1"].created_at)),
            vec![],
        ),
        (q(&|q| q.limit = Some(2)), vec!["a1", "b1"]),
        (q(&|q| q.limit = Some(0)), vec![]),
        // Combined.
        (
            q(&|q| {
                q.parent = Some(wave_ref(&a));
                q.home = Some(remote());
            }),
            vec!["a2"],
        ),
        (
            q(&|q| {
                q.statuses = vec![Waiting];
                q.home = Some(remote());
            }),
            vec!["c1"],
        ),
        (
            q(&|q| {
                q.active_only = true;
                q.home = Some(local());
            }),
            vec!["a3"],
        ),
        (
            q(&|q| {
                q.parent = Some(wave_ref(&b));
                q.active_only = true;
            }),
            vec!["b3"],
        ),
        (
            q(&|q| {
                q.parent = Some(wave_ref(&b));
                q.statuses = vec![Waiting];
            }),
            vec![],
        ),
        (
            q(&|q| {
                q.parent = Some(wave_ref(&a));
                q.statuses = vec![Completed, Failed];
            }),
            vec!["a1", "a2"],
        ),
        (
            q(&|q| {
                q.active_only = true;
                q.statuses = vec![Completed];
            }),
            vec![],
        ),
        (
            q(&|q| {
                q.active_only = true;
                q.statuses = vec![Attached, Completed];
            }),
            vec!["b3"],
        ),
        (
            q(&|q| {
                q.statuses = vec![Waiting, Failed];
                q.home = Some(local());
            }),
            vec!["a3"],
        ),
        (
            q(&|q| {
                q.created_before = Some(named["b3"].created_at);
                q.active_only = true;
            }),
            vec!["c1", "a3"],
        ),
        (
            q(&|q| {
                q.created_before = Some(named["c1"].created_at);
                q.home = Some(remote());
            }),
            vec!["b1", "a2"],
        ),
        (
            q(&|q| {
                q.home = Some(remote());
                q.statuses = vec![HandedBack, Attached, Waiting];
                q.limit = Some(2);
            }),
            vec!["b1", "c1"],
        ),
        (
            q(&|q| {
                q.parent = Some(wave_ref(&a));
                q.home = Some(local());
                q.statuses = vec![Waiting];
                q.created_before = Some(named["b3"].created_at);
            }),
            vec!["a3"],
        ),
    ];
    for (query, expected) in cases {
        let listed = list(&store, &query).await;
        assert_eq!(listed, ids(&expected), "{query:?}");
        // The filters are and-ed, and the order is the list order.
        let oracle: Vec<_> = all
            .iter()
            .filter(|handoff| query.matches(handoff))
            .take(query.limit.unwrap_or(usize::MAX))
            .map(|handoff| handoff.id.clone())
            .collect();
        assert_eq!(listed, oracle, "{query:?}");
    }
    // A home nobody uses, a parent without handoffs.
    let nowhere = WaveHome::parse("ssh://nobody@elsewhere.example").unwrap();
    assert!(list(&store, &q(&|q| q.home = Some(nowhere.clone())))
        .await
        .is_empty());
    let empty = new_wave(&store, dir.path()).await;
    assert!(list(&store, &q(&|q| q.parent = Some(wave_ref(&empty))))
        .await
        .is_empty());
}

/// C17: paging with `limit` and `after` (the last id of the previous
/// page) yields every handoff the filters pass once, in order, whatever
/// the page size; a page may start at a handoff the filters do not pass;
/// an `after` that names no handoff is `NotFound`.
pub async fn c17_paging_yields_each_handoff_once_in_order(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let (named, [a, _, _]) = registry(&store, &dir).await;
    for query in paged_queries(&named, &a) {
        let whole = list(&store, &query).await;
        for size in 1..=4 {
            let paged = paged(&store, &query, size).await;
            assert_eq!(paged, whole, "{query:?}, pages of {size}");
        }
    }
    // A page after a handoff the filters do not pass starts at its place.
    let remote_after_a1 = list(
        &store,
        &ListQuery {
            home: Some(remote()),
            after: Some(named["a1"].id.clone()),
            ..ListQuery::default()
        },
    )
    .await;
    let names = ["b1", "a2", "c1", "b3"];
    assert_eq!(
        remote_after_a1,
        names.map(|name| named[name].id.clone()).to_vec()
    );
    // A start newer than the creation bound: nothing is past both.
    let newer_start = ListQuery {
        created_before: Some(named["b2"].created_at),
        after: Some(named["b3"].id.clone()),
        ..ListQuery::default()
    };
    assert!(list(&store, &newer_start).await.is_empty());
    assert_paging_ends(&store, &ListQuery::default(), &named["b3"].id).await;
}

/// After the last handoff `order` lists, `last`: an empty page, not an
/// error; after a handoff that does not exist: `NotFound`, whatever the
/// limit.
async fn assert_paging_ends(store: &Store, order: &ListQuery, last: &InteractiveHandoffId) {
    let past_the_last = ListQuery {
        after: Some(last.clone()),
        ..order.clone()
    };
    assert!(list(store, &past_the_last).await.is_empty(), "{order:?}");
    for limit in [None, Some(0), Some(3)] {
        assert_not_found(
            store
                .list_interactive_handoffs(ListQuery {
                    after: Some(GenerateId::new()),
                    limit,
                    ..order.clone()
                })
                .await,
            "after an unknown id",
        );
    }
}

/// Queries of every index to page through on [`registry`]: none, a home,
/// several statuses, the active ones, a parent, and a status created
/// before one of them.
fn paged_queries(named: &BTreeMap<&str, InteractiveHandoff>, a: &Wave) -> Vec<ListQuery> {
    vec![
        ListQuery::default(),
        ListQuery {
            home: Some(remote()),
            ..ListQuery::default()
        },
        ListQuery {
            statuses: vec![Waiting, Failed, Expired],
            ..ListQuery::default()
        },
        ListQuery {
            active_only: true,
            ..ListQuery::default()
        },
        ListQuery {
            parent: Some(wave_ref(a)),
            ..ListQuery::default()
        },
        ListQuery {
            statuses: vec![Waiting],
            created_before: Some(named["b3"].created_at),
            ..ListQuery::default()
        },
    ]
}

/// What `query` lists, read in pages of `size`, each starting after the
/// last id of the one before.
async fn paged(store: &Store, query: &ListQuery, size: usize) -> Vec<InteractiveHandoffId> {
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = list(
            store,
            &ListQuery {
                after: after.clone(),
                limit: Some(size),
                ..query.clone()
            },
        )
        .await;
        assert!(page.len() <= size, "{query:?}");
        let Some(last) = page.last().cloned() else {
            break;
        };
        paged.extend(page);
        after = Some(last);
    }
    paged
}

/// C17: newest first is the list order reversed on every index: the same
/// handoffs for every filter, `limit` keeping the newest and `after`
/// paging towards older ones, each handoff once whatever the page size.
pub async fn c17_newest_first_lists_backwards_and_pages_towards_older(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let (named, [a, b, _c]) = registry(&store, &dir).await;
    let ids = |names: &[&str]| -> Vec<InteractiveHandoffId> {
        names.iter().map(|name| named[name].id.clone()).collect()
    };
    let mut queries = paged_queries(&named, &a);
    queries.extend([
        ListQuery {
            statuses: vec![Completed, HandedBack, Failed, Expired],
            ..ListQuery::default()
        },
        ListQuery {
            parent: Some(wave_ref(&b)),
            active_only: true,
            ..ListQuery::default()
        },
        ListQuery {
            created_before: Some(named["a3"].created_at),
            ..ListQuery::default()
        },
        ListQuery {
            statuses: vec![Waiting, Attached, Expired],
            home: Some(local()),
            created_before: Some(named["b3"].created_at),
            ..ListQuery::default()
        },
    ]);
    for oldest_first in queries {
        let query = ListQuery {
            newest_first: true,
            ..oldest_first.clone()
        };
        let mut reversed = list(&store, &oldest_first).await;
        reversed.reverse();
        assert!(!reversed.is_empty(), "{oldest_first:?} lists nothing");
        assert_eq!(list(&store, &query).await, reversed, "{query:?}");
        let newest_two = ListQuery {
            limit: Some(2),
            ..query.clone()
        };
        let kept = reversed.iter().take(2).cloned().collect::<Vec<_>>();
        assert_eq!(list(&store, &newest_two).await, kept, "{query:?}");
        for size in 1..=4 {
            let paged = paged(&store, &query, size).await;
            assert_eq!(paged, reversed, "{query:?}, pages of {size}");
        }
    }
    let everything = ListQuery {
        newest_first: true,
        ..ListQuery::default()
    };
    assert_eq!(
        list(&store, &everything).await,
        ids(&["b3", "a3", "c1", "b2", "a2", "b1", "a1"])
    );
    // A page after a handoff the filters do not pass starts at its place,
    // towards older ones.
    let remote_before_a3 = ListQuery {
        home: Some(remote()),
        after: Some(named["a3"].id.clone()),
        ..everything.clone()
    };
    assert_eq!(
        list(&store, &remote_before_a3).await,
        ids(&["c1", "a2", "b1"])
    );
    // A start newer than the creation bound: the bound still holds.
    let older_than_b2 = ListQuery {
        created_before: Some(named["b2"].created_at),
        after: Some(named["b3"].id.clone()),
        ..everything.clone()
    };
    assert_eq!(list(&store, &older_than_b2).await, ids(&["a2", "b1", "a1"]));
    // The start exactly at the creation bound: strictly older ones.
    let at_the_bound = ListQuery {
        after: Some(named["b2"].id.clone()),
        ..older_than_b2.clone()
    };
    assert_eq!(list(&store, &at_the_bound).await, ids(&["a2", "b1", "a1"]));
    // A start older than the bound: the start decides.
    let before_a2 = ListQuery {
        after: Some(named["a2"].id.clone()),
        ..older_than_b2.clone()
    };
    assert_eq!(list(&store, &before_a2).await, ids(&["b1", "a1"]));
    // After the oldest one: an empty page; after an unknown one: not found.
    assert_paging_ends(&store, &everything, &named["a1"].id).await;
}

/// C17 with C14: `due_by` lists the handoffs due by an instant (active,
/// the deadline at or before it) in list order, either way, alone and with
/// every other filter, a page at a time; a finished handoff with a
/// deadline and one with none are never listed.
pub async fn c17_a_deadline_bound_lists_the_handoffs_due_by_it(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let base = OffsetDateTime::now_utc();
    let by = |minutes: i64| OpenOptions {
        step: None,
        expires_at: Some(base + Duration::minutes(minutes)),
        ..OpenOptions::default()
    };
    let mut named = BTreeMap::new();
    let mut waves = BTreeMap::new();
    // Created in this order; their deadlines in another.
    for (name, options, home) in [
        ("soon", by(10), local()),
        ("held", by(30), remote()),
        ("later", by(120), local()),
        ("never", OpenOptions::default(), local()),
        ("done", by(5), local()),
        ("last", by(20), remote()),
    ] {
        let wave = new_wave(&store, dir.path()).await;
        named.insert(name, open_at(&store, &dir, &wave, home, &options).await);
        waves.insert(name, wave);
        tick().await;
    }
    store
        .attach_interactive_handoff(&named["held"].id)
        .await
        .unwrap();
    store
        .finish_interactive_handoff(&named["done"].id, &outcome(0), None)
        .await
        .unwrap();
    for handoff in named.values_mut() {
        *handoff = get(&store, &handoff.id).await.unwrap();
    }
    let ids = |names: &[&str]| -> Vec<InteractiveHandoffId> {
        names.iter().map(|name| named[name].id.clone()).collect()
    };
    let hour = ListQuery {
        due_by: Some(base + Duration::hours(1)),
        ..ListQuery::default()
    };
    let held_deadline = named["held"].expires_at.unwrap();
    let cases = [
        (hour.clone(), vec!["soon", "held", "last"]),
        (
            ListQuery {
                due_by: Some(base + Duration::minutes(15)),
                ..ListQuery::default()
            },
            vec!["soon"],
        ),
        // At the deadline itself it is due; a microsecond before, not.
        (
            ListQuery {
                due_by: Some(held_deadline),
                ..ListQuery::default()
            },
            vec!["soon", "held", "last"],
        ),
        (
            ListQuery {
                due_by: Some(held_deadline - Duration::microseconds(1)),
                ..ListQuery::default()
            },
            vec!["soon", "last"],
        ),
        (
            ListQuery {
                due_by: Some(base + Duration::days(1)),
                ..ListQuery::default()
            },
            vec!["soon", "held", "later", "last"],
        ),
        (
            ListQuery {
                due_by: Some(base),
                ..ListQuery::default()
            },
            vec![],
        ),
        // Year 10000 in UTC, at the last instant of 9999 west of it.
        (
            ListQuery {
                due_by: Some(time::macros::datetime!(9999-12-31 23:59:59.999999999 -01:00)),
                ..ListQuery::default()
            },
            vec!["soon", "held", "later", "last"],
        ),
        (
            ListQuery {
                statuses: vec![Attached],
                ..hour.clone()
            },
            vec!["held"],
        ),
        (
            ListQuery {
                statuses: vec![Completed, Waiting],
                home: Some(local()),
                ..hour.clone()
            },
            vec!["soon"],
        ),
        (
            ListQuery {
                statuses: vec![Completed],
                ..hour.clone()
            },
            vec![],
        ),
        (
            ListQuery {
                active_only: true,
                home: Some(remote()),
                ..hour.clone()
            },
            vec!["held", "last"],
        ),
        (
            ListQuery {
                parent: Some(wave_ref(&waves["soon"])),
                ..hour.clone()
            },
            vec!["soon"],
        ),
        (
            ListQuery {
                parent: Some(wave_ref(&waves["done"])),
                ..hour.clone()
            },
            vec![],
        ),
        (
            ListQuery {
                created_before: Some(named["last"].created_at),
                ..hour.clone()
            },
            vec!["soon", "held"],
        ),
    ];
    for (query, expected) in cases {
        assert_eq!(list(&store, &query).await, ids(&expected), "{query:?}");
        let newest_first = ListQuery {
            newest_first: true,
            ..query.clone()
        };
        let mut reversed = ids(&expected);
        reversed.reverse();
        assert_eq!(list(&store, &newest_first).await, reversed, "{query:?}");
        for size in 1..=3 {
            assert_eq!(paged(&store, &query, size).await, ids(&expected));
            assert_eq!(paged(&store, &newest_first, size).await, reversed);
        }
    }
    let newest = ListQuery {
        newest_first: true,
        ..hour.clone()
    };
    for (query, after, expected) in [
        (&hour, "held", vec!["last"]),
        (&newest, "held", vec!["soon"]),
        // A start the deadline bound does not pass: its place still counts.
        (&hour, "never", vec!["last"]),
        (&newest, "never", vec!["held", "soon"]),
        (&newest, "later", vec!["held", "soon"]),
    ] {
        let page = ListQuery {
            after: Some(named[after].id.clone()),
            ..query.clone()
        };
        assert_eq!(list(&store, &page).await, ids(&expected), "{page:?}");
    }
    for (query, kept) in [(&hour, "soon"), (&newest, "last")] {
        let one = ListQuery {
            limit: Some(1),
            ..query.clone()
        };
        assert_eq!(list(&store, &one).await, ids(&[kept]), "{one:?}");
    }
    assert_paging_ends(&store, &hour, &named["last"].id).await;
    assert_paging_ends(&store, &newest, &named["soon"].id).await;
}

/// Opens, finishes and (when `claim`) claims a handoff on a new wave.
async fn finished_on_new_wave(store: &Store, dir: &TempDir, claim: bool) -> InteractiveHandoff {
    let wave = new_wave(store, dir.path()).await;
    let opened = open_at(store, dir, &wave, local(), &OpenOptions::default()).await;
    store
        .finish_interactive_handoff(&opened.id, &outcome(0), None)
        .await
        .unwrap();
    if claim {
        assert!(
            store
                .claim_interactive_handoff_wake(&opened.id, 1)
                .await
                .unwrap()
                .claimed
        );
    }
    get(store, &opened.id).await.unwrap()
}

/// C17: prune removes the terminal handoffs whose wake is claimed and that
/// finished before the cutoff, with their history, and nothing else: not
/// an unclaimed wake, not an active handoff, not one finished since. A
/// dry run counts the same and removes nothing; a second prune finds
/// nothing. A pruned step can be opened again.
pub async fn c17_prune_removes_only_claimed_finished_old_handoffs(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let login = StepKey::parse("oauth-login@turn-17").unwrap();
    // Claimed, at a step: opened, attached, finished, wake_claimed.
    let stepped = new_wave(&store, dir.path()).await;
    let at_step = OpenOptions {
        step: Some(login.clone()),
        expires_at: None,
        ..OpenOptions::default()
    };
    let claimed = open_at(&store, &dir, &stepped, local(), &at_step).await;
    store.attach_interactive_handoff(&claimed.id).await.unwrap();
    store
        .finish_interactive_handoff(&claimed.id, &outcome(0), None)
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&claimed.id, 1)
            .await
            .unwrap()
            .claimed
    );
    // Finished, nobody claimed its wake.
    let unclaimed = finished_on_new_wave(&store, &dir, false).await;
    // Expired, then claimed: opened, expired, wake_claimed.
    let expiring = crate::deadlines::open_due_in(&store, &dir, Duration::milliseconds(200)).await;
    // Active.
    let active = {
        let wave = new_wave(&store, dir.path()).await;
        open_at(&store, &dir, &wave, remote(), &OpenOptions::default()).await
    };
    crate::deadlines::until_due(&[&expiring]).await;
    assert_eq!(store.expire_due().await.unwrap().len(), 1);
    assert!(
        store
            .claim_interactive_handoff_wake(&expiring.id, 1)
            .await
            .unwrap()
            .claimed
    );
    tick().await;
    let cutoff = OffsetDateTime::now_utc();
    tick().await;
    // Finished and claimed after the cutoff.
    let recent = finished_on_new_wave(&store, &dir, true).await;

    let kept = [&unclaimed.id, &active.id, &recent.id];
    let mut before = BTreeMap::new();
    for id in kept.iter().copied().chain([&claimed.id, &expiring.id]) {
        before.insert(
            id.clone(),
            (get(&store, id).await.unwrap(), history(&store, id).await),
        );
    }
    assert_eq!(before[&claimed.id].1.len(), 4);
    assert_eq!(before[&expiring.id].1.len(), 3);
    let expected = PruneCount {
        handoffs: 2,
        events: 7,
    };

    // A dry run counts and removes nothing.
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(cutoff).dry_run())
            .await
            .unwrap(),
        expected
    );
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .len(),
        5
    );

    assert_eq!(
        store
            .prune(PruneOptions::finished_before(cutoff))
            .await
            .unwrap(),
        expected
    );
    for id in [&claimed.id, &expiring.id] {
        assert_eq!(get(&store, id).await, None, "{id} was pruned");
        assert_not_found(store.history(id).await, "the history of a pruned handoff");
    }
    for id in kept {
        let (record, events) = &before[id];
        assert_eq!(get(&store, id).await.as_ref(), Some(record), "{id} is kept");
        assert_eq!(&history(&store, id).await, events, "{id} keeps its history");
    }
    assert_eq!(
        list(&store, &ListQuery::default()).await,
        vec![unclaimed.id.clone(), active.id.clone(), recent.id.clone()]
    );
    for status in [Completed, Expired] {
        let remaining = list(
            &store,
            &ListQuery {
                statuses: vec![status],
                created_before: Some(cutoff),
                ..ListQuery::default()
            },
        )
        .await;
        assert!(
            remaining.iter().all(|id| *id == unclaimed.id),
            "{status}: {remaining:?}"
        );
    }
    // Nothing more to prune at that cutoff.
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(cutoff).dry_run())
            .await
            .unwrap(),
        PruneCount::default()
    );
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(cutoff))
            .await
            .unwrap(),
        PruneCount::default()
    );

    // The pruned step is forgotten: opening at it again creates a handoff.
    let mut request = wave_request(&stepped, dir.path());
    request.home = local();
    let (again, created) = store
        .open_interactive_handoff(request.with_options(OpenOptions::at_step(login.clone())))
        .await
        .unwrap();
    assert!(created, "a pruned step is opened again");
    assert_ne!(again.id, claimed.id);

    // Once its wake is claimed, the unclaimed one goes too, with a cutoff
    // in the future; the active ones never.
    assert!(
        store
            .claim_interactive_handoff_wake(&unclaimed.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let later = OffsetDateTime::now_utc() + Duration::hours(1);
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(later))
            .await
            .unwrap(),
        PruneCount {
            handoffs: 2,
            events: 6,
        }
    );
    assert_eq!(
        list(&store, &ListQuery::default()).await,
        vec![active.id.clone(), again.id.clone()]
    );
}

/// C17: a prune of more handoffs than one batch holds removes them all, a
/// batch at a time; a batch of none is refused.
pub async fn c17_prune_removes_batch_after_batch(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let mut opened = Vec::new();
    for n in 0..7 {
        let handoff = open_at(&store, &dir, &wave, local(), &OpenOptions::default()).await;
        store
            .finish_interactive_handoff(&handoff.id, &outcome(n), None)
            .await
            .unwrap();
        assert!(
            store
                .claim_interactive_handoff_wake(&handoff.id, 1)
                .await
                .unwrap()
                .claimed
        );
        opened.push(handoff.id);
    }
    let waiting = open_at(&store, &dir, &wave, local(), &OpenOptions::default()).await;
    tick().await;
    let cutoff = OffsetDateTime::now_utc();
    assert_invalid(
        store
            .prune(PruneOptions {
                batch: 0,
                ..PruneOptions::finished_before(cutoff)
            })
            .await,
        "a batch of 0",
    );
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(cutoff).dry_run())
            .await
            .unwrap(),
        PruneCount {
            handoffs: 7,
            events: 21,
        }
    );
    assert_eq!(
        store
            .prune(PruneOptions {
                batch: 2,
                ..PruneOptions::finished_before(cutoff)
            })
            .await
            .unwrap(),
        PruneCount {
            handoffs: 7,
            events: 21,
        }
    );
    for id in &opened {
        assert_eq!(get(&store, id).await, None);
    }
    assert_eq!(list(&store, &ListQuery::default()).await, vec![waiting.id]);
}

/// The handoffs of a prune race: finished on waves of their own, a third
/// never claimed, a third to be claimed during the race, a third claimed
/// by generation 1 before it whose wave is now at generation 2 (which
/// takes the wake over during the race).
struct Racers {
    never: Vec<InteractiveHandoffId>,
    claimed_during: Vec<InteractiveHandoffId>,
    taken_over: Vec<InteractiveHandoffId>,
    /// Each one's event count before the race.
    events: BTreeMap<InteractiveHandoffId, u64>,
    /// Each one's record before the race.
    records: BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
}

async fn racers(store: &Store, dir: &TempDir, each: usize) -> Racers {
    let mut racers = Racers {
        never: Vec::new(),
        claimed_during: Vec::new(),
        taken_over: Vec::new(),
        events: BTreeMap::new(),
        records: BTreeMap::new(),
    };
    for n in 0..each * 3 {
        let handoff = finished_on_new_wave(store, dir, n % 3 == 2).await;
        match n % 3 {
            0 => racers.never.push(handoff.id.clone()),
            1 => racers.claimed_during.push(handoff.id.clone()),
            _ => {
                store
                    .record_body(&handoff.parent, body(2, None))
                    .await
                    .unwrap();
                racers.taken_over.push(handoff.id.clone());
            }
        }
        let events = history(store, &handoff.id).await.len() as u64;
        racers.events.insert(handoff.id.clone(), events);
        racers.records.insert(handoff.id.clone(), handoff);
    }
    racers
}

/// What a claim in a prune race answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    Won,
    Lost,
    Gone,
}

/// Checks the store after a race of prunes (which together report
/// `pruned`) and claims (`claims`): a wake unclaimed when the race began
/// and never claimed is never pruned; a claim on a wake nobody held always
/// wins; a take-over wins unless its handoff was pruned first; every
/// handoff is whole (with its history) or gone (without any); the prunes
/// counted what went. Then a prune without a race removes every claimed
/// one left.
async fn assert_race_outcome(
    store: &Store,
    racers: &Racers,
    claims: &BTreeMap<InteractiveHandoffId, Claim>,
    pruned: PruneCount,
) {
    let mut gone = PruneCount::default();
    for id in &racers.never {
        assert_eq!(
            get(store, id).await.as_ref(),
            Some(&racers.records[id]),
            "{id}: unclaimed, never pruned"
        );
    }
    for id in &racers.claimed_during {
        assert_eq!(claims[id], Claim::Won, "{id}: nobody held its wake");
    }
    for id in &racers.taken_over {
        assert_ne!(claims[id], Claim::Lost, "{id}: generation 2 is current");
    }
    for id in racers.claimed_during.iter().chain(&racers.taken_over) {
        match get(store, id).await {
            Some(handoff) => {
                let events = history(store, id).await;
                let won = u64::from(claims[id] == Claim::Won);
                assert_eq!(events.len() as u64, racers.events[id] + won, "{id}");
                let holder = if racers.taken_over.contains(id) && claims[id] == Claim::Won {
                    2
                } else {
                    1
                };
                assert_eq!(handoff.wake_claimed_by_generation, Some(holder), "{id}");
            }
            None => {
                assert_not_found(store.history(id).await, "a pruned handoff's history");
                gone += PruneCount {
                    handoffs: 1,
                    events: racers.events[id] + u64::from(claims[id] == Claim::Won),
                };
            }
        }
    }
    assert_eq!(pruned, gone, "the prunes count what went");
    // Without a race, every claimed handoff goes; the unclaimed ones stay.
    store
        .prune(PruneOptions::finished_before(
            OffsetDateTime::now_utc() + Duration::hours(1),
        ))
        .await
        .unwrap();
    let left: BTreeSet<_> = list(store, &ListQuery::default())
        .await
        .into_iter()
        .collect();
    assert_eq!(left, racers.never.iter().cloned().collect());
}

/// C17: on separate handles, two prunes race claims of unclaimed wakes,
/// take-overs of claimed ones, and lists (which never fail and never show
/// a handoff twice).
pub async fn c17_prune_races_claims_and_lists_on_handles(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let racers = racers(&store, &dir, 8).await;
    let mut others = handles(backend, &dir, 5).await.into_iter();
    let barrier = Arc::new(Barrier::new(5));
    let later = OffsetDateTime::now_utc() + Duration::hours(1);
    let mut prunes = Vec::new();
    for (batch, pause) in [(1, 2), (2, 5)] {
        let (handle, barrier) = (others.next().unwrap(), barrier.clone());
        prunes.push(tokio::spawn(async move {
            barrier.wait().await;
            // The claims start first, so the prunes meet them midway.
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            handle
                .prune(PruneOptions {
                    batch,
                    ..PruneOptions::finished_before(later)
                })
                .await
                .unwrap()
        }));
    }
    // One claimer per group, so take-overs meet the first batches.
    let mut claimers = Vec::new();
    for (ids, generation) in [(&racers.taken_over, 2), (&racers.claimed_during, 1)] {
        let (handle, barrier, ids) = (others.next().unwrap(), barrier.clone(), ids.clone());
        claimers.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut claims = BTreeMap::new();
            for id in ids {
                let claim = match handle.claim_interactive_handoff_wake(&id, generation).await {
                    Ok(wake) if wake.claimed => Claim::Won,
                    Ok(_) => Claim::Lost,
                    Err(StoreError::NotFound(_)) => Claim::Gone,
                    Err(e) => panic!("claim {id}: {e}"),
                };
                claims.insert(id, claim);
            }
            claims
        }));
    }
    let lister = {
        let (handle, barrier) = (others.next().unwrap(), barrier.clone());
        let parent = racers.records[&racers.taken_over[0]].parent.clone();
        tokio::spawn(async move {
            barrier.wait().await;
            for round in 0..10 {
                for query in [
                    ListQuery::default(),
                    ListQuery {
                        statuses: vec![Completed, HandedBack, Failed],
                        ..ListQuery::default()
                    },
                    ListQuery {
                        home: Some(local()),
                        limit: Some(5),
                        ..ListQuery::default()
                    },
                    ListQuery {
                        parent: Some(parent.clone()),
                        ..ListQuery::default()
                    },
                ] {
                    let listed = handle
                        .list_interactive_handoffs(query.clone())
                        .await
                        .unwrap_or_else(|e| panic!("round {round}, {query:?}: {e}"));
                    let ids: BTreeSet<_> = listed.iter().map(|h| h.id.clone()).collect();
                    assert_eq!(ids.len(), listed.len(), "{query:?}: listed twice");
                    assert!(
                        listed
                            .windows(2)
                            .all(|w| (w[0].created_at, &w[0].id) < (w[1].created_at, &w[1].id)),
                        "{query:?}: out of order"
                    );
                }
            }
        })
    };
    let mut pruned = PruneCount::default();
    for prune in prunes {
        pruned += prune.await.unwrap();
    }
    let mut claims = BTreeMap::new();
    for claimer in claimers {
        claims.extend(claimer.await.unwrap());
    }
    lister.await.unwrap();
    assert_race_outcome(&store, &racers, &claims, pruned).await;
}

/// C17 across processes: two pruning processes race claiming and
/// taking-over processes.
pub async fn c17_prune_races_claims_across_processes(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let url = backend.config(location(dir.path())).url();
    let racers = racers(&store, &dir, 8).await;
    let later = to_unix_micros(OffsetDateTime::now_utc() + Duration::hours(1)).to_string();
    let mut runs = vec![
        vec!["prune".to_string(), later.clone(), "1".to_string()],
        vec!["prune".to_string(), later, "2".to_string()],
    ];
    for (generation, ids) in [("1", &racers.claimed_during), ("2", &racers.taken_over)] {
        let mut args = vec!["claim-each".to_string(), generation.to_string()];
        args.extend(ids.iter().map(ToString::to_string));
        runs.push(args);
    }
    let results = race_all(&url, &runs).await;
    let mut pruned = PruneCount::default();
    for lines in &results[..2] {
        let line = lines.first().expect("a prune result");
        let counts: Vec<u64> = line
            .strip_prefix("pruned ")
            .unwrap_or_else(|| panic!("prune: {line}"))
            .split(' ')
            .map(|n| n.parse().unwrap())
            .collect();
        pruned += PruneCount {
            handoffs: counts[0],
            events: counts[1],
        };
    }
    let mut claims = BTreeMap::new();
    for line in results[2..].iter().flatten() {
        let (id, answer) = line.split_once(' ').unwrap();
        let claim = match answer {
            "claimed" => Claim::Won,
            "lost" => Claim::Lost,
            "gone" => Claim::Gone,
            other => panic!("claim {id}: {other}"),
        };
        claims.insert(InteractiveHandoffId::parse(id).unwrap(), claim);
    }
    assert_race_outcome(&store, &racers, &claims, pruned).await;
    // Give the OS a moment to reap the workers before the directory goes.
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
}

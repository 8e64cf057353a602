//! A check every repository runs in its own tests: handoffs created in the
//! same microsecond are listed by id, ascending oldest first and
//! descending newest first, and paging through them yields each once. The
//! public API cannot make two such handoffs (the clock moves between
//! opens), so it inserts them through the repository port.

use lf_handoff_application::ports::{HandoffRepository, InsertOutcome};
use lf_handoff_application::{this_process_actor, GenerateId, ListQuery};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoff;

/// Inserts four copies of `finished` (a terminal handoff, so its parent's
/// active slot is never in the way) with its `created_at` and fresh ids,
/// on its parent at `version`, and checks the lists of its parent, of its
/// status and of every handoff, both ways, whole and a page at a time.
pub(crate) async fn ties_are_listed_by_id(
    repository: &dyn HandoffRepository,
    finished: &InteractiveHandoff,
    version: u64,
) {
    assert!(!finished.is_active(), "a terminal template");
    let mut tied = vec![finished.id.clone()];
    for _ in 0..4 {
        let mut copy = finished.clone();
        copy.id = GenerateId::new();
        copy.step = None;
        let outcome = repository
            .insert(&copy, version, &this_process_actor())
            .await
            .unwrap();
        assert_eq!(outcome, InsertOutcome::Inserted);
        tied.push(copy.id);
    }
    tied.sort();
    let ids = |handoffs: Vec<InteractiveHandoff>| -> Vec<InteractiveHandoffId> {
        handoffs
            .into_iter()
            .filter(|handoff| handoff.created_at == finished.created_at)
            .map(|handoff| handoff.id)
            .collect()
    };
    for filter in [
        ListQuery {
            parent: Some(finished.parent.clone()),
            ..ListQuery::default()
        },
        ListQuery {
            statuses: vec![finished.status],
            ..ListQuery::default()
        },
        ListQuery::default(),
    ] {
        for newest_first in [false, true] {
            let query = ListQuery {
                newest_first,
                ..filter.clone()
            };
            let mut expected = tied.clone();
            if newest_first {
                expected.reverse();
            }
            let whole = repository.list(&query).await.unwrap();
            assert_eq!(ids(whole), expected, "{query:?}");
            let mut paged = Vec::new();
            let mut after = None;
            loop {
                let page = ListQuery {
                    after: after.clone(),
                    limit: Some(1),
                    ..query.clone()
                };
                let Some(next) = repository.list(&page).await.unwrap().pop() else {
                    break;
                };
                after = Some(next.id.clone());
                paged.push(next);
            }
            assert_eq!(ids(paged), expected, "{query:?}, a page at a time");
        }
    }
}

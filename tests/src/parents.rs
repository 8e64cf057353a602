//! C10's list of parents: waves, project sessions and task sessions found
//! by kind, wave and project, in id order, page by page.

use std::path::Path;

use lf_handoff_adapters::{GenerateId, ParentQuery, Store, StoreError};
use lf_handoff_domain::id::{ProjectSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use lf_handoff_domain::parent::{Parent, ParentKind};
use lf_handoff_domain::project_session::ProjectSession;

use crate::contract::fresh;
use crate::fixtures::{fresh_project, fresh_task, new_wave};
use crate::Backend;

/// The scenarios of this module (see
/// [`contract_scenarios!`](crate::contract_scenarios)).
#[macro_export]
macro_rules! parents_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [parents];
            AnyBackend: [
                c10_parents_are_listed_by_kind_wave_and_project,
            ],
        );
    };
}

/// C10: `list_parents` gives the parents in id order: a wave with its
/// projects and tasks, a project with its tasks, only one kind, and-ed;
/// pages of any size, after any id (stored or not), add up to the whole
/// list; an unknown wave or project is `NotFound`.
pub async fn c10_parents_are_listed_by_kind_wave_and_project(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let first = new_wave(&store, dir.path()).await;
    let second = new_wave(&store, dir.path()).await;
    let one = new_project(&store, first.id()).await;
    let two = new_project(&store, first.id()).await;
    let three = new_project(&store, second.id()).await;
    let mut all = vec![
        Parent::Wave(first.clone()),
        Parent::Wave(second.clone()),
        Parent::Project(one.clone()),
        Parent::Project(two.clone()),
        Parent::Project(three.clone()),
    ];
    for project in [&one, &one, &two, &three] {
        all.push(new_task(&store, project, dir.path()).await);
    }
    all.sort_by(|a, b| id(a).cmp(id(b)));

    let cases = [
        (ParentQuery::default(), "every parent"),
        (
            ParentQuery {
                kind: Some(ParentKind::Wave),
                ..ParentQuery::default()
            },
            "the waves",
        ),
        (
            ParentQuery {
                wave: Some(first.id().clone()),
                ..ParentQuery::default()
            },
            "a wave with its projects and tasks",
        ),
        (
            ParentQuery {
                kind: Some(ParentKind::Task),
                wave: Some(first.id().clone()),
                ..ParentQuery::default()
            },
            "a wave's tasks",
        ),
        (
            ParentQuery {
                project: Some(one.id.clone()),
                ..ParentQuery::default()
            },
            "a project with its tasks",
        ),
        (
            ParentQuery {
                kind: Some(ParentKind::Wave),
                project: Some(one.id.clone()),
                ..ParentQuery::default()
            },
            "no wave is a project's",
        ),
        (
            ParentQuery {
                wave: Some(second.id().clone()),
                project: Some(one.id.clone()),
                ..ParentQuery::default()
            },
            "a project of another wave",
        ),
    ];
    for (query, what) in cases {
        let expected: Vec<Parent> = all.iter().filter(|p| query.matches(p)).cloned().collect();
        let listed = store.list_parents(query.clone()).await.unwrap();
        assert_eq!(listed, expected, "{what}");
        for size in [1, 2, 4] {
            assert_eq!(
                paged(&store, &query, size).await,
                expected,
                "{what} by {size}"
            );
        }
        let limited = ParentQuery {
            limit: Some(0),
            ..query.clone()
        };
        assert_eq!(store.list_parents(limited).await.unwrap(), [], "{what}");
    }
    assert_eq!(all.iter().filter(|p| p.wave_id() == first.id()).count(), 6);
    assert_eq!(
        all.iter()
            .filter(|p| p.project_id() == Some(&one.id))
            .count(),
        3
    );

    // A start that was never stored pages from its place in id order.
    for after in [
        InteractiveHandoffParent::Project(ProjectSessionId::new()),
        InteractiveHandoffParent::Wave(WaveId::new()),
    ] {
        let query = ParentQuery {
            after: Some(after.clone()),
            ..ParentQuery::default()
        };
        let expected: Vec<Parent> = all
            .iter()
            .filter(|p| id(p) > after.id_str())
            .cloned()
            .collect();
        assert_eq!(
            store.list_parents(query).await.unwrap(),
            expected,
            "after {after}"
        );
    }

    for query in [
        ParentQuery {
            wave: Some(WaveId::new()),
            ..ParentQuery::default()
        },
        ParentQuery {
            project: Some(ProjectSessionId::new()),
            limit: Some(0),
            ..ParentQuery::default()
        },
    ] {
        match store.list_parents(query.clone()).await {
            Err(StoreError::NotFound(_)) => {}
            other => panic!("{query:?}: expected NotFound, got {other:?}"),
        }
    }
}

/// The parent's id text, the list's order.
fn id(parent: &Parent) -> &str {
    match parent {
        Parent::Wave(wave) => wave.id().as_str(),
        Parent::Project(project) => project.id.as_str(),
        Parent::Task(task) => task.id.as_str(),
    }
}

/// `query`'s whole list, read `size` at a time, each page after the last
/// of the one before.
async fn paged(store: &Store, query: &ParentQuery, size: usize) -> Vec<Parent> {
    let mut all: Vec<Parent> = Vec::new();
    loop {
        let page = store
            .list_parents(ParentQuery {
                after: all.last().map(Parent::reference),
                limit: Some(size),
                ..query.clone()
            })
            .await
            .unwrap();
        assert!(page.len() <= size);
        let done = page.len() < size;
        all.extend(page);
        if done {
            return all;
        }
    }
}

async fn new_project(store: &Store, wave: &WaveId) -> ProjectSession {
    let project = fresh_project(wave);
    store.create_project_session(&project).await.unwrap();
    project
}

async fn new_task(store: &Store, project: &ProjectSession, dir: &Path) -> Parent {
    let (task, pr) = fresh_task(project, dir);
    store.create_task_session(&task, &pr).await.unwrap();
    Parent::Task(task)
}

//! The raw writers must write exactly what the adapters write: every
//! backend's store reads back the bulk-loaded population (with no history)
//! and the raw lifecycle's record, field for field, and its history (C15)
//! as the raw side's events, event for event; the store's next event
//! follows them.

use lf_handoff_adapters::ports::recorded_change;
use lf_handoff_adapters::PruneOptions;
use lf_handoff_adapters::{open_store, ListQuery};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus;
use lf_handoff_domain::interactive_handoff::{HandoffEvent, InteractiveHandoff};
use time::OffsetDateTime;

use super::{raw_actor, BenchBackend, PostgresBench, SledBench, SqliteBench, DEFAULT_POSTGRES_URL};
use crate::lifecycle::{create_waves, raw_lifecycle, request};
use crate::population::{Population, ACTIVE_PARENTS, PER_PARENT};

async fn raw_writes_are_read_back_by_the_store(backend: &dyn BenchBackend) {
    let handoffs = (ACTIVE_PARENTS + 20) * PER_PARENT;
    let population = Population::new(OffsetDateTime::now_utc()).unwrap();
    let config = backend.new_store("roundtrip").await.unwrap();
    let raw = backend.raw(&config).await.unwrap();
    raw.bulk_load(
        &population,
        0..Population::parents_for(handoffs),
        0..handoffs,
    )
    .await
    .unwrap();
    raw.close().await;

    let store = open_store(&config).await.unwrap();
    for i in (0..handoffs).step_by(7) {
        let expected = population.handoff(i).unwrap();
        let stored = store.get_interactive_handoff(&expected.id).await.unwrap();
        assert_eq!(
            stored.as_ref(),
            Some(&expected),
            "{} handoff {i}",
            backend.name()
        );
    }
    let parent = population.parent_ref(3);
    let listed = store
        .list_interactive_handoffs(ListQuery::from(&parent))
        .await
        .unwrap();
    let mut expected: Vec<_> = (3 * PER_PARENT..4 * PER_PARENT)
        .map(|i| population.handoff(i).unwrap())
        .collect();
    expected.reverse(); // Oldest first: handoff i is i seconds old.
    assert_eq!(listed, expected, "{}", backend.name());
    let active = store
        .list_interactive_handoffs(ListQuery {
            parent: None,
            active_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(active.len() as u64, ACTIVE_PARENTS, "{}", backend.name());
    // Every list index of C17 holds the loaded handoffs.
    let waiting = store
        .list_interactive_handoffs(ListQuery {
            statuses: vec![InteractiveHandoffStatus::Waiting],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        waiting.len() as u64,
        Population::waiting_in(handoffs),
        "{}",
        backend.name()
    );
    let home = population.handoff(0).unwrap().home;
    let at_home = store
        .list_interactive_handoffs(ListQuery {
            home: Some(home),
            limit: Some(25),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(at_home.len(), 25, "{}", backend.name());
    let claimed = (0..handoffs)
        .filter(|i| population.handoff(*i).unwrap().wake_claimed_at.is_some())
        .count() as u64;
    let later = OffsetDateTime::now_utc() + time::Duration::hours(1);
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(later).dry_run())
            .await
            .unwrap()
            .handoffs,
        claimed,
        "{}",
        backend.name()
    );
    assert_eq!(
        store.get_parent(&parent).await.unwrap(),
        Some(population.wave(3)),
        "{}",
        backend.name()
    );

    // Bulk-loaded handoffs have no history: a store upgraded from a
    // release without history holds such handoffs too.
    assert_eq!(
        store.history(&population.handoff_id(0)).await.unwrap(),
        Vec::new(),
        "{}",
        backend.name()
    );

    let waves = create_waves(&store, 3).await.unwrap();
    drop(store);
    let raw = backend.raw(&config).await.unwrap();
    let (_, first) = raw_lifecycle(raw.as_ref(), &waves[0]).await.unwrap();
    let (_, second) = raw_lifecycle(raw.as_ref(), &waves[1]).await.unwrap();
    raw.close().await;
    let store = open_store(&config).await.unwrap();
    let mut last_position = 0;
    for written in [&first, &second] {
        let [.., claimed] = written;
        assert_eq!(
            store.get_interactive_handoff(&claimed.id).await.unwrap(),
            Some(claimed.clone()),
            "{}",
            backend.name()
        );
        let history = store.history(&claimed.id).await.unwrap();
        assert_eq!(history.len(), 4, "{}: {history:?}", backend.name());
        // Positions are store-wide and follow the writes.
        for event in &history {
            assert!(
                event.position > last_position,
                "{}: {history:?}",
                backend.name()
            );
            last_position = event.position;
        }
        assert_eq!(history, raw_events(written, &history), "{}", backend.name());
    }
    // The store carries on from the raw side's counters.
    let (opened, _) = store
        .open_interactive_handoff(request(&waves[2]))
        .await
        .unwrap();
    let history = store.history(&opened.id).await.unwrap();
    assert_eq!(history.len(), 1, "{}: {history:?}", backend.name());
    assert_eq!(history[0].seq, 1, "{}", backend.name());
    assert!(
        history[0].position > last_position,
        "{}: {history:?}",
        backend.name()
    );
    drop(store);
    backend.remove(&config).await;
}

/// The events the raw side should have written for the records `written`
/// (open, then each change), at the positions the store reports.
fn raw_events(written: &[InteractiveHandoff; 4], stored: &[HandoffEvent]) -> Vec<HandoffEvent> {
    let actor = raw_actor().unwrap();
    let mut before = None;
    let mut events = Vec::new();
    for (index, (after, stored)) in written.iter().zip(stored).enumerate() {
        let change = recorded_change(before, after).unwrap();
        events.push(change.into_event(
            after.id.clone(),
            index as u64 + 1,
            stored.position,
            actor.clone(),
        ));
        before = Some(after);
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reads_what_the_raw_side_writes() {
    let dir = tempfile::tempdir().unwrap();
    raw_writes_are_read_back_by_the_store(&SqliteBench::new(dir.path().to_path_buf())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_reads_what_the_raw_side_writes() {
    let dir = tempfile::tempdir().unwrap();
    raw_writes_are_read_back_by_the_store(&SledBench::new(dir.path().to_path_buf())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reads_what_the_raw_side_writes() {
    let url = std::env::var("LF_HANDOFF_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let dir = tempfile::tempdir().unwrap();
    match PostgresBench::connect(&url, dir.path().to_path_buf()).await {
        Ok(backend) => raw_writes_are_read_back_by_the_store(&backend).await,
        Err(reason) => eprintln!("skipped: PostgreSQL unavailable: {reason}"),
    }
}

//! C23's delivery cursors: the service's own state in the store, replaced
//! only by a compare-and-swap on its version, durable, and settled between
//! racing handles with exactly one winner. A served store refuses them
//! (they belong to the server next to the store), so these scenarios need
//! the store's own storage.

use lf_handoff_adapters::{open_store, DeliveryCursor, Store, StoreError};
use time::{Duration, OffsetDateTime};

use crate::contract::{fresh, handles};
use crate::fixtures::location;
use crate::Backend;

/// The scenarios of this module, by what they need of a backend (see
/// [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! deliveries_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [deliveries];
            OwnStorage: [
                c23_a_delivery_cursor_changes_only_from_the_version_read,
                c23_racing_swaps_of_a_delivery_cursor_have_one_winner,
            ],
        );
    };
}

/// A cursor at `position`, held by `holder`; times in whole microseconds,
/// as stored.
fn cursor(position: u64, holder: &str) -> DeliveryCursor {
    let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    DeliveryCursor {
        position,
        reminded_until: now + Duration::microseconds(123_456),
        holder: holder.to_string(),
        lease_until: now + Duration::seconds(10),
        version: 0,
    }
}

fn stored(cursor: &DeliveryCursor, version: u64) -> DeliveryCursor {
    DeliveryCursor {
        version,
        ..cursor.clone()
    }
}

/// C23: no cursor until one is stored; a swap from the version read (none
/// at first) stores the next version, a swap from any other version
/// stores nothing; the stored cursor survives a reopen; bad keys are
/// refused as invalid input.
pub async fn c23_a_delivery_cursor_changes_only_from_the_version_read(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    assert_eq!(store.delivery_cursor(key).await.unwrap(), None);

    let first = cursor(0, "server-a");
    assert!(store.swap_delivery_cursor(key, None, &first).await.unwrap());
    assert!(
        !store
            .swap_delivery_cursor(key, None, &cursor(5, "server-b"))
            .await
            .unwrap(),
        "a second first swap loses"
    );
    assert_eq!(
        store.delivery_cursor(key).await.unwrap(),
        Some(stored(&first, 1))
    );

    let second = cursor(42, "server-a");
    assert!(store
        .swap_delivery_cursor(key, Some(1), &second)
        .await
        .unwrap());
    for stale in [Some(1), Some(3), None] {
        assert!(
            !store
                .swap_delivery_cursor(key, stale, &cursor(7, "stale"))
                .await
                .unwrap(),
            "a swap from {stale:?} loses"
        );
    }
    assert_eq!(
        store.delivery_cursor(key).await.unwrap(),
        Some(stored(&second, 2))
    );
    assert_eq!(
        store.delivery_cursor("another-endpoint").await.unwrap(),
        None,
        "cursors are per endpoint key"
    );

    drop(store);
    let reopened = open_store(&backend.config(location(dir.path())))
        .await
        .unwrap();
    assert_eq!(
        reopened.delivery_cursor(key).await.unwrap(),
        Some(stored(&second, 2)),
        "a stored cursor is durable"
    );

    let long = "k".repeat(129);
    for bad in ["", long.as_str(), "line\nbreak"] {
        assert!(
            matches!(
                reopened.delivery_cursor(bad).await,
                Err(StoreError::InvalidInput(_))
            ),
            "key {bad:?} is refused"
        );
        assert!(
            matches!(
                reopened.swap_delivery_cursor(bad, None, &first).await,
                Err(StoreError::InvalidInput(_))
            ),
            "key {bad:?} is refused"
        );
    }
}

/// C23: 8 handles swap one cursor from the same version at once, over
/// several rounds: each round exactly one wins, and the stored cursor is
/// the winner's.
pub async fn c23_racing_swaps_of_a_delivery_cursor_have_one_winner(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let stores: Vec<Store> = handles(backend, &dir, 8).await;
    let key = "endpoint";
    assert!(store
        .swap_delivery_cursor(key, None, &cursor(0, "first"))
        .await
        .unwrap());
    for round in 1..=5_u64 {
        let tasks: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(n, handle)| {
                let handle = handle.clone();
                let mine = cursor(round * 100 + n as u64, &format!("server-{n}"));
                tokio::spawn(async move {
                    let won = handle.swap_delivery_cursor(key, Some(round), &mine).await;
                    (mine, won.unwrap())
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (mine, won) = task.await.unwrap();
            if won {
                winners.push(mine);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(
            store.delivery_cursor(key).await.unwrap(),
            Some(stored(&winners[0], round + 1))
        );
    }
}

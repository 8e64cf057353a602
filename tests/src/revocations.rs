//! C29's revocations: the service's record of what it ended before its
//! time (a sign-in whose person signed out), in the store so that every
//! handle and every process sees it, until the instant it would have run
//! out anyway. A served store refuses them (they belong to the server next
//! to the store), so these scenarios need the store's own storage.

use lf_handoff_adapters::{open_store, StoreError};
use time::Duration;

use crate::contract::{fresh, handles};
use crate::fixtures::location;
use crate::Backend;

/// The scenarios of this module, by what they need of a backend (see
/// [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! revocations_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [revocations];
            OwnStorage: [
                c29_a_revocation_holds_on_every_handle_until_it_runs_out,
            ],
        );
    };
}

/// C29: a key revoked until a later instant is revoked on this handle,
/// another handle and after a reopen; one revoked until an instant past is
/// not; revoking again with an earlier instant keeps the later one; other
/// keys are not revoked; bad keys are refused as invalid input.
pub async fn c29_a_revocation_holds_on_every_handle_until_it_runs_out(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let other = handles(backend, &dir, 1).await.remove(0);
    let key = "session:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    assert!(!store.is_revoked(key).await.unwrap());
    let now = store.now();
    store.revoke(key, now + Duration::hours(1)).await.unwrap();
    assert!(store.is_revoked(key).await.unwrap());
    assert!(
        other.is_revoked(key).await.unwrap(),
        "another handle sees it"
    );
    assert!(!store.is_revoked("session:another").await.unwrap());

    // An earlier instant for the same key keeps the later one.
    store.revoke(key, now - Duration::hours(1)).await.unwrap();
    assert!(store.is_revoked(key).await.unwrap());

    // A revocation that ran out is no longer one.
    let ran_out = "session:ran-out";
    store
        .revoke(ran_out, now - Duration::seconds(1))
        .await
        .unwrap();
    assert!(!store.is_revoked(ran_out).await.unwrap());

    drop((store, other));
    let reopened = open_store(&backend.config(location(dir.path())))
        .await
        .unwrap();
    assert!(reopened.is_revoked(key).await.unwrap(), "durable");

    let long = "k".repeat(129);
    for bad in ["", long.as_str(), "line\nbreak"] {
        assert!(
            matches!(
                reopened.is_revoked(bad).await,
                Err(StoreError::InvalidInput(_))
            ),
            "key {bad:?} is refused"
        );
        assert!(
            matches!(
                reopened.revoke(bad, now).await,
                Err(StoreError::InvalidInput(_))
            ),
            "key {bad:?} is refused"
        );
    }
}

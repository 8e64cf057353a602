//! Where a notification endpoint's deliveries stand (contract C23): the
//! [`DeliveryCursor`] the service keeps in the store for each endpoint it
//! posts to, and the [`Deliveries`] port that reads it and replaces it with
//! a compare-and-swap.
//!
//! The cursor is the service's only durable state of its own. It lives in
//! the store so that a restarted server resumes after the last delivered
//! event, and so that several servers on one PostgreSQL store deliver each
//! message once between them: the one holding the cursor's lease delivers,
//! every swap checks the version it read, and a server that loses a swap
//! has lost the lease. The lease rules themselves are the service's; the
//! store only keeps the cursor and settles the race.

use std::fmt::Debug;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::error::{StoreError, StoreResult};

/// The longest endpoint key a store accepts, in bytes.
pub const MAX_ENDPOINT_KEY: usize = 128;

/// One endpoint's deliveries: what has been delivered, and who delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryCursor {
    /// The position of the last event delivered (or passed over as not a
    /// notification): delivery resumes after it.
    pub position: u64,
    /// Deadline reminders: every handoff whose reminder fell due at or
    /// before this instant has been reminded of.
    pub reminded_until: OffsetDateTime,
    /// The server that holds the lease (a name the service makes per
    /// process).
    pub holder: String,
    /// Until when the holder's lease runs; after it, another server may
    /// take the cursor over.
    pub lease_until: OffsetDateTime,
    /// The cursor's version: 1 when first stored, one more at each swap.
    /// Set by the store; ignored in a cursor passed to
    /// [`Deliveries::swap_delivery_cursor`].
    pub version: u64,
}

/// The delivery cursors of a store (C23), one per endpoint key.
///
/// # Contract
///
/// - A cursor stored by a successful swap is durable when the call
///   returns, and is what the next read returns, in every process.
/// - `swap_delivery_cursor(key, expected, cursor)` stores `cursor` with
///   version `expected + 1` (1 for `None`) if and only if the stored
///   cursor's version is `expected` (`None`: no cursor is stored), and
///   returns whether it did. Of any number of racing swaps from one
///   version, exactly one succeeds.
/// - Cursors are not registry data: export, import and prune leave them
///   alone.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Deliveries: Debug + Send + Sync + 'static {
    /// The cursor of `endpoint`, if one was stored.
    ///
    /// # Errors
    /// `Unavailable` on engine failure or an unreadable cursor.
    async fn delivery_cursor(&self, endpoint: &str) -> StoreResult<Option<DeliveryCursor>>;

    /// Replaces the cursor of `endpoint` if its version is still
    /// `expected`; see the trait's contract.
    ///
    /// # Errors
    /// `Unavailable` on engine failure.
    async fn swap_delivery_cursor(
        &self,
        endpoint: &str,
        expected: Option<u64>,
        cursor: &DeliveryCursor,
    ) -> StoreResult<bool>;
}

/// Refuses an endpoint key a store would not keep: empty, longer than
/// [`MAX_ENDPOINT_KEY`] bytes, or holding a control character.
///
/// # Errors
/// `InvalidInput` naming what is wrong.
pub fn check_endpoint_key(endpoint: &str) -> StoreResult<()> {
    if endpoint.is_empty() || endpoint.len() > MAX_ENDPOINT_KEY {
        return Err(StoreError::InvalidInput(format!(
            "a delivery endpoint key must be 1 to {MAX_ENDPOINT_KEY} bytes long, not {}",
            endpoint.len()
        )));
    }
    if endpoint.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput(
            "a delivery endpoint key must not hold control characters".to_string(),
        ));
    }
    Ok(())
}

//! What the service ended before its time (contract C29): a sign-in
//! session whose person signed out. The [`Revocations`] port keeps each
//! revoked key until the moment it would have run out anyway, in the
//! store, so that every server of one store refuses it (C19: several
//! servers are one service) and a restarted server still does.

use std::fmt::Debug;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::error::{StoreError, StoreResult};

/// The longest revocation key a store accepts, in bytes.
pub const MAX_REVOCATION_KEY: usize = 128;

/// The revoked keys of a store (C29).
///
/// # Contract
///
/// - `revoke(key, until, now)` records that `key` is revoked until
///   `until`; a key revoked twice keeps the later `until`. It also forgets
///   every revocation that ran out before `now`, so the store keeps only
///   what can still matter. The revocation is durable when the call
///   returns, and every process sees it from then on.
/// - `is_revoked(key, now)` is true if and only if `key` was revoked until
///   `now` or later.
/// - Revocations are not registry data: export, import and prune leave
///   them alone.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Revocations: Debug + Send + Sync + 'static {
    /// Revokes `key` until `until`; see the trait's contract.
    ///
    /// # Errors
    /// `Unavailable` on engine failure.
    async fn revoke(
        &self,
        key: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> StoreResult<()>;

    /// Whether `key` is revoked at `now`.
    ///
    /// # Errors
    /// `Unavailable` on engine failure or an unreadable revocation.
    async fn is_revoked(&self, key: &str, now: OffsetDateTime) -> StoreResult<bool>;
}

/// Refuses a revocation key a store would not keep: empty, longer than
/// [`MAX_REVOCATION_KEY`] bytes, or holding a control character.
///
/// # Errors
/// `InvalidInput` naming what is wrong.
pub fn check_revocation_key(key: &str) -> StoreResult<()> {
    if key.is_empty() || key.len() > MAX_REVOCATION_KEY {
        return Err(StoreError::InvalidInput(format!(
            "a revocation key must be 1 to {MAX_REVOCATION_KEY} bytes long, not {}",
            key.len()
        )));
    }
    if key.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput(
            "a revocation key must not hold control characters".to_string(),
        ));
    }
    Ok(())
}

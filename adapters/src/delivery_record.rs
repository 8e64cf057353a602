//! The stored form of a delivery cursor (C23), shared by every backend: a
//! JSON object beside the cursor's version, times as whole microseconds
//! since the Unix epoch (as every stored instant).

use lf_handoff_application::{DeliveryCursor, StoreError, StoreResult};
use lf_handoff_domain::timestamp::{from_unix_micros, to_unix_micros};
use serde::{Deserialize, Serialize};

/// A cursor as stored, without its version.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    position: u64,
    reminded_until: i64,
    holder: String,
    lease_until: i64,
}

/// The JSON text stored for `cursor`.
pub(crate) fn encode(cursor: &DeliveryCursor) -> StoreResult<String> {
    serde_json::to_string(&Stored {
        position: cursor.position,
        reminded_until: to_unix_micros(cursor.reminded_until),
        holder: cursor.holder.clone(),
        lease_until: to_unix_micros(cursor.lease_until),
    })
    .map_err(|e| StoreError::damaged(format!("a delivery cursor could not be written ({e})")))
}

/// The cursor of `endpoint` stored as `text` at `version`.
pub(crate) fn decode(endpoint: &str, version: u64, text: &[u8]) -> StoreResult<DeliveryCursor> {
    let unreadable = |detail: String| {
        StoreError::damaged(format!(
            "the delivery cursor of endpoint {endpoint:?} is unreadable ({detail}); the store \
             may be damaged"
        ))
    };
    let stored: Stored = serde_json::from_slice(text).map_err(|e| unreadable(e.to_string()))?;
    let instant = |micros: i64| {
        from_unix_micros(micros).ok_or_else(|| unreadable(format!("instant {micros} out of range")))
    };
    Ok(DeliveryCursor {
        position: stored.position,
        reminded_until: instant(stored.reminded_until)?,
        holder: stored.holder,
        lease_until: instant(stored.lease_until)?,
        version,
    })
}

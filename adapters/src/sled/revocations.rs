//! The service's revocations (C29) on sled: [`Revocations`] for
//! [`SledStore`], in a tree of their own, `revocations`, made by the first
//! revocation (so a store that never revoked has none, and needs no
//! upgrade). A key is the revoked key; a value is the instant it would
//! have run out, in microseconds since the Unix epoch (8 bytes,
//! big-endian, as an `i64`). Each revocation stored forgets those that
//! ran out, and is made durable before it returns.

use async_trait::async_trait;
use lf_handoff_application::{Revocations, StoreError, StoreResult};
use lf_handoff_domain::timestamp::{micros_before, to_unix_micros};
use time::OffsetDateTime;

use super::SledStore;

/// The tree of the revocations.
const REVOCATIONS: &[u8] = b"revocations";

/// The instant a stored value holds.
fn until_of(key: &[u8], value: &[u8]) -> StoreResult<i64> {
    let bytes: [u8; 8] = value.try_into().map_err(|_| {
        StoreError::damaged(format!(
            "the revocation of {:?} is {} bytes long, not 8; the store may be damaged",
            String::from_utf8_lossy(key),
            value.len()
        ))
    })?;
    Ok(i64::from_be_bytes(bytes))
}

#[async_trait]
impl Revocations for SledStore {
    async fn revoke(
        &self,
        key: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let key = key.to_owned();
        let until = to_unix_micros(until);
        let now = micros_before(now);
        self.run(move |shared| {
            shared.write(|| {
                let tree = shared
                    .db
                    .open_tree(REVOCATIONS)
                    .map_err(|e| shared.engine(e))?;
                for entry in tree.iter() {
                    let (stored, value) = entry.map_err(|e| shared.engine(e))?;
                    if until_of(&stored, &value)? < now {
                        tree.remove(stored).map_err(|e| shared.engine(e))?;
                    }
                }
                tree.fetch_and_update(key.as_bytes(), |stored| {
                    let kept = stored
                        .and_then(|value| <[u8; 8]>::try_from(value).ok())
                        .map_or(until, |bytes| i64::from_be_bytes(bytes).max(until));
                    Some(kept.to_be_bytes().to_vec())
                })
                .map_err(|e| shared.engine(e))?;
                shared.make_durable()
            })
        })
        .await
    }

    async fn is_revoked(&self, key: &str, now: OffsetDateTime) -> StoreResult<bool> {
        let key = key.to_owned();
        let now = micros_before(now);
        self.run(move |shared| {
            let names = shared.db.tree_names();
            if !names.iter().any(|name| name.as_ref() == REVOCATIONS) {
                return Ok(false);
            }
            let tree = shared
                .db
                .open_tree(REVOCATIONS)
                .map_err(|e| shared.engine(e))?;
            match tree.get(key.as_bytes()).map_err(|e| shared.engine(e))? {
                Some(value) => Ok(until_of(key.as_bytes(), &value)? >= now),
                None => Ok(false),
            }
        })
        .await
    }
}

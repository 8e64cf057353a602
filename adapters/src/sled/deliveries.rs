//! The service's delivery cursors (C23) on sled: [`Deliveries`] for
//! [`SledStore`], in a tree of their own, `delivery_cursors`, made by the
//! first swap (so a store that never notified has none, and needs no
//! upgrade). A key is the endpoint key; a value is the cursor's version
//! (8 bytes, big-endian) then its JSON record. A swap is sled's
//! compare-and-swap of that one key, made durable before it returns.

use async_trait::async_trait;
use lf_handoff_application::{Deliveries, DeliveryCursor, StoreError, StoreResult};

use super::SledStore;
use crate::delivery_record::{decode, encode};

/// The tree of the cursors.
const DELIVERY_CURSORS: &[u8] = b"delivery_cursors";

/// A stored value's version and record.
fn split<'v>(endpoint: &str, value: &'v [u8]) -> StoreResult<(u64, &'v [u8])> {
    let (version, record) = value.split_at_checked(8).ok_or_else(|| {
        StoreError::damaged(format!(
            "the delivery cursor of endpoint {endpoint:?} is {} bytes long; the store may be \
             damaged",
            value.len()
        ))
    })?;
    let mut bytes = [0; 8];
    bytes.copy_from_slice(version);
    Ok((u64::from_be_bytes(bytes), record))
}

#[async_trait]
impl Deliveries for SledStore {
    async fn delivery_cursor(&self, endpoint: &str) -> StoreResult<Option<DeliveryCursor>> {
        let endpoint = endpoint.to_owned();
        self.run(move |shared| {
            let names = shared.db.tree_names();
            if !names.iter().any(|name| name.as_ref() == DELIVERY_CURSORS) {
                return Ok(None);
            }
            let tree = shared
                .db
                .open_tree(DELIVERY_CURSORS)
                .map_err(|e| shared.engine(e))?;
            shared.get(&tree, endpoint.as_bytes(), |value| {
                let (version, record) = split(&endpoint, &value)?;
                decode(&endpoint, version, record)
            })
        })
        .await
    }

    async fn swap_delivery_cursor(
        &self,
        endpoint: &str,
        expected: Option<u64>,
        cursor: &DeliveryCursor,
    ) -> StoreResult<bool> {
        let endpoint = endpoint.to_owned();
        let record = encode(cursor)?;
        self.run(move |shared| {
            shared.write(|| {
                let tree = shared
                    .db
                    .open_tree(DELIVERY_CURSORS)
                    .map_err(|e| shared.engine(e))?;
                let current = tree
                    .get(endpoint.as_bytes())
                    .map_err(|e| shared.engine(e))?;
                let version = current
                    .as_ref()
                    .map(|value| split(&endpoint, value).map(|(version, _)| version))
                    .transpose()?;
                if version != expected {
                    return Ok(false);
                }
                let mut value = expected
                    .map_or(1, |v| v.saturating_add(1))
                    .to_be_bytes()
                    .to_vec();
                value.extend_from_slice(record.as_bytes());
                let swapped = tree
                    .compare_and_swap(endpoint.as_bytes(), current, Some(value))
                    .map_err(|e| shared.engine(e))?
                    .is_ok();
                if swapped {
                    shared.make_durable()?;
                }
                Ok(swapped)
            })
        })
        .await
    }
}

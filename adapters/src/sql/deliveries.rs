//! The service's delivery cursors (C23): [`Deliveries`] for [`SqlStore`],
//! one row of `delivery_cursors` per endpoint key, swapped on its version.

use async_trait::async_trait;
use lf_handoff_application::{Deliveries, DeliveryCursor, StoreResult};

use crate::delivery_record::{decode, encode};
use crate::sql::driver::Param;
use crate::sql::statements::{DELIVERY_CURSOR, INSERT_DELIVERY_CURSOR, SWAP_DELIVERY_CURSOR};
use crate::sql::{failed, to_stored_version, to_version, Dialect, SqlStore};

#[async_trait]
impl<D: Dialect> Deliveries for SqlStore<D> {
    async fn delivery_cursor(&self, endpoint: &str) -> StoreResult<Option<DeliveryCursor>> {
        let rows = self
            .engine
            .fetch_records(DELIVERY_CURSOR, &[Param::Text(endpoint)])
            .await
            .map_err(failed)?;
        rows.into_iter()
            .next()
            .map(|row| decode(endpoint, to_version(row.version)?, row.record.as_bytes()))
            .transpose()
    }

    async fn swap_delivery_cursor(
        &self,
        endpoint: &str,
        expected: Option<u64>,
        cursor: &DeliveryCursor,
    ) -> StoreResult<bool> {
        let record = encode(cursor)?;
        let affected = match expected {
            None => self
                .engine
                .execute(
                    INSERT_DELIVERY_CURSOR,
                    &[Param::Text(endpoint), Param::Text(&record)],
                )
                .await
                .map_err(failed)?,
            Some(version) => self
                .engine
                .execute(
                    SWAP_DELIVERY_CURSOR,
                    &[
                        Param::Text(endpoint),
                        Param::Int(to_stored_version(version)?),
                        Param::Text(&record),
                    ],
                )
                .await
                .map_err(failed)?,
        };
        Ok(affected == 1)
    }
}

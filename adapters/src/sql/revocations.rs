//! The service's revocations (C29): [`Revocations`] for [`SqlStore`], one
//! row of `revocations` per revoked key, with the instant (microseconds)
//! it would have run out; each revocation stored forgets those that ran
//! out already.

use async_trait::async_trait;
use lf_handoff_application::{Revocations, StoreResult};
use lf_handoff_domain::timestamp::{micros_before, to_unix_micros};
use time::OffsetDateTime;

use crate::sql::driver::Param;
use crate::sql::statements::{FORGET_REVOCATIONS, IS_REVOKED, REVOKE};
use crate::sql::{failed, Dialect, SqlStore};

#[async_trait]
impl<D: Dialect> Revocations for SqlStore<D> {
    async fn revoke(
        &self,
        key: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        self.engine
            .execute(FORGET_REVOCATIONS, &[Param::Int(micros_before(now))])
            .await
            .map_err(failed)?;
        self.engine
            .execute(
                REVOKE,
                &[Param::Text(key), Param::Int(to_unix_micros(until))],
            )
            .await
            .map_err(failed)?;
        Ok(())
    }

    async fn is_revoked(&self, key: &str, now: OffsetDateTime) -> StoreResult<bool> {
        // A whole-microsecond instant is at or after `now` exactly when it
        // is at or after `now` rounded up.
        let revoked = self
            .engine
            .fetch_int(
                IS_REVOKED,
                &[Param::Text(key), Param::Int(micros_before(now))],
            )
            .await
            .map_err(failed)?;
        Ok(revoked > 0)
    }
}

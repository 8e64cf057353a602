//! SQLite's change signal (C16): [`DataVersion`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_application::UnavailableKind;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _};

use crate::changes::{ChangeSource, FileIdentity, Notifier, FILE_CHECK};

/// How often a watched SQLite store's `PRAGMA data_version` is read.
pub(crate) const DATA_VERSION_POLL: Duration = Duration::from_millis(10);

/// SQLite's change signal (C16): `PRAGMA data_version` on a connection of
/// its own, read every [`DATA_VERSION_POLL`] while anyone watches. The
/// value changes when another connection, of this process or another,
/// commits to the file; reading it costs a check of the WAL index in
/// shared memory, not a read of the database. The file's identity is
/// checked every [`FILE_CHECK`]: a store deleted or replaced while
/// watched ends its watchers with `Unavailable` (`io`).
#[derive(Debug)]
pub(super) struct DataVersion {
    pub path: PathBuf,
    pub options: SqliteConnectOptions,
}

#[async_trait::async_trait]
impl ChangeSource for DataVersion {
    async fn run(&self, out: &Arc<Notifier>) {
        let identity = FileIdentity::of(&self.path);
        let gone = || {
            format!(
                "{} was deleted or replaced while it was watched",
                self.path.display()
            )
        };
        if identity.is_none() {
            return out.fail(UnavailableKind::Io, gone());
        }
        let mut conn = None;
        let mut seen: Option<i64> = None;
        let mut checked = Instant::now();
        let mut pause = DATA_VERSION_POLL;
        while out.wanted() {
            if conn.is_none() {
                // A connection that cannot be made now (too many open
                // files, say) is tried again; the readers find out what
                // is wrong meanwhile.
                match self.options.connect().await {
                    Ok(made) => conn = Some(made),
                    Err(_) => out.bump(),
                }
            }
            if let Some(made) = conn.as_mut() {
                match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
                    .fetch_one(made)
                    .await
                {
                    Ok(version) => {
                        // The first reading is the baseline; a commit
                        // between a subscription and it is covered by one
                        // wake then.
                        if seen != Some(version) {
                            out.bump();
                        }
                        seen = Some(version);
                        pause = DATA_VERSION_POLL;
                    }
                    Err(_) => {
                        // Busy for a moment, or the connection broke: wake
                        // the readers once, and try a new connection after
                        // a longer pause.
                        out.bump();
                        conn = None;
                        seen = None;
                    }
                }
            }
            if conn.is_none() {
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            if checked.elapsed() >= FILE_CHECK {
                checked = Instant::now();
                if FileIdentity::of(&self.path) != identity {
                    if let Some(made) = conn.take() {
                        let _ = made.close().await;
                    }
                    return out.fail(UnavailableKind::Io, gone());
                }
            }
            tokio::time::sleep(pause).await;
        }
        if let Some(made) = conn.take() {
            let _ = made.close().await;
        }
    }
}

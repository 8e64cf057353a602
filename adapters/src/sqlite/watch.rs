//! SQLite's change signal (C16): [`DataVersion`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use lf_handoff_application::UnavailableKind;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions as _, Connection as _};

use crate::changes::{ChangeSource, Mark, Notifier};
use crate::file_events::{FileIdentity, FileWatch};

/// How often `PRAGMA data_version` is read when the kernel gives no file
/// notifications for the store (not Linux, or past the inotify limits).
pub(crate) const DATA_VERSION_POLL: Duration = Duration::from_millis(10);

/// How long after a file notification `PRAGMA data_version` is first
/// read: the commit that wrote the file becomes visible once its sync is
/// done, a fraction of a millisecond later on most disks.
const SETTLE: Duration = Duration::from_millis(1);

/// The shortest time between two reads of `PRAGMA data_version` after
/// notifications, doubling while the store stays quiet, so a store
/// written without pause costs a watcher no more reads than the old
/// 10 ms poll.
const CHASE_GAP: Duration = Duration::from_millis(10);

/// How long after the last notification the reads go on, for a commit
/// whose sync took longer than the reads before.
pub(super) const CHASE_FOR: Duration = Duration::from_secs(2);

/// SQLite's change signal (C16): `PRAGMA data_version` on a connection of
/// its own, read when the kernel says the store's files changed.
///
/// The value changes when another connection, of this process or
/// another, commits to the file; reading it costs a check of the WAL index
/// in shared memory, not a read of the database. Every commit writes the
/// store's `-wal` file (or, in another journal mode, the database file),
/// and a checkpoint writes the database file and may truncate the `-wal`
/// file; a [`FileWatch`] on both wakes this source, which then reads the
/// value [`SETTLE`] later and again at growing gaps from [`CHASE_GAP`],
/// until [`CHASE_FOR`] after the last notification: the notification
/// comes as the commit's frames are written, before its sync ends and it
/// becomes visible. The connection is made at the first read, so a short
/// watch of a quiet store makes none.
///
/// Every [`FILE_CHECK`](crate::file_events::FILE_CHECK) the files are looked
/// at: a store deleted or replaced while watched ends its watchers with
/// `Unavailable` (`io`), and a change of either file's size or
/// modification time that no notification announced is taken as one. And
/// every [`RECHECK`](crate::changes::RECHECK) (5 s) without a
/// notification the value is read anyway, the feed's safety check: a
/// commit that both missed wakes the readers then. So the source holds
/// its connection while anyone watches, and an idle store costs one read
/// of the value every 5 s, whatever the number of watchers. Without file
/// notifications (not Linux, or past the kernel's inotify limits) the
/// value is read every [`DATA_VERSION_POLL`].
#[derive(Debug)]
pub(super) struct DataVersion {
    pub path: PathBuf,
    pub options: SqliteConnectOptions,
    /// How often the files are looked at:
    /// [`FILE_CHECK`](crate::file_events::FILE_CHECK), but in tests.
    pub look_every: Duration,
    /// How often the value is read without a notification:
    /// [`RECHECK`](crate::changes::RECHECK), but in tests.
    pub recheck: Duration,
}

/// When to read `PRAGMA data_version` next.
#[derive(Debug)]
pub(super) struct Schedule {
    /// The next read.
    pub next: Instant,
    /// The last read.
    last: Option<Instant>,
    /// After notifications: until when reads go on, and the next gap.
    chase: Option<(Instant, Duration)>,
    /// While no connection can be made: the pause before the next try.
    retry: Duration,
    /// Whether file notifications arrive (else the value is polled).
    watched: bool,
    /// The gap between reads while notifications arrive and none came.
    recheck: Duration,
    /// Whether nothing suggested a change (a notification, a look at
    /// the files) since the readers were last woken: then a first
    /// reading of the value (on a new connection) is the baseline alone,
    /// and wakes nobody.
    pub quiet: bool,
}

impl Schedule {
    /// The first read: at once when the files are not watched; else at
    /// the first notification, or `recheck` from now without one, so a
    /// short watch of a quiet store makes no connection. When the files
    /// are watched, the source wakes its readers as it starts.
    pub fn new(now: Instant, watched: bool, recheck: Duration) -> Self {
        Self {
            next: if watched { now + recheck } else { now },
            last: None,
            chase: None,
            retry: DATA_VERSION_POLL,
            watched,
            recheck,
            quiet: watched,
        }
    }

    /// The files changed at `now`.
    pub fn notified(&mut self, now: Instant) {
        self.quiet = false;
        self.chase = Some((now + CHASE_FOR, CHASE_GAP));
        let soonest = self
            .last
            .map_or(now + SETTLE, |last| (now + SETTLE).max(last + CHASE_GAP));
        self.next = self.next.min(soonest);
    }

    /// File notifications stopped at `now` (the watch ended): the value
    /// is polled from then on.
    pub fn unwatched(&mut self, now: Instant) {
        if self.watched {
            self.watched = false;
            self.next = self.next.min(now);
        }
    }

    /// The value was read at `now`, on a working connection or not
    /// (`connected`). Either way the readers know what it found: it woke
    /// them, or it holds the value to compare the next reading with.
    pub fn read(&mut self, now: Instant, connected: bool) {
        self.last = Some(now);
        self.quiet = true;
        if !connected {
            self.retry = (self.retry * 2).min(Duration::from_secs(1));
            self.next = now + self.retry;
            return;
        }
        self.retry = DATA_VERSION_POLL;
        self.next = match self.chase {
            _ if !self.watched => now + DATA_VERSION_POLL,
            Some((until, gap)) if now < until => {
                self.chase = Some((until, gap * 2));
                now + gap
            }
            _ => {
                self.chase = None;
                now + self.recheck
            }
        };
    }
}

/// What the periodic look at the store's files saw: the database file's
/// identity, and the size and modification time of it and its `-wal`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Look {
    identity: Option<FileIdentity>,
    stamps: [Option<(u64, Option<SystemTime>)>; 2],
}

impl Look {
    fn of(path: &Path, wal: &Path) -> Self {
        let stamp = |path: &Path| {
            std::fs::metadata(path)
                .ok()
                .map(|meta| (meta.len(), meta.modified().ok()))
        };
        Self {
            identity: FileIdentity::of(path),
            stamps: [stamp(path), stamp(wal)],
        }
    }
}

#[async_trait::async_trait]
impl ChangeSource for DataVersion {
    async fn run(&self, out: &Arc<Notifier>) {
        let gone = || {
            format!(
                "{} was deleted or replaced while it was watched",
                self.path.display()
            )
        };
        // SQLite names the `-wal` file after the real path.
        let real = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        let wal = wal_path(&real);
        let files = watch_files(&real);
        let mut looked = Look::of(&self.path, &wal);
        if looked.identity.is_none() {
            return out.fail(UnavailableKind::Io, gone());
        }
        let mut conn = None;
        let mut mark = Mark::default();
        let mut checked = Instant::now();
        let mut schedule = Schedule::new(checked, files.is_some(), self.recheck);
        if files.is_some() {
            // A commit made before the watch began sent no notification:
            // the readers read once more now.
            out.bump();
        }
        while out.wanted() {
            let now = Instant::now();
            let watched = files.as_ref().is_some_and(FileWatch::alive);
            if !watched {
                schedule.unwatched(now);
            }
            if now >= schedule.next {
                let quiet = schedule.quiet;
                let connected = self.read(&mut conn, &mut mark, quiet, out).await;
                schedule.read(now, connected);
            }
            if now.duration_since(checked) >= self.look_every {
                checked = now;
                let look = Look::of(&self.path, &wal);
                if look.identity != looked.identity {
                    if let Some(made) = conn.take() {
                        let _ = made.close().await;
                    }
                    return out.fail(UnavailableKind::Io, gone());
                }
                if look != looked {
                    schedule.notified(now);
                }
                looked = look;
            }
            let wake = schedule.next.min(checked + self.look_every);
            let notified = async {
                match files.as_ref().filter(|files| files.alive()) {
                    Some(files) => files.changed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = notified => schedule.notified(Instant::now()),
                () = tokio::time::sleep_until(wake.into()) => {}
            }
        }
        if let Some(made) = conn.take() {
            let _ = made.close().await;
        }
    }
}

impl DataVersion {
    /// Reads `PRAGMA data_version` on `conn` (connecting first when it is
    /// `None`), waking the readers when it differs from the last reading,
    /// and on a new connection's first read unless `quiet` (nothing
    /// suggested a change since the readers were last woken); false when
    /// no connection could be made or the read failed.
    async fn read(
        &self,
        conn: &mut Option<SqliteConnection>,
        mark: &mut Mark,
        quiet: bool,
        out: &Notifier,
    ) -> bool {
        if conn.is_none() {
            // A connection that cannot be made now (too many open files,
            // say) is tried again; the readers find out what is wrong
            // meanwhile.
            match self.options.connect().await {
                Ok(made) => *conn = Some(made),
                Err(_) => {
                    out.bump();
                    return false;
                }
            }
        }
        let Some(made) = conn.as_mut() else {
            return false;
        };
        match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
            .fetch_one(made)
            .await
        {
            Ok(version) => {
                // The first reading is the baseline; a commit between a
                // subscription (or a notification) and it is covered by
                // one wake then, unless nothing (no notification, no look
                // at the files) suggested one.
                if quiet {
                    mark.baseline(version);
                }
                mark.read(version, out);
                true
            }
            Err(_) => {
                // Busy for a moment, or the connection broke: wake the
                // readers once, and try a new connection after a pause.
                out.bump();
                *conn = None;
                mark.forget();
                false
            }
        }
    }
}

/// The `-wal` file beside the store's file.
fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_os_string();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// A watch on the store's file `real` (its path after symbolic links are
/// followed) and its `-wal` file; `None` when there is no such watch.
pub(super) fn watch_files(real: &Path) -> Option<FileWatch> {
    let dir = real.parent()?;
    let name = real.file_name()?.to_os_string();
    let mut wal = name.clone();
    wal.push("-wal");
    FileWatch::new(dir, &[name, wal] as &[OsString])
}

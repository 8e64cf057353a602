//! File notifications: [`FileWatch`] tells a task that one of a few files
//! of a directory was created, written, truncated, renamed or removed, so
//! a change signal can wait for the kernel instead of polling (C16); and
//! [`FileIdentity`], which tells that a watched file was replaced.
//!
//! On Linux one inotify instance serves the whole process, read by one
//! thread of its own, and each directory is watched once however many
//! store handles watch files in it: a watch costs the kernel's memory and
//! a slot of `fs.inotify.max_user_watches`, and an instance a slot of
//! `fs.inotify.max_user_instances` (128 by default, per user). The thread
//! blocks in `read` and wakes only for events of the watched directories;
//! it hands each one to the watches whose file it names through a
//! [`Notify`], which needs no runtime, so store handles of several tokio
//! runtimes can share it.
//!
//! A directory is watched, not the files: SQLite deletes its `-wal` file
//! when the last connection closes and creates it again at the next write,
//! and a watch on the file itself would end with it.
//!
//! [`FileWatch::new`] returns `None` when no notification can be had (not
//! Linux, or the kernel refused an instance or a watch, e.g. past the
//! limits above); the caller then polls, as it did before. A watch whose
//! directory went away, or whose reader thread stopped, says so
//! ([`FileWatch::alive`]) after waking its task once. When the kernel's
//! queue overflows, every watch is woken.

use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// What one watch's task is woken by.
#[derive(Debug, Default)]
struct Signal {
    notify: Notify,
    dead: AtomicBool,
}

impl Signal {
    fn wake(&self) {
        self.notify.notify_one();
    }

    fn end(&self) {
        self.dead.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// Notifications of changes to some files of one directory (see the
/// module docs). Dropping it ends them.
#[derive(Debug)]
pub(crate) struct FileWatch {
    signal: Arc<Signal>,
    #[cfg(target_os = "linux")]
    registration: inotify::Registration,
}

impl FileWatch {
    /// Watches the files `names` of the directory `dir`; `None` when the
    /// kernel gives no notifications for it.
    pub(crate) fn new(dir: &Path, names: &[OsString]) -> Option<Self> {
        let signal = Arc::new(Signal::default());
        #[cfg(target_os = "linux")]
        {
            let registration = inotify::register(dir, names, &signal)?;
            Some(Self {
                signal,
                registration,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (dir, names, signal);
            None
        }
    }

    /// Returns once one of the files changed since the previous return
    /// (or since the watch was made), or the watch ended.
    pub(crate) async fn changed(&self) {
        self.signal.notify.notified().await;
    }

    /// Whether notifications still arrive: false once the directory was
    /// removed or the reader stopped.
    pub(crate) fn alive(&self) -> bool {
        !self.signal.dead.load(Ordering::SeqCst)
    }
}

#[cfg(target_os = "linux")]
impl Drop for FileWatch {
    fn drop(&mut self) {
        inotify::unregister(&self.registration);
    }
}

#[cfg(target_os = "linux")]
mod inotify {
    //! The process's inotify instance and its reader thread.

    use std::collections::HashMap;
    use std::ffi::OsString;
    use std::mem::MaybeUninit;
    use std::os::unix::ffi::OsStrExt as _;
    use std::path::Path;
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

    use rustix::fd::OwnedFd;
    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, Reader, WatchFlags};
    use rustix::io::Errno;

    use super::Signal;

    /// What a directory is watched for: its files' contents and names.
    const EVENTS: WatchFlags = WatchFlags::MODIFY
        .union(WatchFlags::CREATE)
        .union(WatchFlags::DELETE)
        .union(WatchFlags::MOVED_FROM)
        .union(WatchFlags::MOVED_TO)
        .union(WatchFlags::ONLYDIR)
        .union(WatchFlags::EXCL_UNLINK);

    /// The process's instance, made at the first watch (and again after a
    /// failure, at a later one).
    static INSTANCE: Mutex<Option<Arc<Instance>>> = Mutex::new(None);

    /// One inotify instance and who listens to it.
    #[derive(Debug)]
    struct Instance {
        fd: OwnedFd,
        state: Mutex<State>,
    }

    /// The watched directories, by watch descriptor.
    #[derive(Debug, Default)]
    struct State {
        next_id: u64,
        /// False once the reader thread stopped.
        reading: bool,
        dirs: HashMap<i32, Vec<Listener>>,
    }

    /// One [`FileWatch`](super::FileWatch)'s files and signal.
    #[derive(Debug)]
    struct Listener {
        id: u64,
        names: Vec<OsString>,
        signal: Arc<Signal>,
    }

    /// Where a [`FileWatch`](super::FileWatch) is registered.
    #[derive(Debug)]
    pub(super) struct Registration {
        instance: Arc<Instance>,
        wd: i32,
        id: u64,
    }

    fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The process's instance, made (with its reader thread) if there is
    /// none or the last one stopped.
    fn instance() -> Option<Arc<Instance>> {
        let mut current = lock(&INSTANCE);
        if let Some(instance) = current.as_ref().filter(|i| lock(&i.state).reading) {
            return Some(instance.clone());
        }
        let fd = inotify::init(CreateFlags::CLOEXEC).ok()?;
        let instance = Arc::new(Instance {
            fd,
            state: Mutex::new(State {
                reading: true,
                ..State::default()
            }),
        });
        let reader = instance.clone();
        std::thread::Builder::new()
            .name("lf-handoff-inotify".into())
            .spawn(move || read_events(&reader))
            .ok()?;
        *current = Some(instance.clone());
        Some(instance)
    }

    pub(super) fn register(
        dir: &Path,
        names: &[OsString],
        signal: &Arc<Signal>,
    ) -> Option<Registration> {
        let instance = instance()?;
        let mut state = lock(&instance.state);
        // The kernel gives a directory already watched by this instance
        // its existing descriptor, so each directory is watched once.
        let wd = inotify::add_watch(&instance.fd, dir, EVENTS).ok()?;
        state.next_id += 1;
        let id = state.next_id;
        state.dirs.entry(wd).or_default().push(Listener {
            id,
            names: names.to_vec(),
            signal: signal.clone(),
        });
        drop(state);
        Some(Registration { instance, wd, id })
    }

    pub(super) fn unregister(registration: &Registration) {
        let Registration { instance, wd, id } = registration;
        let mut state = lock(&instance.state);
        let Some(listeners) = state.dirs.get_mut(wd) else {
            return;
        };
        listeners.retain(|listener| listener.id != *id);
        if listeners.is_empty() {
            state.dirs.remove(wd);
            // Fails only if the kernel removed the watch already (the
            // directory is gone); nothing is left to undo then.
            let _ = inotify::remove_watch(&instance.fd, *wd);
        }
    }

    /// The reader thread: hands every event to the listeners it concerns
    /// until reading fails, then ends every watch.
    fn read_events(instance: &Instance) {
        // Room for many events; one needs at most 16 bytes and a name of
        // up to 256.
        let mut buffer = [MaybeUninit::<u8>::uninit(); 8192];
        let mut reader = Reader::new(&instance.fd, &mut buffer);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::INTR) => continue,
                Err(_) => break,
            };
            let flags = event.events();
            let mut state = lock(&instance.state);
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were lost: any file may have changed.
                for listener in state.dirs.values().flatten() {
                    listener.signal.wake();
                }
            } else if flags.contains(ReadFlags::IGNORED) {
                // The kernel removed the watch: the directory is gone.
                for listener in state.dirs.remove(&event.wd()).into_iter().flatten() {
                    listener.signal.end();
                }
            } else if let (Some(listeners), Some(name)) =
                (state.dirs.get(&event.wd()), event.file_name())
            {
                let name = name.to_bytes();
                for listener in listeners {
                    if listener.names.iter().any(|n| n.as_bytes() == name) {
                        listener.signal.wake();
                    }
                }
            }
        }
        let mut state = lock(&instance.state);
        state.reading = false;
        for listener in state.dirs.values().flatten() {
            listener.signal.end();
        }
        state.dirs.clear();
    }
}

/// The identity of a file (device and inode), to notice that a store's
/// file or directory was deleted or replaced while it was watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    dev: u64,
    ino: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` now; `None` when it is missing.
    pub(crate) fn of(path: &std::path::Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|meta| Self {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// How often a source that checks a file checks that it is still there.
pub(crate) const FILE_CHECK: Duration = Duration::from_secs(1);

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn woken(watch: &FileWatch) -> bool {
        tokio::time::timeout(Duration::from_secs(10), watch.changed())
            .await
            .is_ok()
    }

    /// Whether `watch` was woken and not yet told (a stored wake answers
    /// at once).
    async fn pending(watch: &FileWatch) -> bool {
        tokio::time::timeout(Duration::ZERO, watch.changed())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_write_to_a_watched_file_wakes_every_watch_of_it_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let names = [OsString::from("a.db"), OsString::from("a.db-wal")];
        let first = FileWatch::new(dir.path(), &names).unwrap();
        let second = FileWatch::new(dir.path(), &names).unwrap();
        let sentinel = FileWatch::new(dir.path(), &[OsString::from("b.db")]).unwrap();
        let quiet = FileWatch::new(dir.path(), &[OsString::from("q.db")]).unwrap();

        std::fs::write(dir.path().join("a.db-wal"), b"frame").unwrap();
        assert!(woken(&first).await);
        assert!(woken(&second).await);
        // Another file of the same directory wakes nobody else: the events
        // are handed out in order, so once the sentinel's file woke it,
        // the other file's events were handed out too.
        std::fs::write(dir.path().join("c.db"), b"x").unwrap();
        std::fs::write(dir.path().join("b.db"), b"x").unwrap();
        assert!(woken(&sentinel).await);
        assert!(!pending(&quiet).await);

        // A dropped watch leaves the others of its directory working.
        drop(second);
        while pending(&first).await {}
        std::fs::write(dir.path().join("a.db"), b"page").unwrap();
        assert!(woken(&first).await);
        assert!(first.alive());
    }

    #[tokio::test]
    async fn a_removed_directory_ends_its_watches() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("store");
        std::fs::create_dir(&dir).unwrap();
        let watch = FileWatch::new(&dir, &[OsString::from("a.db")]).unwrap();
        assert!(watch.alive());
        std::fs::remove_dir(&dir).unwrap();
        assert!(woken(&watch).await);
        assert!(!watch.alive());
    }

    #[test]
    fn a_directory_that_does_not_exist_gives_no_watch() {
        let parent = tempfile::tempdir().unwrap();
        assert!(FileWatch::new(&parent.path().join("missing"), &[OsString::from("a")]).is_none());
    }
}

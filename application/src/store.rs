//! The [`Store`]: the handle an orchestrator holds, over whichever
//! [`Registry`] runs it.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_domain::interactive_handoff::Actor;
use time::OffsetDateTime;

use crate::error::StoreResult;
use crate::local::{Local, StorePorts};
use crate::registry::{HandleSettings, Registry};

/// The handoff registry: the handle an orchestrator links against.
///
/// A store is a cheap handle over one [`Registry`]: the one over a
/// backend's storage ports ([`Store::new`]), or a client of a served
/// registry. Every operation is a method of the registry's traits,
/// callable on the store as it is (it dereferences to `dyn Registry`):
///
/// | what | methods | contract |
/// | --- | --- | --- |
/// | parents | [`Parents`](crate::Parents): `create_wave`, `create_project_session`, `create_task_session`, `record_body`, `get_parent`, `get_task_pr`, `list_parents` | C10 |
/// | handoffs | [`Handoffs`](crate::Handoffs): `open_interactive_handoff`, `get_interactive_handoff`, `list_interactive_handoffs`, `attach_interactive_handoff`, `finish_interactive_handoff`, `extend_interactive_handoff`, `claim_interactive_handoff_wake`, `history` | C1-C7, C9, C12-C15 |
/// | waiting | [`Waiting`](crate::Waiting): `watch`, `wait` | C16 |
/// | upkeep | [`Upkeep`](crate::Upkeep): `expire_due`, `prune`, `export`, `import` | C14, C17 |
///
/// What the store adds on top is what every registry shares: the actor a
/// handle names in the history ([`with_actor`](Self::with_actor)), the
/// window in which it rides out an unreachable backend
/// ([`with_retry_window`](Self::with_retry_window)), and the service's
/// revocations read at the registry's clock ([`revoke`](Self::revoke),
/// [`is_revoked`](Self::is_revoked)).
///
/// Cheap to clone; clones share the same registry.
#[derive(Clone)]
pub struct Store {
    registry: Arc<dyn Registry>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Store").field(&self.registry).finish()
    }
}

impl From<Arc<dyn Registry>> for Store {
    fn from(registry: Arc<dyn Registry>) -> Self {
        Self { registry }
    }
}

impl Deref for Store {
    type Target = dyn Registry;

    fn deref(&self) -> &Self::Target {
        &*self.registry
    }
}

impl Store {
    /// A store over a backend's ports. Its history names this process as
    /// the actor ([`this_process_actor`](crate::this_process_actor)) until
    /// [`with_actor`](Self::with_actor) says otherwise, and it retries a
    /// call that finds the server unreachable for
    /// [`DEFAULT_RETRY_WINDOW`](crate::DEFAULT_RETRY_WINDOW).
    pub fn new(ports: StorePorts) -> Self {
        Self {
            registry: Arc::new(Local::new(ports)),
        }
    }

    /// This handle, naming `actor` in the history of every change it makes
    /// (C15). Other clones keep their own actor. On a served registry the
    /// server names the caller's token instead (C20).
    #[must_use]
    pub fn with_actor(&self, actor: Actor) -> Self {
        self.with_settings(HandleSettings {
            actor,
            ..self.settings().clone()
        })
    }

    /// This handle, retrying a call that finds the backend unreachable for
    /// at most `window` after the first failure (C18, transient faults).
    /// `Duration::ZERO` fails at once. Other clones keep their own window.
    #[must_use]
    pub fn with_retry_window(&self, window: Duration) -> Self {
        self.with_settings(HandleSettings {
            retry_window: window,
            ..self.settings().clone()
        })
    }

    fn with_settings(&self, settings: HandleSettings) -> Self {
        Self {
            registry: self.registry.with_settings(settings),
        }
    }

    /// Revokes `key` (a key the service derives from what it revokes, such
    /// as a sign-in session; 1 to 128 bytes, no control characters) until
    /// `until`, when it would have run out anyway; every handle on the
    /// store, in every process, then finds it revoked. For the service: an
    /// orchestrator has no use for it.
    ///
    /// # Errors
    /// `InvalidInput` for a bad key (and on a store served over HTTP,
    /// whose revocations belong to the server); `Unavailable` on storage
    /// failure.
    pub async fn revoke(&self, key: &str, until: OffsetDateTime) -> StoreResult<()> {
        self.registry.revoke(key, until, self.now()).await
    }

    /// Whether `key` is revoked now.
    ///
    /// # Errors
    /// As [`revoke`](Self::revoke).
    pub async fn is_revoked(&self, key: &str) -> StoreResult<bool> {
        self.registry.is_revoked(key, self.now()).await
    }
}

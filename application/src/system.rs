//! The production clock and id source, and id generation for every id type.
//!
//! These read the system clock and a random source, which is why they live
//! here and not in the domain.

use lf_handoff_domain::id::{
    InteractiveHandoffId, ProjectSessionId, TaskPrId, TaskSessionId, WaveId,
};
use lf_handoff_domain::interactive_handoff::Actor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::ports::{Clock, IdSource};

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// Generates UUID v7 handoff ids, which sort by creation time.
#[derive(Debug, Clone, Copy, Default)]
pub struct UuidV7Ids;

impl IdSource for UuidV7Ids {
    fn new_handoff_id(&self) -> InteractiveHandoffId {
        InteractiveHandoffId::new()
    }
}

/// The actor a store names in its history when nobody set one (C15):
/// `user@host (pid N)`, from `$USER` (or `$LOGNAME`), the kernel's host
/// name (or `$HOSTNAME`) and this process's id.
pub fn this_process_actor() -> Actor {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    Actor::of_process(&user, &host, std::process::id())
}

/// Fresh ids for every id type: `WaveId::new()`, `TaskSessionId::new()`, ...
///
/// Bring the trait into scope (`use lf_handoff_application::GenerateId;`) to
/// call `new()` on an id type.
pub trait GenerateId: Sized {
    /// A fresh UUID v7 id.
    fn new() -> Self;
}

macro_rules! generate {
    ($($name:ident),*) => {$(
        impl GenerateId for $name {
            fn new() -> Self {
                Self::from_uuid(Uuid::now_v7())
            }
        }
    )*};
}

generate!(
    WaveId,
    ProjectSessionId,
    TaskSessionId,
    TaskPrId,
    InteractiveHandoffId
);

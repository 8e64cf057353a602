//! The JSON shapes the command line prints with `--json` and the service
//! answers with (docs/CLI.md's table): defined once here, so the two
//! cannot differ.
//!
//! The records themselves (a handoff, a census row, an event, a wave, ...)
//! are the domain's serde forms; this module adds the wrappers.

use lf_handoff_application::ArchiveSummary;
use lf_handoff_domain::interactive_handoff::InteractiveHandoff;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// A handoff as every command prints it with `--json` (`Handoff`): the
/// record's fields, and `due`: whether it is active with its deadline
/// passed, so that only an expiry can still happen to it (C14).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HandoffJson {
    /// The record.
    #[serde(flatten)]
    pub handoff: InteractiveHandoff,
    /// Whether it was due when it was printed.
    pub due: bool,
    /// A signed link where a person sees and answers the handoff without
    /// signing in (C21), acting as the caller (`link:NAME`): only in the
    /// service's answers to a token of scope `person`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// The link is a credential (whoever holds it acts with it): `Debug`
/// says only whether there is one.
impl std::fmt::Debug for HandoffJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandoffJson")
            .field("handoff", &self.handoff)
            .field("due", &self.due)
            .field("link", &self.link.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl HandoffJson {
    /// `handoff` as printed at `now`.
    pub fn new(handoff: InteractiveHandoff, now: OffsetDateTime) -> Self {
        Self {
            due: handoff.is_due(now),
            handoff,
            link: None,
        }
    }

    /// The same, carrying `link`.
    pub fn with_link(mut self, link: Option<String>) -> Self {
        self.link = link;
        self
    }
}

/// The JSON of `open` (`POST /v1/handoffs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Opened {
    /// True if and only if this call created the handoff.
    pub created: bool,
    /// The handoff that answers the request: the one created, or the one
    /// reused (the parent's active one, or its handoff for the step).
    pub handoff: HandoffJson,
}

/// The JSON of `claim-wake` (`POST /v1/handoffs/{id}/claim-wake`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Claimed {
    /// True if and only if the given generation holds the wake.
    pub claimed: bool,
    /// The generation that holds the wake after the claim: the given one,
    /// another one, or (never after a claim that returned) none.
    pub holder: Option<u32>,
    /// The handoff as the claim left it (read in the claim's own change).
    /// Optional in the JSON for clients of the first server of this
    /// route, which read it after the claim and sent `null` when a prune
    /// came between.
    pub handoff: Option<HandoffJson>,
}

impl Claimed {
    /// The reply of a claim by `generation`, `claimed` or not, with the
    /// handoff as the claim left it, at `now`.
    pub fn new(
        claimed: bool,
        generation: u32,
        handoff: Option<InteractiveHandoff>,
        now: OffsetDateTime,
    ) -> Self {
        Self {
            claimed,
            holder: match &handoff {
                Some(handoff) => handoff.wake_claimed_by_generation,
                None => claimed.then_some(generation),
            },
            handoff: handoff.map(|handoff| HandoffJson::new(handoff, now)),
        }
    }
}

/// The JSON of `prune` (`POST /v1/prune`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Pruned {
    /// Handoffs removed, or that would be removed.
    pub handoffs: u64,
    /// Their history events.
    pub events: u64,
    /// Whether nothing was removed (a dry run).
    pub dry_run: bool,
    /// The cutoff: handoffs finished before it.
    #[serde(with = "time::serde::rfc3339")]
    pub finished_before: OffsetDateTime,
}

/// The JSON of `export` and `import` (`POST /v1/import`): what was
/// written or loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Counts {
    /// Waves, project sessions and task sessions.
    pub parents: u64,
    /// Task PRs.
    pub task_prs: u64,
    /// Handoffs.
    pub handoffs: u64,
    /// History events.
    pub events: u64,
    /// The last event position the store had given.
    pub last_position: u64,
}

impl From<&ArchiveSummary> for Counts {
    fn from(summary: &ArchiveSummary) -> Self {
        Self {
            parents: summary.parents,
            task_prs: summary.task_prs,
            handoffs: summary.handoffs,
            events: summary.events,
            last_position: summary.last_position,
        }
    }
}

/// The answer of the long poll `GET /v1/handoffs/{id}/wait`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WaitJson {
    /// Whether the handoff has ended (finished or expired); `false` when
    /// the timeout passed first, or the service is shutting down.
    pub ended: bool,
    /// The handoff as last read.
    pub handoff: HandoffJson,
}

/// The answer of `/healthz` (the process answers) and `/readyz` (the store
/// answers; when it does not, `/readyz` is a 503 with the error object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// The store's backend (`sqlite`, `sled`, `postgres`).
    pub backend: String,
}

/// The answer of `POST /v1/handoffs/{id}/link`: a signed link (C21). Its
/// `Debug` hides the link, a credential.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LinkJson {
    /// The handoff's id.
    pub id: String,
    /// The link: `{public URL}/h/{id}?for=...&exp=...&sig=...`.
    pub link: String,
    /// The name it was made for (`link:NAME` is the actor of what is done
    /// with it).
    #[serde(rename = "for")]
    pub holder: String,
    /// When it stops working.
    #[serde(with = "time::serde::rfc3339")]
    pub expires: OffsetDateTime,
}

impl std::fmt::Debug for LinkJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkJson")
            .field("id", &self.id)
            .field("link", &"<redacted>")
            .field("holder", &self.holder)
            .field("expires", &self.expires)
            .finish()
    }
}

//! The `http` backend: a client of a registry served by `lf-handoff
//! serve` (C24), implementing [`Registry`] over the routes of C19, so an
//! orchestrator without database access, and the command line, use the
//! same `Store`, the same types and the same error kinds as on a local
//! store.
//!
//! - [`config`]: the `http://` / `https://` store URL and the token.
//! - `client`: the transport: the token, the retry window, the error
//!   object turned back into the `StoreError` of the same kind.
//! - `plain`: the connections of an `http://` service's calls that
//!   answer one JSON body, driven by the calling task.
//! - `events`: `watch` over the event stream, resumed with
//!   `Last-Event-ID`.
//!
//! What differs from a local store, by design:
//! - **The actor is the token's name**: the service names the token in
//!   the history whatever [`Registry::with_actor`] says (C20), so a
//!   client cannot pass for someone else.
//! - **`now`** is this machine's clock; deadlines given as durations
//!   (`expires_in`, `extend --by`) count from the service's.
//! - **`wait`** rides long polls of at most 5 minutes each, one after
//!   another until its timeout; **`watch`** one event stream, resumed
//!   after its last position when the connection breaks.
//! - **`prune`** runs in the service's batches; the batch size asked for
//!   is not sent.
//! - **`import`** sends an input of up to 1 MiB whole, with its length;
//!   a longer one as it reads it (a chunked body, at most about 1.3 MiB
//!   held). A refusal the service makes before reading the body (a token,
//!   a store that is not empty) ends the call at once; when it closed the
//!   connection under the body, an empty import of the same route (which
//!   changes nothing) finds it out. An input larger than the service
//!   takes is refused once its limit (1 GiB by default) has been sent.
//! - Unreachable services and transient errors (`Retry-After`) are
//!   retried for the handle's retry window, as a local store retries its
//!   backend; an import, as on a local store, is sent once.

mod client;
pub mod config;
mod events;
mod plain;

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt as _;
use lf_handoff_api::requests::{
    parent_query_string, ClaimWake, CreateTask, Extend, ListParams, OpenRequest, Prune, Reason,
    Summary, WaitParams, MAX_PAGE, MAX_WAIT,
};
use lf_handoff_api::routes::content_type;
use lf_handoff_api::{Claimed, Counts, HandoffJson, Opened, Pruned, WaitJson};
use lf_handoff_application::archive::Progress;
use lf_handoff_application::{
    ArchiveSummary, ClaimedWake, Deliveries, DeliveryCursor, HandleSettings, Handoffs, ListQuery,
    ParentQuery, Parents, PruneCount, PruneOptions, Registry, Revocations, StoreError, StoreResult,
    UnavailableKind, Upkeep, Waited, Waiting, WatchFilter, WatchFrom, Watcher,
    DEFAULT_RETRY_WINDOW,
};
use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::id::{InteractiveHandoffId, TaskPrId};
use lf_handoff_domain::interactive_handoff::{
    check_outcome_answer, check_person_outcome, Answer, HandoffEvent, InteractiveHandoff,
    InteractiveHandoffOutcome, InteractiveHandoffParent, OpenInteractiveHandoff,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::{TaskPr, TaskSession};
use lf_handoff_domain::wave::Wave;
use time::OffsetDateTime;

use client::{Call, Client, Shared};
pub use config::{HttpConfig, Token, TOKEN_ENV};
use events::ServiceEvents;

/// A registry served over HTTP.
#[derive(Debug, Clone)]
pub(crate) struct ServiceRegistry {
    client: Shared,
    settings: HandleSettings,
}

impl ServiceRegistry {
    /// The client of the service `config` names. Nothing is sent yet: the
    /// first call finds out whether the service answers and takes the
    /// token.
    ///
    /// # Errors
    /// As reading the token and the `ca` file.
    pub(crate) fn open(config: &HttpConfig) -> StoreResult<Arc<dyn Registry>> {
        Ok(Arc::new(Self {
            client: Arc::new(Client::new(config)?),
            settings: HandleSettings::default(),
        }))
    }

    async fn json<T: serde::de::DeserializeOwned>(&self, call: &Call<'_>) -> StoreResult<T> {
        self.client.json(call, self.settings.retry_window).await
    }

    /// `Some(T)`, or `None` when the service says the thing does not exist.
    async fn found<T: serde::de::DeserializeOwned>(
        &self,
        call: &Call<'_>,
    ) -> StoreResult<Option<T>> {
        match self.json(call).await {
            Ok(value) => Ok(Some(value)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Creates a parent: `POST` of `body` to `path`; the answer (the
    /// parent as stored) must be JSON, and is not kept.
    async fn create(&self, path: &str, body: &impl serde::Serialize) -> StoreResult<()> {
        self.json::<serde_json::Value>(&Call::post_json(path, body)?)
            .await
            .map(drop)
    }

    async fn handoff(&self, call: &Call<'_>) -> StoreResult<InteractiveHandoff> {
        Ok(self.json::<HandoffJson>(call).await?.handoff)
    }
}

/// A signed link (C21) to handoff `id` from the service `config` names
/// (`POST /v1/handoffs/{id}/link`): what `lf-handoff link` asks a
/// service for, since the link secret is the service's.
///
/// # Errors
/// As the service answers (`NotFound` for an unknown handoff, `Forbidden`
/// for a token that may not make links, `InvalidInput` for a bad name or
/// time), or `Unavailable` when it cannot be reached.
pub async fn make_link(
    config: &HttpConfig,
    id: &InteractiveHandoffId,
    request: &lf_handoff_api::requests::LinkRequest,
) -> StoreResult<lf_handoff_api::LinkJson> {
    let client = Client::new(config)?;
    client
        .json(
            &Call::post_json(&handoff_path(id, "/link"), request)?,
            DEFAULT_RETRY_WINDOW,
        )
        .await
}

/// `/v1/handoffs/{id}` and what follows it.
fn handoff_path(id: &InteractiveHandoffId, rest: &str) -> String {
    format!("/v1/handoffs/{}{rest}", segment(id.as_str()))
}

/// The path of a parent: `/v1/waves/{id}`, `/v1/projects/{id}` or
/// `/v1/tasks/{id}`.
fn parent_path(reference: &InteractiveHandoffParent) -> String {
    let collection = match reference {
        InteractiveHandoffParent::Wave(_) => "waves",
        InteractiveHandoffParent::Project(_) => "projects",
        InteractiveHandoffParent::Task(_) => "tasks",
    };
    format!("/v1/{collection}/{}", segment(reference.id_str()))
}

/// `text` as one path segment: every byte but the unreserved ones escaped.
fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A parent as the service answers with it: the record of its kind.
fn parent_of(
    reference: &InteractiveHandoffParent,
    bytes: serde_json::Value,
) -> StoreResult<Parent> {
    let parent = match reference {
        InteractiveHandoffParent::Wave(_) => serde_json::from_value(bytes).map(Parent::Wave),
        InteractiveHandoffParent::Project(_) => serde_json::from_value(bytes).map(Parent::Project),
        InteractiveHandoffParent::Task(_) => serde_json::from_value(bytes).map(Parent::Task),
    };
    parent.map_err(|e| {
        StoreError::unavailable(
            UnavailableKind::Other,
            format!(
                "the service answered with something that is not a {}: {e}",
                reference.kind()
            ),
        )
    })
}

#[async_trait]
impl Registry for ServiceRegistry {
    fn backend(&self) -> &'static str {
        "http"
    }

    fn settings(&self) -> &HandleSettings {
        &self.settings
    }

    fn with_settings(&self, settings: HandleSettings) -> Arc<dyn Registry> {
        Arc::new(Self {
            settings,
            ..self.clone()
        })
    }

    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

#[async_trait]
impl Parents for ServiceRegistry {
    async fn create_wave(&self, wave: &Wave) -> StoreResult<()> {
        self.create("/v1/waves", wave).await
    }

    async fn create_project_session(&self, project: &ProjectSession) -> StoreResult<()> {
        self.create("/v1/projects", project).await
    }

    async fn create_task_session(&self, task: &TaskSession, pr: &TaskPr) -> StoreResult<()> {
        let body = CreateTask {
            task: task.clone(),
            pr: pr.clone(),
        };
        self.create("/v1/tasks", &body).await
    }

    async fn get_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Parent>> {
        let path = parent_path(reference);
        match self.found(&Call::get(&path)).await? {
            Some(value) => parent_of(reference, value).map(Some),
            None => Ok(None),
        }
    }

    async fn list_parents(&self, query: ParentQuery) -> StoreResult<Vec<Parent>> {
        // Pages of at most MAX_PAGE; at least one call, so an unknown wave
        // or project is `NotFound` even for `limit` 0, as on a local store.
        let wanted = query.limit.unwrap_or(usize::MAX);
        let mut params = query;
        let mut parents: Vec<Parent> = Vec::new();
        loop {
            let page = wanted.saturating_sub(parents.len()).clamp(1, MAX_PAGE);
            params.limit = Some(page);
            let call = Call::get("/v1/parents").query(parent_query_string(&params));
            let rows: Vec<Parent> = self.json(&call).await?;
            let read = rows.len();
            params.after = rows.last().map(Parent::reference);
            parents.extend(rows);
            if read < page || parents.len() >= wanted {
                break;
            }
        }
        parents.truncate(wanted);
        Ok(parents)
    }

    async fn get_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        let path = format!("/v1/task-prs/{}", segment(id.as_str()));
        self.found(&Call::get(&path)).await
    }

    async fn record_body(
        &self,
        reference: &InteractiveHandoffParent,
        process: ChildProcessGeneration,
    ) -> StoreResult<Parent> {
        let path = format!("{}/body", parent_path(reference));
        let value = self.json(&Call::post_json(&path, &process)?).await?;
        parent_of(reference, value)
    }
}

#[async_trait]
impl Handoffs for ServiceRegistry {
    async fn open_interactive_handoff(
        &self,
        request: OpenInteractiveHandoff,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let body = OpenRequest {
            request,
            expires_in: None,
        };
        let opened: Opened = self.json(&Call::post_json("/v1/handoffs", &body)?).await?;
        Ok((opened.handoff.handoff, opened.created))
    }

    async fn get_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<InteractiveHandoff>> {
        let path = handoff_path(id, "");
        Ok(self
            .found::<HandoffJson>(&Call::get(&path))
            .await?
            .map(|json| json.handoff))
    }

    async fn list_interactive_handoffs(
        &self,
        query: ListQuery,
    ) -> StoreResult<Vec<InteractiveHandoff>> {
        let mut params = ListParams {
            parent: query.parent,
            active: query.active_only,
            status: query.statuses,
            home: query.home,
            older_than: None,
            created_before: query.created_before,
            due_within: None,
            due_by: query.due_by,
            after: query.after,
            limit: None,
            newest_first: query.newest_first,
        };
        let mut handoffs = Vec::new();
        if query.limit == Some(0) {
            // No page to read, but an unknown start is still `NotFound`,
            // as on a local store: ask for one row and keep none.
            if params.after.is_some() {
                params.limit = Some(1);
                let call = Call::get("/v1/handoff-records").query(params.to_query());
                self.json::<Vec<HandoffJson>>(&call).await?;
            }
            return Ok(handoffs);
        }
        loop {
            let page = query
                .limit
                .map_or(MAX_PAGE, |wanted| wanted.saturating_sub(handoffs.len()))
                .min(MAX_PAGE);
            if page == 0 {
                break;
            }
            params.limit = Some(page);
            let call = Call::get("/v1/handoff-records").query(params.to_query());
            let rows: Vec<HandoffJson> = self.json(&call).await?;
            let got = rows.len();
            if let Some(last) = rows.last() {
                params.after = Some(last.handoff.id.clone());
            }
            handoffs.extend(rows.into_iter().map(|json| json.handoff));
            if got < page {
                break;
            }
        }
        Ok(handoffs)
    }

    async fn attach_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff> {
        self.handoff(&Call::post(&handoff_path(id, "/attach")))
            .await
    }

    async fn finish_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
        answer: Option<&Answer>,
    ) -> StoreResult<InteractiveHandoff> {
        // The domain's checks, as a local store makes them: "expired" is no
        // person's outcome, and there is no route for it; a failure
        // carries no answer.
        check_person_outcome(outcome).map_err(StoreError::from)?;
        check_outcome_answer(outcome, answer).map_err(StoreError::from)?;
        let answer = answer.cloned();
        let (rest, body) = match outcome {
            InteractiveHandoffOutcome::Completed { summary } => (
                "/complete",
                serde_json::to_value(Summary {
                    summary: summary.clone(),
                    answer: answer.clone(),
                }),
            ),
            InteractiveHandoffOutcome::HandedBack { summary } => (
                "/back",
                serde_json::to_value(Summary {
                    summary: summary.clone(),
                    answer: answer.clone(),
                }),
            ),
            InteractiveHandoffOutcome::Failed { reason } => (
                "/fail",
                serde_json::to_value(Reason {
                    reason: reason.clone(),
                }),
            ),
            InteractiveHandoffOutcome::Expired => {
                return Err(StoreError::InvalidInput(
                    "a handoff cannot be finished as expired".into(),
                ))
            }
        };
        let body = body.map_err(|e| {
            StoreError::InvalidInput(format!("the outcome cannot be encoded as JSON: {e}"))
        })?;
        let path = handoff_path(id, rest);
        self.handoff(&Call::post_json(&path, &body)?).await
    }

    async fn extend_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        until: OffsetDateTime,
    ) -> StoreResult<InteractiveHandoff> {
        let path = handoff_path(id, "/extend");
        let body = Extend {
            until: Some(until),
            by: None,
        };
        self.handoff(&Call::post_json(&path, &body)?).await
    }

    async fn claim_interactive_handoff_wake(
        &self,
        id: &InteractiveHandoffId,
        generation: u32,
    ) -> StoreResult<ClaimedWake> {
        let path = handoff_path(id, "/claim-wake");
        let answer: Claimed = self
            .json(&Call::post_json(&path, &ClaimWake { generation })?)
            .await?;
        let handoff = answer.handoff.ok_or_else(|| {
            StoreError::unavailable(
                UnavailableKind::Other,
                format!("the service's answer to the claim of {id} carries no handoff"),
            )
        })?;
        Ok(ClaimedWake {
            claimed: answer.claimed,
            handoff: handoff.handoff,
        })
    }

    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        self.json(&Call::get(&handoff_path(id, "/history"))).await
    }
}

#[async_trait]
impl Waiting for ServiceRegistry {
    async fn watch(&self, from: WatchFrom, filter: WatchFilter) -> StoreResult<Watcher> {
        let position = match from {
            WatchFrom::After(position) => Some(position),
            WatchFrom::Now => None,
        };
        let events = ServiceEvents::open(
            self.client.clone(),
            self.settings.retry_window,
            position,
            filter,
        )
        .await?;
        Ok(Watcher::new(Box::new(events)))
    }

    async fn wait(
        &self,
        id: &InteractiveHandoffId,
        timeout: Option<Duration>,
    ) -> StoreResult<Waited> {
        let deadline = timeout.map(|timeout| tokio::time::Instant::now() + timeout);
        let path = handoff_path(id, "/wait");
        loop {
            let poll = deadline.map_or(MAX_WAIT, |deadline| {
                deadline
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(MAX_WAIT)
            });
            let call = Call::get(&path)
                .query(WaitParams { timeout: poll }.to_query())
                .timeout(Some(poll + client::CALL_TIMEOUT));
            let answer: WaitJson = self.json(&call).await?;
            if answer.ended {
                return Ok(Waited::Ended(answer.handoff.handoff));
            }
            if deadline.is_some_and(|deadline| tokio::time::Instant::now() >= deadline) {
                return Ok(Waited::TimedOut(answer.handoff.handoff));
            }
        }
    }
}

#[async_trait]
impl Upkeep for ServiceRegistry {
    async fn expire_due(&self) -> StoreResult<Vec<InteractiveHandoff>> {
        // One call: the records come from the sweep's own changes.
        let expired: Vec<HandoffJson> = self.json(&Call::post("/v1/expire-records")).await?;
        Ok(expired.into_iter().map(|json| json.handoff).collect())
    }

    async fn prune(&self, options: PruneOptions) -> StoreResult<PruneCount> {
        let body = Prune {
            finished_before: options.finished_before,
            dry_run: options.dry_run,
            batch: Some(options.batch),
        };
        let pruned: Pruned = self.json(&Call::post_json("/v1/prune", &body)?).await?;
        Ok(PruneCount {
            handoffs: pruned.handoffs,
            events: pruned.events,
        })
    }

    async fn export(
        &self,
        out: &mut (dyn Write + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        let call = Call::get("/v1/export").timeout(None);
        let response = self.client.send(&call, self.settings.retry_window).await?;
        let mut body = response.bytes_stream();
        let mut last_line = Vec::new();
        let mut ended = false;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| self.client.unreachable(&call, &e))?;
            out.write_all(&chunk).map_err(|e| written(&e))?;
            remember_last_line(&mut last_line, &chunk, &mut ended);
        }
        out.flush().map_err(|e| written(&e))?;
        let summary = end_line(&last_line).filter(|_| ended).ok_or_else(|| {
            StoreError::unavailable(
                UnavailableKind::Unreachable,
                format!(
                    "the export from {} was cut short (no end line); what was written is not \
                     a whole export",
                    self.client.base()
                ),
            )
        })?;
        if let Some(mut progress) = progress {
            progress(&summary);
        }
        Ok(summary)
    }

    async fn import(
        &self,
        input: &mut (dyn BufRead + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        // Sent once, never again within the retry window (C18): an import
        // whose commit was acknowledged late would find the store not
        // empty. An input that ends within `WHOLE_IMPORT` goes as one body
        // with its length, like any call (written before the service can
        // answer on all but the slowest links, so a refusal comes back as
        // such); a longer one as it is read.
        let (head, ended) = read_head(input, WHOLE_IMPORT).map_err(|e| {
            StoreError::unavailable(
                UnavailableKind::of_io_error(&e),
                format!("cannot read the export to import: {e}"),
            )
        })?;
        let counts: Counts = if ended {
            let call = Call::post("/v1/import")
                .body(head, content_type::LINES)
                .timeout(None);
            self.client.json(&call, Duration::ZERO).await?
        } else {
            self.client
                .post_reader("/v1/import", content_type::LINES, head, input)
                .await?
        };
        let summary = ArchiveSummary {
            parents: counts.parents,
            task_prs: counts.task_prs,
            handoffs: counts.handoffs,
            events: counts.events,
            last_position: counts.last_position,
        };
        if let Some(mut progress) = progress {
            progress(&summary);
        }
        Ok(summary)
    }
}

/// Delivery cursors belong to the server that notifies: a served registry
/// keeps none of its own.
#[async_trait]
impl Deliveries for ServiceRegistry {
    async fn delivery_cursor(&self, _endpoint: &str) -> StoreResult<Option<DeliveryCursor>> {
        Err(served_cursors())
    }

    async fn swap_delivery_cursor(
        &self,
        _endpoint: &str,
        _expected: Option<u64>,
        _cursor: &DeliveryCursor,
    ) -> StoreResult<bool> {
        Err(served_cursors())
    }
}

/// Revocations belong to the server whose sign-ins they end: a served
/// registry keeps none of its own.
#[async_trait]
impl Revocations for ServiceRegistry {
    async fn revoke(
        &self,
        _key: &str,
        _until: OffsetDateTime,
        _now: OffsetDateTime,
    ) -> StoreResult<()> {
        Err(served_revocations())
    }

    async fn is_revoked(&self, _key: &str, _now: OffsetDateTime) -> StoreResult<bool> {
        Err(served_revocations())
    }
}

/// The largest import sent whole, with its length; a longer one is sent
/// as it is read.
const WHOLE_IMPORT: usize = 1024 * 1024;

/// Reads `input` until its end or until `limit` bytes were read: what was
/// read, and whether the input ended there.
fn read_head(input: &mut (dyn BufRead + Send), limit: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut head = Vec::new();
    while head.len() < limit {
        let read = match input.fill_buf() {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if read.is_empty() {
            return Ok((head, true));
        }
        let length = read.len().min(limit - head.len());
        head.extend_from_slice(&read[..length]);
        input.consume(length);
    }
    // An input of exactly `limit` bytes is whole too.
    loop {
        match input.fill_buf() {
            Ok(rest) => return Ok((head, rest.is_empty())),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
    }
}

/// The error of an export whose output refused a write.
fn written(error: &std::io::Error) -> StoreError {
    StoreError::unavailable(
        UnavailableKind::of_io_error(error),
        format!("cannot write the export: {error}"),
    )
}

/// Keeps the last whole line seen (its first [`MAX_END_LINE`] bytes) in
/// `line`, and whether the stream ends with a line end in `ended`, given
/// the next `chunk` of the stream.
fn remember_last_line(line: &mut Vec<u8>, chunk: &[u8], ended: &mut bool) {
    for piece in chunk.split_inclusive(|&byte| byte == b'\n') {
        if *ended {
            line.clear();
        }
        // Only the start of a long line is kept: an end line is short, and
        // a record's line (or a stream that never ends its line) must not
        // grow the client's memory.
        let room = MAX_END_LINE.saturating_sub(line.len());
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        *ended = piece.ends_with(b"\n");
    }
}

/// The most of an export's last line kept to read its end line from, which
/// holds a few counts.
const MAX_END_LINE: usize = 64 * 1024;

/// The counts of an export's end line.
fn end_line(line: &[u8]) -> Option<ArchiveSummary> {
    #[derive(serde::Deserialize)]
    struct End {
        end: ArchiveSummary,
    }
    serde_json::from_slice::<End>(line).ok().map(|end| end.end)
}

/// Delivery cursors are the server's own state: a served store does not
/// hand them out, and a server does not deliver for a served store.
fn served_cursors() -> StoreError {
    StoreError::InvalidInput(
        "delivery cursors belong to the server next to the store; a store served over HTTP \
         does not give them out (run `serve --notify` against the store itself)"
            .to_string(),
    )
}

/// Revocations are the server's own state, as delivery cursors are.
fn served_revocations() -> StoreError {
    StoreError::InvalidInput(
        "revocations belong to the server next to the store; a store served over HTTP does \
         not keep them (run `serve` against the store itself)"
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_escape_everything_but_unreserved_bytes() {
        assert_eq!(segment("ih_0190-abc.~_"), "ih_0190-abc.~_");
        assert_eq!(segment("a/b?c d%é"), "a%2Fb%3Fc%20d%25%C3%A9");
    }

    #[test]
    fn the_end_line_is_the_last_whole_line_of_an_export() {
        let mut line = Vec::new();
        let mut ended = false;
        for chunk in [
            &b"{\"format\":\"lf-handoff-export\",\"version\":1}\n{\"en"[..],
            b"d\":{\"parents\":1,\"task_prs\":0,\"handoffs\":2,\"events\":3,\"last_position\":4}}",
            b"\n",
        ] {
            remember_last_line(&mut line, chunk, &mut ended);
        }
        assert!(ended);
        let summary = end_line(&line).unwrap();
        assert_eq!((summary.handoffs, summary.last_position), (2, 4));
        // Cut short: no line end after the last line.
        let mut line = Vec::new();
        let mut ended = false;
        remember_last_line(&mut line, b"{\"format\":1}\n{\"end\":{}", &mut ended);
        assert!(!ended);
    }
}

//! The bodies and query parameters the service takes. Every body refuses
//! a field it does not know ([`strict`](crate::strict)), and every query a
//! parameter it does not know, so a misspelt option is an error, never
//! silently ignored.

use std::time::Duration;

use lf_handoff_application::{ListQuery, ParentQuery, StoreError, StoreResult};
use lf_handoff_domain::id::{InteractiveHandoffId, ProjectSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    Answer, InteractiveHandoffOutcome, InteractiveHandoffParent, InteractiveHandoffStatus,
    OpenInteractiveHandoff,
};
use lf_handoff_domain::parent::ParentKind;
use lf_handoff_domain::task::{TaskPr, TaskSession};
use lf_handoff_domain::wave_home::WaveHome;
use lf_handoff_domain::DomainError;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};
use utoipa::ToSchema;

use crate::duration;

/// The longest a long poll waits (`GET /v1/handoffs/{id}/wait?timeout=`).
pub const MAX_WAIT: Duration = Duration::from_secs(5 * 60);

/// How long a long poll waits without a `timeout`.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The most rows one `GET /v1/handoffs` answers (and its page size when
/// the query gives no `limit`): a client pages on with `after`, so a list
/// of any length is served in bounded memory.
pub const MAX_PAGE: usize = 1000;

/// `POST /v1/tasks`: a task session and its first PR, stored atomically.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    /// The task session.
    pub task: TaskSession,
    /// Its first PR.
    pub pr: TaskPr,
}

/// `POST /v1/handoffs`: the open request's fields, the step and the
/// deadline (C12, C14) among them. The deadline is `expires_at`, or
/// `expires_in` counted from the service's clock (`90s`, `15m`, `2h`,
/// `1d`, `2w`, `1h30m`); not both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OpenRequest {
    /// The request.
    #[serde(flatten)]
    pub request: OpenInteractiveHandoff,
    /// The deadline, this long from now (C14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<String>,
}

impl OpenRequest {
    /// The request, its deadline counted from `now` when it gives
    /// `expires_in`.
    ///
    /// # Errors
    /// `InvalidInput` for both deadlines at once, or an `expires_in` that
    /// is not a duration.
    pub fn into_open(self, now: OffsetDateTime) -> StoreResult<OpenInteractiveHandoff> {
        let mut request = self.request;
        match (request.options.expires_at, self.expires_in) {
            (Some(_), Some(_)) => {
                return Err(StoreError::InvalidInput(
                    "give expires_at or expires_in, not both".into(),
                ))
            }
            (_, None) => {}
            (None, Some(span)) => {
                request.options.expires_at = Some(after(now, &span, "expires_in")?)
            }
        }
        Ok(request)
    }
}

/// `POST /v1/handoffs/{id}/complete` and `/back`: what was done, or what
/// the agent continues from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// The summary.
    pub summary: String,
    /// The answer (C26): required by `/complete` on a handoff that asks
    /// with choices or a form, optional on `/back`; it must fit the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
}

/// `POST /v1/handoffs/{id}/fail`: why the work could not be done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// The reason.
    pub reason: String,
}

/// The outcome and answer `/complete` records.
pub fn completed(body: Summary) -> (InteractiveHandoffOutcome, Option<Answer>) {
    (
        InteractiveHandoffOutcome::Completed {
            summary: body.summary,
        },
        body.answer,
    )
}

/// The outcome and answer `/back` records.
pub fn handed_back(body: Summary) -> (InteractiveHandoffOutcome, Option<Answer>) {
    (
        InteractiveHandoffOutcome::HandedBack {
            summary: body.summary,
        },
        body.answer,
    )
}

/// The outcome `/fail` records, and its answer: none.
pub fn failed(body: Reason) -> (InteractiveHandoffOutcome, Option<Answer>) {
    (
        InteractiveHandoffOutcome::Failed {
            reason: body.reason,
        },
        None,
    )
}

/// `POST /v1/handoffs/{id}/extend`: the new deadline, `until` or `by` (a
/// duration from the service's clock now, not from the old deadline, so
/// a retried request sets the same deadline); exactly one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Extend {
    /// The new deadline.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub until: Option<OffsetDateTime>,
    /// The new deadline, this long from now (`90s`, `2h`, `1d`, ...).
    #[serde(default)]
    pub by: Option<String>,
}

impl Extend {
    /// The new deadline, `by` counted from `now`.
    ///
    /// # Errors
    /// `InvalidInput` unless exactly one of `until` and `by` is given, or
    /// for a `by` that is not a duration.
    pub fn until(self, now: OffsetDateTime) -> StoreResult<OffsetDateTime> {
        match (self.until, self.by) {
            (Some(until), None) => Ok(until),
            (None, Some(by)) => after(now, &by, "by"),
            _ => Err(StoreError::InvalidInput(
                "give the new deadline as until (RFC 3339) or by (a duration), exactly one".into(),
            )),
        }
    }
}

/// `POST /v1/handoffs/{id}/link`: who a signed link (C21) is for and how
/// long it works; both optional (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkRequest {
    /// The name the link is for: what its holder does is recorded as
    /// `link:NAME`. Default: the token's name.
    #[serde(default, rename = "for")]
    pub holder: Option<String>,
    /// How long the link works (`90s`, `2h`, `1d`). Default: until the
    /// handoff's deadline, else a day.
    #[serde(default)]
    pub valid_for: Option<String>,
}

impl LinkRequest {
    /// `valid_for` as a duration.
    ///
    /// # Errors
    /// `InvalidInput` for a `valid_for` that is not a duration.
    pub fn valid_for(&self) -> StoreResult<Option<Duration>> {
        self.valid_for
            .as_deref()
            .map(|text| duration::parse(text).map_err(|e| invalid(format!("valid_for: {e}"))))
            .transpose()
    }
}

/// `POST /v1/handoffs/{id}/claim-wake`: the claiming body's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimWake {
    /// The generation.
    pub generation: u32,
}

/// `POST /v1/prune`: remove the finished handoffs whose wake was claimed,
/// finished before the cutoff (C17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Prune {
    /// The cutoff (RFC 3339): handoffs finished strictly before it. A
    /// cutoff in the future prunes every finished handoff whose wake was
    /// claimed, as the library's `prune` does.
    #[serde(with = "time::serde::rfc3339")]
    pub finished_before: OffsetDateTime,
    /// Count what would be removed, and remove nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// At most this many handoffs per atomic write (at least 1; default
    /// the store's, 256).
    #[serde(default)]
    pub batch: Option<usize>,
}

/// The query of `GET /v1/handoffs`: the filters of `list` (and-ed) and
/// the page. `status` may repeat (any of them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// `parent=task:ts_...`: only this parent's handoffs.
    pub parent: Option<InteractiveHandoffParent>,
    /// `active=true`: only handoffs that are not finished.
    pub active: bool,
    /// `status=waiting&status=attached`: only handoffs in one of these.
    pub status: Vec<InteractiveHandoffStatus>,
    /// `home=user@local`: only handoffs whose work runs there.
    pub home: Option<WaveHome>,
    /// `older_than=2h`: only handoffs created more than this long ago.
    pub older_than: Option<Duration>,
    /// Only handoffs created before this time (`created_before`, RFC 3339):
    /// what a client whose clock is not the service's sends instead of
    /// `older_than`. Not both.
    pub created_before: Option<OffsetDateTime>,
    /// `due_within=1h`: only handoffs due within this long from now
    /// (active, the deadline at or before now plus this).
    pub due_within: Option<Duration>,
    /// Only handoffs due by this time (`due_by`, RFC 3339): what a client
    /// whose clock is not the service's sends instead of `due_within`.
    /// Not both.
    pub due_by: Option<OffsetDateTime>,
    /// `after=ih_...`: the page after this handoff.
    pub after: Option<InteractiveHandoffId>,
    /// `limit=N`: at most this many, at most [`MAX_PAGE`] (the default).
    pub limit: Option<usize>,
    /// `newest_first=true`: the list order reversed, so a page holds the
    /// newest and `after` pages towards older handoffs.
    pub newest_first: bool,
}

impl ListParams {
    /// Parses a query string (without the `?`).
    ///
    /// # Errors
    /// `InvalidInput` naming the parameter that is unknown, given twice
    /// (but `status`) or malformed.
    pub fn parse(query: &str) -> StoreResult<Self> {
        parse_query(
            query,
            LIST_PARAMETERS,
            &["status"],
            |params: &mut Self, key, value| {
                match key {
                    "parent" => params.parent = Some(parent(&value)?),
                    "active" => params.active = boolean("active", &value)?,
                    "status" => {
                        params
                            .status
                            .push(InteractiveHandoffStatus::parse(&value).ok_or_else(|| {
                                let names: Vec<&str> = InteractiveHandoffStatus::ALL
                                    .iter()
                                    .map(|status| status.as_str())
                                    .collect();
                                invalid(format!(
                                    "status {value:?} is unknown: use {}",
                                    names.join(", ")
                                ))
                            })?)
                    }
                    "home" => {
                        params.home = Some(
                            WaveHome::parse(&value).map_err(|e| invalid(format!("home: {e}")))?,
                        )
                    }
                    "older_than" => params.older_than = Some(span("older_than", &value)?),
                    "created_before" => {
                        params.created_before = Some(instant("created_before", &value)?)
                    }
                    "due_within" => params.due_within = Some(span("due_within", &value)?),
                    "due_by" => params.due_by = Some(instant("due_by", &value)?),
                    "after" => {
                        params.after = Some(
                            InteractiveHandoffId::parse(&value)
                                .map_err(|e| invalid(format!("after: {e}")))?,
                        )
                    }
                    "limit" => params.limit = Some(limit(&value)?),
                    "newest_first" => params.newest_first = boolean("newest_first", &value)?,
                    _ => return Ok(false),
                }
                Ok(true)
            },
        )
    }

    /// The query string (without the `?`) that [`parse`](Self::parse)
    /// reads back as these parameters.
    pub fn to_query(&self) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        if let Some(parent) = &self.parent {
            out.append_pair("parent", &parent.to_string());
        }
        if self.active {
            out.append_pair("active", "true");
        }
        for status in &self.status {
            out.append_pair("status", status.as_str());
        }
        if let Some(home) = &self.home {
            out.append_pair("home", &home.to_string());
        }
        if let Some(span) = self.older_than {
            out.append_pair("older_than", &duration::format(span));
        }
        if let Some(before) = self.created_before {
            out.append_pair("created_before", &rfc3339(before));
        }
        if let Some(span) = self.due_within {
            out.append_pair("due_within", &duration::format(span));
        }
        if let Some(by) = self.due_by {
            out.append_pair("due_by", &rfc3339(by));
        }
        if let Some(after) = &self.after {
            out.append_pair("after", after.as_str());
        }
        if let Some(limit) = self.limit {
            out.append_pair("limit", &limit.to_string());
        }
        if self.newest_first {
            out.append_pair("newest_first", "true");
        }
        out.finish()
    }

    /// The store's query, `older_than` counted back from `now` and
    /// `due_within` forward from it; the page is at most [`MAX_PAGE`].
    ///
    /// # Errors
    /// `InvalidInput` for both forms of one bound, or an `older_than` or a
    /// `due_within` that reaches past the times a timestamp holds.
    pub fn into_query(self, now: OffsetDateTime) -> StoreResult<ListQuery> {
        let created_before = bound(
            ("older_than", self.older_than),
            ("created_before", self.created_before),
            |span| duration::before(now, span),
        )?;
        let due_by = bound(
            ("due_within", self.due_within),
            ("due_by", self.due_by),
            |span| duration::after(now, span),
        )?;
        Ok(ListQuery {
            parent: self.parent,
            active_only: self.active,
            statuses: self.status,
            home: self.home,
            created_before,
            due_by,
            after: self.after,
            limit: Some(self.limit.unwrap_or(MAX_PAGE).min(MAX_PAGE)),
            newest_first: self.newest_first,
        })
    }
}

/// A time bound given as a span from now (`span`'s name and value) or as
/// an instant, not both: `shift` moves now by the span.
fn bound(
    (span_name, span): (&str, Option<Duration>),
    (instant_name, instant): (&str, Option<OffsetDateTime>),
    shift: impl FnOnce(Duration) -> Option<OffsetDateTime>,
) -> StoreResult<Option<OffsetDateTime>> {
    match (span, instant) {
        (Some(_), Some(_)) => Err(invalid(format!(
            "give {span_name} or {instant_name}, not both"
        ))),
        (Some(span), None) => shift(span).map(Some).ok_or_else(|| {
            invalid(format!(
                "{span_name} {} reaches past the times a timestamp can hold",
                duration::format(span)
            ))
        }),
        (None, instant) => Ok(instant),
    }
}

/// `instant` as RFC 3339, in UTC. Past RFC 3339's years (0000 to 9999 in
/// UTC) a bound is after every stored time, or before every one, so the
/// last (or the first) instant RFC 3339 writes means the same to a store:
/// a bound is never left out.
fn rfc3339(instant: OffsetDateTime) -> String {
    let utc = instant.checked_to_offset(UtcOffset::UTC);
    match utc.and_then(|utc| utc.format(&Rfc3339).ok()) {
        Some(text) => text,
        None if instant.year() > 0 => "9999-12-31T23:59:59.999999999Z".to_string(),
        None => "0000-01-01T00:00:00Z".to_string(),
    }
}

/// A duration parameter's value.
fn span(name: &str, value: &str) -> StoreResult<Duration> {
    duration::parse(value).map_err(|e| invalid(format!("{name}: {e}")))
}

/// An RFC 3339 parameter's value.
fn instant(name: &str, value: &str) -> StoreResult<OffsetDateTime> {
    OffsetDateTime::parse(value, &Rfc3339).map_err(|e| invalid(format!("{name}: {e}")))
}

const LIST_PARAMETERS: &str = "parent, active, status, home, older_than, created_before, \
     due_within, due_by, after, limit, newest_first";

/// Parses the query of `GET /v1/parents` (without the `?`): `kind`
/// (`wave`, `project` or `task`), `wave` (`wv_...`), `project`
/// (`ps_...`), `after` (a parent id) and `limit` (1 to [`MAX_PAGE`], the
/// default).
///
/// # Errors
/// `InvalidInput` naming the parameter that is unknown, given twice or
/// malformed.
pub fn parse_parent_query(query: &str) -> StoreResult<ParentQuery> {
    let mut parsed = parse_query(
        query,
        "kind, wave, project, after, limit",
        &[],
        |params: &mut ParentQuery, key, value| {
            let field = |e: DomainError| invalid(format!("{key}: {e}"));
            match key {
                "kind" => params.kind = Some(ParentKind::parse(&value).map_err(field)?),
                "wave" => params.wave = Some(WaveId::parse(&value).map_err(field)?),
                "project" => params.project = Some(ProjectSessionId::parse(&value).map_err(field)?),
                "after" => {
                    params.after = Some(InteractiveHandoffParent::parse_id(&value).map_err(field)?)
                }
                "limit" => params.limit = Some(limit(&value)?),
                _ => return Ok(false),
            }
            Ok(true)
        },
    )?;
    parsed.limit = Some(parsed.limit.unwrap_or(MAX_PAGE).min(MAX_PAGE));
    Ok(parsed)
}

/// The query string (without the `?`) that [`parse_parent_query`] reads
/// back as `query`.
pub fn parent_query_string(query: &ParentQuery) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    if let Some(kind) = query.kind {
        out.append_pair("kind", kind.as_str());
    }
    if let Some(wave) = &query.wave {
        out.append_pair("wave", wave.as_str());
    }
    if let Some(project) = &query.project {
        out.append_pair("project", project.as_str());
    }
    if let Some(after) = &query.after {
        out.append_pair("after", after.id_str());
    }
    if let Some(limit) = query.limit {
        out.append_pair("limit", &limit.to_string());
    }
    out.finish()
}

/// The query of `GET /v1/events`: where the stream starts, and which
/// events it carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventParams {
    /// `from=POS`: the events after this position (0: the whole history);
    /// without it, the events from now on. A `Last-Event-ID` header wins.
    pub from: Option<u64>,
    /// `parent=task:ts_...`: only this parent's handoffs' events.
    pub parent: Option<InteractiveHandoffParent>,
}

impl EventParams {
    /// Parses a query string (without the `?`).
    ///
    /// # Errors
    /// `InvalidInput` naming the parameter that is unknown, repeated or
    /// malformed.
    pub fn parse(query: &str) -> StoreResult<Self> {
        parse_query(
            query,
            "from, parent",
            &[],
            |params: &mut Self, key, value| {
                match key {
                    "from" => params.from = Some(position("from", &value)?),
                    "parent" => params.parent = Some(parent(&value)?),
                    _ => return Ok(false),
                }
                Ok(true)
            },
        )
    }

    /// The query string (without the `?`).
    pub fn to_query(&self) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        if let Some(from) = self.from {
            out.append_pair("from", &from.to_string());
        }
        if let Some(parent) = &self.parent {
            out.append_pair("parent", &parent.to_string());
        }
        out.finish()
    }
}

/// The query of `GET /v1/handoffs/{id}/wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitParams {
    /// `timeout=30s` (`500ms`, `2m`, ...; `0ms` reads once): how long to
    /// wait, at most [`MAX_WAIT`]; [`DEFAULT_WAIT`] without it.
    pub timeout: Duration,
}

impl Default for WaitParams {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_WAIT,
        }
    }
}

impl WaitParams {
    /// Parses a query string (without the `?`).
    ///
    /// # Errors
    /// `InvalidInput` for an unknown parameter, or a timeout that is not a
    /// duration or is longer than [`MAX_WAIT`].
    pub fn parse(query: &str) -> StoreResult<Self> {
        parse_query(query, "timeout", &[], |params: &mut Self, key, value| {
            if key != "timeout" {
                return Ok(false);
            }
            params.timeout = timeout(&value)?;
            Ok(true)
        })
    }

    /// The query string (without the `?`), the timeout in milliseconds.
    pub fn to_query(&self) -> String {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("timeout", &format!("{}ms", self.timeout.as_millis()))
            .finish()
    }
}

/// A long poll's timeout: whole milliseconds (`500ms`, `0ms`) or a
/// duration (`30s`, `2m`), at most [`MAX_WAIT`].
fn timeout(text: &str) -> StoreResult<Duration> {
    let span = match text.trim().strip_suffix("ms") {
        Some(millis) if !millis.is_empty() && millis.bytes().all(|b| b.is_ascii_digit()) => {
            Duration::from_millis(
                millis
                    .parse()
                    .map_err(|_| invalid(format!("timeout {text:?} is too long: at most 5m")))?,
            )
        }
        _ => duration::parse(text).map_err(|e| invalid(format!("timeout: {e}")))?,
    };
    if span > MAX_WAIT {
        return Err(invalid(format!(
            "timeout {} is longer than the {} a long poll waits at most; wait again after it \
             returns",
            duration::format(span),
            duration::format(MAX_WAIT)
        )));
    }
    Ok(span)
}

/// The decoded pairs of a query string.
fn pairs(query: &str) -> StoreResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        // form_urlencoded replaces bytes that are not UTF-8: refuse them
        // rather than look up a name that was never sent.
        if key.contains('\u{fffd}') || value.contains('\u{fffd}') {
            return Err(invalid(format!(
                "query parameter {key:?} is not valid UTF-8 once decoded"
            )));
        }
        out.push((key.into_owned(), value.into_owned()));
    }
    Ok(out)
}

/// The parameters of a query string (without the `?`), read into a `T`
/// from its default: `set` takes each decoded pair in turn and answers
/// false for a name it does not know, which is refused naming the `known`
/// ones; a parameter given twice is refused too, unless it is one of
/// `repeatable`.
fn parse_query<T: Default>(
    query: &str,
    known: &str,
    repeatable: &[&str],
    mut set: impl FnMut(&mut T, &str, String) -> StoreResult<bool>,
) -> StoreResult<T> {
    let mut params = T::default();
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in pairs(query)? {
        if !repeatable.contains(&key.as_str()) {
            if seen.contains(&key) {
                return Err(invalid(format!(
                    "query parameter {key:?} is given twice; give it once"
                )));
            }
            seen.push(key.clone());
        }
        if !set(&mut params, &key, value)? {
            return Err(unknown_parameter(&key, known));
        }
    }
    Ok(params)
}

fn boolean(name: &str, text: &str) -> StoreResult<bool> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(format!(
            "{name} must be true or false, not {text:?}"
        ))),
    }
}

fn limit(text: &str) -> StoreResult<usize> {
    match text.parse::<usize>() {
        Ok(0) => Err(invalid("limit 0 lists nothing: give at least 1")),
        Ok(limit) if limit <= MAX_PAGE => Ok(limit),
        Ok(_) => Err(invalid(format!(
            "limit {text} is more than the {MAX_PAGE} rows a page holds; page on with after"
        ))),
        Err(_) => Err(invalid(format!("limit {text:?} is not a number of rows"))),
    }
}

fn parent(text: &str) -> StoreResult<InteractiveHandoffParent> {
    InteractiveHandoffParent::parse(text).map_err(|e| invalid(format!("parent: {e}")))
}

fn position(name: &str, text: &str) -> StoreResult<u64> {
    text.parse::<u64>()
        .map_err(|_| invalid(format!("{name} {text:?} is not an event position")))
}

/// A deadline `span` (a duration's text, named `field`) after `now`.
fn after(now: OffsetDateTime, span: &str, field: &str) -> StoreResult<OffsetDateTime> {
    let span = duration::parse(span).map_err(|e| invalid(format!("{field}: {e}")))?;
    duration::after(now, span).ok_or_else(|| {
        invalid(format!(
            "a deadline {} from now is past the last time a timestamp can hold",
            duration::format(span)
        ))
    })
}

fn unknown_parameter(name: &str, known: &str) -> StoreError {
    invalid(format!(
        "query parameter {name:?} is unknown here: use {known}"
    ))
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::InvalidInput(message.into())
}

/// Parses the event position a `Last-Event-ID` header carries.
///
/// # Errors
/// `InvalidInput` when it is not a position.
pub fn last_event_id(text: &str) -> StoreResult<u64> {
    position("Last-Event-ID", text.trim())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn list_queries_round_trip() {
        let params = ListParams {
            parent: Some(
                InteractiveHandoffParent::parse("task:ts_01a23770-d145-7233-b23a-4c031002983d")
                    .unwrap(),
            ),
            active: true,
            status: vec![
                InteractiveHandoffStatus::Waiting,
                InteractiveHandoffStatus::HandedBack,
            ],
            home: Some(WaveHome::parse("ssh://jo@host:2222").unwrap()),
            older_than: Some(Duration::from_secs(5400)),
            created_before: None,
            due_within: Some(Duration::from_secs(900)),
            due_by: None,
            after: Some(
                InteractiveHandoffId::parse("ih_01a23770-d145-7233-b23a-4c031002983d").unwrap(),
            ),
            limit: Some(25),
            newest_first: true,
        };
        assert_eq!(ListParams::parse(&params.to_query()).unwrap(), params);
        let oldest_first = ListParams {
            newest_first: false,
            ..params.clone()
        };
        assert!(!oldest_first.to_query().contains("newest_first"));
        assert_eq!(
            ListParams::parse(&oldest_first.to_query()).unwrap(),
            oldest_first
        );
        let before = ListParams {
            older_than: None,
            created_before: Some(time::macros::datetime!(2026-12-03 18:00:00.123456 UTC)),
            ..params.clone()
        };
        assert_eq!(ListParams::parse(&before.to_query()).unwrap(), before);
        let both = format!("{}&older_than=1h", before.to_query());
        let error = ListParams::parse(&both)
            .unwrap()
            .into_query(OffsetDateTime::now_utc())
            .unwrap_err();
        assert!(error.to_string().contains("not both"), "{error}");
        assert_eq!(ListParams::parse("").unwrap(), ListParams::default());
    }

    #[test]
    fn a_deadline_bound_is_counted_from_now_or_given() {
        let now = time::macros::datetime!(2026-12-04 12:00:00 UTC);
        let within = ListParams::parse("due_within=15m").unwrap();
        assert_eq!(
            within.into_query(now).unwrap().due_by,
            Some(time::macros::datetime!(2026-12-04 12:15:00 UTC))
        );
        let by = ListParams {
            due_by: Some(time::macros::datetime!(2026-12-05 08:30:00.5 UTC)),
            ..ListParams::default()
        };
        assert_eq!(ListParams::parse(&by.to_query()).unwrap(), by);
        assert_eq!(
            by.clone().into_query(now).unwrap().due_by,
            by.due_by,
            "an instant is taken as it is given"
        );
        assert_eq!(ListParams::default().into_query(now).unwrap().due_by, None);
        // Sent in UTC; past the years RFC 3339 writes, as its last or its
        // first instant, never left out.
        for (given, sent) in [
            (
                time::macros::datetime!(2026-12-05 10:30:00.5 +02:00),
                "2026-12-05T08%3A30%3A00.5Z",
            ),
            (
                time::macros::datetime!(2026-12-05 10:30:00 +01:00:30),
                "2026-12-05T09%3A29%3A30Z",
            ),
            (
                time::macros::datetime!(9999-12-31 23:59:59 -01:00),
                "9999-12-31T23%3A59%3A59.999999999Z",
            ),
            (
                time::macros::datetime!(0000-01-01 00:30:00 +01:00),
                "0000-01-01T00%3A00%3A00Z",
            ),
        ] {
            let params = ListParams {
                due_by: Some(given),
                created_before: Some(given),
                ..ListParams::default()
            };
            let query = params.to_query();
            assert_eq!(
                query,
                format!("created_before={sent}&due_by={sent}"),
                "{given}"
            );
            assert!(ListParams::parse(&query).is_ok(), "{query}");
        }
        let both = format!("{}&due_within=1h", by.to_query());
        let error = ListParams::parse(&both)
            .unwrap()
            .into_query(now)
            .unwrap_err();
        assert!(error.is_invalid_input());
        assert!(error.message().contains("due_within or due_by"), "{error}");
    }

    #[test]
    fn bad_queries_name_the_parameter() {
        for (query, names) in [
            ("colour=red", "colour"),
            ("limit=0", "limit"),
            ("limit=1001", "limit"),
            ("limit=-1", "limit"),
            ("active=yes", "active"),
            ("status=done", "status"),
            ("parent=ship:1", "parent"),
            ("after=ih_nope", "after"),
            ("older_than=5", "older_than"),
            ("created_before=yesterday", "created_before"),
            ("limit=1&limit=2", "limit"),
            ("home=%FF", "home"),
            ("newest_first=1", "newest_first"),
            ("due_within=soon", "due_within"),
            ("due_within=0s", "due_within"),
            ("due_within=99999999w", "due_within"),
            ("due_within=-1h", "due_within"),
            ("due_by=tomorrow", "due_by"),
            ("due_within=1h&due_within=2h", "due_within"),
            ("newest_first=true&newest_first=false", "newest_first"),
        ] {
            let error = ListParams::parse(query).unwrap_err();
            assert!(error.is_invalid_input());
            assert!(error.message().contains(names), "{query}: {error}");
        }
    }

    #[test]
    fn wait_timeouts_are_bounded() {
        assert_eq!(WaitParams::parse("").unwrap().timeout, DEFAULT_WAIT);
        assert_eq!(
            WaitParams::parse("timeout=1500ms").unwrap().timeout,
            Duration::from_millis(1500)
        );
        assert_eq!(
            WaitParams::parse("timeout=0ms").unwrap().timeout,
            Duration::ZERO
        );
        assert_eq!(
            WaitParams::parse("timeout=5m").unwrap().timeout,
            Duration::from_secs(300)
        );
        for bad in [
            "timeout=6m",
            "timeout=300001ms",
            "timeout=soon",
            "timeout=99999999999999999999999ms",
            "x=1",
        ] {
            assert!(
                WaitParams::parse(bad).unwrap_err().is_invalid_input(),
                "{bad}"
            );
        }
        let params = WaitParams {
            timeout: Duration::from_millis(2500),
        };
        assert_eq!(WaitParams::parse(&params.to_query()).unwrap(), params);
    }

    #[test]
    fn event_queries_round_trip() {
        let params = EventParams {
            from: Some(42),
            parent: Some(
                InteractiveHandoffParent::parse("wave:wv_01a23770-d145-7233-b23a-4c031002983d")
                    .unwrap(),
            ),
        };
        assert_eq!(EventParams::parse(&params.to_query()).unwrap(), params);
        assert!(EventParams::parse("from=-1").is_err());
        assert!(EventParams::parse("since=1").is_err());
        assert_eq!(last_event_id(" 17 ").unwrap(), 17);
        assert!(last_event_id("x").is_err());
    }

    #[test]
    fn parent_queries_round_trip_and_page_at_most_max_page() {
        let query = ParentQuery {
            kind: Some(ParentKind::Task),
            wave: Some(WaveId::parse("wv_01a23770-d145-7233-b23a-4c031002983d").unwrap()),
            project: Some(
                ProjectSessionId::parse("ps_01a23770-d145-7233-b23a-4c031002983d").unwrap(),
            ),
            after: Some(
                InteractiveHandoffParent::parse_id("ts_01a23770-d145-7233-b23a-4c031002983d")
                    .unwrap(),
            ),
            limit: Some(7),
        };
        assert_eq!(
            parse_parent_query(&parent_query_string(&query)).unwrap(),
            query
        );
        assert_eq!(parse_parent_query("").unwrap().limit, Some(MAX_PAGE));
        for bad in ["kind=handoff", "wave=x", "after=ih_1", "limit=0", "sort=id"] {
            assert!(parse_parent_query(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn deadlines_are_one_of_two_forms() {
        let now = time::macros::datetime!(2026-01-01 00:00:00 UTC);
        let extend = |until, by: Option<&str>| Extend {
            until,
            by: by.map(str::to_string),
        };
        assert_eq!(
            extend(None, Some("2h")).until(now).unwrap(),
            now + time::Duration::hours(2)
        );
        assert_eq!(extend(Some(now), None).until(now).unwrap(), now);
        assert!(extend(None, None).until(now).is_err());
        assert!(extend(Some(now), Some("1h")).until(now).is_err());
        assert!(extend(None, Some("1 hour")).until(now).is_err());
    }

    proptest! {
        #[test]
        fn any_query_parses_or_is_refused_as_invalid_input(query in any::<String>()) {
            let errors = [
                ListParams::parse(&query).err(),
                EventParams::parse(&query).err(),
                WaitParams::parse(&query).err(),
            ];
            for error in errors.into_iter().flatten() {
                prop_assert!(error.is_invalid_input());
            }
        }
    }
}

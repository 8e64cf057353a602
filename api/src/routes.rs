//! The route table (contracts C19, C20): every route of the service with
//! its method, path template, who may call it, what it takes and what it
//! answers. The server builds its router from this table (one handler per
//! [`RouteId`]), the OpenAPI document is generated from it
//! ([`crate::openapi`]), and the tests walk it, so the three cannot
//! disagree.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a token may do (C20). A token holds one or more scopes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// A body: create parents, record a body, open, claim a wake, wait,
    /// read one handoff or parent.
    Agent,
    /// A person: read, list, attach, finish, extend, history, events,
    /// wait.
    Person,
    /// An operator: expire, prune, export, import, and every read.
    Operator,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Self; 3] = [Self::Agent, Self::Person, Self::Operator];

    /// The scope's name: `agent`, `person` or `operator`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Person => "person",
            Self::Operator => "operator",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == name)
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a token (`/healthz`, `/readyz`).
    Public,
    /// Any valid token, whatever its scopes (`/metrics`,
    /// `/v1/openapi.json`).
    AnyToken,
    /// A token holding at least one of these scopes.
    Scopes(&'static [Scope]),
}

impl Access {
    /// Whether a token holding `scopes` may call the route (`None`: no
    /// token).
    pub fn allows(self, scopes: Option<&[Scope]>) -> bool {
        match (self, scopes) {
            (Self::Public, _) => true,
            (_, None) => false,
            (Self::AnyToken, Some(_)) => true,
            (Self::Scopes(allowed), Some(held)) => held.iter().any(|s| allowed.contains(s)),
        }
    }

    /// The scopes that may call the route; empty for a public route, all
    /// of them for any token.
    pub fn scopes(self) -> &'static [Scope] {
        match self {
            Self::Public => &[],
            Self::AnyToken => &Scope::ALL,
            Self::Scopes(scopes) => scopes,
        }
    }
}

const AGENT: &[Scope] = &[Scope::Agent];
const PERSON: &[Scope] = &[Scope::Person];
const OPERATOR: &[Scope] = &[Scope::Operator];
const ANY_READ: &[Scope] = &[Scope::Agent, Scope::Person, Scope::Operator];
const CENSUS: &[Scope] = &[Scope::Person, Scope::Operator];

/// An HTTP method the service answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`: reads; never changes anything.
    Get,
    /// `POST`: everything that changes the store, and import.
    Post,
}

impl Method {
    /// `GET` or `POST`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
        }
    }
}

/// A request or response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body.
    Empty,
    /// `application/json`: the schema of this name in the document.
    Json(&'static str),
    /// `application/json`: an array of the schema of this name.
    JsonList(&'static str),
    /// `application/x-ndjson`: an export's JSON lines.
    Lines,
    /// `text/event-stream`: each event's `id:` is its position, its
    /// `data:` the event (the schema of this name) on one line.
    EventStream(&'static str),
    /// `text/plain` (the Prometheus text format).
    Text,
    /// `application/json`: the OpenAPI document.
    Document,
}

/// A content type the service takes or answers.
pub mod content_type {
    /// JSON bodies.
    pub const JSON: &str = "application/json";
    /// An export's JSON lines (what `/v1/export` sends and `/v1/import`
    /// takes; `application/jsonl` is taken too).
    pub const LINES: &str = "application/x-ndjson";
    /// The other name of JSON lines.
    pub const JSONL: &str = "application/jsonl";
    /// The event stream.
    pub const EVENT_STREAM: &str = "text/event-stream";
    /// The Prometheus text format, version 0.0.4.
    pub const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";
}

/// One response of a route that is not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Success {
    /// The status.
    pub status: u16,
    /// When it is given.
    pub description: &'static str,
    /// What it carries.
    pub body: Body,
}

/// A query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// What it means, for the document.
    pub description: &'static str,
    /// `integer`, `boolean` or `string`.
    pub kind: &'static str,
    /// Whether it may be given more than once.
    pub repeated: bool,
}

/// Every route, by name. The server has one handler per name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum RouteId {
    CreateWave,
    CreateProject,
    CreateTask,
    GetWave,
    GetProject,
    GetTask,
    GetTaskPr,
    ListParents,
    RecordWaveBody,
    RecordProjectBody,
    RecordTaskBody,
    Open,
    List,
    ListRecords,
    Get,
    Attach,
    Complete,
    Back,
    Fail,
    Extend,
    Link,
    ClaimWake,
    History,
    Wait,
    Events,
    Expire,
    ExpireRecords,
    Prune,
    Export,
    Import,
    Healthz,
    Readyz,
    Metrics,
    OpenApi,
}

/// One route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Its name (the document's `operationId` is its snake_case form).
    pub id: RouteId,
    /// Its method.
    pub method: Method,
    /// Its path template; `{id}` is the one path parameter.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    /// One line for the document.
    pub summary: &'static str,
    /// The command it mirrors, or what it is for.
    pub description: &'static str,
    /// Its request body.
    pub request: Body,
    /// Its query parameters.
    pub query: &'static [Param],
    /// Its answers that are not errors.
    pub success: &'static [Success],
    /// Whether the current state can refuse it (409).
    pub conflicts: bool,
    /// Whether it reads or writes the store (503 when the store cannot be
    /// used).
    pub store: bool,
    /// Whether it holds a connection open while it waits (an event
    /// stream, a long poll), and so counts against the stream limit (503
    /// beyond it).
    pub streams: bool,
}

impl Route {
    /// The error statuses it may answer, each with the error object.
    pub fn error_statuses(&self) -> Vec<u16> {
        let mut statuses = Vec::new();
        let has_body = !matches!(self.request, Body::Empty);
        let has_id = self.path.contains('{');
        if has_body || has_id || !self.query.is_empty() {
            statuses.push(400);
        }
        if self.access != Access::Public {
            statuses.push(401);
        }
        if matches!(self.access, Access::Scopes(scopes) if scopes.len() < Scope::ALL.len()) {
            statuses.push(403);
        }
        // An id in the path, a page start, or a parent the body names.
        let names_parent = matches!(
            self.id,
            RouteId::CreateProject | RouteId::CreateTask | RouteId::Open
        );
        if has_id || names_parent || self.query.iter().any(|param| param.name == "after") {
            statuses.push(404);
        }
        if self.conflicts {
            statuses.push(409);
        }
        if has_body {
            statuses.push(413);
            statuses.push(415);
        }
        if self.store || self.streams {
            statuses.push(503);
        }
        statuses
    }

    /// Every status it may answer: its successes, then its errors.
    pub fn statuses(&self) -> Vec<u16> {
        let mut statuses: Vec<u16> = self.success.iter().map(|s| s.status).collect();
        statuses.extend(self.error_statuses());
        statuses
    }

    /// The document's `operationId`: the name in snake_case.
    pub fn operation_id(&self) -> String {
        let name = format!("{:?}", self.id);
        let mut out = String::new();
        for (index, c) in name.chars().enumerate() {
            if c.is_ascii_uppercase() {
                if index > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// The route `method` `path_template` names, if any.
pub fn find(method: Method, path_template: &str) -> Option<&'static Route> {
    ROUTES
        .iter()
        .find(|route| route.method == method && route.path == path_template)
}

/// The route named `id`.
pub fn route(id: RouteId) -> &'static Route {
    // Every id has a route: a test walks them all.
    ROUTES
        .iter()
        .find(|route| route.id == id)
        .unwrap_or(&ROUTES[0])
}

const fn ok(body: Body) -> Success {
    Success {
        status: 200,
        description: "done",
        body,
    }
}

const OK_HANDOFF: &[Success] = &[ok(Body::Json("HandoffJson"))];
const CREATED_WAVE: &[Success] = &[Success {
    status: 201,
    description: "stored (also when an equal one was stored before: creating is idempotent)",
    body: Body::Json("Wave"),
}];
const CREATED_PROJECT: &[Success] = &[Success {
    status: 201,
    description: "stored (also when an equal one was stored before: creating is idempotent)",
    body: Body::Json("ProjectSession"),
}];
const CREATED_TASK: &[Success] = &[Success {
    status: 201,
    description: "stored with its PR (also when equal ones were stored before)",
    body: Body::Json("TaskSession"),
}];

const LIST_QUERY: &[Param] = &[
    Param {
        name: "parent",
        description: "only this parent's handoffs: wave:ID, project:ID or task:ID",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "active",
        description: "true: only handoffs that are not finished",
        kind: "boolean",
        repeated: false,
    },
    Param {
        name: "status",
        description: "only handoffs in this status (repeatable: in any of them)",
        kind: "string",
        repeated: true,
    },
    Param {
        name: "home",
        description:
            "only handoffs whose work runs at this home (user@local, ssh://user@host[:port])",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "older_than",
        description: "only handoffs created more than this long ago (90s, 15m, 2h, 1d, 2w, 1h30m)",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "created_before",
        description: "only handoffs created before this time (RFC 3339); not with older_than",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "due_within",
        description: "only handoffs due within this long from now: active, their deadline at or \
                      before now plus this (15m, 1h, 1d, ...)",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "due_by",
        description: "only handoffs due by this time (RFC 3339); not with due_within",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "after",
        description: "the page after this handoff id (the last id of the previous page)",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "limit",
        description: "at most this many rows, 1 to 1000 (the default: a page is at most 1000)",
        kind: "integer",
        repeated: false,
    },
    Param {
        name: "newest_first",
        description: "true: newest first (after then pages towards older handoffs)",
        kind: "boolean",
        repeated: false,
    },
];

const PARENT_QUERY: &[Param] = &[
    Param {
        name: "kind",
        description: "only parents of this kind: wave, project or task",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "wave",
        description:
            "only this wave's parents: the wave itself, its projects and its tasks (wv_...)",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "project",
        description: "only this project's parents: the project itself and its tasks (ps_...)",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "after",
        description:
            "the page after this parent id (the last id of the previous page; it need not exist)",
        kind: "string",
        repeated: false,
    },
    Param {
        name: "limit",
        description: "at most this many parents, 1 to 1000 (the default: a page is at most 1000)",
        kind: "integer",
        repeated: false,
    },
];

const WAIT_QUERY: &[Param] = &[Param {
    name: "timeout",
    description: "how long to wait: 500ms, 30s, 2m, ... at most 5m; default 30s; 0ms reads once",
    kind: "string",
    repeated: false,
}];

const EVENT_QUERY: &[Param] = &[
    Param {
        name: "from",
        description: "the events after this position (0: the whole history); default: from now \
                      on. A Last-Event-ID header wins.",
        kind: "integer",
        repeated: false,
    },
    Param {
        name: "parent",
        description: "only the events of this parent's handoffs: wave:ID, project:ID or task:ID",
        kind: "string",
        repeated: false,
    },
];

/// A route with the defaults: no body, no query, no conflict, on the
/// store, not a stream.
const fn plain(
    id: RouteId,
    method: Method,
    path: &'static str,
    access: Access,
    summary: &'static str,
    description: &'static str,
    success: &'static [Success],
) -> Route {
    Route {
        id,
        method,
        path,
        access,
        summary,
        description,
        request: Body::Empty,
        query: &[],
        success,
        conflicts: false,
        store: true,
        streams: false,
    }
}

const fn with_body(mut route: Route, request: Body, conflicts: bool) -> Route {
    route.request = request;
    route.conflicts = conflicts;
    route
}

const fn conflicting(mut route: Route) -> Route {
    route.conflicts = true;
    route
}

const fn with_query(mut route: Route, query: &'static [Param]) -> Route {
    route.query = query;
    route
}

const fn streaming(mut route: Route) -> Route {
    route.streams = true;
    route
}

const fn off_store(mut route: Route) -> Route {
    route.store = false;
    route
}

use Method::{Get, Post};
use RouteId as R;

/// Every route of the service.
pub const ROUTES: &[Route] = &[
    with_body(
        plain(R::CreateWave, Post, "/v1/waves", Access::Scopes(AGENT), "Create a wave",
            "`wave create`: the body is the wave as `wave create --json` prints it.", CREATED_WAVE),
        Body::Json("Wave"), true),
    with_body(
        plain(R::CreateProject, Post, "/v1/projects", Access::Scopes(AGENT), "Create a project session",
            "`project create`: the body is the project session, under an existing wave.", CREATED_PROJECT),
        Body::Json("ProjectSession"), true),
    with_body(
        plain(R::CreateTask, Post, "/v1/tasks", Access::Scopes(AGENT), "Create a task session with its first PR",
            "`task create`: the task session and its first PR, stored atomically; the answer is the task.", CREATED_TASK),
        Body::Json("CreateTask"), true),
    plain(R::GetWave, Get, "/v1/waves/{id}", Access::Scopes(ANY_READ), "Read a wave",
        "The wave as stored.", &[ok(Body::Json("Wave"))]),
    plain(R::GetProject, Get, "/v1/projects/{id}", Access::Scopes(ANY_READ), "Read a project session",
        "The project session as stored.", &[ok(Body::Json("ProjectSession"))]),
    plain(R::GetTask, Get, "/v1/tasks/{id}", Access::Scopes(ANY_READ), "Read a task session",
        "The task session as stored.", &[ok(Body::Json("TaskSession"))]),
    plain(R::GetTaskPr, Get, "/v1/task-prs/{id}", Access::Scopes(ANY_READ), "Read a task PR",
        "The task PR as stored.", &[ok(Body::Json("TaskPr"))]),
    with_query(
        plain(R::ListParents, Get, "/v1/parents", Access::Scopes(CENSUS), "List parents",
            "`parents --json`: waves, project sessions and task sessions in id order, filtered (and-ed) \
             and paged, each as `{\"kind\": ..., \"value\": <the record>}`. 404 when `wave` or `project` \
             names no parent.",
            &[ok(Body::JsonList("Parent"))]),
        PARENT_QUERY),
    with_body(
        plain(R::RecordWaveBody, Post, "/v1/waves/{id}/body", Access::Scopes(AGENT), "Record a wave's new body",
            "`task body wave:ID`: records the body process; the answer is the wave after it.", &[ok(Body::Json("Wave"))]),
        Body::Json("ChildProcessGeneration"), true),
    with_body(
        plain(R::RecordProjectBody, Post, "/v1/projects/{id}/body", Access::Scopes(AGENT), "Record a project session's new body",
            "`task body project:ID`: the answer is the project session after it.", &[ok(Body::Json("ProjectSession"))]),
        Body::Json("ChildProcessGeneration"), true),
    with_body(
        plain(R::RecordTaskBody, Post, "/v1/tasks/{id}/body", Access::Scopes(AGENT), "Record a task session's new body",
            "`task body`: the answer is the task session after it.", &[ok(Body::Json("TaskSession"))]),
        Body::Json("ChildProcessGeneration"), true),
    with_body(
        plain(R::Open, Post, "/v1/handoffs", Access::Scopes(AGENT), "Open a handoff",
            "`open`: opens a handoff for the parent, or answers with the one that answers the request \
             (the parent's active one; with a step, its handoff for the step, whatever its status).",
            &[
                Success { status: 201, description: "created", body: Body::Json("Opened") },
                Success { status: 200, description: "reused: nothing was written (`created` is false)", body: Body::Json("Opened") },
            ]),
        Body::Json("OpenRequest"), true),
    with_query(
        plain(R::List, Get, "/v1/handoffs", Access::Scopes(CENSUS), "List handoffs",
            "`list --json`: the census rows, oldest first (newest first with newest_first=true), filtered (and-ed) and paged.",
            &[ok(Body::JsonList("InteractiveHandoffListRow"))]),
        LIST_QUERY),
    with_query(
        plain(R::ListRecords, Get, "/v1/handoff-records", Access::Scopes(CENSUS), "List handoffs as whole records",
            "The handoffs `GET /v1/handoffs` lists, with the same filters and pages, each as the whole record \
             `status --json` prints: what the library's client reads.",
            &[ok(Body::JsonList("HandoffJson"))]),
        LIST_QUERY),
    plain(R::Get, Get, "/v1/handoffs/{id}", Access::Scopes(ANY_READ), "Read a handoff",
        "`status --json`.", OK_HANDOFF),
    conflicting(plain(R::Attach, Post, "/v1/handoffs/{id}/attach", Access::Scopes(PERSON), "Record that a person attached",
        "`attach --print`'s record: attaching again changes nothing. No body (or `{}`).", OK_HANDOFF)),
    with_body(
        plain(R::Complete, Post, "/v1/handoffs/{id}/complete", Access::Scopes(PERSON), "Complete a handoff",
            "`complete --summary`.", OK_HANDOFF),
        Body::Json("Summary"), true),
    with_body(
        plain(R::Back, Post, "/v1/handoffs/{id}/back", Access::Scopes(PERSON), "Hand a handoff back",
            "`back --summary`.", OK_HANDOFF),
        Body::Json("Summary"), true),
    with_body(
        plain(R::Fail, Post, "/v1/handoffs/{id}/fail", Access::Scopes(PERSON), "Fail a handoff",
            "`fail --reason`.", OK_HANDOFF),
        Body::Json("Reason"), true),
    with_body(
        plain(R::Link, Post, "/v1/handoffs/{id}/link", Access::Scopes(PERSON), "Make a signed link",
            "`link --valid-for`: a link where a person sees and answers the handoff without signing in (C21), \
             acting as `link:` and the token's name. `for`, when given, must be that name (403 \
             `link_for_another_name` otherwise); `valid_for` is at most `30d`. Body `{}` for a link until the \
             deadline (at most 30 days).",
            &[ok(Body::Json("LinkJson"))]),
        Body::Json("LinkRequest"), false),
    with_body(
        plain(R::Extend, Post, "/v1/handoffs/{id}/extend", Access::Scopes(PERSON), "Move a handoff's deadline",
            "`extend --until` or `--by` (from the service's clock now).", OK_HANDOFF),
        Body::Json("Extend"), true),
    with_body(
        plain(R::ClaimWake, Post, "/v1/handoffs/{id}/claim-wake", Access::Scopes(AGENT), "Claim a finished handoff's wake",
            "`claim-wake`: 200 whether or not this generation won; `claimed` says which.",
            &[ok(Body::Json("Claimed"))]),
        Body::Json("ClaimWake"), true),
    plain(R::History, Get, "/v1/handoffs/{id}/history", Access::Scopes(CENSUS), "A handoff's history",
        "`history --json`: every change, oldest first, with who made it.",
        &[ok(Body::JsonList("HandoffEvent"))]),
    streaming(with_query(
        plain(R::Wait, Get, "/v1/handoffs/{id}/wait", Access::Scopes(ANY_READ), "Wait for a handoff to end (a long poll)",
            "`wait`: answers when the handoff ends (finished, or expired at its deadline) or the timeout \
             passes, whichever is first; it never polls the store.", &[ok(Body::Json("WaitJson"))]),
        WAIT_QUERY)),
    streaming(with_query(
        plain(R::Events, Get, "/v1/events", Access::Scopes(CENSUS), "Follow the history (server-sent events)",
            "`watch --json` as a `text/event-stream`: each event's `id:` is its position and its `data:` the \
             `watch --json` line. Reconnecting with `Last-Event-ID` resumes after it, missing and repeating \
             nothing. The stream ends when the service shuts down; resume it.",
            &[ok(Body::EventStream("HandoffEvent"))]),
        EVENT_QUERY)),
    plain(R::Expire, Post, "/v1/expire", Access::Scopes(OPERATOR), "Expire every due handoff",
        "`expire --json`: the census rows of the handoffs this call expired.",
        &[ok(Body::JsonList("InteractiveHandoffListRow"))]),
    plain(R::ExpireRecords, Post, "/v1/expire-records", Access::Scopes(OPERATOR), "Expire every due handoff, answering whole records",
        "What `POST /v1/expire` does, answering each handoff this call expired as the whole record \
         `status --json` prints, as its change left it: what the library's client reads.",
        &[ok(Body::JsonList("HandoffJson"))]),
    with_body(
        plain(R::Prune, Post, "/v1/prune", Access::Scopes(OPERATOR), "Prune finished handoffs",
            "`prune --json`: removes the finished handoffs whose wake was claimed, finished before the cutoff.",
            &[ok(Body::Json("Pruned"))]),
        Body::Json("Prune"), false),
    plain(R::Export, Get, "/v1/export", Access::Scopes(OPERATOR), "Export the registry",
        "`export`: versioned JSON lines from one consistent snapshot, streamed. A stream that ends \
         without its end line is not a whole export (an import refuses it).", &[ok(Body::Lines)]),
    with_body(
        plain(R::Import, Post, "/v1/import", Access::Scopes(OPERATOR), "Import an export into an empty store",
            "`import`: all of it or nothing; the body has its own, larger size limit.",
            &[ok(Body::Json("Counts"))]),
        Body::Lines, true),
    off_store(plain(R::Healthz, Get, "/healthz", Access::Public, "The process answers",
        "Always 200 while the process serves.", &[ok(Body::Json("Health"))])),
    plain(R::Readyz, Get, "/readyz", Access::Public, "The store answers",
        "200 when a read of the store succeeds now, else 503 with the error object.",
        &[ok(Body::Json("Health"))]),
    plain(R::Metrics, Get, "/metrics", Access::AnyToken, "Metrics in the Prometheus text format",
        "Requests and latency by route and status, open and due handoffs (counted at each scrape), \
         event streams and long polls in progress, store retries.", &[ok(Body::Text)]),
    off_store(plain(R::OpenApi, Get, "/v1/openapi.json", Access::AnyToken, "This document",
        "The OpenAPI 3.1 document, generated from the service's route table.", &[ok(Body::Document)])),
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_route_is_named_once_and_found_by_method_and_path() {
        let mut ids = HashSet::new();
        let mut keys = HashSet::new();
        for each in ROUTES {
            assert!(ids.insert(each.id), "{:?} twice", each.id);
            assert!(
                keys.insert((each.method, each.path)),
                "{} {}",
                each.method.as_str(),
                each.path
            );
            assert_eq!(find(each.method, each.path), Some(each));
            assert_eq!(route(each.id).path, each.path);
        }
        assert_eq!(ids.len(), 34);
    }

    #[test]
    fn reads_are_gets_and_changes_are_posts() {
        for route in ROUTES {
            if route.method == Method::Get {
                assert!(!route.conflicts, "{:?}", route.id);
                assert_eq!(route.request, Body::Empty, "{:?}", route.id);
            }
        }
    }

    #[test]
    fn scopes_follow_the_contract() {
        let allowed = |id, scope: Scope| route(id).access.allows(Some(&[scope]));
        for id in [R::CreateWave, R::Open, R::ClaimWake, R::RecordTaskBody] {
            assert!(allowed(id, Scope::Agent));
            assert!(!allowed(id, Scope::Person));
            assert!(!allowed(id, Scope::Operator));
        }
        for id in [R::Attach, R::Complete, R::Back, R::Fail, R::Extend, R::Link] {
            assert!(allowed(id, Scope::Person));
            assert!(!allowed(id, Scope::Agent));
            assert!(!allowed(id, Scope::Operator));
        }
        for id in [R::Expire, R::ExpireRecords, R::Prune, R::Export, R::Import] {
            assert!(allowed(id, Scope::Operator));
            assert!(!allowed(id, Scope::Person));
        }
        for id in [R::List, R::ListParents, R::History, R::Events] {
            assert!(allowed(id, Scope::Person) && allowed(id, Scope::Operator));
            assert!(!allowed(id, Scope::Agent));
        }
        for id in [R::Get, R::Wait, R::GetWave, R::GetTaskPr] {
            assert!(Scope::ALL.into_iter().all(|scope| allowed(id, scope)));
        }
        for id in [R::Healthz, R::Readyz] {
            assert!(route(id).access.allows(None));
        }
        for id in [R::Metrics, R::OpenApi] {
            assert!(!route(id).access.allows(None));
            assert!(Scope::ALL.into_iter().all(|scope| allowed(id, scope)));
        }
        assert!(route(R::Open)
            .access
            .allows(Some(&[Scope::Person, Scope::Agent])));
    }

    #[test]
    fn operation_ids_are_snake_case() {
        assert_eq!(route(R::ClaimWake).operation_id(), "claim_wake");
        assert_eq!(route(R::GetTaskPr).operation_id(), "get_task_pr");
        assert_eq!(route(R::OpenApi).operation_id(), "open_api");
    }
}

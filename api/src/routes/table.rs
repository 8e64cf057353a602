//! The entries of the route table: every route's method, path, access,
//! bodies and documentation, written with a few `const fn` builders so
//! each entry reads as one line of the service's description.

use super::{
    Access, Audience, Body, Method, Param, Route, RouteId, Success, AGENT, ANY_READ, CENSUS,
    OPERATOR, PERSON,
};

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
        audience: Audience::Program,
        cookie: false,
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

/// A route the inbox's script may call with the sign-in cookie instead of
/// the bearer token.
const fn cookie_read(mut route: Route) -> Route {
    route.cookie = true;
    route
}

/// A route of the person's pages: `cookie` says whether the page reads
/// the sign-in cookie.
const fn page(
    id: RouteId,
    method: Method,
    path: &'static str,
    access: Access,
    cookie: bool,
    description: &'static str,
    success: &'static [Success],
) -> Route {
    let mut route = plain(id, method, path, access, description, description, success);
    route.audience = Audience::Browser;
    route.cookie = cookie;
    if let Method::Post = method {
        route.request = Body::Form;
    }
    route
}

const PAGE: &[Success] = &[ok(Body::Html)];
const SEE_OTHER: u16 = 303;
const ACTED: &[Success] = &[Success {
    status: SEE_OTHER,
    description: "done: back to the page, with `done=ACTION`, so a reload sends nothing again",
    body: Body::Empty,
}];
const TO_INBOX: &[Success] = &[Success {
    status: SEE_OTHER,
    description: "the cookie set (or cleared); to `/`",
    body: Body::Empty,
}];

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
    cookie_read(with_query(
        plain(R::ListRecords, Get, "/v1/handoff-records", Access::Scopes(CENSUS), "List handoffs as whole records",
            "The handoffs `GET /v1/handoffs` lists, with the same filters and pages, each as the whole record \
             `status --json` prints: what the library's client reads.",
            &[ok(Body::JsonList("HandoffJson"))]),
        LIST_QUERY)),
    cookie_read(plain(R::Get, Get, "/v1/handoffs/{id}", Access::Scopes(ANY_READ), "Read a handoff",
        "`status --json`.", OK_HANDOFF)),
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
    cookie_read(plain(R::History, Get, "/v1/handoffs/{id}/history", Access::Scopes(CENSUS), "A handoff's history",
        "`history --json`: every change, oldest first, with who made it.",
        &[ok(Body::JsonList("HandoffEvent"))])),
    streaming(with_query(
        plain(R::Wait, Get, "/v1/handoffs/{id}/wait", Access::Scopes(ANY_READ), "Wait for a handoff to end (a long poll)",
            "`wait`: answers when the handoff ends (finished, or expired at its deadline) or the timeout \
             passes, whichever is first; it never polls the store.", &[ok(Body::Json("WaitJson"))]),
        WAIT_QUERY)),
    cookie_read(streaming(with_query(
        plain(R::Events, Get, "/v1/events", Access::Scopes(CENSUS), "Follow the history (server-sent events)",
            "`watch --json` as a `text/event-stream`: each event's `id:` is its position and its `data:` the \
             `watch --json` line. Reconnecting with `Last-Event-ID` resumes after it, missing and repeating \
             nothing. The stream ends when the service shuts down; resume it.",
            &[ok(Body::EventStream("HandoffEvent"))]),
        EVENT_QUERY))),
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
    // The person's pages (C21, C22): HTML, not in the document.
    page(R::Inbox, Get, "/", Access::Public, true,
        "The inbox of a signed-in person; without a sign-in, the sign-in form. `?token=` signs in \
         with a `person` token (303 to `/`); `status`, `parent` and `due=soon` filter.",
        &[ok(Body::Html), Success { status: SEE_OTHER, description: "signed in: to `/`", body: Body::Empty }]),
    page(R::InboxRows, Get, "/inbox/rows", Access::Scopes(PERSON), true,
        "The inbox's list alone, with the inbox's filters: what its script reads on each event.", PAGE),
    page(R::HandoffPage, Get, "/inbox/{id}", Access::Scopes(PERSON), true,
        "One handoff: facts, history, the attach command with its environment names, forms.", PAGE),
    page(R::HandoffAction, Post, "/inbox/{id}", Access::Scopes(PERSON), true,
        "A form of the handoff's page (`csrf`, `action` = `back`, `complete`, `fail` or `extend`, \
         `text` or `by`): acts as the token's name.", ACTED),
    page(R::LinkPage, Get, "/h/{id}", Access::Public, false,
        "A signed link's page (`for`, `exp`, `sig`: the link is the credential, C21): the handoff \
         and its forms; changes nothing.", PAGE),
    page(R::LinkAction, Post, "/h/{id}", Access::Public, false,
        "A form of a signed link's page: acts as `link:NAME`.", ACTED),
    page(R::SignIn, Post, "/sign-in", Access::Public, false,
        "The sign-in form (`token`, of scope `person`): sets the sign-in cookie.", TO_INBOX),
    page(R::SignOut, Post, "/sign-out", Access::Public, true,
        "The sign-out form (`csrf`): ends the sign-in on every server of the store; without a \
         sign-in it changes nothing.", TO_INBOX),
    off_store(page(R::Stylesheet, Get, "/static/inbox.css", Access::Public, false,
        "The pages' stylesheet, from the binary.", &[ok(Body::Stylesheet)])),
    off_store(page(R::Script, Get, "/static/inbox.js", Access::Public, false,
        "The inbox's script, from the binary.", &[ok(Body::Script)])),
    // The Model Context Protocol (C28): JSON-RPC, not in the document.
    mcp(R::Mcp, "/mcp", "The Model Context Protocol over streamable HTTP (C28)",
        "An agent's MCP client: the tools ask_person, await_answer, get_handoff and list_waiting \
         (docs/MCP.md). Each POST is one JSON-RPC message, answered on its own (no session); a \
         tool call may wait up to the service's MCP wait for a person's answer, holding a long-poll place."),
];

const MCP_ANSWER: &[Success] = &[ok(Body::JsonRpc)];

/// The route of an agent's Model Context Protocol client: a `POST` of a
/// JSON-RPC message by an agent token, held open while a tool waits.
const fn mcp(
    id: RouteId,
    path: &'static str,
    summary: &'static str,
    description: &'static str,
) -> Route {
    let mut route = plain(
        id,
        Post,
        path,
        Access::Scopes(AGENT),
        summary,
        description,
        MCP_ANSWER,
    );
    route.audience = Audience::Agent;
    route.request = Body::JsonRpc;
    route.streams = true;
    route
}

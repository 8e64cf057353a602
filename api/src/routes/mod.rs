//! The route table (contracts C19, C20, C22): every route of the service,
//! the JSON API and the person's pages alike, with its method, path
//! template, who may call it, whether a signed-in person's cookie may be
//! used on it, what it takes and what it answers. The server builds its
//! whole router from this table (one handler per [`RouteId`]), the
//! OpenAPI document is generated from its JSON routes
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
    /// `text/html`: a page.
    Html,
    /// `application/x-www-form-urlencoded`: a page's form.
    Form,
    /// `text/css`: the pages' stylesheet.
    Stylesheet,
    /// `text/javascript`: the inbox's script.
    Script,
    /// `application/json`: a JSON-RPC message of the Model Context
    /// Protocol (its answer may be `text/event-stream`).
    JsonRpc,
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
    /// A page.
    pub const HTML: &str = "text/html; charset=utf-8";
    /// A page's form.
    pub const FORM: &str = "application/x-www-form-urlencoded";
    /// The pages' stylesheet.
    pub const STYLESHEET: &str = "text/css; charset=utf-8";
    /// The inbox's script.
    pub const SCRIPT: &str = "text/javascript; charset=utf-8";
}

/// Whom a route answers: a program or a person's browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// A program (the library's client, a script): the server checks the
    /// token (or, where [`Route::cookie`] allows it, the sign-in cookie)
    /// before the handler runs, a refusal is the error object, and the
    /// route is in the OpenAPI document.
    Program,
    /// A person's browser (C22): a page, the form it posts, or the pages'
    /// stylesheet and script. The page checks the sign-in cookie or the
    /// signed link itself and shows a refusal as an error page; every
    /// answer carries the pages' headers; the route is not in the OpenAPI
    /// document, which describes JSON.
    Browser,
    /// An agent's Model Context Protocol client (C28): JSON-RPC messages
    /// of the protocol's streamable HTTP transport. The token is checked
    /// as for a program and a refusal is the error object, but the
    /// protocol's own schema describes the messages, so the route is not
    /// in the OpenAPI document.
    Agent,
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
    /// `GET /`: the inbox, or the sign-in form.
    Inbox,
    /// `GET /inbox/rows`: the inbox's list alone.
    InboxRows,
    /// `GET /inbox/{id}`: one handoff's page.
    HandoffPage,
    /// `POST /inbox/{id}`: a form of the handoff's page.
    HandoffAction,
    /// `GET /h/{id}`: a signed link's page.
    LinkPage,
    /// `POST /h/{id}`: a form of a signed link's page.
    LinkAction,
    /// `POST /sign-in`: the sign-in form.
    SignIn,
    /// `POST /sign-out`: the sign-out form.
    SignOut,
    /// `GET /static/inbox.css`.
    Stylesheet,
    /// `GET /static/inbox.js`.
    Script,
    /// `POST /mcp`: the Model Context Protocol over streamable HTTP.
    Mcp,
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
    /// Whom it answers: a program (JSON, in the document) or a browser.
    pub audience: Audience,
    /// Whether a signed-in person's sign-in cookie may stand for their
    /// `person` token on it (C22): the reads of the inbox's script and the
    /// pages of a signed-in person, never a JSON route that changes
    /// anything (a page's form carries an anti-forgery token besides).
    pub cookie: bool,
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
    /// Whether the OpenAPI document describes it: the JSON routes, not the
    /// pages.
    pub fn documented(&self) -> bool {
        self.audience == Audience::Program
    }

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

mod table;

pub use table::ROUTES;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashSet;

    use super::*;
    use RouteId as R;

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
        assert_eq!(ids.len(), 45);
    }

    #[test]
    fn a_cookie_reads_the_json_routes_and_acts_only_on_pages() {
        for route in ROUTES {
            if route.cookie && route.documented() {
                assert_eq!(route.method, Method::Get, "{:?}", route.id);
            }
            if route.cookie {
                assert!(
                    route.access.allows(Some(&[Scope::Person])),
                    "{:?}",
                    route.id
                );
            }
        }
        let cookie = |id| route(id).cookie;
        assert!([R::Events, R::ListRecords, R::Get, R::History]
            .into_iter()
            .all(cookie));
        assert!(![R::List, R::Wait, R::Attach, R::Export, R::LinkPage]
            .into_iter()
            .any(cookie));
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
        for id in [
            R::CreateWave,
            R::Open,
            R::ClaimWake,
            R::RecordTaskBody,
            R::Mcp,
        ] {
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

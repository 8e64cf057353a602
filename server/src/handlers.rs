//! The router, built from the route table alone, and the handlers of the
//! JSON routes that answer once (the streams are in [`crate::streams`],
//! the pages in [`crate::web`]). Each handler calls the `Store`'s
//! public methods, as the command line does, and answers with the shape
//! the matching command prints with `--json`.

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, Method as HttpMethod, StatusCode, Uri};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Json, Router};
use lf_handoff_adapters::{ListQuery, PruneOptions, StoreError};
use lf_handoff_api::error::LINK_FOR_ANOTHER_NAME;
use lf_handoff_api::requests::{
    self, ClaimWake, CreateTask, Extend, LinkRequest, ListParams, OpenRequest, Prune, Reason,
    Summary,
};
use lf_handoff_api::routes::{content_type, Audience, Method, Route, RouteId, ROUTES};
use lf_handoff_api::{openapi, Category, Claimed, ErrorResponse, Health, LinkJson, Opened, Pruned};
use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::id::{
    InteractiveHandoffId, ProjectSessionId, TaskPrId, TaskSessionId, WaveId,
};
use lf_handoff_domain::interactive_handoff::{
    Answer as HandoffAnswer, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffParent,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::wave::Wave;
use time::OffsetDateTime;
use tower_http::catch_panic::CatchPanicLayer;

use crate::error::ApiError;
use crate::extract::{IdParam, JsonBody, NoBody, Who};
use crate::layers::{authorize, observe, panicked};
use crate::mcp;
use crate::state::AppState;
use crate::streams;
use crate::tokens::Caller;
use crate::web;

/// A handler's answer.
type Answer = Result<Response, ApiError>;

/// The service: every route of the table ([`ROUTES`]) with its handler,
/// and no other. The JSON routes sit behind the authorization layer, and
/// errors of routing itself (an unknown path, a method a JSON path does
/// not take) are the error object; the pages get their headers and their
/// own 405 ([`web::pages`]); logging and the panic layer wrap both.
pub fn app(state: AppState) -> Router {
    let mut programs = Router::new();
    let mut browsers = Router::new();
    for route in ROUTES {
        match route.audience {
            Audience::Program | Audience::Agent => {
                programs = programs.route(route.path, handler(route))
            }
            Audience::Browser => browsers = browsers.route(route.path, handler(route)),
        }
    }
    programs
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method)
        .route_layer(from_fn_with_state(state.clone(), authorize))
        .merge(web::pages(browsers))
        .layer(CatchPanicLayer::custom(panicked))
        .layer(from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// The handler of each route, on the route's method (a `GET` also
/// answers `HEAD`). The match is exhaustive, so a route added to the
/// table without a handler does not compile.
fn handler(route: &Route) -> MethodRouter<AppState> {
    let method = match route.method {
        Method::Get => MethodFilter::GET,
        Method::Post => MethodFilter::POST,
    };
    match route.id {
        RouteId::CreateWave => on(method, create_wave),
        RouteId::CreateProject => on(method, create_project),
        RouteId::CreateTask => on(method, create_task),
        RouteId::GetWave => on(method, get_wave),
        RouteId::GetProject => on(method, get_project),
        RouteId::GetTask => on(method, get_task),
        RouteId::GetTaskPr => on(method, get_task_pr),
        RouteId::ListParents => on(method, list_parents),
        RouteId::RecordWaveBody => on(method, record_wave_body),
        RouteId::RecordProjectBody => on(method, record_project_body),
        RouteId::RecordTaskBody => on(method, record_task_body),
        RouteId::Open => on(method, open),
        RouteId::List => on(method, list),
        RouteId::ListRecords => on(method, list_records),
        RouteId::Get => on(method, get_handoff),
        RouteId::Attach => on(method, attach),
        RouteId::Complete => on(method, complete),
        RouteId::Back => on(method, back),
        RouteId::Fail => on(method, fail),
        RouteId::Extend => on(method, extend),
        RouteId::Link => on(method, link),
        RouteId::ClaimWake => on(method, claim_wake),
        RouteId::History => on(method, history),
        RouteId::Wait => on(method, streams::wait),
        RouteId::Events => on(method, streams::events),
        RouteId::Expire => on(method, expire),
        RouteId::ExpireRecords => on(method, expire_records),
        RouteId::Prune => on(method, prune),
        RouteId::Export => on(method, streams::export),
        RouteId::Import => on(method, streams::import),
        RouteId::Healthz => on(method, healthz),
        RouteId::Readyz => on(method, readyz),
        RouteId::Metrics => on(method, metrics),
        RouteId::OpenApi => on(method, openapi_document),
        RouteId::Inbox => on(method, web::inbox),
        RouteId::InboxRows => on(method, web::inbox_rows),
        RouteId::HandoffPage => on(method, web::handoff_page),
        RouteId::HandoffAction => on(method, web::handoff_action),
        RouteId::LinkPage => on(method, web::link_page),
        RouteId::LinkAction => on(method, web::link_action),
        RouteId::SignIn => on(method, web::sign_in),
        RouteId::SignOut => on(method, web::sign_out),
        RouteId::Stylesheet => on(method, web::style),
        RouteId::Script => on(method, web::script),
        RouteId::Mcp => on(method, mcp::mcp),
    }
}

async fn unknown_route(method: HttpMethod, uri: Uri) -> ApiError {
    // The path only: a query may carry a token (a sign-in link).
    ApiError::plain(
        Category::NotFound,
        format!(
            "there is no route {method} {}; the routes are listed in /v1/openapi.json",
            uri.path()
        ),
    )
}

async fn wrong_method(method: HttpMethod, uri: Uri) -> ApiError {
    let allowed: Vec<&str> = ROUTES
        .iter()
        .filter(|route| route.documented() && same_shape(route.path, uri.path()))
        .map(|route| route.method.as_str())
        .collect();
    ApiError::plain(
        Category::MethodNotAllowed,
        format!(
            "{} does not take {method}; use {}",
            uri.path(),
            if allowed.is_empty() {
                "another method".to_string()
            } else {
                allowed.join(" or ")
            }
        ),
    )
}

/// Whether `path` fits the route template `template`.
pub(crate) fn same_shape(template: &str, path: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    a.len() == b.len() && a.iter().zip(&b).all(|(t, p)| t.starts_with('{') || t == p)
}

/// The JSON answer `value` with `status`.
fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    (status, Json(value)).into_response()
}

fn ok(value: &impl serde::Serialize) -> Answer {
    Ok(json(StatusCode::OK, value))
}

fn parse<T>(
    id: &str,
    parse: impl Fn(&str) -> Result<T, lf_handoff_domain::DomainError>,
) -> Result<T, ApiError> {
    parse(id).map_err(|e| ApiError::from(StoreError::from(e)))
}

fn handoff_id(id: &IdParam) -> Result<InteractiveHandoffId, ApiError> {
    parse(&id.0, InteractiveHandoffId::parse)
}

fn missing(what: &str, id: &str) -> ApiError {
    ApiError::from(StoreError::NotFound(format!("{what} {id} does not exist")))
}

async fn create_wave(
    State(state): State<AppState>,
    Who(caller): Who,
    JsonBody(wave): JsonBody<Wave>,
) -> Answer {
    state.store_as(&caller.name).create_wave(&wave).await?;
    Ok(json(StatusCode::CREATED, &wave))
}

async fn create_project(
    State(state): State<AppState>,
    Who(caller): Who,
    JsonBody(project): JsonBody<ProjectSession>,
) -> Answer {
    state
        .store_as(&caller.name)
        .create_project_session(&project)
        .await?;
    Ok(json(StatusCode::CREATED, &project))
}

async fn create_task(
    State(state): State<AppState>,
    Who(caller): Who,
    JsonBody(body): JsonBody<CreateTask>,
) -> Answer {
    state
        .store_as(&caller.name)
        .create_task_session(&body.task, &body.pr)
        .await?;
    Ok(json(StatusCode::CREATED, &body.task))
}

/// A parent as `task body --json` prints it: the wave, project or task
/// itself.
fn parent_json(parent: &Parent) -> Response {
    match parent {
        Parent::Wave(wave) => json(StatusCode::OK, wave),
        Parent::Project(project) => json(StatusCode::OK, project),
        Parent::Task(task) => json(StatusCode::OK, task),
    }
}

async fn read_parent(state: &AppState, reference: InteractiveHandoffParent) -> Answer {
    match state.store().get_parent(&reference).await? {
        Some(parent) => Ok(parent_json(&parent)),
        None => Err(missing("parent", &reference.to_string())),
    }
}

async fn list_parents(State(state): State<AppState>, RawQuery(query): RawQuery) -> Answer {
    let query = requests::parse_parent_query(query.as_deref().unwrap_or_default())?;
    ok(&state.store().list_parents(query).await?)
}

async fn get_wave(State(state): State<AppState>, id: IdParam) -> Answer {
    let id = parse(&id.0, WaveId::parse)?;
    read_parent(&state, InteractiveHandoffParent::Wave(id)).await
}

async fn get_project(State(state): State<AppState>, id: IdParam) -> Answer {
    let id = parse(&id.0, ProjectSessionId::parse)?;
    read_parent(&state, InteractiveHandoffParent::Project(id)).await
}

async fn get_task(State(state): State<AppState>, id: IdParam) -> Answer {
    let id = parse(&id.0, TaskSessionId::parse)?;
    read_parent(&state, InteractiveHandoffParent::Task(id)).await
}

async fn get_task_pr(State(state): State<AppState>, id: IdParam) -> Answer {
    let pr_id = parse(&id.0, TaskPrId::parse)?;
    match state.store().get_task_pr(&pr_id).await? {
        Some(pr) => ok(&pr),
        None => Err(missing("task PR", &id.0)),
    }
}

async fn record_body(
    state: &AppState,
    caller: &Caller,
    reference: InteractiveHandoffParent,
    process: ChildProcessGeneration,
) -> Answer {
    let parent = state
        .store_as(&caller.name)
        .record_body(&reference, process)
        .await?;
    Ok(parent_json(&parent))
}

async fn record_wave_body(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(process): JsonBody<ChildProcessGeneration>,
) -> Answer {
    let id = parse(&id.0, WaveId::parse)?;
    record_body(&state, &caller, InteractiveHandoffParent::Wave(id), process).await
}

async fn record_project_body(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(process): JsonBody<ChildProcessGeneration>,
) -> Answer {
    let id = parse(&id.0, ProjectSessionId::parse)?;
    record_body(
        &state,
        &caller,
        InteractiveHandoffParent::Project(id),
        process,
    )
    .await
}

async fn record_task_body(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(process): JsonBody<ChildProcessGeneration>,
) -> Answer {
    let id = parse(&id.0, TaskSessionId::parse)?;
    record_body(&state, &caller, InteractiveHandoffParent::Task(id), process).await
}

async fn open(
    State(state): State<AppState>,
    Who(caller): Who,
    JsonBody(body): JsonBody<OpenRequest>,
) -> Answer {
    let store = state.store_as(&caller.name);
    let request = body.into_open(store.now())?;
    let (handoff, created) = store.open_interactive_handoff(request).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json(
        status,
        &Opened {
            created,
            handoff: state.handoff_json(&caller, handoff),
        },
    ))
}

async fn list(State(state): State<AppState>, RawQuery(query): RawQuery) -> Answer {
    let (handoffs, now) = listed(&state, query.as_deref()).await?;
    let rows: Vec<_> = handoffs.iter().map(|h| h.list_row(now)).collect();
    ok(&rows)
}

async fn list_records(
    State(state): State<AppState>,
    Who(caller): Who,
    RawQuery(query): RawQuery,
) -> Answer {
    let (handoffs, _) = listed(&state, query.as_deref()).await?;
    ok(&state.handoff_jsons(&caller, handoffs))
}

/// The handoffs a list query selects, and the time they were read.
async fn listed(
    state: &AppState,
    query: Option<&str>,
) -> Result<(Vec<InteractiveHandoff>, OffsetDateTime), ApiError> {
    let store = state.store();
    let params = ListParams::parse(query.unwrap_or_default())?;
    let handoffs = store
        .list_interactive_handoffs(params.into_query(store.now())?)
        .await?;
    Ok((handoffs, store.now()))
}

fn handoff_json(state: &AppState, caller: &Caller, handoff: InteractiveHandoff) -> Answer {
    ok(&state.handoff_json(caller, handoff))
}

async fn get_handoff(State(state): State<AppState>, Who(caller): Who, id: IdParam) -> Answer {
    let handoff_id = handoff_id(&id)?;
    match state.store().get_interactive_handoff(&handoff_id).await? {
        Some(handoff) => handoff_json(&state, &caller, handoff),
        None => Err(missing("handoff", &id.0)),
    }
}

async fn attach(State(state): State<AppState>, Who(caller): Who, id: IdParam, _: NoBody) -> Answer {
    let id = handoff_id(&id)?;
    let store = state.store_as(&caller.name);
    let handoff = store.attach_interactive_handoff(&id).await?;
    handoff_json(&state, &caller, handoff)
}

async fn finish(
    state: &AppState,
    caller: &Caller,
    id: &IdParam,
    (outcome, answer): (InteractiveHandoffOutcome, Option<HandoffAnswer>),
) -> Answer {
    let id = handoff_id(id)?;
    let store = state.store_as(&caller.name);
    let handoff = store
        .finish_interactive_handoff(&id, &outcome, answer.as_ref())
        .await?;
    handoff_json(state, caller, handoff)
}

async fn complete(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(body): JsonBody<Summary>,
) -> Answer {
    finish(&state, &caller, &id, requests::completed(body)).await
}

async fn back(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(body): JsonBody<Summary>,
) -> Answer {
    finish(&state, &caller, &id, requests::handed_back(body)).await
}

async fn fail(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(body): JsonBody<Reason>,
) -> Answer {
    finish(&state, &caller, &id, requests::failed(body)).await
}

async fn extend(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(body): JsonBody<Extend>,
) -> Answer {
    let id = handoff_id(&id)?;
    let store = state.store_as(&caller.name);
    let until = body.until(store.now())?;
    let handoff = store.extend_interactive_handoff(&id, until).await?;
    handoff_json(&state, &caller, handoff)
}

/// `POST /v1/handoffs/{id}/link`: a signed link to a handoff that exists,
/// acting as `link:` and the token's name (C29: no token makes a link
/// that acts under another name, so `for`, when given, must be that
/// name), for at most 30 days. The route takes only scope `person`: an
/// operator's token makes no link, as operators do not finish handoffs.
async fn link(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(body): JsonBody<LinkRequest>,
) -> Answer {
    let handoff_id = handoff_id(&id)?;
    let maker = caller.name.as_str();
    if let Some(asked) = body.holder.as_deref().filter(|asked| *asked != maker) {
        return Err(ApiError(ErrorResponse::new(
            Category::Forbidden,
            LINK_FOR_ANOTHER_NAME,
            format!(
                "a link acts as the token that makes it: this token makes links for {maker:?} \
                 only, not for {asked:?}; leave for out, or make the link with that person's \
                 own token"
            ),
        )));
    }
    let valid_for = body.valid_for()?;
    let handoff = state
        .store()
        .get_interactive_handoff(&handoff_id)
        .await?
        .ok_or_else(|| missing("handoff", &id.0))?;
    let now = state.store().now();
    let expires = crate::links::link_expiry(handoff.expires_at, now, valid_for)?;
    let link = state.make_link(maker, &handoff.id, expires, "route")?;
    ok(&LinkJson {
        id: handoff.id.to_string(),
        link: link.url(state.public_url().unwrap_or_default()),
        holder: maker.to_string(),
        expires: OffsetDateTime::from_unix_timestamp(link.expires).unwrap_or(expires),
    })
}

async fn claim_wake(
    State(state): State<AppState>,
    Who(caller): Who,
    id: IdParam,
    JsonBody(body): JsonBody<ClaimWake>,
) -> Answer {
    let handoff_id = handoff_id(&id)?;
    let store = state.store_as(&caller.name);
    // The record comes from the claim's own change: it says who holds
    // the wake, and nothing (a prune) can come between.
    let answer = store
        .claim_interactive_handoff_wake(&handoff_id, body.generation)
        .await?;
    ok(&Claimed::new(
        answer.claimed,
        body.generation,
        Some(answer.handoff),
        store.now(),
    ))
}

async fn history(State(state): State<AppState>, id: IdParam) -> Answer {
    let id = handoff_id(&id)?;
    ok(&state.store().history(&id).await?)
}

async fn expire(State(state): State<AppState>, Who(caller): Who, _: NoBody) -> Answer {
    let store = state.store_as(&caller.name);
    let expired = store.expire_due().await?;
    let now = store.now();
    let rows: Vec<_> = expired.iter().map(|h| h.list_row(now)).collect();
    ok(&rows)
}

async fn expire_records(State(state): State<AppState>, Who(caller): Who, _: NoBody) -> Answer {
    let store = state.store_as(&caller.name);
    let expired = store.expire_due().await?;
    ok(&state.handoff_jsons(&caller, expired))
}

async fn prune(
    State(state): State<AppState>,
    Who(caller): Who,
    JsonBody(body): JsonBody<Prune>,
) -> Answer {
    let store = state.store_as(&caller.name);
    let cutoff = body.finished_before;
    let defaults = PruneOptions::finished_before(cutoff);
    let count = store
        .prune(PruneOptions {
            dry_run: body.dry_run,
            batch: body.batch.unwrap_or(defaults.batch),
            ..defaults
        })
        .await?;
    ok(&Pruned {
        handoffs: count.handoffs,
        events: count.events,
        dry_run: body.dry_run,
        finished_before: cutoff.to_offset(time::UtcOffset::UTC),
    })
}

async fn healthz(State(state): State<AppState>) -> Answer {
    ok(&Health {
        status: "ok".into(),
        backend: state.store().backend().into(),
    })
}

/// Ready when one read of the store succeeds now (no retries: a store
/// that does not answer makes the service not ready at once).
async fn readyz(State(state): State<AppState>) -> Answer {
    let store = state.store().clone().with_retry_window(Duration::ZERO);
    store
        .list_interactive_handoffs(ListQuery {
            limit: Some(1),
            ..ListQuery::default()
        })
        .await?;
    ok(&Health {
        status: "ok".into(),
        backend: store.backend().into(),
    })
}

async fn metrics(State(state): State<AppState>) -> Answer {
    let text = state.metrics().render(state.store()).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type::PROMETHEUS),
        )],
        text,
    )
        .into_response())
}

async fn openapi_document() -> Response {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    let text = DOCUMENT.get_or_init(openapi::document_json).clone();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type::JSON),
        )],
        text,
    )
        .into_response()
}

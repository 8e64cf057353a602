//! The person's pages (contracts C21, C22): the inbox at `/`, one page per
//! handoff, and the pages of signed links. Server-rendered HTML (askama
//! templates in `server/templates`, which escape every value unless told
//! otherwise, and nothing here tells them otherwise but the list the same
//! templates rendered), one stylesheet and one small script served from
//! the binary, and every action a plain `<form method=post>`.
//!
//! - **Sign-in**: `GET /?token=...` (the URL `serve` prints) or the
//!   sign-in form's `POST /sign-in` checks a token of scope `person` and
//!   sets the `lfh_session` cookie (HttpOnly, SameSite=Strict, Secure
//!   when the browser reaches the service over TLS, a week's `Max-Age`)
//!   to a sign-in signed with the link secret, which holds the token's
//!   stored hash's tag and an expiry, never the token; then redirects to
//!   `/`, so the token leaves the address bar. The sign-in is checked
//!   against the token table on every request: a revoked token's sign-in
//!   stops working once the tokens file is read again (SIGHUP).
//! - **Anti-forgery**: every form carries `csrf`, the HMAC of the cookie
//!   (or, on a link's page, of the link) under the link secret, checked in
//!   constant time on every POST; a POST whose `Origin` is another site's,
//!   or whose `Sec-Fetch-Site` is not `same-origin`, is refused first.
//! - **Links**: `GET /h/{id}?for&exp&sig` shows the handoff and the forms
//!   and never changes anything (mail and chat scanners open links);
//!   `POST` to the same URL acts as `link:NAME`. A finished handoff's link
//!   shows its outcome, and a POST to it writes nothing. A one-tap link
//!   (`&choice=VALUE`, signed) offers that choice alone, to confirm.
//! - **Answers** (C26, `answers.rs`): a handoff that asks shows one button
//!   per choice or its form's typed inputs; `action=answer` builds the
//!   answer from them and completes with it; a refused answer shows the
//!   form again with the values kept and the rule beside its field.
//! - **Headers**: a strict Content-Security-Policy (no inline script or
//!   style), `Referrer-Policy: same-origin` (a link's signature never
//!   leaves for another site in a `Referer`, and the browser still names
//!   this origin in the `Origin` of its forms), `X-Frame-Options: DENY`, `nosniff`, and no
//!   caching of pages.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::Router;
use lf_handoff_adapters::{ListQuery, StoreError};
use lf_handoff_api::requests::{self, Extend, Reason, Summary};
use lf_handoff_api::routes::{content_type, Audience, Method as RouteMethod, ROUTES};
use lf_handoff_api::{Category, Scope};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    refused_env_reason, Actor, HandoffEventKind, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffParent, InteractiveHandoffStatus,
};
use time::OffsetDateTime;

use crate::error::ApiError;
use crate::extract::{whole_body, Sender};
use crate::links::{rfc3339, LinkGrant, LinkRefusal};
use crate::state::AppState;
use crate::tokens::Caller;

mod answers;
mod forms;
mod views;

use forms::*;
pub(crate) use forms::{session_cookie, session_entry, sign_in, sign_out};
use views::*;

/// The sign-in cookie's name.
pub const COOKIE: &str = "lfh_session";

/// The pages' Content-Security-Policy: nothing but this origin's script,
/// style and connections; no inline script; no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src \
                       'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                       base-uri 'none'";

/// How many handoffs the inbox shows at most: the newest.
const PAGE: usize = 500;

/// A deadline this close (or passed) is urgent, and `due=soon` shows it.
const SOON: time::Duration = time::Duration::hours(1);

/// The last stretch before a deadline, shown as urgent.
const URGENT: time::Duration = time::Duration::minutes(15);

const STYLE: &str = include_str!("../../static/inbox.css");
const SCRIPT: &str = include_str!("../../static/inbox.js");

/// The pages' routes (`router`: the table's routes for a browser), with
/// their headers and their 405.
pub(crate) fn pages(router: Router<AppState>) -> Router<AppState> {
    router
        .method_not_allowed_fallback(wrong_method)
        .layer(map_response(page_headers))
}

/// The methods the page at `path` takes, from the route table: what the
/// `Allow` header of a 405 names. A `GET` page also answers `HEAD`. A
/// template without a parameter wins, as in the router (`/inbox/rows`
/// over `/inbox/{id}`).
fn allowed(path: &str) -> String {
    let pages = || {
        ROUTES.iter().filter(|route| {
            route.audience == Audience::Browser && crate::handlers::same_shape(route.path, path)
        })
    };
    let template = pages()
        .map(|route| route.path)
        .min_by_key(|template| template.contains('{'));
    let methods: Vec<&str> = pages()
        .filter(|route| Some(route.path) == template)
        .map(|route| match route.method {
            RouteMethod::Get => "GET, HEAD",
            RouteMethod::Post => "POST",
        })
        .collect();
    if methods.is_empty() {
        "GET, HEAD".to_string()
    } else {
        methods.join(", ")
    }
}

/// A page asked with a method it does not take: a 405 whose body is the
/// error page, as for any other refusal of a page, with `Allow`.
async fn wrong_method(method: Method, uri: Uri) -> Response {
    let allow = allowed(uri.path());
    // The path only: a link's query holds its signature.
    let mut response = error_page(ApiError::plain(
        Category::MethodNotAllowed,
        format!("{} does not take {method}; use {allow}", uri.path()),
    ));
    if let Ok(value) = HeaderValue::from_str(&allow) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

async fn page_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

fn asset(content_type: &'static str, text: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=300"),
            ),
        ],
        text,
    )
        .into_response()
}

pub(crate) async fn style() -> Response {
    asset(content_type::STYLESHEET, STYLE)
}

pub(crate) async fn script() -> Response {
    asset(content_type::SCRIPT, SCRIPT)
}

async fn rows(state: &AppState, filter: &Filter) -> Result<Vec<Row>, ApiError> {
    let store = state.store();
    let now = store.now();
    // A person sees what came last, never a registry's oldest handoffs:
    // the list read backwards, one page of the index. Those due soon are
    // read from the index of due handoffs, up to the hour ahead.
    let query = ListQuery {
        limit: Some(PAGE),
        newest_first: true,
        due_by: (filter.due == "soon").then(|| now.saturating_add(SOON)),
        ..filter.list_query()?
    };
    let handoffs = store.list_interactive_handoffs(query).await?;
    let mut rows = Vec::with_capacity(handoffs.len());
    for handoff in &handoffs {
        let who = match handoff.attached_at {
            Some(_) => attached_by(&store.history(&handoff.id).await?),
            None => None,
        };
        rows.push(row(handoff, who, now));
    }
    Ok(rows)
}

pub(crate) async fn inbox(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let (filter, token) = Filter::parse(query.as_deref().unwrap_or_default());
    if let Some(token) = token {
        // The sign-in URL is opened from a terminal or typed (the browser
        // says `Sec-Fetch-Site: none`); another site's link to it would sign
        // the person in as whoever made that link (login forgery).
        let from_another_site = headers
            .get("sec-fetch-site")
            .is_some_and(|site| matches!(site.as_bytes(), b"cross-site" | b"same-site"));
        if from_another_site {
            return sign_in_page(
                StatusCode::FORBIDDEN,
                Some(
                    "a sign-in link followed from another site is refused; open the URL `serve` \
                     printed yourself, or paste your token below"
                        .into(),
                ),
            );
        }
        return sign_in_with(&state, &token);
    }
    let session = match session(&state, &headers).await {
        Ok(session) => session,
        Err(error) => return error_page(error),
    };
    let Some(session) = session else {
        return match session_cookie(&headers) {
            Some(_) => {
                let mut page = sign_in_page(
                    StatusCode::UNAUTHORIZED,
                    Some(
                        "your sign-in is no longer valid (you signed out, it ran out, or the \
                         token was revoked)"
                            .into(),
                    ),
                );
                page.headers_mut()
                    .insert(header::SET_COOKIE, cookie_header(&state, "", Some(0)));
                page
            }
            None => sign_in_page(StatusCode::OK, None),
        };
    };
    let (status, error, rows) = match rows(&state, &filter).await {
        Ok(rows) => (StatusCode::OK, None, rows),
        Err(error) => (
            StatusCode::from_u16(error.0.status()).unwrap_or(StatusCode::BAD_REQUEST),
            Some(error.0.error.message),
            Vec::new(),
        ),
    };
    let rows_html = match (RowsView {
        filtered: filter.is_filtered(),
        rows,
    })
    .render()
    {
        Ok(text) => text,
        Err(error) => return html(StatusCode::OK, Err(error)),
    };
    let view = InboxView {
        person: session.caller.name.to_string(),
        csrf: state.link_secret().form_token(&session.cookie),
        statuses: filter.choices(),
        filter_query: filter.query_string(),
        filter,
        error,
        rows_html,
    };
    html(status, view.render())
}

/// The list alone, for the script to replace the inbox's with.
pub(crate) async fn inbox_rows(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    match session(&state, &headers).await {
        Ok(Some(_)) => {}
        Ok(None) => return error_page(ApiError::plain(Category::Unauthorized, "sign in first")),
        Err(error) => return error_page(error),
    }
    let (filter, _) = Filter::parse(query.as_deref().unwrap_or_default());
    match rows(&state, &filter).await {
        Ok(rows) => html(
            StatusCode::OK,
            RowsView {
                filtered: filter.is_filtered(),
                rows,
            }
            .render(),
        ),
        Err(error) => error_page(error),
    }
}

/// How a handoff's page is reached: signed in, or through a link (a
/// one-tap link names its choice).
struct Access {
    action_url: String,
    csrf: String,
    link_holder: Option<String>,
    choice: Option<String>,
}

async fn handoff_view(
    state: &AppState,
    id: &InteractiveHandoffId,
    access: Access,
    notice: Option<String>,
    error: Option<String>,
    sent: &answers::Sent<'_>,
) -> Result<HandoffView, ApiError> {
    let store = state.store();
    let handoff = store
        .get_interactive_handoff(id)
        .await?
        .ok_or_else(|| pruned(id))?;
    let history = store.history(id).await?;
    let now = store.now();
    let outcome = handoff.outcome.as_ref().map(|outcome| OutcomeView {
        heading: match outcome {
            InteractiveHandoffOutcome::Completed { .. } => "Completed".into(),
            InteractiveHandoffOutcome::HandedBack { .. } => "Handed back".into(),
            InteractiveHandoffOutcome::Failed { .. } => "Failed".into(),
            InteractiveHandoffOutcome::Expired => "Expired: its deadline passed".into(),
        },
        text: outcome.text().to_string(),
    });
    let events = history
        .iter()
        .map(|event| EventRow {
            at: rfc3339(event.at),
            at_text: event
                .at
                .format(time::macros::format_description!(
                    "[year]-[month]-[day] [hour]:[minute]:[second] UTC"
                ))
                .unwrap_or_else(|_| rfc3339(event.at)),
            kind: event.kind.as_str(),
            actor: event.actor.to_string(),
            detail: match (&event.detail, &event.answer) {
                (Some(detail), Some(answer)) => Some(format!("{detail} (answer: {answer})")),
                (None, Some(answer)) => Some(format!("answer: {answer}")),
                (detail, None) => detail.clone(),
            },
        })
        .collect();
    Ok(HandoffView {
        row: row(&handoff, attached_by(&history), now),
        active: handoff.is_active(),
        asks: answers::asks(&handoff, access.choice.as_deref(), sent),
        answer: answers::answer_view(&handoff),
        one_tap: access.choice.is_some(),
        outcome,
        cwd: handoff.cwd.display().to_string(),
        provider: handoff.provider.clone(),
        environment: handoff
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        refused_environment: handoff
            .environment
            .keys()
            .filter(|name| refused_env_reason(name).is_some())
            .cloned()
            .collect(),
        // The service's own address, so a person who has only the service
        // (and a person token) can paste it.
        attach_command: match state.public_url() {
            Some(url) => format!("lf-handoff --store {url} attach {}", handoff.id),
            None => format!("lf-handoff attach {}", handoff.id),
        },
        attach_argv: shell_line(&handoff.attach_argv),
        history: events,
        action_url: access.action_url,
        csrf: access.csrf,
        link_holder: access.link_holder,
        notice,
        error,
    })
}

fn pruned(id: &InteractiveHandoffId) -> ApiError {
    ApiError::from(StoreError::NotFound(format!(
        "handoff {id} does not exist (it may have been pruned after it finished)"
    )))
}

fn handoff_id(id: &str) -> Result<InteractiveHandoffId, ApiError> {
    InteractiveHandoffId::parse(id).map_err(|e| ApiError::from(StoreError::from(e)))
}

/// The `done` notice of a page reached after an action.
fn notice_of(query: Option<&str>) -> Option<String> {
    let query = query?;
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "done")
        .map(|(_, value)| match value.as_ref() {
            "complete" => "Completed.".to_string(),
            "answer" => "Answered.".to_string(),
            "back" => "Handed back.".to_string(),
            "fail" => "Failed.".to_string(),
            _ => "The deadline was moved.".to_string(),
        })
}

pub(crate) async fn handoff_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let session = match session(&state, &headers).await {
        Ok(session) => session,
        Err(error) => return error_page(error),
    };
    let Some(session) = session else {
        return sign_in_page(StatusCode::UNAUTHORIZED, Some("sign in first".into()));
    };
    let id = match handoff_id(&id) {
        Ok(id) => id,
        Err(error) => return error_page(error),
    };
    let access = Access {
        action_url: format!("/inbox/{id}"),
        csrf: state.link_secret().form_token(&session.cookie),
        link_holder: None,
        choice: None,
    };
    let sent = answers::Sent::default();
    match handoff_view(
        &state,
        &id,
        access,
        notice_of(query.as_deref()),
        None,
        &sent,
    )
    .await
    {
        Ok(view) => html(StatusCode::OK, view.render()),
        Err(error) => error_page(error),
    }
}

/// Acts on a handoff's page, then shows it (after a redirect, so a reload
/// does not send the form again), or shows it with the error.
async fn finish_page(
    state: &AppState,
    id: &InteractiveHandoffId,
    actor: &Actor,
    form: &Form,
    access: Access,
) -> Response {
    let store = state.store();
    let handoff = match store.get_interactive_handoff(id).await {
        Ok(Some(handoff)) => handoff,
        Ok(None) => return error_page(pruned(id)),
        Err(error) => return error_page(error.into()),
    };
    let result = if handoff.is_active() {
        act(state, actor, &handoff, form, access.choice.as_deref()).await
    } else {
        Err(ApiError::plain(
            Category::Conflict,
            "this handoff is already finished; nothing was changed",
        )
        .into())
    };
    match result {
        Ok(_) => {
            let done = form.get("action").unwrap_or_default();
            let separator = if access.action_url.contains('?') {
                '&'
            } else {
                '?'
            };
            let to = format!("{}{separator}done={done}", access.action_url);
            redirect(&to)
        }
        Err(Refused { error, refusal }) => {
            let status = StatusCode::from_u16(error.0.status()).unwrap_or(StatusCode::BAD_REQUEST);
            // The person's values stay in the form, the refusal beside
            // its field.
            let sent = answers::Sent {
                form: Some(form),
                refusal,
            };
            let message = Some(error.0.error.message);
            match handoff_view(state, id, access, None, message, &sent).await {
                Ok(view) => html(status, view.render()),
                Err(error) => error_page(error),
            }
        }
    }
}

pub(crate) async fn handoff_action(
    State(state): State<AppState>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let session = match session(&state, request.headers()).await {
        Ok(session) => session,
        Err(error) => return error_page(error),
    };
    let Some(session) = session else {
        return sign_in_page(StatusCode::UNAUTHORIZED, Some("sign in first".into()));
    };
    let id = match handoff_id(&id) {
        Ok(id) => id,
        Err(error) => return error_page(error),
    };
    let form = match read_form(&state, request, Sender::Known).await {
        Ok(form) => form,
        Err(error) => return error_page(error),
    };
    if let Err(error) = check_csrf(&state, &session.cookie, &form) {
        return error_page(error);
    }
    let access = Access {
        action_url: format!("/inbox/{id}"),
        csrf: state.link_secret().form_token(&session.cookie),
        link_holder: None,
        choice: None,
    };
    finish_page(&state, &id, &session.caller.name, &form, access).await
}

/// The link's query without the `done` notice an action adds.
fn link_query(query: Option<&str>) -> String {
    let query = query.unwrap_or_default();
    let mut kept = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key != "done" {
            kept.append_pair(&key, &value);
        }
    }
    kept.finish()
}

fn verify_link(state: &AppState, id: &str, query: &str) -> Result<LinkGrant, LinkRefusal> {
    let now = state.store().now();
    let grant = state.link_secret().verify(id, query, now)?;
    if !state.maker_holds(&grant) {
        return Err(LinkRefusal::MakerRevoked);
    }
    Ok(grant)
}

/// The page of a refused link.
fn refused_link(refusal: &LinkRefusal) -> Response {
    let status = match refusal {
        LinkRefusal::Malformed(_) => StatusCode::BAD_REQUEST,
        LinkRefusal::BadSignature
        | LinkRefusal::Expired(_)
        | LinkRefusal::TooLong(_)
        | LinkRefusal::MakerRevoked => StatusCode::FORBIDDEN,
    };
    message_page(
        status,
        "This link does not work",
        format!("{refusal}; nothing was changed"),
    )
}

fn link_access(state: &AppState, grant: &LinkGrant, query: &str) -> Access {
    Access {
        action_url: format!("/h/{}?{query}", grant.id),
        csrf: state.link_secret().form_token(&link_session(query)),
        link_holder: Some(grant.holder.clone()),
        choice: grant.choice.clone(),
    }
}

/// `GET /h/{id}?...`: the handoff and its forms; changes nothing.
pub(crate) async fn link_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let notice = notice_of(query.as_deref());
    let query = link_query(query.as_deref());
    let grant = match verify_link(&state, &id, &query) {
        Ok(grant) => grant,
        Err(refusal) => return refused_link(&refusal),
    };
    let access = link_access(&state, &grant, &query);
    let sent = answers::Sent::default();
    match handoff_view(&state, &grant.id, access, notice, None, &sent).await {
        Ok(view) => html(StatusCode::OK, view.render()),
        Err(error) => error_page(error),
    }
}

/// `POST /h/{id}?...`: acts as `link:NAME`.
pub(crate) async fn link_action(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let query = link_query(query.as_deref());
    let grant = match verify_link(&state, &id, &query) {
        Ok(grant) => grant,
        Err(refusal) => return refused_link(&refusal),
    };
    let form = match read_form(&state, request, Sender::Anyone).await {
        Ok(form) => form,
        Err(error) => return error_page(error),
    };
    if let Err(error) = check_csrf(&state, &link_session(&query), &form) {
        return error_page(error);
    }
    let access = link_access(&state, &grant, &query);
    finish_page(&state, &grant.id, &grant.actor, &form, access).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pages_405_names_the_methods_of_the_table() {
        assert_eq!(allowed("/inbox/ih_x"), "GET, HEAD, POST");
        assert_eq!(allowed("/h/ih_x"), "GET, HEAD, POST");
        assert_eq!(allowed("/inbox/rows"), "GET, HEAD");
        assert_eq!(allowed("/sign-out"), "POST");
        assert_eq!(allowed("/static/inbox.css"), "GET, HEAD");
        assert_eq!(allowed("/"), "GET, HEAD");
    }

    #[test]
    fn spans_read_as_people_say_them() {
        assert_eq!(span(time::Duration::seconds(45)), "45s");
        assert_eq!(span(time::Duration::minutes(12)), "12m");
        assert_eq!(span(time::Duration::minutes(185)), "3h 5m");
        assert_eq!(span(time::Duration::hours(51)), "2d 3h");
        assert_eq!(span(time::Duration::seconds(-5)), "0s");
    }

    #[test]
    fn a_command_line_is_quoted_where_it_needs_to_be() {
        let argv = ["tmux", "attach-session", "-t", "agent one", "it's"].map(String::from);
        assert_eq!(
            shell_line(&argv),
            r"tmux attach-session -t 'agent one' 'it'\''s'"
        );
    }

    #[test]
    fn a_forms_debug_names_its_fields_only() {
        let form =
            forms::Form::parse(b"token=lfh_SECRET&csrf=CSRF&action=complete").unwrap_or_default();
        let shown = format!("{form:?}");
        assert!(
            !shown.contains("SECRET") && !shown.contains("CSRF"),
            "{shown}"
        );
        assert!(shown.contains("token") && shown.contains("csrf"), "{shown}");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; lfh_session=lfh_x ; b=2"),
        );
        assert_eq!(session_cookie(&headers), Some("lfh_x"));
        headers.insert(header::COOKIE, HeaderValue::from_static("lfh_session="));
        assert_eq!(session_cookie(&headers), None);
    }

    fn check_origin_of(headers: &HeaderMap) -> Result<(), ApiError> {
        check_origin(headers, Some("https://handoffs.example"))
    }

    #[test]
    fn a_post_from_another_site_is_refused() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_static(value));
            }
            map
        };
        assert!(check_origin_of(&headers(&[("host", "h:1")])).is_ok());
        assert!(check_origin_of(&headers(&[("host", "h:1"), ("origin", "http://h:1")])).is_ok());
        assert!(check_origin_of(&headers(&[("host", "h:1"), ("origin", "http://evil")])).is_err());
        assert!(check_origin_of(&headers(&[("origin", "http://h:1")])).is_err());
        assert!(check_origin_of(&headers(&[("sec-fetch-site", "cross-site")])).is_err());
        assert!(check_origin_of(&headers(&[("sec-fetch-site", "same-origin")])).is_ok());
        assert!(check_origin_of(&headers(&[("origin", "null")])).is_err());
        // Behind a proxy that passes another Host on: the public URL.
        assert!(check_origin_of(&headers(&[
            ("host", "127.0.0.1:7381"),
            ("origin", "https://handoffs.example")
        ]))
        .is_ok());
        assert!(check_origin_of(&headers(&[
            ("host", "127.0.0.1:7381"),
            ("origin", "https://handoffs.example.evil")
        ]))
        .is_err());
        assert!(check_origin_of(&headers(&[
            ("origin", "null"),
            ("sec-fetch-site", "same-origin")
        ]))
        .is_ok());
    }
}

//! Sessions and forms of the person's pages: the sign-in cookie, the
//! sign-in and sign-out routes, a form's parse, its origin and
//! anti-forgery checks, and the actions a form carries out.

use super::*;
use crate::links::{SessionValue, SESSION_VALIDITY};
use crate::tokens::TokenEntry;
use lf_handoff_domain::interactive_handoff::AnswerRefusal;

/// The value of the sign-in cookie, if the request carries one.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// A signed-in person: their sign-in (the cookie's value) and who it
/// names.
pub(super) struct Session {
    pub(super) cookie: String,
    pub(super) caller: Caller,
}

/// The token entry a sign-in cookie's `value` names: a token of scope
/// `person` still in the tokens file, signed in less than
/// [`SESSION_VALIDITY`](crate::links::SESSION_VALIDITY) ago, and not signed
/// out (through any server of the store: the sign-out is in the store).
///
/// # Errors
/// The store's error (withheld, 503) when it cannot say whether the
/// sign-in was signed out: the caller refuses the request without taking
/// the person's cookie.
pub async fn session_entry(state: &AppState, value: &str) -> Result<Option<TokenEntry>, ApiError> {
    let Some(session) = SessionValue::parse(value, state.store().now()) else {
        return Ok(None);
    };
    let entry = {
        let secret = state.link_secret();
        state
            .tokens()
            .find(|entry| {
                entry.caller.scopes.contains(&Scope::Person)
                    && secret.check_session(&session, entry.hash())
            })
            .cloned()
    };
    let Some(entry) = entry else {
        return Ok(None);
    };
    if state.store().is_revoked(&session.revocation_key()).await? {
        return Ok(None);
    }
    Ok(Some(entry))
}

/// The signed-in person of `headers`' cookie, if any.
///
/// # Errors
/// As [`session_entry`].
pub(super) async fn session(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<Session>, ApiError> {
    let Some(cookie) = session_cookie(headers) else {
        return Ok(None);
    };
    Ok(session_entry(state, cookie).await?.map(|entry| Session {
        cookie: cookie.to_string(),
        caller: entry.caller,
    }))
}

pub(super) fn cookie_header(state: &AppState, value: &str, max_age: Option<u64>) -> HeaderValue {
    let mut text = format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict");
    if state.secure_cookies() {
        text.push_str("; Secure");
    }
    if let Some(age) = max_age {
        text.push_str(&format!("; Max-Age={age}"));
    }
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

pub(super) fn redirect(to: &str) -> Response {
    let location = HeaderValue::from_str(to).unwrap_or_else(|_| HeaderValue::from_static("/"));
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

/// Signs in with `token`: the cookie and a redirect to the inbox, or the
/// sign-in page saying why not.
pub(super) fn sign_in_with(state: &AppState, token: &str) -> Response {
    let tokens = state.tokens();
    let Some(entry) = tokens
        .entry_of(token)
        .filter(|entry| entry.caller.scopes.contains(&Scope::Person))
    else {
        return sign_in_page(
            StatusCode::UNAUTHORIZED,
            Some(
                "that token is not a person's token this service accepts (unknown, revoked, or \
                 without the scope person)"
                    .into(),
            ),
        );
    };
    let validity = SESSION_VALIDITY.as_secs();
    let expires = state
        .store()
        .now()
        .unix_timestamp()
        .saturating_add(i64::try_from(validity).unwrap_or(i64::MAX));
    let mut nonce = [0_u8; 16];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce).is_err() {
        return error_page(ApiError::plain(
            Category::Unavailable,
            "no randomness for a sign-in; try again",
        ));
    }
    let value = state
        .link_secret()
        .session_value(entry.hash(), expires, &nonce);
    let mut response = redirect("/");
    response.headers_mut().insert(
        header::SET_COOKIE,
        cookie_header(state, &value, Some(validity)),
    );
    response
}

pub(crate) async fn sign_in(State(state): State<AppState>, request: Request) -> Response {
    let form = match read_form(&state, request, Sender::Anyone).await {
        Ok(form) => form,
        Err(error) => return error_page(error),
    };
    match form.get("token") {
        Some(token) => sign_in_with(&state, token.trim()),
        None => sign_in_page(StatusCode::BAD_REQUEST, Some("paste a token".into())),
    }
}

pub(crate) async fn sign_out(State(state): State<AppState>, request: Request) -> Response {
    let session = match session(&state, request.headers()).await {
        Ok(session) => session,
        Err(error) => return error_page(error),
    };
    let Some(session) = session else {
        return redirect("/");
    };
    let form = match read_form(&state, request, Sender::Known).await {
        Ok(form) => form,
        Err(error) => return error_page(error),
    };
    if let Err(error) = check_csrf(&state, &session.cookie, &form) {
        return error_page(error);
    }
    // The sign-in ends on every server of the store, not only in this
    // browser, until it would have run out anyway.
    let Some(value) = SessionValue::parse(&session.cookie, state.store().now()) else {
        return redirect("/");
    };
    let until = OffsetDateTime::from_unix_timestamp(value.expires)
        .unwrap_or_else(|_| state.store().now() + SESSION_VALIDITY);
    if let Err(error) = state.store().revoke(&value.revocation_key(), until).await {
        return error_page(ApiError::from(error));
    }
    state.signed_out();
    tracing::info!(person = %session.caller.name.as_str(), "signed out");
    let mut response = redirect("/");
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie_header(&state, "", Some(0)));
    response
}

// ---------------------------------------------------------------------
// Forms

/// A form's fields, each given at most once. Its `Debug` names the fields
/// only: a sign-in form's `token` and every form's `csrf` are secrets.
#[derive(Default)]
pub(super) struct Form(pub(super) BTreeMap<String, String>);

impl std::fmt::Debug for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Form")
            .field(&self.0.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Form {
    pub(super) fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let mut fields = BTreeMap::new();
        for (key, value) in form_urlencoded::parse(body) {
            if fields
                .insert(key.clone().into_owned(), value.into_owned())
                .is_some()
            {
                return Err(ApiError::invalid(format!("the form gives {key} twice")));
            }
        }
        Ok(Self(fields))
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }
}

/// Refuses a POST another site's page sent: `Sec-Fetch-Site` other than
/// `same-origin`, or an `Origin` that is neither this service's `Host` nor
/// its public URL (`public`: what a proxy in front serves it as, when the
/// proxy does not pass the browser's `Host` on).
pub(super) fn check_origin(headers: &HeaderMap, public: Option<&str>) -> Result<(), ApiError> {
    let refused = || {
        ApiError::plain(
            Category::Forbidden,
            "this form was sent from another site; nothing was changed",
        )
    };
    if let Some(site) = headers.get("sec-fetch-site") {
        if site.as_bytes() != b"same-origin" {
            return Err(refused());
        }
    }
    let same_site = headers
        .get("sec-fetch-site")
        .is_some_and(|site| site.as_bytes() == b"same-origin");
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().map_err(|_| refused())?;
        if public.is_some_and(|public| origin.eq_ignore_ascii_case(public)) {
            return Ok(());
        }
        // A browser sends `null` when a referrer policy hides the page's
        // address; then only its Sec-Fetch-Site speaks for it.
        if origin == "null" {
            return if same_site { Ok(()) } else { Err(refused()) };
        }
        let host = headers
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
            .ok_or_else(refused)?;
        let origin_host = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
            .ok_or_else(refused)?;
        if !origin_host.eq_ignore_ascii_case(host) {
            return Err(refused());
        }
    }
    Ok(())
}

/// The form of a POST: from this site, declared as a form, within the
/// body limits for `sender` (the public ones for a form anyone can post:
/// sign-in, a link's form).
pub(super) async fn read_form(
    state: &AppState,
    request: Request,
    sender: Sender,
) -> Result<Form, ApiError> {
    check_origin(request.headers(), state.public_url())?;
    let media = crate::extract::media_type(request.headers());
    if media.as_deref() != Some("application/x-www-form-urlencoded") {
        return Err(ApiError::plain(
            Category::UnsupportedMediaType,
            "send the page's form (application/x-www-form-urlencoded)",
        ));
    }
    let body = whole_body(request, state, sender).await?;
    Form::parse(&body)
}

pub(super) fn check_csrf(state: &AppState, session: &str, form: &Form) -> Result<(), ApiError> {
    let presented = form.get("csrf").unwrap_or_default();
    if state.link_secret().check_form_token(session, presented) {
        Ok(())
    } else {
        Err(ApiError::plain(
            Category::Forbidden,
            "this form's anti-forgery token is not valid (an old page, or a form from elsewhere); \
             nothing was changed: reload the page and send it again",
        ))
    }
}

/// What a link's forms are tied to (their anti-forgery token's session).
pub(super) fn link_session(query: &str) -> String {
    format!("link\n{query}")
}

/// Why a form's action was refused: the error, and the answer's
/// refusal when an answer was at fault (to show beside its field).
pub(super) struct Refused {
    pub(super) error: ApiError,
    pub(super) refusal: Option<AnswerRefusal>,
}

impl From<ApiError> for Refused {
    fn from(error: ApiError) -> Self {
        Self {
            error,
            refusal: None,
        }
    }
}

impl From<StoreError> for Refused {
    fn from(error: StoreError) -> Self {
        ApiError::from(error).into()
    }
}

/// Carries out the form's action on `handoff` as `actor`; the notice to
/// show. `only` is the choice of a one-tap link (C26), the one answer
/// its form may give.
pub(super) async fn act(
    state: &AppState,
    actor: &Actor,
    handoff: &InteractiveHandoff,
    form: &Form,
    only: Option<&str>,
) -> Result<&'static str, Refused> {
    let id = &handoff.id;
    let store = state.store_as(actor);
    let text = || form.get("text").unwrap_or_default().to_string();
    if only.is_some() && (form.get("action") != Some("answer") || form.get("choice") != only) {
        return Err(ApiError::plain(
            Category::Forbidden,
            "this link confirms its one choice only; nothing was changed",
        )
        .into());
    }
    let ((outcome, answer), notice) = match form.get("action") {
        Some("answer") => {
            let answer = match answers::answer_of(handoff, form) {
                Ok(Some(answer)) => answer,
                Ok(None) => {
                    return Err(ApiError::invalid(
                        "this handoff asks for no answer: hand it back or complete it",
                    )
                    .into())
                }
                Err(refusal) => {
                    return Err(Refused {
                        error: ApiError::invalid(refusal.to_string()),
                        refusal: Some(refusal),
                    })
                }
            };
            let summary = match text().trim() {
                "" => answers::summary_of(handoff, &answer),
                _ => text(),
            };
            (
                requests::completed(Summary {
                    summary,
                    answer: Some(answer),
                }),
                "Answered.",
            )
        }
        Some("complete") => (
            requests::completed(Summary {
                summary: text(),
                answer: None,
            }),
            "Completed.",
        ),
        Some("back") => (
            requests::handed_back(Summary {
                summary: text(),
                answer: None,
            }),
            "Handed back.",
        ),
        Some("fail") => (requests::failed(Reason { reason: text() }), "Failed."),
        Some("extend") => {
            let until = Extend {
                until: None,
                by: Some(form.get("by").unwrap_or_default().trim().to_string()),
            }
            .until(store.now())?;
            store.extend_interactive_handoff(id, until).await?;
            return Ok("The deadline was moved.");
        }
        _ => {
            return Err(ApiError::invalid(
                "the form's action is not answer, complete, back, fail or extend",
            )
            .into())
        }
    };
    store
        .finish_interactive_handoff(id, &outcome, answer.as_ref())
        .await?;
    Ok(notice)
}

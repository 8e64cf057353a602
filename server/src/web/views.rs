//! What the person's pages show: the rows of the inbox, its filters, the
//! askama views of each page, and the pages of messages and errors.

use super::*;
use lf_handoff_adapters::ListQuery;

/// A deadline as shown.
#[derive(Debug)]
pub(super) struct Deadline {
    pub(super) at: String,
    pub(super) unix_ms: i128,
    pub(super) text: String,
    pub(super) urgent: bool,
}

/// A handoff as a row of the inbox (and the head of its page).
#[derive(Debug)]
pub(super) struct Row {
    pub(super) id: String,
    pub(super) href: String,
    pub(super) reason: String,
    pub(super) reason_short: String,
    pub(super) status: &'static str,
    pub(super) status_text: &'static str,
    pub(super) parent: String,
    pub(super) step: Option<String>,
    pub(super) home: String,
    pub(super) created: String,
    pub(super) age: String,
    pub(super) deadline: Option<Deadline>,
    pub(super) attached_by: Option<String>,
    /// What it asks for while active, what it was answered with once
    /// ended (C26).
    pub(super) answer: Option<String>,
}

pub(super) fn row(
    handoff: &InteractiveHandoff,
    attached_by: Option<String>,
    now: OffsetDateTime,
) -> Row {
    let reason_short: String = handoff.reason.chars().take(80).collect();
    Row {
        id: handoff.id.to_string(),
        href: format!("/inbox/{}", handoff.id),
        reason: handoff.reason.clone(),
        reason_short,
        status: handoff.status.as_str(),
        status_text: handoff.status.describe(),
        parent: handoff.parent.to_string(),
        step: handoff.step.as_ref().map(ToString::to_string),
        home: handoff.home.to_string(),
        created: rfc3339(handoff.created_at),
        age: span(now - handoff.created_at),
        deadline: handoff.expires_at.map(|at| {
            let left = at - now;
            Deadline {
                at: rfc3339(at),
                unix_ms: at.unix_timestamp_nanos() / 1_000_000,
                text: if left.is_positive() {
                    format!("due in {}", span(left))
                } else {
                    format!("overdue by {}", span(-left))
                },
                urgent: left < URGENT,
            }
        }),
        attached_by,
        answer: super::answers::row_answer(handoff),
    }
}

/// `span` as `45s`, `12m`, `3h 5m` or `2d 3h`.
pub(super) fn span(span: time::Duration) -> String {
    let seconds = span.whole_seconds().max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match () {
        () if seconds < 60 => format!("{seconds}s"),
        () if minutes < 60 => format!("{minutes}m"),
        () if hours < 48 => format!("{hours}h {}m", minutes % 60),
        () => format!("{days}d {}h", hours % 24),
    }
}

/// The name of whoever attached last, from a handoff's history.
pub(super) fn attached_by(
    history: &[lf_handoff_domain::interactive_handoff::HandoffEvent],
) -> Option<String> {
    history
        .iter()
        .rev()
        .find(|event| event.kind == HandoffEventKind::Attached)
        .map(|event| event.actor.to_string())
}

/// `argv` as one shell line, each word quoted when it needs to be.
pub(super) fn shell_line(argv: &[String]) -> String {
    let word = |word: &String| {
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
        if plain {
            word.clone()
        } else {
            format!("'{}'", word.replace('\'', r"'\''"))
        }
    };
    argv.iter().map(word).collect::<Vec<_>>().join(" ")
}

/// One choice of a select.
#[derive(Debug)]
pub(super) struct Choice {
    pub(super) value: &'static str,
    pub(super) label: &'static str,
    pub(super) selected: bool,
}

/// The inbox's filters, as given.
#[derive(Debug, Default)]
pub(super) struct Filter {
    pub(super) status: String,
    pub(super) parent: String,
    pub(super) due: String,
}

pub(super) const STATUSES: [(&str, &str); 5] = [
    ("active", "waiting or attached"),
    ("waiting", "waiting"),
    ("attached", "attached"),
    ("finished", "finished"),
    ("all", "all"),
];

impl Filter {
    pub(super) fn parse(query: &str) -> (Self, Option<String>) {
        let mut filter = Self::default();
        let mut token = None;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let value = value.trim().to_string();
            match key.as_ref() {
                "status" => filter.status = value,
                "parent" => filter.parent = value,
                "due" => filter.due = value,
                "token" => token = Some(value),
                _ => {}
            }
        }
        (filter, token)
    }

    pub(super) fn status(&self) -> &str {
        if self.status.is_empty() {
            "active"
        } else {
            &self.status
        }
    }

    pub(super) fn is_filtered(&self) -> bool {
        self.status() != "active" || !self.parent.is_empty() || !self.due.is_empty()
    }

    pub(super) fn query_string(&self) -> String {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("status", self.status())
            .append_pair("parent", &self.parent)
            .append_pair("due", &self.due)
            .finish()
    }

    pub(super) fn choices(&self) -> Vec<Choice> {
        STATUSES
            .iter()
            .map(|(value, label)| Choice {
                value,
                label,
                selected: *value == self.status(),
            })
            .collect()
    }

    pub(super) fn list_query(&self) -> Result<ListQuery, ApiError> {
        use InteractiveHandoffStatus as S;
        let (active_only, statuses) = match self.status() {
            "active" => (true, vec![]),
            "waiting" => (false, vec![S::Waiting]),
            "attached" => (false, vec![S::Attached]),
            "finished" => (
                false,
                vec![S::Completed, S::HandedBack, S::Failed, S::Expired],
            ),
            "all" => (false, vec![]),
            other => {
                return Err(ApiError::invalid(format!(
                    "status {other:?} is not active, waiting, attached, finished or all"
                )))
            }
        };
        if !matches!(self.due.as_str(), "" | "soon") {
            return Err(ApiError::invalid("due is empty (any) or soon"));
        }
        let parent = if self.parent.is_empty() {
            None
        } else {
            Some(
                InteractiveHandoffParent::parse(&self.parent)
                    .map_err(|e| ApiError::invalid(format!("parent: {e}")))?,
            )
        };
        Ok(ListQuery {
            parent,
            active_only,
            statuses,
            ..ListQuery::default()
        })
    }
}

#[derive(Template)]
#[template(path = "rows.html")]
pub(super) struct RowsView {
    pub(super) rows: Vec<Row>,
    pub(super) filtered: bool,
}

#[derive(Template)]
#[template(path = "inbox.html")]
pub(super) struct InboxView {
    pub(super) person: String,
    pub(super) csrf: String,
    pub(super) statuses: Vec<Choice>,
    pub(super) filter: Filter,
    pub(super) filter_query: String,
    pub(super) error: Option<String>,
    pub(super) rows_html: String,
}

#[derive(Template)]
#[template(path = "sign_in.html")]
pub(super) struct SignInView {
    pub(super) error: Option<String>,
}

#[derive(Template)]
#[template(path = "message.html")]
pub(super) struct MessageView {
    pub(super) heading: &'static str,
    pub(super) message: String,
}

/// One event of a handoff's page.
#[derive(Debug)]
pub(super) struct EventRow {
    pub(super) at: String,
    pub(super) at_text: String,
    pub(super) kind: &'static str,
    pub(super) actor: String,
    pub(super) detail: Option<String>,
}

/// An outcome as shown: its heading and text.
#[derive(Debug)]
pub(super) struct OutcomeView {
    pub(super) heading: String,
    pub(super) text: String,
}

#[derive(Template)]
#[template(path = "handoff.html")]
pub(super) struct HandoffView {
    pub(super) row: Row,
    pub(super) active: bool,
    /// What it asks for, while active (C26).
    pub(super) asks: Option<super::answers::AsksView>,
    /// What it was answered with, once ended.
    pub(super) answer: Option<super::answers::AnswerView>,
    /// Whether the page is a one-tap link's, which confirms its choice
    /// and offers nothing else.
    pub(super) one_tap: bool,
    pub(super) outcome: Option<OutcomeView>,
    pub(super) cwd: String,
    pub(super) provider: String,
    pub(super) environment: Vec<(String, String)>,
    /// The environment names `lf-handoff attach` refuses to run (C29),
    /// which only a store of an earlier release can hold.
    pub(super) refused_environment: Vec<String>,
    pub(super) attach_command: String,
    pub(super) attach_argv: String,
    pub(super) history: Vec<EventRow>,
    pub(super) action_url: String,
    pub(super) csrf: String,
    pub(super) link_holder: Option<String>,
    pub(super) notice: Option<String>,
    pub(super) error: Option<String>,
}

pub(super) fn html(status: StatusCode, rendered: Result<String, askama::Error>) -> Response {
    match rendered {
        Ok(text) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type::HTML),
            )],
            text,
        )
            .into_response(),
        Err(error) => {
            tracing::error!("a page could not be rendered: {error}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be rendered (a bug, logged)",
            )
                .into_response()
        }
    }
}

pub(super) fn sign_in_page(status: StatusCode, error: Option<String>) -> Response {
    html(status, SignInView { error }.render())
}

pub(super) fn message_page(status: StatusCode, heading: &'static str, message: String) -> Response {
    html(status, MessageView { heading, message }.render())
}

/// An error as a page, with the status the API gives it.
pub(super) fn error_page(error: ApiError) -> Response {
    let status =
        StatusCode::from_u16(error.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let heading = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::FORBIDDEN => "Refused",
        StatusCode::UNAUTHORIZED => "Sign in again",
        status if status.is_server_error() => "The service failed",
        _ => "Not done",
    };
    message_page(status, heading, error.0.error.message)
}

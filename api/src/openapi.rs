//! The OpenAPI 3.1 document of the service, generated from the code: the
//! paths from the route table's JSON routes ([`ROUTES`]; the pages answer
//! HTML and are left out), the schemas from the Rust
//! types the service sends and takes (derived with `utoipa` beside their
//! serde forms, the domain's behind its `openapi` feature). Nothing in it
//! is written by hand, so it cannot drift from what the service does;
//! `GET /v1/openapi.json` serves it.

use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::interactive_handoff::{HandoffEvent, InteractiveHandoffListRow};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::{TaskPr, TaskSession};
use lf_handoff_domain::wave::Wave;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::info::{InfoBuilder, LicenseBuilder};
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem, PathsBuilder,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::{ResponseBuilder, ResponsesBuilder};
use utoipa::openapi::schema::{ArrayBuilder, ComponentsBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{OpenApi, OpenApiBuilder, Ref, RefOr, Required};
use utoipa::ToSchema;

use crate::error::ErrorResponse;
use crate::json::{Claimed, Counts, HandoffJson, Health, LinkJson, Opened, Pruned, WaitJson};
use crate::requests::{
    ClaimWake, CreateTask, Extend, LinkRequest, OpenRequest, Prune, Reason, Summary,
};
use crate::routes::{content_type, Access, Body, Method, Route, ROUTES};

/// The name of the bearer token's security scheme in the document.
pub const SECURITY_SCHEME: &str = "token";

/// The schema name of the error object.
pub const ERROR_SCHEMA: &str = "ErrorResponse";

/// The document.
pub fn document() -> OpenApi {
    let mut paths = PathsBuilder::new();
    for route in ROUTES.iter().filter(|route| route.documented()) {
        let method = match route.method {
            Method::Get => HttpMethod::Get,
            Method::Post => HttpMethod::Post,
        };
        paths = paths.path(route.path, PathItem::new(method, operation(route)));
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("lf-handoff")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The lf-handoff registry of interactive handoffs as a service (contract C19). \
                     Every JSON body is the shape the matching command prints with --json; every \
                     error is the error object with the status of its category. Every route but \
                     /healthz and /readyz needs `Authorization: Bearer <token>`; a route's \
                     security requirement lists the scopes of which the token must hold one (C20).",
                ))
                .license(Some(
                    LicenseBuilder::new().name("MIT OR Apache-2.0").build(),
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components()))
        .build()
}

/// The document as pretty JSON.
pub fn document_json() -> String {
    // Serialising a document made of strings and maps cannot fail; an
    // empty object keeps the route answering JSON all the same.
    document()
        .to_pretty_json()
        .unwrap_or_else(|_| "{}".to_string())
}

/// Every schema the routes name, with the schemas they refer to.
fn components() -> utoipa::openapi::Components {
    let mut schemas = Vec::new();
    fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
    add::<Wave>(&mut schemas);
    add::<ProjectSession>(&mut schemas);
    add::<TaskSession>(&mut schemas);
    add::<TaskPr>(&mut schemas);
    add::<Parent>(&mut schemas);
    add::<ChildProcessGeneration>(&mut schemas);
    add::<CreateTask>(&mut schemas);
    add::<OpenRequest>(&mut schemas);
    add::<Opened>(&mut schemas);
    add::<HandoffJson>(&mut schemas);
    add::<InteractiveHandoffListRow>(&mut schemas);
    add::<Summary>(&mut schemas);
    add::<Reason>(&mut schemas);
    add::<Extend>(&mut schemas);
    add::<LinkRequest>(&mut schemas);
    add::<LinkJson>(&mut schemas);
    add::<ClaimWake>(&mut schemas);
    add::<Claimed>(&mut schemas);
    add::<HandoffEvent>(&mut schemas);
    add::<WaitJson>(&mut schemas);
    add::<Prune>(&mut schemas);
    add::<Pruned>(&mut schemas);
    add::<Counts>(&mut schemas);
    add::<Health>(&mut schemas);
    add::<ErrorResponse>(&mut schemas);
    ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .security_scheme(
            SECURITY_SCHEME,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("lfh_...")
                    .description(Some(
                        "A token made by `lf-handoff token create NAME --scope ...` (or printed by \
                         `lf-handoff serve` without a tokens file). Its name is the actor of \
                         every change made with it.",
                    ))
                    .build(),
            ),
        )
        .build()
}

fn operation(route: &Route) -> utoipa::openapi::path::Operation {
    let mut description = route.description.to_string();
    let scopes: Vec<&str> = route.access.scopes().iter().map(|s| s.as_str()).collect();
    match route.access {
        Access::Public => description.push_str("\n\nNo token needed."),
        Access::AnyToken => description.push_str("\n\nAny valid token."),
        Access::Scopes(_) => {
            description.push_str(&format!("\n\nScopes: {} (any one).", scopes.join(", ")));
        }
    }
    let mut operation = OperationBuilder::new()
        .operation_id(Some(route.operation_id()))
        .summary(Some(route.summary))
        .description(Some(description))
        .tag(tag(route));
    if route.access != Access::Public {
        operation = operation.security(SecurityRequirement::new(SECURITY_SCHEME, scopes));
    }
    if route.path.contains("{id}") {
        operation = operation.parameter(
            ParameterBuilder::new()
                .name("id")
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(Some("The id (ih_..., wv_..., ps_..., ts_... or pr_...)."))
                .schema(Some(string())),
        );
    }
    for param in route.query {
        let scalar = ObjectBuilder::new()
            .schema_type(match param.kind {
                "integer" => Type::Integer,
                "boolean" => Type::Boolean,
                _ => Type::String,
            })
            .build();
        let schema: RefOr<Schema> = if param.repeated {
            ArrayBuilder::new().items(scalar).build().into()
        } else {
            scalar.into()
        };
        operation = operation.parameter(
            ParameterBuilder::new()
                .name(param.name)
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(param.description))
                .schema(Some(schema)),
        );
    }
    if let Some((content_type, schema)) = content(route.request) {
        operation = operation.request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content(
                    content_type,
                    ContentBuilder::new().schema(Some(schema)).build(),
                )
                .build(),
        ));
    }
    let mut responses = ResponsesBuilder::new();
    for success in route.success {
        let mut response = ResponseBuilder::new().description(success.description);
        if let Some((content_type, schema)) = content(success.body) {
            response = response.content(
                content_type,
                ContentBuilder::new().schema(Some(schema)).build(),
            );
        }
        responses = responses.response(success.status.to_string(), response.build());
    }
    for status in route.error_statuses() {
        let mut response = ResponseBuilder::new()
            .description(error_description(status))
            .content(
                content_type::JSON,
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name(ERROR_SCHEMA)))
                    .build(),
            );
        if status == 503 {
            response = response.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(ObjectBuilder::new().schema_type(Type::Integer).build())
                    .description(Some(
                        "Seconds to wait before trying again: given when the cause is transient \
                         (a lock, an unreachable server, a service at a limit).",
                    ))
                    .build(),
            );
        }
        responses = responses.response(status.to_string(), response.build());
    }
    operation.responses(responses.build()).build()
}

/// The tag of each group of paths, by the paths' beginnings; a route
/// that none begins is tagged `service`.
const TAGS: &[(&str, &[&str])] = &[
    ("handoffs", &["/v1/handoffs"]),
    (
        "parents",
        &["/v1/waves", "/v1/projects", "/v1/tasks", "/v1/task-prs"],
    ),
    ("events", &["/v1/events"]),
    (
        "upkeep",
        &["/v1/expire", "/v1/prune", "/v1/export", "/v1/import"],
    ),
];

fn tag(route: &Route) -> &'static str {
    TAGS.iter()
        .find(|(_, starts)| starts.iter().any(|start| route.path.starts_with(start)))
        .map_or("service", |(tag, _)| tag)
}

fn string() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .build()
        .into()
}

/// The content type and schema of a body; `None` for no body.
fn content(body: Body) -> Option<(&'static str, RefOr<Schema>)> {
    Some(match body {
        Body::Empty => return None,
        Body::Json(name) => (content_type::JSON, Ref::from_schema_name(name).into()),
        Body::JsonList(name) => (
            content_type::JSON,
            ArrayBuilder::new()
                .items(Ref::from_schema_name(name))
                .build()
                .into(),
        ),
        Body::Lines => (
            content_type::LINES,
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(
                    "Versioned JSON lines: a header, the records, an end line with the counts.",
                ))
                .build()
                .into(),
        ),
        Body::EventStream(name) => (
            content_type::EVENT_STREAM,
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(format!(
                    "Server-sent events: `id: POSITION`, `data: ` and one {name} as JSON."
                )))
                .build()
                .into(),
        ),
        Body::Text => (content_type::PROMETHEUS, string()),
        Body::Html => (content_type::HTML, string()),
        Body::Form => (content_type::FORM, string()),
        Body::Stylesheet => (content_type::STYLESHEET, string()),
        Body::Script => (content_type::SCRIPT, string()),
        // Never in the document (an agent's route); an object if it were.
        Body::Document | Body::JsonRpc => (
            content_type::JSON,
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .build()
                .into(),
        ),
    })
}

fn error_description(status: u16) -> &'static str {
    match status {
        400 => "invalid input: a malformed body, query, id or value",
        401 => "no token, or one the service does not know",
        403 => "the token's scopes do not allow this route",
        404 => "no such handoff, parent or page start",
        409 => "the current state refuses the request (the kind says which rule)",
        413 => "the body is larger than the service takes",
        415 => "the body is not of the content type this route takes",
        503 => "the store cannot be used now, or the service is at a limit",
        _ => "an error",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::Value;

    use super::*;

    fn names_in(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    out.push(reference.clone());
                }
                map.values().for_each(|v| names_in(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| names_in(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_is_openapi_3_1_with_every_route_and_status() {
        let document: Value = serde_json::from_str(&document_json()).unwrap();
        assert!(document["openapi"].as_str().unwrap().starts_with("3.1"));
        for route in ROUTES {
            if !route.documented() {
                let item = &document["paths"][route.path];
                assert!(item.is_null(), "the page {} is in the document", route.path);
                continue;
            }
            let method = route.method.as_str().to_ascii_lowercase();
            let operation = &document["paths"][route.path][&method];
            assert!(operation.is_object(), "{} {}", method, route.path);
            for status in route.statuses() {
                assert!(
                    operation["responses"][status.to_string()].is_object(),
                    "{} {} lacks {status}",
                    method,
                    route.path
                );
            }
        }
    }

    #[test]
    fn every_reference_names_a_schema_of_the_document() {
        let document: Value = serde_json::from_str(&document_json()).unwrap();
        let mut references = Vec::new();
        names_in(&document, &mut references);
        assert!(!references.is_empty());
        for reference in references {
            let name = reference.strip_prefix("#/components/schemas/").unwrap();
            assert!(
                document["components"]["schemas"][name].is_object(),
                "{reference} is not in the document"
            );
        }
    }
}

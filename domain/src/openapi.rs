//! OpenAPI schemas of the domain's types, for the service's generated
//! document (only with the `openapi` feature). The types whose serde form
//! is derived get their schema derived beside it (`utoipa::ToSchema`);
//! those written by hand as text (ids, homes) get a text schema here.

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// A string schema with `description` and, when given, a `pattern`.
pub(crate) fn text_schema(description: &str, pattern: Option<&str>) -> RefOr<Schema> {
    let mut schema = ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description));
    if let Some(pattern) = pattern {
        schema = schema.pattern(Some(pattern));
    }
    RefOr::T(Schema::Object(schema.build()))
}

//! The OpenAPI schema of a form (C26), behind the `openapi` feature:
//! JSON Schema's own object form, written by hand because
//! [`FormSpec`]'s serde form is.

use super::FormSpec;

/// The schema of a form in the OpenAPI document: JSON Schema's own
/// object form, written by hand because [`FormSpec`]'s serde form is.
impl utoipa::PartialSchema for FormSpec {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{
            ArrayBuilder, Object, ObjectBuilder, Schema, SchemaType, Type,
        };
        let text = |description: &str| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(description))
                .build()
        };
        let count = |description: &str| {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .description(Some(description))
                .build()
        };
        let bound = |description: &str| {
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .description(Some(description))
                .build()
        };
        let field = ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "One property of the form: a scalar of JSON Schema's type string, integer, \
                 number or boolean, with the keywords listed and no others.",
            ))
            .property(
                "type",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["string", "integer", "number", "boolean"])),
            )
            .required("type")
            .property("title", text("What a person sees as the field's name."))
            .property("description", text("Help text shown beside the field."))
            .property(
                "default",
                Object::builder()
                    .schema_type(SchemaType::AnyValue)
                    .description(Some(
                        "The value the form starts with; it must fit the field.",
                    )),
            )
            .property(
                "enum",
                ArrayBuilder::new()
                    .items(Object::builder().schema_type(SchemaType::AnyValue))
                    .description(Some(
                        "The only values allowed (strings and numbers; 1 to 50, each once).",
                    )),
            )
            .property("minLength", count("Strings: the fewest characters."))
            .property("maxLength", count("Strings: the most characters."))
            .property("minimum", bound("Numbers: the smallest value."))
            .property("maximum", bound("Numbers: the largest value."))
            .build();
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "A form (C26): a flat JSON Schema object, the subset the Model Context \
                 Protocol's elicitation allows. 1 to 20 properties, each a scalar; no nesting, \
                 no other keyword. A spec outside the subset is refused naming the rule.",
            ))
            .property(
                "type",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["object"])),
            )
            .required("type")
            .property("title", text("The form's title."))
            .property("description", text("The form's help text."))
            .property(
                "properties",
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .description(Some("The fields by name, in the order a person sees them."))
                    .additional_properties(Some(Schema::Object(field))),
            )
            .required("properties")
            .property(
                "required",
                ArrayBuilder::new()
                    .items(ObjectBuilder::new().schema_type(Type::String))
                    .description(Some("The names of the fields an answer must have.")),
            )
            .into()
    }
}

impl utoipa::ToSchema for FormSpec {}

//! The four tools: their arguments, schemas and descriptions, what each
//! does on the store, and the protocol's `ServerHandler` that lists and
//! calls them.

use std::sync::Arc;
use std::time::Duration;

use lf_handoff_api::duration;
use lf_handoff_application::{ListQuery, Store, StoreError, StoreResult, Waited};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, OpenInteractiveHandoff, OpenOptions, StepKey,
};
use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::reply::{listed, tool_error, Question};
use crate::session::{Asker, Settings};
use crate::shape::{self, ChoiceArg};

/// The tools' names, in the order they are listed.
pub const TOOLS: [&str; 4] = ["ask_person", "await_answer", "get_handoff", "list_waiting"];

/// How many questions `list_waiting` lists at most, newest first.
const LIST_LIMIT: usize = 50;

const ASK_PERSON: &str = "Ask a person a question and wait for the answer. Use it when you need \
a human decision, a credential, an approval or a fact only a person has. The question is \
stored as a handoff: it reaches the person's inbox and notifications and survives a restart of \
you or of this server. The call waits a bounded time (under a minute) and returns either the \
answer (`state` answered or expired) or that the question is still waiting, with its `id`; then \
call await_answer with that id to keep waiting, and do other work meanwhile if you can. Give \
`choices` for a pick among options (e.g. allow/deny; the `answer` is the chosen value) or a \
`form` for a few fields (the `answer` is an object of them), not both; \
give a `step` key naming this point of your work so asking again (after a restart, a retry) \
returns the same question instead of asking the person twice. Only one question per agent waits \
at a time: await the waiting one before asking another.";

const AWAIT_ANSWER: &str = "Wait for the answer to a question asked with ask_person, by its \
`id` (ih_...). Waits a bounded time (under a minute) and returns the answer, or that it is \
still waiting (call again to keep waiting). Waiting never changes the question.";

const GET_HANDOFF: &str = "Read where a question (a handoff, `id` ih_...) stands now, without \
waiting: waiting, answered (with the answer) or expired.";

const LIST_WAITING: &str = "List your questions that no person has answered yet, newest first, \
with their ids.";

/// `ask_person`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AskPerson {
    /// The question, complete enough for a person who has not seen your
    /// conversation: what you need, why, and what happens with the answer.
    question: String,
    /// The options the person picks one of, 2 to 10 (e.g. allow and
    /// deny). Not with `form`.
    #[serde(default)]
    choices: Option<Vec<ChoiceArg>>,
    /// A few fields the person fills in: a flat JSON Schema object,
    /// `{"type": "object", "properties": {"name": {"type": "string",
    /// "title": "..."}}, "required": ["name"]}`, with properties of type
    /// string, integer, number or boolean (at most 20). Not with
    /// `choices`.
    #[serde(default)]
    form: Option<Map<String, Value>>,
    /// A name for this point of your work (e.g. `deploy-approval`): asking
    /// again with the same step returns the same question and its answer,
    /// even after a restart, instead of asking the person twice.
    #[serde(default)]
    step: Option<String>,
    /// How long the person has to answer (90s, 15m, 2h, 1d); after it the
    /// question expires. Default: no deadline.
    #[serde(default)]
    expires_in: Option<String>,
    /// The answer the question ends with if nobody answers by its
    /// deadline (with `expires_in`): one of the choices' values, or an
    /// object that fits the form (e.g. `"deny"`).
    #[serde(default)]
    on_expiry: Option<Value>,
}

/// `await_answer`'s and `get_handoff`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ById {
    /// The question's handoff id, `ih_...`, as ask_person returned it.
    id: String,
}

/// `list_waiting`'s arguments: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArguments {}

/// The MCP server of one registry: its four tools over `store`, for the
/// client `settings` describe.
#[derive(Debug, Clone)]
pub struct McpServer {
    store: Store,
    settings: Arc<Settings>,
}

impl McpServer {
    /// A server over `store` (its actor names whoever the history should
    /// name) for a client described by `settings`.
    pub fn new(store: Store, settings: Settings) -> Self {
        Self {
            store,
            settings: Arc::new(settings),
        }
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The tools, with their input schemas and descriptions.
    pub fn tools() -> Vec<Tool> {
        let tool = |name: &'static str,
                    description: &'static str,
                    schema: Result<Arc<JsonObject>, String>,
                    read_only: bool| {
            let schema = schema.unwrap_or_else(|_| Arc::new(JsonObject::new()));
            Tool::new(name, description, schema).with_annotations(
                ToolAnnotations::new()
                    .read_only(read_only)
                    .destructive(false),
            )
        };
        vec![
            tool(TOOLS[0], ASK_PERSON, schema_for_input::<AskPerson>(), false),
            tool(TOOLS[1], AWAIT_ANSWER, schema_for_input::<ById>(), true),
            tool(TOOLS[2], GET_HANDOFF, schema_for_input::<ById>(), true),
            tool(
                TOOLS[3],
                LIST_WAITING,
                schema_for_input::<NoArguments>(),
                true,
            ),
        ]
    }

    /// Calls the tool `name` with `arguments`: its result, or a tool error
    /// carrying the error object's kind (`None` for a tool it does not
    /// have).
    pub async fn call(&self, name: &str, arguments: Option<JsonObject>) -> Option<CallToolResult> {
        let arguments = Value::Object(arguments.unwrap_or_default());
        let result = match name {
            "ask_person" => match parse::<AskPerson>(name, arguments) {
                Ok(args) => self.ask_person(args).await,
                Err(error) => Err(error),
            },
            "await_answer" => match parse::<ById>(name, arguments) {
                Ok(args) => self.await_answer(&args.id).await,
                Err(error) => Err(error),
            },
            "get_handoff" => match parse::<ById>(name, arguments) {
                Ok(args) => self.get_handoff(&args.id).await,
                Err(error) => Err(error),
            },
            "list_waiting" => match parse::<NoArguments>(name, arguments) {
                Ok(_) => self.list_waiting().await,
                Err(error) => Err(error),
            },
            _ => return None,
        };
        Some(result.unwrap_or_else(|error| tool_error(&error)))
    }

    async fn ask_person(&self, args: AskPerson) -> StoreResult<CallToolResult> {
        let step = args.step.as_deref().map(StepKey::parse).transpose()?;
        let expires_at = match args.expires_in.as_deref() {
            Some(text) => {
                let span = duration::parse(text).map_err(|error| {
                    StoreError::InvalidInput(format!(
                        "expires_in: {}",
                        error.message(&duration::PERSON)
                    ))
                })?;
                Some(duration::after(self.store.now(), span).ok_or_else(|| {
                    StoreError::InvalidInput(
                        "expires_in reaches past the last time a timestamp holds".into(),
                    )
                })?)
            }
            None => None,
        };
        let parent = self.settings.parent.resolve(&self.store).await?;
        let asker = Asker::from(&parent);
        let place = &self.settings.place;
        let mut request = OpenInteractiveHandoff {
            parent: asker.parent,
            home: place.home.clone(),
            cwd: asker.worktree.unwrap_or_else(|| place.cwd.clone()),
            provider: asker.provider,
            provider_session_id: asker.provider_session_id,
            body_generation: asker.generation,
            reason: args.question,
            environment: Default::default(),
            attach_argv: place.attach_argv.clone(),
            options: OpenOptions::default(),
        };
        request.options.step = step.clone();
        request.options.expires_at = expires_at;
        shape::apply(&mut request, args.choices, args.form, args.on_expiry)?;
        let reason = request.reason.clone();
        let (handoff, created) = self.store.open_interactive_handoff(request).await?;
        // Without a step the parent's active handoff answers (C3): another
        // question of the parent is waiting, not this one.
        if !created && step.is_none() && handoff.reason != reason {
            return Err(StoreError::conflict(
                lf_handoff_domain::ConflictKind::ParentBusy,
                format!(
                    "another question is waiting for a person ({}: {:?}); wait for its answer with \
                     await_answer first, one question waits at a time",
                    handoff.id, handoff.reason
                ),
            ));
        }
        let mut question = self.waited(handoff).await?;
        question.created = Some(created);
        Ok(question.result())
    }

    async fn await_answer(&self, id: &str) -> StoreResult<CallToolResult> {
        let handoff = self.handoff(id).await?;
        Ok(self.waited(handoff).await?.result())
    }

    async fn get_handoff(&self, id: &str) -> StoreResult<CallToolResult> {
        let handoff = self.handoff(id).await?;
        Ok(self.question(&handoff).result())
    }

    /// The handoff `id` names.
    ///
    /// # Errors
    /// `InvalidInput` for a malformed id, `NotFound` for an unknown one.
    async fn handoff(&self, id: &str) -> StoreResult<InteractiveHandoff> {
        let id = InteractiveHandoffId::parse(id)?;
        self.store
            .get_interactive_handoff(&id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("handoff {id} does not exist")))
    }

    async fn list_waiting(&self) -> StoreResult<CallToolResult> {
        let query = ListQuery {
            parent: Some(self.settings.parent.reference()),
            active_only: true,
            newest_first: true,
            limit: Some(LIST_LIMIT),
            ..ListQuery::default()
        };
        let handoffs = match self.store.list_interactive_handoffs(query).await {
            Ok(handoffs) => handoffs,
            // A session wave not made yet has no question.
            Err(StoreError::NotFound(_)) => Vec::new(),
            Err(error) => return Err(error),
        };
        let questions: Vec<Question> = handoffs.iter().map(|h| self.question(h)).collect();
        Ok(listed(&questions))
    }

    /// `handoff` once it ended, or as it is after the bounded wait.
    async fn waited(&self, handoff: InteractiveHandoff) -> StoreResult<Question> {
        if !handoff.is_active() {
            return Ok(self.question(&handoff));
        }
        let handoff = match self.store.wait(&handoff.id, Some(self.wait())).await? {
            Waited::Ended(handoff) | Waited::TimedOut(handoff) => handoff,
        };
        Ok(self.question(&handoff))
    }

    fn wait(&self) -> Duration {
        self.settings.wait
    }

    fn question(&self, handoff: &InteractiveHandoff) -> Question {
        Question::of(handoff, self.settings.inbox.as_deref())
    }
}

/// The arguments of tool `name` as a `T`.
///
/// # Errors
/// `InvalidInput` naming the tool and what is wrong: a missing or unknown
/// argument, a value of the wrong type.
fn parse<T: DeserializeOwned>(name: &str, arguments: Value) -> StoreResult<T> {
    serde_json::from_value(arguments)
        .map_err(|error| StoreError::InvalidInput(format!("{name}'s arguments: {error}")))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("lf-handoff", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Ask a person with ask_person when you need a human decision, credential or \
                 approval. A call waits under a minute; when it returns that the question is \
                 still waiting, call await_answer with its id later. Questions are durable: \
                 the answer is kept for you whatever restarts.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(Self::tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        Self::tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.call(&request.name, request.arguments).await {
            Some(result) => Ok(result.into()),
            None => Err(ErrorData::invalid_params(
                format!(
                    "there is no tool {:?}; the tools are {}",
                    request.name,
                    TOOLS.join(", ")
                ),
                None,
            )),
        }
    }
}

/// Serves `server` over standard input and output until the client
/// closes them. A question waiting when the client goes stays open in the
/// store.
///
/// # Errors
/// `Unavailable` when the protocol cannot start (the client did not
/// initialize) or the transport fails.
pub async fn serve_stdio(server: McpServer) -> StoreResult<()> {
    let unavailable = |error: String| {
        StoreError::unavailable(lf_handoff_application::UnavailableKind::Other, error)
    };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| {
            unavailable(format!("the MCP client did not start the session: {error}"))
        })?;
    running
        .waiting()
        .await
        .map_err(|error| unavailable(format!("the MCP session failed: {error}")))?;
    Ok(())
}

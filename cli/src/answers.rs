//! A question with a shape (contract C26) on the command line: the spec
//! `open` asks with (`--choices`, `--form FILE`, `--on-expiry`) and the
//! answer `complete`, `back` and `answer` give (`--choice`, `--set
//! NAME=VALUE`, `--answer-json`). Whether an answer fits is the domain's
//! to say, through the store, so every face refuses the same answers with
//! the same words.

use std::io::Read as _;
use std::path::Path;

use clap::Args;
use lf_handoff_adapters::StoreError;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Answer, Choice, FormSpec, InteractiveHandoffOutcome, OpenOptions,
};
use serde_json::Value;

use crate::context::Context;
use crate::error::{CliError, CliResult};

/// The answer of `complete`, `back` and `answer` (C26): at most one of
/// `--choice`, `--set` (repeatable) and `--answer-json`.
#[derive(Debug, Default, Args)]
pub struct AnswerArgs {
    /// Answer with this choice's value.
    #[arg(long, value_name = "VALUE", conflicts_with_all = ["set", "answer_json"])]
    pub choice: Option<String>,
    /// Set a form's field, typed by the form (repeatable): NAME=VALUE;
    /// booleans take true or false.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_set, conflicts_with = "answer_json")]
    pub set: Vec<(String, String)>,
    /// The whole answer as JSON: "deny", or {"budget": 300}.
    #[arg(long = "answer-json", value_name = "JSON")]
    pub answer_json: Option<String>,
}

impl AnswerArgs {
    /// Whether any answer flag was given.
    pub fn is_given(&self) -> bool {
        self.choice.is_some() || !self.set.is_empty() || self.answer_json.is_some()
    }
}

/// A choice of `open --choices`: VALUE or VALUE=Label.
pub fn parse_choice(text: &str) -> Result<Choice, String> {
    Choice::parse(text).map_err(|e| e.to_string())
}

fn parse_set(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!("{text:?} must be NAME=VALUE"));
    };
    Ok((name.to_string(), value.to_string()))
}

/// The largest form file `--form` reads, in bytes.
const MAX_FORM_FILE: u64 = 256 * 1024;

/// `options` with the spec of `open`'s flags: the choices, the form read
/// from `form` (`-`: standard input) and the `on_expiry` answer.
///
/// # Errors
/// Exit 2 for a form file that cannot be read, is not JSON or is not a
/// form of the subset, or an `on_expiry` that is not JSON where a form
/// needs it; the store checks the rest when it opens.
pub fn with_spec(
    ctx: &Context,
    mut options: OpenOptions,
    choices: Vec<Choice>,
    form: Option<&Path>,
    on_expiry: Option<&str>,
) -> CliResult<OpenOptions> {
    if !choices.is_empty() {
        options.choices = Some(choices);
    }
    if let Some(path) = form {
        options.form = Some(read_form(ctx, path)?);
    }
    if let Some(text) = on_expiry {
        options.on_expiry = Some(match options.form {
            Some(_) => Answer::parse_json(text).map_err(|e| ctx.fail(e.into()))?,
            None => choice_or_json(text),
        });
    }
    Ok(options)
}

/// A choice's value as given, or JSON when it is a JSON string.
fn choice_or_json(text: &str) -> Answer {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::String(value)) => Answer::choice(value),
        _ => Answer::choice(text),
    }
}

fn read_form(ctx: &Context, path: &Path) -> CliResult<FormSpec> {
    let shown = path.display();
    let invalid = |message: String| ctx.fail(StoreError::InvalidInput(message));
    let mut text = String::new();
    let read = if path == Path::new("-") {
        std::io::stdin()
            .take(MAX_FORM_FILE + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_FORM_FILE + 1).read_to_string(&mut text))
    };
    read.map_err(|e| invalid(format!("--form {shown}: cannot read it: {e}")))?;
    if text.len() as u64 > MAX_FORM_FILE {
        return Err(invalid(format!(
            "--form {shown}: the file is larger than {MAX_FORM_FILE} bytes"
        )));
    }
    serde_json::from_str(&text).map_err(|e| invalid(format!("--form {shown}: {e}")))
}

/// The answer the flags give, if any: `--set` values are typed by the
/// handoff's form, which is read first.
///
/// # Errors
/// Exit 2 for JSON that does not parse, `--set` on a handoff without a
/// form, or a value that is not of its field's type; exit 3 for an
/// unknown handoff.
pub async fn answer_of(
    ctx: &Context,
    id: &InteractiveHandoffId,
    args: &AnswerArgs,
) -> CliResult<Option<Answer>> {
    if let Some(value) = &args.choice {
        return Ok(Some(Answer::choice(value.clone())));
    }
    if let Some(text) = &args.answer_json {
        return Answer::parse_json(text)
            .map(Some)
            .map_err(|e| ctx.fail(e.into()));
    }
    if args.set.is_empty() {
        return Ok(None);
    }
    let handoff = ctx
        .store
        .get_interactive_handoff(id)
        .await
        .map_err(|e| ctx.fail(e))?
        .ok_or_else(|| ctx.missing_handoff(id))?;
    let Some(form) = &handoff.form else {
        return Err(ctx.fail(StoreError::InvalidInput(format!(
            "handoff {id} asks with no form: --set fills a form's fields; answer choices with \
             --choice"
        ))));
    };
    form.answer_from_texts(args.set.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map(Some)
        .map_err(|refusal| ctx.fail(StoreError::InvalidInput(refusal.to_string())))
}

/// `answer`: the completion with the answer the flags give, and its
/// summary (by default "answered" and the answer), for `finish`.
///
/// # Errors
/// Exit 2 without an answer flag; as [`answer_of`] otherwise.
pub async fn completion(
    ctx: &Context,
    id: &InteractiveHandoffId,
    args: &AnswerArgs,
    summary: Option<String>,
) -> CliResult<(InteractiveHandoffOutcome, Option<Answer>)> {
    if !args.is_given() {
        return Err(CliError::usage(
            "answer needs --choice VALUE, --set NAME=VALUE or --answer-json JSON",
        ));
    }
    let Some(answer) = answer_of(ctx, id, args).await? else {
        return Err(CliError::usage("answer needs an answer"));
    };
    let summary = summary.unwrap_or_else(|| answer.default_summary());
    Ok((
        InteractiveHandoffOutcome::Completed { summary },
        Some(answer),
    ))
}

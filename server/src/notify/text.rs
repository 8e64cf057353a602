//! The `text` of a notification: what a Slack or Mattermost incoming
//! webhook shows as it is. Agent text is cleaned so it cannot mention,
//! link or format; a handoff that asks with choices (C26) lists each
//! choice with its one-tap link.

use lf_handoff_domain::interactive_handoff::{HandoffEvent, InteractiveHandoff};
use serde::Serialize;
use time::OffsetDateTime;

/// How many characters of an agent's text a message carries.
const TEXT_LIMIT: usize = 300;

/// A choice of a message and its one-tap link.
#[derive(Serialize)]
pub(super) struct ChoiceLink {
    pub(super) value: String,
    pub(super) label: String,
    pub(super) link: String,
}

/// What an agent or a person typed, fit for a webhook's `text`: control
/// characters dropped, cut to [`TEXT_LIMIT`] characters, `&`, `<`, `>`
/// escaped as Slack's formatting asks (so no `<!channel>`, `<@U123>` or
/// `<http://x|label>`), and a zero-width space after every `@` and between
/// `]` and `(`, so neither a mention (`@channel`, `@here`, `@all`,
/// `@everyone`, a person's name) nor a Markdown link whose label hides
/// where it goes (`[label](url)`) is rendered by Mattermost, Discord, or
/// Slack with `link_names`.
fn clean(typed: &str) -> String {
    let mut kept: String = typed
        .chars()
        .filter(|c| !c.is_control() && !is_bidi_control(*c))
        .take(TEXT_LIMIT)
        .collect();
    if typed.chars().count() > TEXT_LIMIT {
        kept.push('…');
    }
    kept.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('@', "@\u{200b}")
        .replace("](", "]\u{200b}(")
}

/// Unicode's bidirectional controls, which can make a line read other
/// than it is.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The `text` of a message.
pub(super) fn text(
    kind: &str,
    event: Option<&HandoffEvent>,
    handoff: Option<&InteractiveHandoff>,
    link: Option<&str>,
    choices: &[ChoiceLink],
    now: OffsetDateTime,
) -> String {
    let id = handoff
        .map(|handoff| handoff.id.to_string())
        .or_else(|| event.map(|event| event.handoff_id.to_string()))
        .unwrap_or_default();
    let mut line = match (kind, handoff) {
        ("opened", Some(handoff)) => format!(
            "A handoff waits for a person: {} ({id}, {})",
            clean(&handoff.reason),
            clean(&handoff.parent.to_string())
        ),
        ("finished" | "expired", Some(handoff)) => match &handoff.outcome {
            Some(outcome) if !outcome.text().is_empty() => format!(
                "Handoff {id} {}: {}",
                outcome.status().describe(),
                clean(outcome.text())
            ),
            Some(outcome) => format!("Handoff {id} {}", outcome.status().describe()),
            None => format!("Handoff {id} {}", handoff.status.describe()),
        },
        ("deadline_near", Some(handoff)) => {
            let left = handoff
                .expires_at
                .map(|deadline| lf_handoff_domain::timestamp::approximate(deadline - now))
                .unwrap_or_default();
            format!("Handoff {id} expires in {left}: {}", clean(&handoff.reason))
        }
        _ => format!("Handoff {id}: {kind} (it has been removed since)"),
    };
    if let Some(link) = link {
        line.push('\n');
        line.push_str(link);
    }
    for choice in choices {
        // Slack's link form, `<url|label>`, with the label cleaned.
        let label = clean(&choice.label).replace('|', "¦");
        line.push_str(&format!("\n• <{}|{label}> ({})", choice.link, choice.value));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_text_cannot_format_or_mention() {
        assert_eq!(
            clean("<!channel> a & b <https://x|y>"),
            "&lt;!channel&gt; a &amp; b &lt;https://x|y&gt;"
        );
        assert_eq!(clean("line\nbreak\u{202e}txt.exe"), "linebreaktxt.exe");
        assert_eq!(
            clean("@channel [Sign in](https://evil.example) ![x](y) mail@x"),
            "@\u{200b}channel [Sign in]\u{200b}(https://evil.example) ![x]\u{200b}(y) mail@\u{200b}x"
        );
        let long = "x".repeat(TEXT_LIMIT + 10);
        assert_eq!(clean(&long).chars().count(), TEXT_LIMIT + 1);
    }

    #[test]
    fn each_choice_is_a_line_with_its_link() {
        let choices = [
            ChoiceLink {
                value: "allow".into(),
                label: "Allow <!channel> | @here".into(),
                link: "https://x/h/ih_1?choice=allow&sig=s".into(),
            },
            ChoiceLink {
                value: "deny".into(),
                label: "Deny".into(),
                link: "https://x/h/ih_1?choice=deny&sig=t".into(),
            },
        ];
        let now = time::macros::datetime!(2026-12-06 12:00 UTC);
        let text = text(
            "opened",
            None,
            None,
            Some("https://x/h/ih_1"),
            &choices,
            now,
        );
        let lines: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(
            lines,
            [
                "• <https://x/h/ih_1?choice=allow&sig=s|Allow &lt;!channel&gt; ¦ @\u{200b}here> (allow)",
                "• <https://x/h/ih_1?choice=deny&sig=t|Deny> (deny)",
            ]
        );
    }
}

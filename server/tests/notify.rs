//! Notifications through a served store (C23, C29): what an agent typed
//! reaches a chat's incoming webhook as text, never as a mention, a
//! Slack-style link or a Markdown link.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use lf_handoff_server::NotifyConfig;
use serde_json::json;
use support::Served;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_text_in_a_notification_cannot_link_or_mention() {
    let (hooks, received) = support::receiver().await;
    let mut notify = NotifyConfig::new(vec![format!("{hooks}/hook")]);
    notify.lease = Duration::from_secs(3);
    let served = Served::start_configured(|config| config.notify = Some(notify)).await;
    let reason =
        "@channel @here @everyone @all hi @alice: [Reset your password](https://evil.example) \
                  ![x](https://evil.example/x.png) <!channel> <!here> <@U123> <#C123> \
                  <https://evil.example|your bank>";
    let told = support::told(&served, &received, &["/hook"], json!({"reason": reason})).await;
    let text = told["/hook"]["text"].as_str().unwrap();
    for rendered in [
        "@channel",
        "@here",
        "@everyone",
        "@all",
        "@alice",
        "](",
        "<!",
        "<@",
        "<#",
        "<https",
    ] {
        assert!(!text.contains(rendered), "{rendered:?} in {text}");
    }
    // Shown as typed, to a reader.
    for shown in [
        "@\u{200b}channel",
        "[Reset your password]\u{200b}(https://evil.example)",
        "&lt;!channel&gt;",
        "&lt;https://evil.example|your bank&gt;",
    ] {
        assert!(text.contains(shown), "{shown:?} not in {text}");
    }
    // The message's own link stays a link, on a line of its own.
    let link = told["/hook"]["link"].as_str().unwrap();
    assert!(text.ends_with(&format!("\n{link}")), "{text}");
}

//! The `http` backend's connections to a service at an `http://` URL: a
//! connection the service closed while it was idle is not used again, and
//! one whose answer was left partly unread is not used again either.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::{open_store, HttpConfig, StorageConfig, Store, Token, UnavailableKind};
use lf_handoff_server::Limits;
use support::Served;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The `http` backend's store for `url` with `token`, retrying nothing: a
/// call that loses its connection fails instead of being sent again.
async fn client(url: &str, token: &str) -> Store {
    let config = HttpConfig::new(url)
        .unwrap()
        .with_token(Token::new(token).unwrap());
    open_store(&StorageConfig::Http(config))
        .await
        .unwrap()
        .with_retry_window(Duration::ZERO)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_service_closed_while_idle_is_not_used_again() {
    let served = Served::start_with(Limits {
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let id = InteractiveHandoffId::parse(&served.open_id().await).unwrap();
    let person = client(&served.url, &served.person).await;
    assert!(person.get_interactive_handoff(&id).await.unwrap().is_some());
    // The service closes the keep-alive connection after 300 ms idle.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let attached = person.attach_interactive_handoff(&id).await.unwrap();
    assert_eq!(attached.id, id);
    tokio::time::sleep(Duration::from_millis(900)).await;
    let history = person.history(&id).await.unwrap();
    let attaches = history
        .iter()
        .filter(|event| event.kind.as_str() == "attached")
        .count();
    assert_eq!(attaches, 1, "{history:?}");
    served.stop().await;
}

/// A server that answers its first request with a 502 whose body is
/// larger than the client reads of an error, and every later one with an
/// empty JSON list; it counts the connections it accepted.
async fn oversized_error_then_lists() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let answered = answered.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0_u8; 1];
                loop {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                    if !head.ends_with(b"\r\n\r\n") {
                        continue;
                    }
                    head.clear();
                    let answer = if answered.fetch_add(1, Ordering::SeqCst) == 0 {
                        let body = vec![b'x'; 200 * 1024];
                        let mut answer = format!(
                            "HTTP/1.1 502 Bad Gateway\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        answer.extend_from_slice(&body);
                        answer
                    } else {
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                          content-length: 2\r\n\r\n[]"
                            .to_vec()
                    };
                    if stream.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_answer_was_left_unread_is_not_used_again() {
    let (url, accepted) = oversized_error_then_lists().await;
    let store = client(&url, "lfh_0123456789abcdef0123456789abcdef").await;
    let id = InteractiveHandoffId::parse("ih_01a241b1-e8a4-75f2-af70-000000000000").unwrap();
    let error = store.history(&id).await.unwrap_err();
    assert_eq!(
        error.unavailable_kind(),
        Some(UnavailableKind::Unreachable),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("without an lf-handoff error object"),
        "{error}"
    );
    // Read on the same connection, the rest of the 502's body would be
    // taken for the next answer.
    assert_eq!(store.history(&id).await.unwrap(), Vec::new());
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    // A whole answer leaves its connection for the next call.
    assert_eq!(store.history(&id).await.unwrap(), Vec::new());
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

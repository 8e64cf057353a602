//! The `http` backend's connections to a service at an `http://` URL: a
//! connection the service closed while it was idle is not used again, and
//! one whose answer was left partly unread is not used again either; a
//! sweep is one request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_adapters::{
    open_store, HttpConfig, StorageConfig, Store, StoreError, Token, UnavailableKind,
};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_server::Limits;
use support::Served;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The `http` backend's store for `url` with `token`, retrying nothing: a
/// call that loses its connection fails instead of being sent again.
async fn client(url: &str, token: &str) -> Store {
    client_within(url, token, Duration::ZERO).await
}

/// The same, retrying calls for `window`.
async fn client_within(url: &str, token: &str, window: Duration) -> Store {
    let config = HttpConfig::new(url)
        .unwrap()
        .with_token(Token::new(token).unwrap());
    open_store(&StorageConfig::Http(config))
        .await
        .unwrap()
        .with_retry_window(window)
}

/// A token of the right form, for servers that check none.
const ANY_TOKEN: &str = "lfh_0123456789abcdef0123456789abcdef";

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

/// A server that answers its `n`th request with `answers[n]` (the last
/// one again once they run out), reading each request's head and its
/// `content-length` or chunked body; it counts the connections it accepted and the
/// requests it read.
async fn canned(answers: Vec<Vec<u8>>) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let (counter, read) = (accepted.clone(), requests.clone());
    let answers = Arc::new(answers);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let (read, answers) = (read.clone(), answers.clone());
            tokio::spawn(async move {
                let mut stream = tokio::io::BufReader::new(stream);
                loop {
                    let (mut length, mut chunked) = (0_usize, false);
                    loop {
                        let mut line = String::new();
                        match stream.read_line(&mut line).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':') {
                            if name.eq_ignore_ascii_case("content-length") {
                                length = value.trim().parse().unwrap();
                            }
                            if name.eq_ignore_ascii_case("transfer-encoding") {
                                chunked = value.trim().eq_ignore_ascii_case("chunked");
                            }
                        }
                    }
                    let mut body = vec![0_u8; length];
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    if chunked && skip_chunks(&mut stream).await.is_err() {
                        return;
                    }
                    let n = read.fetch_add(1, Ordering::SeqCst);
                    let answer = &answers[n.min(answers.len() - 1)];
                    if stream.get_mut().write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, accepted, requests)
}

/// A 502 whose body is larger than the client reads of an error.
/// Reads a chunked body to its end.
async fn skip_chunks(
    stream: &mut tokio::io::BufReader<tokio::net::TcpStream>,
) -> std::io::Result<()> {
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await?;
        let size = usize::from_str_radix(line.trim(), 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let mut chunk = vec![0_u8; size + 2];
        stream.read_exact(&mut chunk).await?;
        if size == 0 {
            return Ok(());
        }
    }
}

fn oversized_bad_gateway() -> Vec<u8> {
    let body = vec![b'x'; 200 * 1024];
    let mut answer = format!(
        "HTTP/1.1 502 Bad Gateway\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

/// A 200 with `body` as JSON.
fn json_answer(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_answer_was_left_unread_is_not_used_again() {
    let (url, accepted, _) = canned(vec![oversized_bad_gateway(), json_answer("[]")]).await;
    let store = client(&url, ANY_TOKEN).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_is_sent_once_even_within_the_retry_window() {
    // A transient failure first (what a proxy says of a service that is
    // down), then an import's counts: sent again, an import whose commit
    // was acknowledged late would find the store not empty (C18).
    let counts = r#"{"parents":1,"task_prs":0,"handoffs":1,"events":1,"last_position":1}"#;
    let (url, _, requests) = canned(vec![oversized_bad_gateway(), json_answer(counts)]).await;
    let store = client_within(&url, ANY_TOKEN, Duration::from_secs(30)).await;
    let error = store.import(&mut &b"{}\n"[..], None).await.unwrap_err();
    assert_eq!(
        error.unavailable_kind(),
        Some(UnavailableKind::Unreachable),
        "{error}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1, "sent once");
    // An ordinary call within the same window is sent again.
    let id = InteractiveHandoffId::parse("ih_01a241b1-e8a4-75f2-af70-000000000000").unwrap();
    let (url, _, requests) = canned(vec![oversized_bad_gateway(), json_answer("[]")]).await;
    let store = client_within(&url, ANY_TOKEN, Duration::from_secs(30)).await;
    assert_eq!(store.history(&id).await.unwrap(), Vec::new());
    assert_eq!(requests.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_is_one_request_answering_the_records_it_expired() {
    let served = Served::start().await;
    let mut opened = Vec::new();
    for _ in 0..3 {
        let answer = served.open(serde_json::json!({"expires_in": "1s"})).await;
        opened.push(answer["handoff"]["id"].as_str().unwrap().to_string());
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let operator = client(&served.url, &served.operator).await;
    let mut expired = operator.expire_due().await.unwrap();
    expired.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    opened.sort();
    let ids: Vec<&str> = expired.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, opened);
    for handoff in &expired {
        assert_eq!(handoff.status.as_str(), "expired");
        let read = operator.get_interactive_handoff(&handoff.id).await.unwrap();
        assert_eq!(read.as_ref(), Some(handoff));
    }
    // The sweep was one request, and no handoff was read after it but the
    // three reads above.
    let metrics = served.get("/metrics", &served.operator).await.text;
    let count = |route: &str| -> u64 {
        metrics
            .lines()
            .filter(|line| line.starts_with("lf_handoff_http_requests_total{"))
            .filter(|line| line.contains(&format!("route=\"{route}\"")))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(count("/v1/expire-records"), 1, "{metrics}");
    assert_eq!(count("/v1/expire"), 0, "{metrics}");
    assert_eq!(count("/v1/handoffs/{id}"), 3, "{metrics}");
    served.stop().await;
}

/// An input of `total` bytes of one line that never ends, counting what
/// was read of it.
struct Endless {
    total: usize,
    read: Arc<AtomicUsize>,
    buffer: Vec<u8>,
}

impl Endless {
    fn new(total: usize) -> Self {
        Self {
            total,
            read: Arc::new(AtomicUsize::new(0)),
            buffer: vec![b' '; 64 * 1024],
        }
    }

    /// How much of it was read.
    fn taken(&self) -> usize {
        self.read.load(Ordering::SeqCst)
    }
}

impl std::io::Read for Endless {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = std::io::BufRead::fill_buf(self)?.len().min(out.len());
        out[..n].fill(b' ');
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl std::io::BufRead for Endless {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        let left = self.total - self.read.load(Ordering::SeqCst);
        Ok(&self.buffer[..left.min(self.buffer.len())])
    }

    fn consume(&mut self, amount: usize) {
        self.read.fetch_add(amount, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_is_read_as_it_is_sent() {
    let served = Served::start_with(Limits {
        max_import_body: 1024 * 1024,
        ..Limits::default()
    })
    .await;
    let before = served.snapshot().await;
    let operator = client(&served.url, &served.operator).await;
    // 256 MiB, which the service refuses long before its end.
    let total = 256 * 1024 * 1024;
    let mut input = Endless::new(total);
    let error = operator.import(&mut input, None).await.unwrap_err();
    let taken = input.taken();
    assert!(
        taken < total / 4,
        "{taken} of {total} bytes read before the answer"
    );
    // The service's 413, or, when it closed the connection under the
    // body before the answer was read, the lost connection naming the
    // limit (an empty import found no other refusal).
    let refused =
        matches!(error, StoreError::InvalidInput(_)) && error.to_string().contains("larger than");
    let cut = error.unavailable_kind() == Some(UnavailableKind::Unreachable)
        && error.to_string().contains("size limit");
    assert!(refused || cut, "{error}");
    assert_eq!(served.snapshot().await, before, "nothing written");

    // A refusal before the body is read (a token without the operator's
    // scope) ends the call at once, whatever is left of the input, and is
    // what the call answers even when the connection closed under the
    // body.
    let person = client(&served.url, &served.person).await;
    let mut input = Endless::new(total);
    let error = person.import(&mut input, None).await.unwrap_err();
    assert_eq!(
        error.denied_kind(),
        Some(lf_handoff_adapters::DeniedKind::Forbidden),
        "{error}"
    );
    let taken = input.taken();
    assert!(
        taken < total / 4,
        "{taken} of {total} bytes read before the answer"
    );
    assert_eq!(served.snapshot().await, before, "nothing written");

    served.stop().await;

    // An input the import refuses for what it holds (here its first
    // line), within the service's limit: the service reads the rest of
    // the body and answers; the client hears the refusal, not a
    // connection closed under its body.
    let served = Served::start().await;
    let before = served.snapshot().await;
    let operator = client(&served.url, &served.operator).await;
    // 64 MiB, more than the sockets between them hold.
    let mut damaged = std::io::Read::chain(
        &b"this is not an export\n"[..],
        Endless::new(64 * 1024 * 1024),
    );
    let error = operator.import(&mut damaged, None).await.unwrap_err();
    assert!(matches!(error, StoreError::InvalidInput(_)), "{error}");
    assert_eq!(served.snapshot().await, before, "nothing written");
    served.stop().await;
}

/// A server that answers every request (read up to its head) with `head`,
/// then a chunked body of `first` and `piece` again and again up to
/// `total` bytes, then stalls with the connection open: what a service
/// gone wrong, or something else answering in its place, can send.
async fn stalling(head: &'static str, first: Vec<u8>, piece: Vec<u8>, total: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (first, piece) = (first.clone(), piece.clone());
            tokio::spawn(async move {
                let mut stream = tokio::io::BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    match stream.read_line(&mut line).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => break,
                        Ok(_) => {}
                    }
                }
                let stream = stream.get_mut();
                let chunk = |bytes: &[u8]| {
                    let mut out = format!("{:x}\r\n", bytes.len()).into_bytes();
                    out.extend_from_slice(bytes);
                    out.extend_from_slice(b"\r\n");
                    out
                };
                let mut sent = first.len();
                let mut out = format!("{head}transfer-encoding: chunked\r\n\r\n").into_bytes();
                out.extend(chunk(&first));
                if stream.write_all(&out).await.is_err() {
                    return;
                }
                while sent < total {
                    if stream.write_all(&chunk(&piece)).await.is_err() {
                        return;
                    }
                    sent += piece.len();
                }
                tokio::time::sleep(Duration::from_secs(600)).await;
            });
        }
    });
    url
}

/// Forty MiB of JSON whitespace, more than the client reads of an answer.
async fn oversized_json() -> String {
    stalling(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n",
        b"[".to_vec(),
        vec![b' '; 1024 * 1024],
        40 * 1024 * 1024,
    )
    .await
}

/// How long a bounded read may take: the call's own timeout is 60 s.
const BOUND: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_answer_is_read_up_to_a_bound() {
    // A call that answers one JSON body, on a connection of its own.
    let id = InteractiveHandoffId::parse("ih_01a241b1-e8a4-75f2-af70-000000000000").unwrap();
    let store = client(&oversized_json().await, ANY_TOKEN).await;
    let error = tokio::time::timeout(BOUND, store.history(&id))
        .await
        .expect("refused at the bound, not read until the call's timeout")
        .unwrap_err();
    assert_eq!(error.unavailable_kind(), Some(UnavailableKind::Other));
    assert!(error.to_string().contains("more than 32 MiB"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_to_an_import_sent_as_it_is_read_is_read_up_to_a_bound() {
    // An import of more than 1 MiB goes through reqwest.
    let store = client(&oversized_json().await, ANY_TOKEN).await;
    let input = vec![b' '; 2 * 1024 * 1024];
    let error = tokio::time::timeout(BOUND, store.import(&mut &input[..], None))
        .await
        .expect("refused at the bound, not read until the call's timeout")
        .unwrap_err();
    assert!(error.to_string().contains("more than 32 MiB"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_data_never_ends_is_refused_at_a_bound() {
    let url = stalling(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n",
        b"id: 0\n\n".to_vec(),
        format!("data: {}\n", "x".repeat(1000)).into_bytes(),
        8 * 1024 * 1024,
    )
    .await;
    let store = client(&url, ANY_TOKEN).await;
    let mut watcher = store
        .watch(
            lf_handoff_adapters::WatchFrom::Now,
            lf_handoff_adapters::WatchFilter::default(),
        )
        .await
        .unwrap();
    let error = watcher
        .next_within(Duration::from_secs(5))
        .await
        .expect_err("an event over 1 MiB is refused");
    assert!(error.to_string().contains("longer than 1 MiB"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_goes_in_clear_text_only_to_a_loopback_host_unless_the_url_allows_it() {
    let open = |url: &str| {
        let config = HttpConfig::new(url)
            .unwrap()
            .with_token(Token::new(ANY_TOKEN).unwrap());
        async move { open_store(&StorageConfig::Http(config)).await }
    };
    for remote in ["http://10.0.0.7:7381", "http://lf.example/registry"] {
        let error = open(remote).await.unwrap_err();
        assert!(error.is_invalid_input(), "{remote}: {error}");
        assert!(
            error.to_string().contains("?insecure=true") && error.to_string().contains("https://"),
            "{error}"
        );
        assert!(!error.to_string().contains(ANY_TOKEN), "{error}");
        open(&format!("{remote}?insecure=true")).await.unwrap();
    }
    for near in [
        "http://127.0.0.1:7381",
        "http://localhost:7381",
        "http://[::1]:7381",
        "https://10.0.0.7:7381",
    ] {
        open(near).await.unwrap();
    }
    // A served store on a loopback address works as before.
    let served = Served::start().await;
    let store = client(&served.url, &served.person).await;
    assert!(store
        .list_interactive_handoffs(lf_handoff_adapters::ListQuery::default())
        .await
        .unwrap()
        .is_empty());
    served.stop().await;
}

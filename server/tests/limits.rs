//! The limits that hold under abuse (C20, C29): the connection limit and
//! each peer address's share of it, the header timeout (which also closes
//! idle keep-alive connections), the whole-body deadline (the public
//! routes' smaller one), the limit on event streams and long polls.
//! Stalled connections hold only their own place, and lose it after the
//! header timeout, so they do not starve the others; one address that
//! holds all it may leaves the rest to other addresses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use lf_handoff_server::{Gauge, Limits};
use serde_json::json;
use support::Served;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

fn address(served: &Served) -> String {
    served.url.trim_start_matches("http://").to_string()
}

/// Reads what the server sends until it closes, at most `within`.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut out = Vec::new();
    let mut buffer = [0_u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(Ok(n)) => out.extend_from_slice(&buffer[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_hold_one_place_each_and_lose_it_after_the_header_timeout() {
    let served = Served::start_with(Limits {
        max_connections: 4,
        header_read_timeout: Duration::from_secs(1),
        ..Limits::default()
    })
    .await;
    // Four clients that send half a request and stall (slowloris).
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(address(&served)).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        stalled.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The fifth is told the service is at its limit, and closed.
    let mut fifth = TcpStream::connect(address(&served)).await.unwrap();
    fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut fifth, Duration::from_secs(5))
        .await
        .expect("the refused connection is closed");
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    let body = &answer[answer.find("\r\n\r\n").unwrap() + 4..];
    let error: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(error["error"]["kind"], "busy");
    assert_eq!(error["error"]["category"], "unavailable");

    // The stalled ones are closed after the header timeout...
    for stream in &mut stalled {
        let answer = read_until_closed(stream, Duration::from_secs(5)).await;
        assert!(
            answer.is_some(),
            "a stalled connection was kept past the timeout"
        );
    }
    // ...and the service serves again.
    let started = Instant::now();
    loop {
        let reply = served
            .client
            .get(format!("{}/healthz", served.url))
            .send()
            .await
            .unwrap();
        if reply.status().as_u16() == 200 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "still refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = served.get("/metrics", &served.agent).await;
    assert!(metrics.text.lines().any(|line| line
        .starts_with("lf_handoff_connections_refused_total ")
        && !line.ends_with(" 0")));
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let served = Served::start_with(Limits {
        header_read_timeout: Duration::from_millis(800),
        ..Limits::default()
    })
    .await;
    let mut stream = TcpStream::connect(address(&served)).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let answer = read_until_closed(&mut stream, Duration::from_secs(5))
        .await
        .expect("closed within 5 s");
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "closed before the timeout"
    );
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_and_long_polls_beyond_the_limit_are_503_with_retry_after() {
    let served = Served::start_with(Limits {
        max_streams: 2,
        ..Limits::default()
    })
    .await;
    let id = served.open_id().await;
    let first = served
        .client
        .get(format!("{}/v1/events", served.url))
        .bearer_auth(&served.person)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status().as_u16(), 200);
    let poll = {
        let client = served.client.clone();
        let url = format!("{}/v1/handoffs/{id}/wait?timeout=1500ms", served.url);
        let token = served.agent.clone();
        tokio::spawn(async move { client.get(url).bearer_auth(token).send().await.unwrap() })
    };
    let started = Instant::now();
    while served.state.metrics().gauge_value(Gauge::LongPolls) < 1 {
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for path in [
        "/v1/events".to_string(),
        format!("/v1/handoffs/{id}/wait?timeout=1s"),
    ] {
        let reply = served.get(&path, &served.person).await;
        assert_eq!(reply.error(503, "unavailable"), "busy", "{path}");
        assert_eq!(reply.header("retry-after").as_deref(), Some("1"));
    }
    // Other routes are not limited by it.
    let reply = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    assert_eq!(reply.status, 200);
    // The long poll ends (timed out): its place is free again.
    let waited = poll.await.unwrap();
    assert_eq!(waited.status().as_u16(), 200);
    let body: serde_json::Value = waited.json().await.unwrap();
    assert_eq!(body["ended"], false);
    let reply = served
        .get(
            &format!("/v1/handoffs/{id}/wait?timeout=0ms"),
            &served.person,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    drop(first);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_refused_and_holds_nothing() {
    let served = Served::start_with(Limits {
        body_timeout: Duration::from_millis(500),
        ..Limits::default()
    })
    .await;
    let wave = served.wave().await;
    let before = served.snapshot().await;
    let body =
        serde_json::to_vec(&support::open_body(&wave, served.dir.path(), json!({}))).unwrap();
    let answer = support::stalled_post(&served, "/v1/handoffs", &served.agent, "", &body).await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("did not arrive whole"), "{answer}");
    assert_eq!(served.snapshot().await, before);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_gives_its_stream_place_back() {
    let served = Served::start_with(Limits {
        max_streams: 1,
        ..Limits::default()
    })
    .await;
    let stream = served
        .client
        .get(format!("{}/v1/events", served.url))
        .bearer_auth(&served.person)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    assert_eq!(served.state.metrics().gauge_value(Gauge::EventStreams), 1);
    drop(stream);
    let started = Instant::now();
    while served.state.metrics().gauge_value(Gauge::EventStreams) > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the place of a stream whose client went away was not given back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("given back after {:?}", started.elapsed());
    let again = served
        .client
        .get(format!("{}/v1/events", served.url))
        .bearer_auth(&served.person)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 200);
    served.stop().await;
}

/// A connection to `served` from `source` (any 127.0.0.0/8 address reaches
/// the loopback listener: one machine plays several peers).
async fn connect_from(served: &Served, source: [u8; 4]) -> TcpStream {
    lf_handoff_conformance::peers::connect_from(source.into(), address(served).parse().unwrap())
        .await
        .expect("a connection from another loopback address")
}

/// Sends `body` one byte every `pause` after `head`, until the server
/// answers (or closes); returns the answer and how long it took, or
/// `None` when it had not answered within `within`.
async fn trickle(
    stream: &mut TcpStream,
    head: &str,
    body: &[u8],
    pause: Duration,
    within: Duration,
) -> Option<(String, Duration)> {
    let started = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buffer = vec![0_u8; 8192];
    for byte in body.iter().cycle() {
        if started.elapsed() > within {
            return None;
        }
        if let Ok(read) = tokio::time::timeout(pause, stream.read(&mut buffer)).await {
            let n = read.unwrap_or(0);
            return Some((
                String::from_utf8_lossy(&buffer[..n]).into_owned(),
                started.elapsed(),
            ));
        }
        if stream.write_all(&[*byte]).await.is_err() {
            let answer = read_until_closed(stream, Duration::from_secs(1)).await;
            return Some((answer.unwrap_or_default(), started.elapsed()));
        }
    }
    None
}

/// A JSON body sent a byte at a time, each long before the pause a
/// per-piece timeout would catch, is refused at the whole-body deadline
/// (C29), and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_trickled_a_byte_at_a_time_is_cut_at_the_whole_body_deadline() {
    let served = Served::start_with(Limits {
        body_timeout: Duration::from_secs(1),
        ..Limits::default()
    })
    .await;
    let wave = served.wave().await;
    let before = served.snapshot().await;
    let body =
        serde_json::to_vec(&support::open_body(&wave, served.dir.path(), json!({}))).unwrap();
    let head = format!(
        "POST /v1/handoffs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        served.agent,
        body.len()
    );
    let mut stream = TcpStream::connect(address(&served)).await.unwrap();
    let (answer, took) = trickle(
        &mut stream,
        &head,
        &body,
        Duration::from_millis(100),
        Duration::from_secs(8),
    )
    .await
    .expect("a trickled body was held past 8 s");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("did not arrive whole"), "{answer}");
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    assert_eq!(served.snapshot().await, before);
    served.stop().await;
}

/// The sign-in form, which anyone may post, is read within the public
/// limits: a body trickled to it is cut at their deadline, and one over
/// their size is 413 before it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_form_is_held_to_the_public_limits() {
    let served = Served::start_with(Limits {
        public_body_timeout: Duration::from_secs(1),
        ..Limits::default()
    })
    .await;
    let form = format!("token={}", "x".repeat(4000));
    let head = |length: usize| {
        format!(
            "POST /sign-in HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\n",
            host = address(&served),
            origin = served.url,
        )
    };
    let mut stream = TcpStream::connect(address(&served)).await.unwrap();
    let (answer, took) = trickle(
        &mut stream,
        &head(form.len()),
        form.as_bytes(),
        Duration::from_millis(100),
        Duration::from_secs(8),
    )
    .await
    .expect("a trickled sign-in was held past 8 s");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(took < Duration::from_secs(5), "answered after {took:?}");

    let mut stream = TcpStream::connect(address(&served)).await.unwrap();
    stream.write_all(head(17 * 1024).as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut stream, Duration::from_secs(5))
        .await
        .unwrap_or_default();
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    served.stop().await;
}

/// One address that opens more connections than its share, idle and
/// trickling, holds only its share: the rest are refused with a 503 that
/// says so, and a client of another address is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_only_its_share_and_another_is_served() {
    let served = Served::start_with(Limits {
        max_connections: 16,
        max_connections_per_peer: Some(4),
        header_read_timeout: Duration::from_secs(30),
        ..Limits::default()
    })
    .await;
    let hostile = [127, 0, 0, 2];
    let mut held = Vec::new();
    for n in 0..20 {
        let mut stream = connect_from(&served, hostile).await;
        if n % 2 == 0 {
            // Half a request head, never finished.
            let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\n").await;
        }
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Another address is served, although 20 connections were opened.
    let reply = served
        .client
        .get(format!("{}/healthz", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    // The hostile address got its share; the others were told why.
    let mut refused = 0;
    for stream in &mut held {
        if let Some(answer) = read_until_closed(stream, Duration::from_millis(200)).await {
            assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
            assert!(answer.contains("this address holds its share"), "{answer}");
            refused += 1;
        }
    }
    assert_eq!(refused, 16, "20 opened, a share of 4");
    // Its places come back when it closes them.
    drop(held);
    let mut again = connect_from(&served, hostile).await;
    again
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    for _ in 0..50 {
        answer = read_until_closed(&mut again, Duration::from_secs(5))
            .await
            .unwrap_or_default();
        if answer.starts_with("HTTP/1.1 200 ") {
            break;
        }
        // The server may not have seen the closes yet.
        tokio::time::sleep(Duration::from_millis(50)).await;
        again = connect_from(&served, hostile).await;
        again
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
    }
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    served.stop().await;
}

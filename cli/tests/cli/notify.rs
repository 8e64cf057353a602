//! `serve --notify` (C23) as processes: a receiver in the test takes the
//! messages. Every `opened` and finish of a burst of handoffs arrives,
//! each carrying its event's position, through a `kill -9` and restart of
//! the server in the middle (duplicates only around the kill) and through
//! a graceful restart (none repeated); two servers on one PostgreSQL store
//! deliver each message once between them; an endpoint that answers 500,
//! hangs or redirects gets bounded retries and slows nothing else; the
//! messages are signed with the shared secret.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::{wave_and_request, Serving};
use crate::support::Sandbox;

/// How a receiver answers.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// 200, after this long.
    Ok(Duration),
    /// 500.
    Fail,
    /// Reads the request and never answers.
    Hang,
    /// 302 to itself.
    Redirect,
}

/// One message as received: its `Idempotency-Key` header, its signature
/// header, and its body.
#[derive(Debug, Clone)]
struct Received {
    key: String,
    signature: Option<String>,
    body: Value,
    raw: Vec<u8>,
}

/// An HTTP endpoint in the test that records what is posted to it.
struct Receiver {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
    attempts: Arc<Mutex<usize>>,
}

impl Receiver {
    fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/hooks/SECRET-PATH",
            listener.local_addr().unwrap()
        );
        let received = Arc::new(Mutex::new(Vec::new()));
        let attempts = Arc::new(Mutex::new(0));
        let (taken, tried, location) = (received.clone(), attempts.clone(), url.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (taken, tried, location) = (taken.clone(), tried.clone(), location.clone());
                std::thread::spawn(move || serve_one(stream, answer, &taken, &tried, &location));
            }
        });
        Self {
            url,
            received,
            attempts,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    fn attempts(&self) -> usize {
        *self.attempts.lock().unwrap()
    }

    /// Waits until `done` holds of what was received, at most `within`.
    fn until(&self, within: Duration, what: &str, done: impl Fn(&[Received]) -> bool) {
        let started = Instant::now();
        while !done(&self.received()) {
            assert!(
                started.elapsed() < within,
                "{what}: not after {within:?}; received {} messages",
                self.received().len()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Serves the requests of one connection (keep-alive) as `answer` says.
fn serve_one(
    stream: TcpStream,
    answer: Answer,
    taken: &Mutex<Vec<Received>>,
    tried: &Mutex<usize>,
    location: &str,
) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut headers = BTreeMap::new();
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        *tried.lock().unwrap() += 1;
        let response = match answer {
            Answer::Ok(delay) => {
                std::thread::sleep(delay);
                taken.lock().unwrap().push(Received {
                    key: headers.get("idempotency-key").cloned().unwrap_or_default(),
                    signature: headers.get("x-lf-handoff-signature").cloned(),
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    raw: body.clone(),
                });
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string()
            }
            Answer::Fail => {
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".into()
            }
            Answer::Hang => {
                std::thread::sleep(Duration::from_secs(3600));
                return;
            }
            Answer::Redirect => {
                format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n")
            }
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Opens a handoff through the service (a wave of its own) and returns
/// its id.
fn open(serving: &Serving, agent: &str, cwd: &str) -> String {
    let request = wave_and_request(serving, agent, cwd);
    let (status, body) = serving.request("POST", "/v1/handoffs", Some(agent), Some(&request));
    assert_eq!(status, 201, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["handoff"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn complete(serving: &Serving, person: &str, id: &str) {
    let (status, body) = serving.request(
        "POST",
        &format!("/v1/handoffs/{id}/complete"),
        Some(person),
        Some(&json!({"summary": "done <!channel> & more"})),
    );
    assert_eq!(status, 200, "{body}");
}

/// The messages of `received` by idempotency key, checking each carries
/// its event's position as its key says; and how many were repeats.
fn by_key(received: &[Received]) -> (BTreeMap<String, Received>, usize) {
    let mut unique = BTreeMap::new();
    for message in received {
        let position = message.body["position"].as_u64().unwrap();
        assert_eq!(
            message.key,
            format!("event-{position}"),
            "{:?}",
            message.body
        );
        assert_eq!(message.body["idempotency_key"], message.key.as_str());
        assert_eq!(message.body["event"]["position"], position);
        unique.insert(message.key.clone(), message.clone());
    }
    let repeats = received.len() - unique.len();
    (unique, repeats)
}

/// The keys every `opened` and `finished` event of `ids` must arrive under.
fn expected_kinds(unique: &BTreeMap<String, Received>, ids: &[String]) {
    for id in ids {
        for kind in ["opened", "finished"] {
            assert!(
                unique
                    .values()
                    .any(|m| m.body["kind"] == kind && m.body["event"]["handoff_id"] == id.as_str()),
                "no {kind} message for {id}"
            );
        }
    }
}

const BURST: usize = 100;

fn notify_args<'a>(store: &'a str, url: &'a str) -> Vec<&'a str> {
    vec!["--store", store, "--notify", url, "--notify-lease", "1s"]
}

#[test]
fn a_burst_of_100_arrives_whole_through_a_kill_9_and_restart() {
    let sandbox = Sandbox::new();
    let receiver = Receiver::start(Answer::Ok(Duration::from_millis(5)));
    let store = format!("sqlite://{}", sandbox.path("served.db").display());
    let args = notify_args(&store, &receiver.url);
    let mut serving = Serving::start(&sandbox, &args);
    let (agent, person) = (serving.token("agent"), serving.token("person"));
    let cwd = sandbox.dir.path().to_str().unwrap().to_string();
    // The endpoint's cursor starts at the server's start: let it be made.
    std::thread::sleep(Duration::from_millis(500));

    let mut ids = Vec::new();
    for _ in 0..BURST / 2 {
        let id = open(&serving, &agent, &cwd);
        complete(&serving, &person, &id);
        ids.push(id);
    }
    receiver.until(Duration::from_secs(30), "the first messages", |r| {
        r.len() >= 20
    });
    serving.child.kill().unwrap();
    serving.child.wait().unwrap();
    let at_kill = receiver.received().len();

    let serving = Serving::start(&sandbox, &args);
    let (agent, person) = (serving.token("agent"), serving.token("person"));
    for _ in BURST / 2..BURST {
        let id = open(&serving, &agent, &cwd);
        complete(&serving, &person, &id);
        ids.push(id);
    }
    receiver.until(Duration::from_secs(60), "every message", |r| {
        by_key(r).0.len() >= 2 * BURST
    });
    std::thread::sleep(Duration::from_millis(500));
    let received = receiver.received();
    let (unique, repeats) = by_key(&received);
    println!(
        "notifications through kill -9: {} messages, {} distinct, {repeats} repeated, {at_kill} \
         received before the kill",
        received.len(),
        unique.len()
    );
    assert_eq!(unique.len(), 2 * BURST, "one message per opened and finish");
    expected_kinds(&unique, &ids);
    assert!(
        repeats <= 2,
        "only a message around the kill repeats: {repeats}"
    );
    // What an agent typed is escaped in the text; the event is as watch prints it.
    let finished = unique
        .values()
        .find(|m| m.body["kind"] == "finished")
        .unwrap();
    let text = finished.body["text"].as_str().unwrap();
    assert!(text.contains("&lt;!channel&gt; &amp; more"), "{text}");
    assert!(!text.contains("<!channel>"), "{text}");
    assert_eq!(finished.body["handoff"]["status"], "completed");
    drop(serving);
}

#[test]
fn a_graceful_restart_repeats_nothing_and_messages_are_signed() {
    let sandbox = Sandbox::new();
    let receiver = Receiver::start(Answer::Ok(Duration::from_millis(5)));
    let store = format!("sqlite://{}", sandbox.path("served.db").display());
    let secret_file = sandbox.path("notify-secret");
    std::fs::write(&secret_file, "a shared secret of some length\n").unwrap();
    let mut args = notify_args(&store, &receiver.url);
    args.extend(["--notify-secret-file", secret_file.to_str().unwrap()]);
    let mut serving = Serving::start(&sandbox, &args);
    let (agent, person) = (serving.token("agent"), serving.token("person"));
    let cwd = sandbox.dir.path().to_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let mut ids = Vec::new();
    for _ in 0..20 {
        let id = open(&serving, &agent, &cwd);
        complete(&serving, &person, &id);
        ids.push(id);
    }
    receiver.until(Duration::from_secs(30), "some messages", |r| r.len() >= 10);
    serving.signal("-TERM");
    assert_eq!(
        serving.exit_within(Duration::from_secs(30)),
        Some(0),
        "{}",
        serving.log()
    );

    let serving = Serving::start(&sandbox, &args);
    let (agent, person) = (serving.token("agent"), serving.token("person"));
    for _ in 0..5 {
        let id = open(&serving, &agent, &cwd);
        complete(&serving, &person, &id);
        ids.push(id);
    }
    receiver.until(Duration::from_secs(30), "every message", |r| {
        by_key(r).0.len() >= 2 * ids.len()
    });
    std::thread::sleep(Duration::from_millis(500));
    let received = receiver.received();
    let (unique, repeats) = by_key(&received);
    assert_eq!(repeats, 0, "a graceful restart repeats nothing");
    expected_kinds(&unique, &ids);
    // Each message's signature is the HMAC-SHA256 of its body under the
    // secret (trimmed), checked with Python's standard library.
    for message in received.iter().take(3) {
        let signature = message.signature.clone().expect("a signed message");
        let mut python = std::process::Command::new("python3")
            .args([
                "-c",
                "import hmac,hashlib,sys; \
                 print('sha256=' + hmac.new(b'a shared secret of some length', \
                 sys.stdin.buffer.read(), hashlib.sha256).hexdigest())",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        python
            .stdin
            .take()
            .unwrap()
            .write_all(&message.raw)
            .unwrap();
        let output = python.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), signature);
    }
    // Each message carries the handoff's signed link (C21), which the
    // service answers: `link:notification` for whoever follows it.
    let last = ids.last().unwrap();
    let message = received
        .iter()
        .find(|m| m.body["handoff"]["id"] == json!(last))
        .expect("a message of the last handoff");
    let link = message.body["link"].as_str().expect("a link").to_string();
    let base = format!("http://{}", serving.address);
    assert!(
        link.starts_with(&format!("{base}/h/{last}?for=notification&exp=")),
        "{link}"
    );
    let (status, page) = serving.request("GET", &link[base.len()..], None, None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("link for notification"));
    let log = serving.log();
    assert!(
        !log.contains("SECRET-PATH"),
        "the endpoint's path is never logged: {log}"
    );
}

#[test]
fn a_failing_hanging_or_redirecting_endpoint_is_retried_a_bounded_number_of_times_and_slows_nothing(
) {
    let sandbox = Sandbox::new();
    let failing = Receiver::start(Answer::Fail);
    let hanging = Receiver::start(Answer::Hang);
    let redirecting = Receiver::start(Answer::Redirect);
    let working = Receiver::start(Answer::Ok(Duration::ZERO));
    let store = format!("sqlite://{}", sandbox.path("served.db").display());
    let serving = Serving::start(
        &sandbox,
        &[
            "--store",
            &store,
            "--notify",
            &failing.url,
            "--notify",
            &hanging.url,
            "--notify",
            &redirecting.url,
            "--notify",
            &working.url,
            "--notify-attempts",
            "3",
        ],
    );
    let (agent, person) = (serving.token("agent"), serving.token("person"));
    let cwd = sandbox.dir.path().to_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let id = open(&serving, &agent, &cwd);
    complete(&serving, &person, &id);
    let api = started.elapsed();
    working.until(
        Duration::from_secs(10),
        "the working endpoint's messages",
        |r| r.len() == 2,
    );
    assert!(
        api < Duration::from_secs(5),
        "the API answered while endpoints failed: {api:?}"
    );
    // 3 attempts per message (1 s, then 2 s apart): two messages, 6 posts.
    let settled = Instant::now();
    while failing.attempts() < 6 && settled.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(failing.attempts(), 6, "bounded retries of a 500");
    assert!(redirecting.attempts() <= 6, "a redirect is not followed");
    assert!(redirecting.attempts() >= 3, "a redirect is a failed post");
    assert!(hanging.attempts() >= 1);
    let (status, metrics) = serving.request("GET", "/metrics", Some(&agent), None);
    assert_eq!(status, 200);
    let dropped = metrics
        .lines()
        .find(|line| {
            line.starts_with("lf_handoff_notifications_total")
                && line.contains(&failing.url[..failing.url.find("/hooks").unwrap()])
                && line.contains("outcome=\"dropped\"")
        })
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(dropped.ends_with(" 2"), "{dropped}");
    assert!(!metrics.contains("SECRET-PATH"));
}

#[test]
fn two_servers_on_one_postgres_store_deliver_each_message_once() {
    let Ok(server) = std::env::var("LF_HANDOFF_TEST_POSTGRES_URL") else {
        eprintln!("skipped: LF_HANDOFF_TEST_POSTGRES_URL names no PostgreSQL server");
        return;
    };
    let schema = format!("lft_notify_{}", std::process::id());
    let joint = if server.contains('?') { '&' } else { '?' };
    let store = format!("{server}{joint}schema={schema}");
    let sandbox = Sandbox::new();
    let receiver = Receiver::start(Answer::Ok(Duration::ZERO));
    let args = notify_args(&store, &receiver.url);
    let first = Serving::start(&sandbox, &args);
    let second = Serving::start(&sandbox, &args);
    let cwd = sandbox.dir.path().to_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let mut ids = Vec::new();
    for n in 0..30 {
        let serving = if n % 2 == 0 { &first } else { &second };
        let id = open(serving, &serving.token("agent"), &cwd);
        complete(serving, &serving.token("person"), &id);
        ids.push(id);
    }
    receiver.until(Duration::from_secs(30), "every message", |r| {
        by_key(r).0.len() >= 2 * ids.len()
    });
    std::thread::sleep(Duration::from_secs(2));
    let received = receiver.received();
    let (unique, repeats) = by_key(&received);
    expected_kinds(&unique, &ids);
    assert_eq!(
        repeats, 0,
        "two servers deliver each message once between them"
    );
    drop((first, second));
    let base = server.split('?').next().unwrap();
    let _ = std::process::Command::new("psql")
        .args([
            base,
            "-qc",
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        ])
        .output();
}

#[test]
fn a_deadline_within_the_lead_time_is_reminded_of_once() {
    let sandbox = Sandbox::new();
    let receiver = Receiver::start(Answer::Ok(Duration::ZERO));
    let store = format!("sqlite://{}", sandbox.path("served.db").display());
    let mut args = notify_args(&store, &receiver.url);
    args.extend(["--notify-before", "15m"]);
    let serving = Serving::start(&sandbox, &args);
    let (agent, person) = (serving.token("agent"), serving.token("person"));
    let cwd = sandbox.dir.path().to_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let mut soon = wave_and_request(&serving, &agent, &cwd);
    soon["expires_in"] = json!("10m");
    let (status, body) = serving.request("POST", "/v1/handoffs", Some(&agent), Some(&soon));
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["handoff"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut later = wave_and_request(&serving, &agent, &cwd);
    later["expires_in"] = json!("2h");
    let (status, body) = serving.request("POST", "/v1/handoffs", Some(&agent), Some(&later));
    assert_eq!(status, 201, "{body}");
    let reminders = |received: &[Received]| {
        received
            .iter()
            .filter(|m| m.body["kind"] == "deadline_near")
            .cloned()
            .collect::<Vec<_>>()
    };
    receiver.until(Duration::from_secs(10), "a reminder", |r| {
        !reminders(r).is_empty()
    });
    // Several ticks later: still one reminder, for the near deadline only.
    std::thread::sleep(Duration::from_secs(2));
    let received = reminders(&receiver.received());
    assert_eq!(received.len(), 1, "{received:?}");
    let reminder = &received[0];
    assert_eq!(reminder.body["handoff"]["id"], id.as_str());
    assert!(
        reminder.key.starts_with(&format!("deadline-{id}-")),
        "{}",
        reminder.key
    );
    let text = reminder.body["text"].as_str().unwrap();
    assert!(text.contains("expires in"), "{text}");
    // The person's finish is told too; nothing more about the deadline.
    complete(&serving, &person, &id);
    receiver.until(Duration::from_secs(10), "the finish", |r| {
        r.iter().any(|m| m.body["kind"] == "finished")
    });
}

//! The harness: a server started on a free loopback port in its own runtime, and a small
//! HTTP/1.1 client over a plain `TcpStream`, so that tests can also send what no well-behaved
//! client would (half a header, a body that never ends).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capgate::Limits;
use capgate_server::state::AppState;
use capgate_server::{ConnectionLimits, ServeConfig, Server};
use serde_json::Value;

/// The repository root.
pub const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The PEP token the test servers take.
pub const PEP: &str = "pep-token-0123456789abcdef";
/// The operator token the test servers take.
pub const OPERATOR: &str = "operator-token-0123456789abcdef";

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temp dir.
pub fn temp_dir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "capgate-server-{prefix}-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` to `dir/name`.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A configuration for `policies` with the test tokens in `dir`, on a free loopback port.
pub fn config(dir: &Path, policies: Vec<PathBuf>) -> ServeConfig {
    ServeConfig {
        policies,
        listen: "127.0.0.1:0".parse().unwrap(),
        pep_token_file: write(dir, "pep.token", PEP),
        operator_token_file: Some(write(dir, "operator.token", OPERATOR)),
        audit: Some(dir.join("audit.jsonl")),
        tls: None,
        identities: Some(write(dir, "identities.json", &identities())),
        grpc_listen: Some("127.0.0.1:0".parse().unwrap()),
        insecure_plaintext: false,
        observe: false,
        watch: false,
        limits: Limits::DEFAULT,
        connections: ConnectionLimits {
            header_timeout: Duration::from_millis(500),
            body_timeout: Duration::from_millis(500),
            shutdown_grace: Duration::from_secs(5),
            ..ConnectionLimits::default()
        },
    }
}

/// The credential of the test agent, bound to skill `notes` (autonomy 100, org acme).
pub const AGENT: &str = "agent-credential-0123456789";
/// The credential of a second agent, bound to skill `notes` with autonomy 0.
pub const TIMID_AGENT: &str = "timid-agent-credential-0123";

fn sha256_hex(text: &str) -> String {
    capgate_server::credential::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The identities file of the test servers.
pub fn identities() -> String {
    serde_json::json!({"identities": [
        {"credential_sha256": sha256_hex(AGENT), "skill": "notes",
         "agent": {"id": "a-1"}, "context": {"org": "acme"}, "autonomy": 100},
        {"credential_sha256": sha256_hex(TIMID_AGENT), "skill": "notes",
         "agent": {"id": "a-2"}, "context": {"org": "acme"}, "autonomy": 0},
    ]})
    .to_string()
}

/// A running server; dropping it shuts it down and waits for it.
pub struct Running {
    pub address: SocketAddr,
    pub grpc: Option<SocketAddr>,
    pub state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Shuts the server down and waits until it has stopped (audit written).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts a server with `config`.
pub fn start(config: ServeConfig) -> Running {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let server = Server::bind(config).await.unwrap();
            ready_tx
                .send((
                    server.local_addr().unwrap(),
                    server.grpc_addr().unwrap(),
                    server.state().clone(),
                ))
                .unwrap();
            server
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    let (address, grpc, state) = ready_rx.recv().unwrap();
    Running {
        address,
        grpc,
        state,
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// Starts a server on the bundled policies.
pub fn start_bundled(name: &str) -> (Running, PathBuf) {
    let dir = temp_dir(name);
    let running = start(config(&dir, vec![Path::new(REPO).join("policies")]));
    (running, dir)
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The first header named `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends raw bytes and reads one response (the connection closes after it).
pub fn raw(address: SocketAddr, bytes: &[u8]) -> Response {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    read_response(&mut stream).expect("no response")
}

/// Reads one response: status line, headers, and a `Content-Length` body.
pub fn read_response(stream: &mut TcpStream) -> Option<Response> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(Response {
        status,
        headers,
        body,
    })
}

/// A request's bytes, with `Connection: close`.
pub fn request(method: &str, path: &str, token: Option<&str>, body: &str) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some(token) = token {
        text.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    text.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    text.into_bytes()
}

/// Sends a request and reads the response.
pub fn send(
    address: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> Response {
    raw(address, &request(method, path, token, body))
}

/// `POST /v1/check` with the PEP token.
pub fn check(address: SocketAddr, body: &str) -> Response {
    send(address, "POST", "/v1/check", Some(PEP), body)
}

/// `METHOD PATH` with the operator token.
pub fn operator(address: SocketAddr, method: &str, path: &str, body: &str) -> Response {
    send(address, method, path, Some(OPERATOR), body)
}

/// A meeting-scheduler request (the bundled policy) with these extra members.
pub fn scheduler_request(extra: Value) -> String {
    let mut request = serde_json::json!({
        "skill": "meeting-scheduler",
        "operation": "POST",
        "resource": "https://calendar.example.com/v3/calendars/primary/events",
        "payload": {
            "organizer": {"email": "sched-bot@example.com"},
            "attendees": [{"email": "ana@example.com"}],
            "start": "2026-12-01T15:00:00Z",
            "end": "2026-12-01T16:00:00Z",
            "summary": "Design review"
        },
        "agent": {"id": "sched-bot", "email": "sched-bot@example.com"},
        "autonomy": 80
    });
    for (key, value) in extra.as_object().unwrap() {
        request[key] = value.clone();
    }
    request.to_string()
}

//! A real nginx (the Debian package) in front of a test upstream, asking capgate with the
//! shipped `docs/examples/nginx.conf`: an allowed call reaches the upstream, a refused one never
//! does. Without nginx installed the tests print `skipped: nginx not installed` and pass, unless
//! `CAPGATE_REQUIRE_SERVICES=1` (CI), where they fail.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::check::start_notes;
use crate::common::*;

/// The nginx binary, or `None` (after saying so) when it is not installed and not required.
fn nginx_binary() -> Option<PathBuf> {
    let found = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("CAPGATE_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "nginx is not installed and CAPGATE_REQUIRE_SERVICES=1"
        );
        println!("skipped: nginx not installed");
    }
    found
}

/// A free loopback port (bound and released; the window for another process is small).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An upstream that records each request it gets and answers `200 upstream`.
struct Upstream {
    address: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut request = Vec::new();
                let mut chunk = [0_u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&request).into_owned());
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nupstream",
                );
            }
        });
        Upstream { address, seen }
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// nginx running the shipped example configuration; killed on drop.
struct Nginx {
    child: Child,
    address: SocketAddr,
}

impl Drop for Nginx {
    /// SIGTERM, so that the master stops its workers (SIGKILL would orphan them); SIGKILL only
    /// if it has not exited within five seconds.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    fn start(binary: &Path, dir: &Path, capgate: SocketAddr, upstream: SocketAddr) -> Self {
        let example =
            std::fs::read_to_string(Path::new(REPO).join("docs/examples/nginx.conf")).unwrap();
        let port = free_port();
        let text = example
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
            .replace("127.0.0.1:8181", &capgate.to_string())
            .replace("127.0.0.1:9000", &upstream.to_string())
            .replace("PEP_TOKEN", PEP)
            .replace(
                "/tmp/capgate-nginx-example",
                &dir.join("nginx").display().to_string(),
            );
        for placeholder in [
            "127.0.0.1:8080",
            "127.0.0.1:8181",
            "127.0.0.1:9000",
            "PEP_TOKEN",
        ] {
            assert!(
                example.contains(placeholder),
                "the example no longer has {placeholder}"
            );
        }
        let conf = write(dir, "nginx.conf", &text);
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            // Not the test's own output: a worker holding it open would keep the test run waiting.
            .stderr(std::fs::File::create(dir.join("nginx.log")).unwrap())
            .spawn()
            .unwrap();
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(address).is_err() {
            assert!(Instant::now() < deadline, "nginx did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, address }
    }
}

/// An agent's call through nginx.
fn through(
    nginx: &Nginx,
    method: &str,
    path: &str,
    credential: Option<&str>,
    body: &str,
) -> Response {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some(credential) = credential {
        text.push_str(&format!("X-Capgate-Credential: {credential}\r\n"));
    }
    if !body.is_empty() {
        text.push_str("Content-Type: application/json\r\n");
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    raw(nginx.address, text.as_bytes())
}

#[test]
fn nginx_forwards_allowed_calls_only() {
    let Some(binary) = nginx_binary() else { return };
    let (capgate, dir) = start_notes("nginx");
    let upstream = Upstream::start();
    let nginx = Nginx::start(&binary, &dir, capgate.address, upstream.address);

    let allowed = through(&nginx, "GET", "/v1/notes/1", Some(AGENT), "");
    assert_eq!(allowed.status, 200);
    assert_eq!(allowed.body, b"upstream");
    let seen = upstream.requests();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].starts_with("GET /v1/notes/1 "), "{}", seen[0]);
    assert!(
        !seen[0]
            .to_ascii_lowercase()
            .contains("x-capgate-credential: agent"),
        "the agent's credential reached the upstream: {}",
        seen[0]
    );

    let denied = through(&nginx, "DELETE", "/v1/notes/1", Some(AGENT), "");
    assert_eq!(denied.status, 403);
    assert_eq!(denied.header("x-capgate-reason"), Some("operation"));

    // auth_request forwards no body: the payload constraint fails closed.
    let unread = through(
        &nginx,
        "POST",
        "/v1/notes",
        Some(AGENT),
        r#"{"title": "hello"}"#,
    );
    assert_eq!(unread.status, 403);
    assert_eq!(unread.header("x-capgate-reason"), Some("input write"));

    let override_ = through(&nginx, "GET", "/v1/notes/1?_method=DELETE", Some(AGENT), "");
    assert_eq!(override_.status, 403);

    let anonymous = through(&nginx, "GET", "/v1/notes/1", None, "");
    assert_eq!(anonymous.status, 401);
    let stranger = through(
        &nginx,
        "GET",
        "/v1/notes/1",
        Some("not-an-agent-0123456789"),
        "",
    );
    assert_eq!(stranger.status, 401);

    assert_eq!(
        upstream.requests().len(),
        1,
        "a refused call reached the upstream"
    );
}

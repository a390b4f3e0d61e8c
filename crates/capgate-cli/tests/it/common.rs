//! The harness every module shares: temporary files, the repository's own files, and the built
//! `capgate` binary.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The repository root (the bundled `policies/` and the engine's test data live there).
pub const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temp dir, `capgate-PREFIX-PID-N`.
pub fn temp_dir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "capgate-{prefix}-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The built `capgate` binary, to run from the repository root (so that `policies/...` names
/// the bundled policies).
pub fn capgate() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_capgate"));
    command.current_dir(REPO);
    command
}

/// Runs `capgate ARGS` from the repository root with nothing on standard input.
pub fn run(args: &[&str]) -> Output {
    capgate().args(args).output().unwrap()
}

/// Runs `capgate ARGS` from the repository root with `stdin` on a pipe. The child may exit
/// before reading all of it (on a bad policy, say); that is not an error.
pub fn run_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = capgate()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let _ = input.write_all(stdin);
    drop(input);
    child.wait_with_output().unwrap()
}

/// Standard output, lossily decoded.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Standard error, lossily decoded.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

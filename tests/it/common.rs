//! Helpers shared by the integration tests that write files and drive the binary.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// The repository root.
pub const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// True when data a test needs must be there: in CI (`CI=true`) or with
/// `CAPGATE_REQUIRE_DATA=1`.
pub fn data_required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("CAPGATE_REQUIRE_DATA").is_ok_and(|v| v == "1")
}

/// A folder of test data from outside the repository: `$VAR` when set, else `default` (relative
/// to the repository root). When it is missing, the test is skipped with one line on standard
/// error (written past the test harness's capture, so a plain `cargo test` shows it), unless
/// [`data_required`], when it fails.
pub fn external_data(var: &str, default: &str, what: &str) -> Option<PathBuf> {
    use std::io::Write;
    let dir = match std::env::var_os(var) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(REPO).join(default),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        !data_required(),
        "{what} is missing at `{}`: set {var} to its folder",
        dir.display()
    );
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {what} not found at `{}`, set {var} to run it",
        dir.display()
    );
    None
}

/// The VM's input for a call of skill `s` with `operation` on `resource`, with these documents
/// (payload, agent, context), at the epoch, case variants refused.
pub fn vm_input<'a, J>(
    [payload, agent, context]: [J; 3],
    operation: &'a str,
    resource: &'a capgate::vm::resource::RequestResource<'a>,
    bindings: &'a capgate::vm::resource::Bindings<'a>,
    regex_budget: &'a capgate::vm::RegexBudget,
) -> capgate::vm::Input<'a, J> {
    capgate::vm::Input {
        payload,
        agent,
        context,
        resource,
        bindings,
        skill: "s",
        operation,
        transaction: None,
        now: chrono::DateTime::UNIX_EPOCH,
        max_array_scan: 100,
        regex_budget,
        refuse_case_variants: true,
    }
}

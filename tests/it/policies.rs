//! The bundled example policies (`policies/<skill>/`) and their replay sessions.
//!
//! Every `policies/**/*.session.jsonl` is run through [`capgate::Session`] over the whole
//! `policies/` directory, exactly as `capgate replay -p policies SESSION.jsonl` would run it.
//! A session fails when any line has a failed `expect`/`expect_constraint` or is an error; the
//! failure lists every such line with its output. Each session file has its own test, and
//! `every_session_file_has_a_test` makes sure a new file cannot be added without one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};

use capgate::{Limits, PolicyLoader, PolicySet, Session, SessionOptions};

fn policies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")
}

fn load_policies() -> PolicySet {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_path(&policies_dir());
    match loader.finish() {
        Ok(policy) => policy,
        Err(error) => panic!("policies/ does not load:\n{error}"),
    }
}

/// Every session file under `policies/`, relative to it, sorted.
fn session_files() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.to_string_lossy().ends_with(".session.jsonl") {
                let relative = path.strip_prefix(root).unwrap();
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let root = policies_dir();
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// Runs one session file on a fresh engine and fails listing every line that did not hold.
fn run_session(relative: &str) {
    let text = std::fs::read_to_string(policies_dir().join(relative))
        .unwrap_or_else(|e| panic!("cannot read policies/{relative}: {e}"));
    let session = Session::new(load_policies(), SessionOptions::default()).unwrap();
    let results = session.run_text(&text);
    assert!(!results.is_empty(), "policies/{relative} has no lines");
    let calls = results
        .iter()
        .filter(|r| r.output.get("decision").is_some())
        .count();
    assert!(calls > 0, "policies/{relative} makes no calls");
    let failures: Vec<String> = results
        .iter()
        .filter(|r| r.failed_expectation || r.error)
        .map(|r| format!("{}  {}", r.text.trim_end(), r.output))
        .collect();
    assert!(
        failures.is_empty(),
        "policies/{relative}: {} of {} lines failed:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}

macro_rules! session_tests {
    ($($name:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $name() {
                run_session($file);
            }
        )*

        const SESSIONS_WITH_TESTS: &[&str] = &[$($file),*];
    };
}

session_tests! {
    meeting_scheduler_session_holds => "meeting-scheduler/meeting-scheduler.session.jsonl",
    crm_summarizer_session_holds => "crm-summarizer/crm-summarizer.session.jsonl",
    email_send_session_holds => "email-send/email-send.session.jsonl",
    payments_transfer_session_holds => "payments-transfer/payments-transfer.session.jsonl",
    crm_writer_session_holds => "crm-writer/crm-writer.session.jsonl",
    coding_agent_tools_session_holds => "coding-agent-tools/coding-agent-tools.session.jsonl",
}

#[test]
fn every_session_file_has_a_test() {
    let mut listed: Vec<String> = SESSIONS_WITH_TESTS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        session_files(),
        listed,
        "add the new session file to `session_tests!`"
    );
}

#[test]
fn policies_directory_loads_without_diagnostics() {
    let policy = load_policies();
    let mut names: Vec<String> = policy.skills.iter().map(|s| s.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "coding-agent-tools",
            "crm-summarizer",
            "crm-writer",
            "email-send",
            "meeting-scheduler",
            "payments-transfer",
        ]
    );
}

#[test]
fn every_skill_folder_holds_its_manifest_and_session() {
    for entry in std::fs::read_dir(policies_dir()).unwrap().flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let skill = path.file_name().unwrap().to_string_lossy().to_string();
        let manifest_cap = path.join(format!("{skill}.cap"));
        let manifest_json = path.join(format!("{skill}.json"));
        assert!(
            manifest_cap.is_file() || manifest_json.is_file(),
            "policies/{skill}/ has no {skill}.cap or {skill}.json"
        );
        assert!(
            path.join(format!("{skill}.session.jsonl")).is_file(),
            "policies/{skill}/ has no {skill}.session.jsonl"
        );
    }
}

#[test]
fn at_least_two_policies_use_the_json_manifest_form() {
    let json = std::fs::read_dir(policies_dir())
        .unwrap()
        .flatten()
        .filter(|entry| {
            let skill = entry.file_name().to_string_lossy().to_string();
            entry.path().join(format!("{skill}.json")).is_file()
        })
        .count();
    assert!(json >= 2, "only {json} JSON manifests under policies/");
}

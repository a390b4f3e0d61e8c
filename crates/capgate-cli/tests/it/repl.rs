//! `capgate repl`, driven through piped standard input (every command, every input form, the
//! error paths) and once through a pseudo-terminal (line editing, completion, multi-line input,
//! history).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const POLICY: &str = r#"
skill "mail" {
  version "1"
  capability "send" {
    resource service "outboundGateway"
    operations use
    lifetime process
    justification "sends the mail the user asked for"
    fieldMatches payload.to ~ /[^@]+@example\.com/
    actorBinding payload.from == agent.email
    rateLimit 2 per minute
  }
  capability "draft" {
    resource tool "draft"
    operations call
    lifetime call 1
    justification "one draft per grant"
  }
  capability "batch" {
    resource tool "batch"
    operations call
    lifetime transaction
    justification "only inside a turn"
  }
  capability "gated" {
    resource tool "gated"
    operations call
    lifetime process
    sensitivity elevated
    justification "needs a first-use approval"
  }
}
"#;

const SEND: &str =
    r#"{"skill": "mail", "operation": "use", "resource": "service:outboundGateway"}"#;

fn temp_dir() -> PathBuf {
    common::temp_dir("repl")
}

fn policy_file(dir: &Path) -> PathBuf {
    let path = dir.join("mail.cap");
    std::fs::write(&path, POLICY).unwrap();
    path
}

struct Run {
    stdout: String,
    stderr: String,
    code: i32,
}

fn capgate() -> Command {
    let mut command = common::capgate();
    command.env_remove("NO_COLOR");
    command
}

/// Runs `capgate repl ARGS` with `input` on a pipe.
fn repl_with(args: &[&str], input: &[u8]) -> Run {
    let mut child = capgate()
        .arg("repl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let output = child.wait_with_output().unwrap();
    Run {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        code: output.status.code().unwrap_or(-1),
    }
}

/// Runs the repl on the test policy, the clock at a Tuesday afternoon.
fn repl(input: &str) -> Run {
    let dir = temp_dir();
    let policy = policy_file(&dir);
    repl_with(
        &[
            "-p",
            policy.to_str().unwrap(),
            "--now",
            "2026-12-01T15:00:00Z",
        ],
        input.as_bytes(),
    )
}

fn assert_contains(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "expected {needle:?} in:\n{haystack}"
    );
}

// --- starting and stopping ------------------------------------------------------------------

#[test]
fn piped_input_gets_no_prompt_and_eof_exits_zero() {
    let run = repl(":policies\n");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("capgate>"), "{}", run.stdout);
    assert_contains(&run.stdout, "loaded 1 skill(s) from 1 path(s)");
    assert_contains(&run.stdout, "skill `mail` 1");
    assert_contains(
        &run.stdout,
        "capability `send`: service outboundGateway [use], lifetime process",
    );
    assert_contains(
        &run.stdout,
        "capability `draft`: tool draft [call], lifetime call 1",
    );
}

#[test]
fn quit_stops_reading_and_exits_zero() {
    let run = repl(":quit\n:policies\n");
    assert_eq!(run.code, 0);
    assert!(!run.stdout.contains("skill `mail`"), "{}", run.stdout);
    let run = repl(":exit\n:policies\n");
    assert!(!run.stdout.contains("skill `mail`"), "{}", run.stdout);
}

#[test]
fn starts_without_policies() {
    let run = repl_with(&[], b":policies\n");
    assert_eq!(run.code, 0);
    assert_contains(&run.stdout, "no skills loaded");
}

#[test]
fn a_bad_start_time_is_a_usage_error() {
    let run = repl_with(&["--now", "tuesday"], b"");
    assert_eq!(run.code, 2);
    assert_contains(&run.stderr, "`tuesday` is not an RFC 3339 timestamp");
}

#[test]
fn help_lists_every_command() {
    let run = repl(":help\n");
    for command in [
        ":load",
        ":reload",
        ":policies",
        ":agent",
        ":context",
        ":payload",
        ":time",
        ":advance",
        ":begin",
        ":end",
        ":grant",
        ":revoke",
        ":approve",
        ":explain",
        ":disasm",
        ":help",
        ":quit",
    ] {
        assert_contains(&run.stdout, command);
    }
}

// --- requests -------------------------------------------------------------------------------

#[test]
fn a_request_prints_the_same_text_as_check() {
    let dir = temp_dir();
    let policy = policy_file(&dir);
    let request = r#"{"skill": "mail", "operation": "use", "resource": "service:outboundGateway", "agent": {"email": "bot@example.com"}, "payload": {"to": "eve@evil.test", "from": "bot@example.com"}}"#;
    let check = capgate()
        .args([
            "check",
            "-p",
            policy.to_str().unwrap(),
            "-r",
            "-",
            "--format",
            "text",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(request.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    let expected = String::from_utf8(check.stdout).unwrap();
    assert!(expected.starts_with("deny"), "{expected}");
    let run = repl_with(
        &["-p", policy.to_str().unwrap()],
        format!("{request}\n").as_bytes(),
    );
    assert_contains(&run.stdout, &expected);
}

#[test]
fn agent_context_and_payload_fill_the_fields_a_request_omits() {
    let run = repl(&format!(
        ":agent {{\"email\": \"bot@example.com\"}}\n\
         :payload {{\"to\": \"ann@example.com\", \"from\": \"bot@example.com\"}}\n\
         :context {{\"org\": \"acme\"}}\n\
         {SEND}\n\
         :agent\n:context\n:payload\n"
    ));
    assert_contains(&run.stdout, "allow — skill `mail`, capability `send`");
    assert_contains(&run.stdout, "agent {\"email\":\"bot@example.com\"}");
    assert_contains(&run.stdout, "context {\"org\":\"acme\"}");
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn a_field_the_request_gives_wins_over_the_current_one() {
    let run = repl(&format!(
        ":agent {{\"email\": \"bot@example.com\"}}\n\
         :payload {{\"to\": \"ann@example.com\", \"from\": \"bot@example.com\"}}\n\
         {}\n",
        SEND.replace(
            '}',
            r#", "payload": {"to": "eve@evil.test", "from": "bot@example.com"}}"#
        )
    ));
    assert_contains(&run.stdout, "deny — skill `mail`");
    assert_contains(&run.stdout, "fieldMatches payload.to");
}

#[test]
fn clear_forgets_the_current_value() {
    let run = repl(":agent {\"id\": 1}\n:clear agent\n:agent\n:clear nothing\n:clear\n");
    assert_contains(&run.stdout, "agent cleared");
    assert_contains(&run.stdout, "agent is not set");
    assert_contains(&run.stderr, "`nothing` is not one of");
    assert_contains(&run.stderr, "usage: `:clear agent|context|payload`");
}

#[test]
fn a_request_that_is_not_valid_is_denied_with_reason_input() {
    let run = repl("{\"skill\": \"mail\"}\n");
    assert_contains(&run.stdout, "deny — skill `mail`");
    assert_contains(&run.stdout, "input: malformed request");
}

#[test]
fn malformed_json_is_an_error_and_the_repl_goes_on() {
    let run = repl("{\"skill\": }\n[1, 2]\n:policies\n");
    assert_eq!(run.code, 0);
    assert_contains(&run.stderr, "error: malformed JSON");
    assert_contains(&run.stdout, "skill `mail`");
}

#[test]
fn a_json_value_that_is_not_an_object_is_not_a_request() {
    let run = repl("{\"a\": 1} \n");
    assert_contains(&run.stdout, "input: malformed request");
    let run = repl("[{}]\n");
    assert_contains(&run.stderr, "is not a command");
}

#[test]
fn a_request_time_moves_the_clock() {
    let run = repl(&format!(
        "{}\n:time\n",
        SEND.replace('}', r#", "time": "2027-01-05T10:00:00Z"}"#)
    ));
    assert_contains(&run.stdout, "time 2027-01-05T10:00:00+00:00");
    let run = repl(&format!("{}\n", SEND.replace('}', r#", "time": "soon"}"#)));
    assert_contains(&run.stderr, "`time` \"soon\" is not an RFC 3339 timestamp");
}

// --- clock and rate limits ------------------------------------------------------------------

#[test]
fn rate_limits_follow_the_simulated_clock() {
    let run = repl(&format!(
        ":time 2026-12-01T15:00:00Z\n\
         :agent {{\"email\": \"bot@example.com\"}}\n\
         :payload {{\"to\": \"ann@example.com\", \"from\": \"bot@example.com\"}}\n\
         {SEND}\n{SEND}\n{SEND}\n:advance 30s\n{SEND}\n:advance 31s\n{SEND}\n"
    ));
    let verdicts: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("allow") || l.starts_with("deny"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        ["allow", "allow", "deny", "deny", "allow"],
        "{}",
        run.stdout
    );
    assert_contains(&run.stdout, "rateLimit");
    assert_contains(&run.stdout, "time 2026-12-01T15:00:30+00:00");
    assert_contains(&run.stdout, "time 2026-12-01T15:01:01+00:00");
}

#[test]
fn time_shows_and_rejects_bad_timestamps() {
    let run = repl(":time\n:time yesterday\n:advance\n:advance 3 parsecs\n");
    assert_contains(&run.stdout, "time 2026-12-01T15:00:00+00:00");
    assert_contains(&run.stderr, "`yesterday` is not an RFC 3339 timestamp");
    assert_contains(&run.stderr, "usage: `:advance DURATION`");
    assert_eq!(run.stderr.matches("error:").count(), 3, "{}", run.stderr);
}

// --- explain --------------------------------------------------------------------------------

#[test]
fn explain_traces_every_constraint_with_the_value_it_saw() {
    let run = repl(&format!(
        ":agent {{\"email\": \"bot@example.com\"}}\n\
         :payload {{\"to\": \"eve@evil.test\", \"from\": \"bot@example.com\"}}\n\
         {SEND}\n:explain\n"
    ));
    let explain = run.stdout.split("request: mail use").nth(1).unwrap();
    assert_contains(explain, "✗ candidate `send`");
    assert_contains(explain, "✗ fieldMatches payload.to ~ /[^@]+@example\\.com/");
    assert_contains(explain, "mail.cap:10:5");
    assert_contains(explain, "payload.to = \"eve@evil.test\"");
    // The constraint after the failing one is still traced.
    assert_contains(explain, "✓ actorBinding payload.from == agent.email");
    assert_contains(explain, "payload.from = \"bot@example.com\"");
    assert_contains(explain, "rateLimit 2 per 1m");
    assert_contains(explain, "decision: deny — skill `mail`");
}

#[test]
fn explain_before_a_request_is_an_error() {
    let run = repl(":explain\n:explain now\n");
    assert_contains(&run.stderr, "no valid request yet");
    assert_contains(&run.stderr, "`:explain` takes no arguments");
}

#[test]
fn explain_of_an_unknown_skill_says_there_is_no_candidate() {
    let run = repl(
        "{\"skill\": \"nope\", \"operation\": \"call\", \"resource\": \"tool:x\"}\n:explain\n",
    );
    assert_contains(&run.stdout, "no candidate capability");
    assert_contains(&run.stdout, "unknownSkill");
}

// --- constraint lines -----------------------------------------------------------------------

#[test]
fn a_constraint_line_that_holds_prints_true() {
    let run = repl(
        ":payload {\"email\": \"ann@example.com\"}\nfieldMatches payload.email ~ /.*@example\\.com/\n",
    );
    assert_contains(&run.stdout, "true\n");
    assert_contains(&run.stdout, "✓ payload.email = \"ann@example.com\"");
}

#[test]
fn a_failing_constraint_line_prints_false_and_why() {
    let run = repl(
        ":payload {\"email\": \"eve@evil.test\"}\nfieldMatches payload.email ~ /.*@example\\.com/\n",
    );
    assert_contains(&run.stdout, "false\n");
    assert_contains(&run.stdout, "does not match /.*@example\\.com/");
}

#[test]
fn a_constraint_on_a_missing_path_fails_unless_optional() {
    let run = repl(
        ":payload {}\nfieldEquals payload.cc == \"x\"\noptional fieldEquals payload.cc == \"x\"\n",
    );
    let results: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| *l == "true" || *l == "false")
        .collect();
    assert_eq!(results, ["false", "true"], "{}", run.stdout);
    assert_contains(&run.stdout, "absent");
}

#[test]
fn constraint_lines_see_the_agent_the_context_and_the_clock() {
    let run = repl(
        ":agent {\"email\": \"a@example.com\"}\n\
         :payload {\"from\": \"a@example.com\"}\n\
         :context {\"org\": \"acme\"}\n\
         actorBinding payload.from == agent.email\n\
         fieldEquals context.org == \"acme\"\n\
         wallClockWindow mon-fri 09:00-17:00\n\
         :time 2026-12-05T12:00:00Z\n\
         wallClockWindow mon-fri 09:00-17:00\n",
    );
    let results: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| *l == "true" || *l == "false")
        .collect();
    assert_eq!(results, ["true", "true", "true", "false"], "{}", run.stdout);
}

#[test]
fn a_constraint_block_may_span_lines() {
    let run = repl(
        ":payload {\"a\": 2}\nany {\n  fieldEquals payload.a == 1\n  fieldEquals payload.a == 2\n}\n",
    );
    assert_contains(&run.stdout, "true\n");
}

#[test]
fn several_constraints_on_a_line_are_a_conjunction() {
    let run = repl(
        ":payload {\"a\": 1, \"b\": 2}\nfieldEquals payload.a == 1 fieldEquals payload.b == 3\n",
    );
    assert_contains(&run.stdout, "false\n");
    assert_contains(&run.stdout, "✓ fieldEquals payload.a == 1");
    assert_contains(&run.stdout, "✗ fieldEquals payload.b == 3");
}

#[test]
fn a_constraint_that_does_not_compile_points_at_its_column() {
    let run = repl("fieldEquals payload.to === 3\n:policies\n");
    assert_contains(&run.stderr, "<input>:1:26: error:");
    assert_contains(&run.stderr, "   1 | fieldEquals payload.to === 3\n");
    assert_contains(&run.stderr, &format!("       | {}^\n", " ".repeat(25)));
    assert_contains(&run.stderr, "error: the constraint does not compile");
    assert_contains(&run.stdout, "skill `mail`");
}

#[test]
fn a_constraint_with_a_bad_regex_is_reported() {
    let run = repl("fieldMatches payload.a ~ /(a/\n");
    assert_contains(&run.stderr, "<input>:1:");
    assert_contains(&run.stderr, "error: the constraint does not compile");
}

#[test]
fn a_rate_limit_line_is_not_evaluable_alone() {
    let run = repl("rateLimit 5 per minute\n");
    assert_contains(
        &run.stderr,
        "`rateLimit` counts the calls a stateful engine allowed",
    );
}

// --- skill blocks ---------------------------------------------------------------------------

#[test]
fn a_skill_block_is_added_to_the_policies() {
    let run = repl(
        "skill \"notes\" {\n\
           version \"1\"\n\
           capability \"read\" {\n\
             resource tool \"read_note\"\n\
             operations call\n\
             lifetime process\n\
             justification \"reads notes\"\n\
             fieldMatches payload.path ~ /notes\\/[a-z]+/\n\
           }\n\
         }\n\
         {\"skill\": \"notes\", \"operation\": \"call\", \"resource\": \"tool:read_note\", \"payload\": {\"path\": \"notes/todo\"}}\n\
         {\"skill\": \"notes\", \"operation\": \"call\", \"resource\": \"tool:read_note\", \"payload\": {\"path\": \"/etc/passwd\"}}\n\
         :policies\n",
    );
    assert_contains(&run.stdout, "added skill `notes` (1 capability)");
    assert_contains(&run.stdout, "allow — skill `notes`, capability `read`");
    assert_contains(&run.stdout, "deny — skill `notes`");
    assert_contains(&run.stdout, "at <repl:1>:8:");
    assert_contains(&run.stdout, "skill `notes` 1 (typed here)");
    assert_contains(&run.stdout, "skill `mail` 1");
}

#[test]
fn a_skill_block_replaces_a_skill_of_the_same_name() {
    let run = repl(
        "skill \"mail\" { version \"2\" capability \"ping\" { resource tool \"ping\" operations call lifetime process justification \"j\" } }\n\
         {\"skill\": \"mail\", \"operation\": \"call\", \"resource\": \"tool:ping\"}\n\
         :policies\n",
    );
    assert_contains(&run.stdout, "replaced skill `mail` (1 capability)");
    assert_contains(&run.stdout, "allow — skill `mail`, capability `ping`");
    assert_contains(&run.stdout, "skill `mail` 2 (typed here)");
    assert!(!run.stdout.contains("capability `send`"), "{}", run.stdout);
}

#[test]
fn a_skill_block_that_does_not_compile_shows_the_snippet_and_changes_nothing() {
    let run = repl(
        "skill \"notes\" {\n  version \"1\"\n  capability \"read\" {\n    resource tool \"read_note\"\n    operations call\n    lifetime process\n  }\n}\n:policies\n",
    );
    assert_contains(&run.stderr, "<repl:1>:3:");
    assert_contains(&run.stderr, "justification");
    assert_contains(&run.stderr, "   3 |   capability \"read\" {");
    assert_contains(&run.stderr, "^");
    assert_contains(
        &run.stderr,
        "error: skill rejected; the policy is unchanged",
    );
    assert!(!run.stdout.contains("notes"), "{}", run.stdout);
}

#[test]
fn an_unfinished_block_at_end_of_input_is_reported() {
    let run = repl("skill \"notes\" {\n  version \"1\"\n");
    assert_eq!(run.code, 0);
    assert_contains(&run.stderr, "<repl:1>:");
    assert_contains(&run.stderr, "skill rejected");
}

#[test]
fn a_command_ends_an_unfinished_block() {
    let run = repl("{\"skill\": \n:quit\n:policies\n");
    assert_eq!(run.code, 0);
    assert_contains(&run.stderr, "malformed JSON");
    assert!(!run.stdout.contains("skill `mail`"), "{}", run.stdout);
}

// --- loading --------------------------------------------------------------------------------

#[test]
fn load_adds_files_and_keeps_the_last_good_policy_on_error() {
    let dir = temp_dir();
    let other = dir.join("other.cap");
    std::fs::write(
        &other,
        "skill \"other\" { version \"1\" capability \"c\" { resource tool \"t\" operations call lifetime process justification \"j\" } }",
    )
    .unwrap();
    let broken = dir.join("broken.cap");
    std::fs::write(&broken, "skill \"broken\" {\n  version\n}\n").unwrap();
    let run = repl(&format!(
        ":load {}\n:load {}\n:load\n:load {}\n:policies\n",
        other.display(),
        broken.display(),
        dir.join("missing.cap").display()
    ));
    assert_contains(&run.stdout, "loaded 2 skill(s) from 2 path(s)");
    assert_contains(&run.stderr, "broken.cap:3:1: error: expected a string");
    assert_contains(&run.stderr, "   3 | }");
    assert_contains(
        &run.stderr,
        "policy rejected; the last good policy stays loaded",
    );
    assert_contains(&run.stderr, "`:load` needs one or more policy files");
    assert_contains(&run.stderr, "missing.cap");
    let policies = run.stdout.rsplit("loaded 2 skill(s)").next().unwrap();
    assert_contains(policies, "skill `mail`");
    assert_contains(policies, "skill `other`");
    assert!(!policies.contains("broken"), "{policies}");
}

#[test]
fn reload_reads_the_files_again() {
    let dir = temp_dir();
    let policy = policy_file(&dir);
    let mut child = capgate()
        .args(["repl", "-p", policy.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"skill \"mail\" { version \"typed\" capability \"c\" { resource tool \"t\" operations call lifetime process justification \"j\" } }\n").unwrap();
    stdin.flush().unwrap();
    // The file changes while the repl runs; `:reload` sees the change.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&policy, POLICY.replace("version \"1\"", "version \"2\"")).unwrap();
    stdin
        .write_all(b":reload\n:policies\n:reload now\n")
        .unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_contains(
        &stdout,
        "note: skill `mail` from the files replaces the one typed here",
    );
    assert_contains(&stdout, "reloaded 1 skill(s)");
    assert_contains(&stdout, "skill `mail` 2");
    assert_contains(&stderr, "`:reload` takes no arguments");
}

#[test]
fn reload_without_files_is_an_error() {
    let run = repl_with(&[], b":reload\n");
    assert_contains(&run.stderr, "no policy files are loaded");
}

#[test]
fn a_bad_policy_at_start_is_reported_and_reload_retries_it() {
    let dir = temp_dir();
    let path = dir.join("p.cap");
    std::fs::write(&path, "skill \"s\" {").unwrap();
    let mut child = capgate()
        .args(["repl", "-p", path.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b":policies\n").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&path, POLICY).unwrap();
    stdin.write_all(b":reload\n:policies\n").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_contains(
        &stderr,
        "starting with no policy; fix the files and `:reload`",
    );
    assert_contains(&stdout, "no skills loaded");
    assert_contains(&stdout, "reloaded 1 skill(s)");
    assert_contains(&stdout, "skill `mail` 1");
}

// --- grants, transactions, revocation, approval ---------------------------------------------

#[test]
fn a_grant_is_used_once_for_a_call_lifetime() {
    let draft =
        r#"{"skill": "mail", "operation": "call", "resource": "tool:draft", "grant": "g-1"}"#;
    let run = repl(&format!("{draft}\n:grant mail draft\n{draft}\n{draft}\n"));
    let verdicts: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("allow") || l.starts_with("deny"))
        .collect();
    assert_eq!(verdicts.len(), 3, "{}", run.stdout);
    assert!(verdicts[0].starts_with("deny"));
    assert_contains(&run.stdout, "grant `g-1` for `mail`/`draft`");
    assert!(verdicts[1].starts_with("allow"), "{}", run.stdout);
    assert_contains(verdicts[1], "grant `g-1`");
    assert!(verdicts[2].starts_with("deny"));
}

#[test]
fn grant_errors_are_reported() {
    let run = repl(":grant mail\n:grant nope draft\n:grant mail nope\n");
    assert_contains(&run.stderr, "usage: `:grant SKILL CAP [TX]`");
    assert_contains(&run.stderr, "unknown skill `nope`");
    assert_contains(&run.stderr, "skill `mail` has no capability `nope`");
}

#[test]
fn a_transaction_lifetime_needs_an_open_transaction() {
    let batch = r#"{"skill": "mail", "operation": "call", "resource": "tool:batch", "transaction": "turn-1"}"#;
    let run = repl(&format!(
        "{batch}\n:begin turn-1\n{batch}\n:end turn-1\n{batch}\n:begin\n:grant mail draft turn-1\n\
         :begin turn-2\n:grant mail draft turn-2\n:end turn-3\n"
    ));
    let verdicts: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("allow") || l.starts_with("deny"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(verdicts, ["deny", "allow", "deny"], "{}", run.stdout);
    assert_contains(&run.stdout, "begin transaction `turn-1`");
    assert_contains(&run.stdout, "end transaction `turn-1`");
    assert_contains(&run.stderr, "usage: `:begin TX`");
    assert_contains(&run.stderr, "transaction `turn-1` is not open");
    assert_contains(&run.stdout, "for `mail`/`draft` in `turn-2`");
    assert_contains(&run.stderr, "`turn-3`");
}

#[test]
fn revocations_refuse_later_calls() {
    let draft =
        r#"{"skill": "mail", "operation": "call", "resource": "tool:draft", "grant": "g-1"}"#;
    let gated = r#"{"skill": "mail", "operation": "call", "resource": "tool:gated"}"#;
    let run = repl(&format!(
        ":grant mail draft\n:revoke grant g-1\n{draft}\n\
         :approve mail\n{gated}\n:revoke capability mail gated\n{gated}\n\
         :revoke skill mail\n:revoke\n:revoke grant nope\n"
    ));
    assert_contains(&run.stdout, "revoked grant `g-1`");
    assert_contains(&run.stdout, "revoked capability `mail`/`gated`");
    assert_contains(&run.stdout, "revoked skill `mail`");
    let verdicts: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("allow") || l.starts_with("deny"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(verdicts, ["deny", "allow", "deny"], "{}", run.stdout);
    assert_contains(
        &run.stderr,
        "usage: `:revoke grant G | skill S | capability S C`",
    );
    assert_contains(&run.stderr, "error: ");
}

#[test]
fn approval_unlocks_an_elevated_capability() {
    let gated = r#"{"skill": "mail", "operation": "call", "resource": "tool:gated"}"#;
    let run = repl(&format!(
        "{gated}\n:approve mail\n{gated}\n:approve nope\n:approve\n"
    ));
    assert_contains(
        &run.stdout,
        "approval_required — skill `mail`, capability `gated`",
    );
    assert_contains(&run.stdout, "approved skill `mail`");
    assert_contains(&run.stdout, "allow — skill `mail`, capability `gated`");
    assert_contains(&run.stderr, "unknown skill `nope`");
    assert_contains(&run.stderr, "usage: `:approve SKILL`");
}

// --- disasm and bad input -------------------------------------------------------------------

/// `:disasm` prints a capability as `capgate disasm` does, from its summary line (operations
/// included) to its rate limits.
#[test]
fn disasm_prints_what_capgate_disasm_prints() {
    let dir = temp_dir();
    let policy = policy_file(&dir);
    let output = capgate()
        .args(["disasm", policy.to_str().unwrap()])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&output.stdout).into_owned();
    let start = listing.find("capability `send`:").unwrap();
    let end = start + listing[start..].find("\n\n").unwrap() + 1;
    let send = &listing[start..end];
    assert!(
        send.starts_with("capability `send`: service outboundGateway [use]\n")
            && send.ends_with("  then  rateLimit 2 per 1m\n"),
        "{send}"
    );
    let run = repl_with(&["-p", policy.to_str().unwrap()], b":disasm mail send\n");
    assert_contains(&run.stdout, send);
}

#[test]
fn disasm_prints_a_capabilitys_bytecode() {
    let run = repl(":disasm mail send\n:disasm mail\n:disasm nope send\n:disasm mail nope\n");
    assert_contains(&run.stdout, "capability `send`: service outboundGateway");
    assert_contains(&run.stdout, "then  rateLimit 2 per 1m");
    // How the VM answers each check first (docs/bytecode.md, "The plan").
    assert_contains(&run.stdout, "plan: check0 ");
    assert_contains(&run.stderr, "usage: `:disasm SKILL CAP`");
    assert_contains(&run.stderr, "unknown skill `nope`");
    assert_contains(&run.stderr, "skill `mail` has no capability `nope`");
}

#[test]
fn bad_lines_are_errors_and_never_stop_the_repl() {
    let mut input = b":frobnicate\nhello world\n:agent {bad\n:payload [1,\n2]\n".to_vec();
    input.extend_from_slice(b"\xff\xfe\n");
    input.extend_from_slice(b"}}}\n:payload\n");
    let run = repl_with(&["--now", "2026-12-01T15:00:00Z"], &input);
    assert_eq!(run.code, 0);
    assert_contains(&run.stderr, "unknown command `:frobnicate`");
    assert_contains(&run.stderr, "`hello world` is not a command");
    assert_contains(&run.stderr, "`:agent` needs JSON");
    assert_contains(&run.stderr, "the line is not UTF-8");
    assert_contains(&run.stderr, "`}}}` is not a command");
    assert_contains(&run.stdout, "payload [1,2]");
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn comments_and_blank_lines_are_ignored() {
    let run = repl("\n   \n// a comment\n# another\n");
    assert_eq!(run.code, 0);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn a_deeply_nested_payload_is_refused() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let run = repl(&format!(":payload {deep}\n:payload\n"));
    assert_contains(&run.stderr, "error:");
    assert_contains(&run.stdout, "payload is not set");
}

// --- terminal -------------------------------------------------------------------------------

/// A program running on a pseudo-terminal through `script`, its output collected by a thread.
struct Terminal {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Terminal {
    /// Starts `command` on a pseudo-terminal, or `None` when there is no `script` tool.
    fn start(command: &str, envs: &[(&str, &Path)]) -> Option<Terminal> {
        let script = ["/usr/bin/script", "/bin/script"]
            .into_iter()
            .find(|p| Path::new(p).exists())?;
        let mut builder = Command::new(script);
        builder
            .args(["-qfec", command, "/dev/null"])
            .env("TERM", "xterm")
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in envs {
            builder.env(key, value);
        }
        let mut child = builder.spawn().unwrap();
        let input = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = output.clone();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        Some(Terminal {
            child,
            input,
            output,
            reader: Some(reader),
        })
    }

    fn seen(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits until the output after byte `from` holds each of `needles`, in order.
    fn wait_for(&self, from: usize, needles: &[&str]) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = self.seen();
            let mut rest = seen.get(from..).unwrap_or("");
            let mut found = true;
            for needle in needles {
                match rest.find(needle) {
                    Some(at) => rest = &rest[at + needle.len()..],
                    None => found = false,
                }
                if !found {
                    break;
                }
            }
            if found {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `keys` one at a time, as a person would, once the editor shows its prompt, and
    /// waits for `needle` and the next prompt.
    fn type_keys(&mut self, keys: &[u8], needle: &str) -> bool {
        let from = self.seen().len();
        for key in keys {
            self.input.write_all(&[*key]).unwrap();
            self.input.flush().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        self.wait_for(from, &[needle, "capgate> "])
    }

    /// Types `keys` and waits for the program to exit; returns its exit code.
    fn finish(mut self, keys: &[u8]) -> Option<i32> {
        self.input.write_all(keys).unwrap();
        self.input.flush().unwrap();
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        status.code()
    }
}

#[test]
fn a_terminal_session_edits_completes_continues_blocks_and_keeps_history() {
    let dir = temp_dir();
    let policy = policy_file(&dir);
    let history = dir.join("state").join("history");
    let command = format!(
        "{} repl -p {} --now 2026-12-01T15:00:00Z",
        env!("CARGO_BIN_EXE_capgate"),
        policy.display()
    );
    let Some(mut terminal) = Terminal::start(&command, &[("CAPGATE_HISTORY", &history)]) else {
        eprintln!("skipped: no `script` tool to run the repl on a pseudo-terminal");
        return;
    };
    assert!(
        terminal.wait_for(0, &["capgate> "]),
        "no prompt:\n{}",
        terminal.seen()
    );
    // Tab completes a command; Enter runs it.
    assert!(
        terminal.type_keys(b":poli\t\r", "capability `batch`"),
        "tab did not complete `:policies`:\n{}",
        terminal.seen()
    );
    // Backspace edits the line: `:helx` becomes `:help`.
    assert!(
        terminal.type_keys(b":helx\x7fp\r", ":disasm SKILL CAP"),
        "backspace did not edit the line:\n{}",
        terminal.seen()
    );
    // An open `{` continues the input on the next line until it is balanced.
    assert!(
        terminal.type_keys(
            b"skill \"notes\" {\r version \"1\"\r capability \"r\" { resource tool \"t\" operations call lifetime process justification \"j\" }\r}\r",
            "added skill `notes`",
        ),
        "the open block did not continue:\n{}",
        terminal.seen()
    );
    // A skill name from the loaded policies completes too.
    assert!(
        terminal.type_keys(b":disasm not\t r\r", "capability `r`: tool t"),
        "a skill name did not complete:\n{}",
        terminal.seen()
    );
    let code = terminal.finish(b":quit\r");
    assert_eq!(code, Some(0));
    let saved = std::fs::read_to_string(&history).unwrap();
    assert_contains(&saved, ":policies");
    assert_contains(&saved, ":help");
    assert_contains(&saved, ":disasm notes r");
}

/// On a terminal, a line that leaves a `{` or `[` open shows the continuation prompt for the
/// next one, a `:` command line ends the unfinished block (reported, then the command runs),
/// and an echoed value is cut and its bidirectional controls escaped.
#[test]
fn a_terminal_shows_a_continuation_prompt_and_a_command_ends_the_block() {
    let dir = temp_dir();
    let history = dir.join("history");
    let command = format!(
        "{} repl --now 2026-12-01T15:00:00Z",
        env!("CARGO_BIN_EXE_capgate")
    );
    let Some(mut terminal) = Terminal::start(&command, &[("CAPGATE_HISTORY", &history)]) else {
        eprintln!("skipped: no `script` tool to run the repl on a pseudo-terminal");
        return;
    };
    assert!(
        terminal.wait_for(0, &["capgate> "]),
        "no prompt:\n{}",
        terminal.seen()
    );
    let from = terminal.seen().len();
    for key in b"{\"skill\": \"mail\",\r" {
        terminal.input.write_all(&[*key]).unwrap();
        terminal.input.flush().unwrap();
    }
    assert!(
        terminal.wait_for(from, &["     ... "]),
        "no continuation prompt:\n{}",
        terminal.seen()
    );
    assert!(
        terminal.type_keys(b":time\r", "time 2026-12-01T15:00:00+00:00"),
        "`:time` did not end the block:\n{}",
        terminal.seen()
    );
    let long = format!("{{\"a\": \"\u{202e}{}\"}}", "x".repeat(400));
    let keys = format!(":payload {long}\r");
    assert!(
        terminal.type_keys(keys.as_bytes(), "payload {\"a\":\"\\u{202e}xxx"),
        "the echo was not escaped:\n{}",
        terminal.seen()
    );
    let seen = terminal.seen();
    let echo = seen.rsplit("payload {\"a\"").next().unwrap();
    assert!(echo.contains("x…"), "the echo was not cut:\n{echo}");
    let code = terminal.finish(b":quit\r");
    assert_eq!(code, Some(0));
}

#[test]
fn an_unwritable_history_file_does_not_fail_the_repl() {
    let dir = temp_dir();
    // A history path under a regular file can be neither read nor created.
    let blocker = dir.join("file");
    std::fs::write(&blocker, "").unwrap();
    let history = blocker.join("history");
    let command = format!("{} repl", env!("CARGO_BIN_EXE_capgate"));
    let Some(mut terminal) = Terminal::start(&command, &[("CAPGATE_HISTORY", &history)]) else {
        eprintln!("skipped: no `script` tool to run the repl on a pseudo-terminal");
        return;
    };
    assert!(
        terminal.wait_for(0, &["capgate> "]),
        "no prompt:\n{}",
        terminal.seen()
    );
    assert!(
        terminal.type_keys(
            b":time 2026-12-01T15:00:00Z\r",
            "time 2026-12-01T15:00:00+00:00"
        ),
        "{}",
        terminal.seen()
    );
    let output = terminal.output.clone();
    let code = terminal.finish(b":quit\r");
    let seen = output.lock().unwrap().clone();
    assert_eq!(code, Some(0), "{seen}");
    assert_contains(&seen, "cannot write the history file");
}

/// Found in review: scripted input rescanned the whole open block after every line to see
/// whether it was complete, so a pretty-printed request of 40,000 lines took 40 s (quadratic).
/// The brackets are counted one line at a time. A 30,000-line request (under the 1 MiB
/// limit) is decided at once.
#[test]
fn regression_a_long_multi_line_request_is_read_in_linear_time() {
    let mut request = String::from(
        "{\"skill\": \"mail\", \"operation\": \"use\",\n\"resource\": \"service:outboundGateway\",\n\"payload\": {\"lines\": [\n",
    );
    for i in 0..30_000 {
        request.push_str(&format!("{i},\n"));
    }
    request.push_str("0\n]}}\n");
    let run = repl(&request);
    // Read as one request and decided (it lacks `payload.to`, which the policy checks).
    assert_contains(&run.stdout, "deny — skill `mail`");
    assert_contains(&run.stdout, "fieldMatches payload.to: the value is absent");
}

/// A piped line over `Limits::max_session_line_bytes` is an error, held no further than the
/// limit, and the next line runs; so is a block of lines that grows over it.
#[test]
fn an_oversized_line_is_an_error_and_the_next_line_runs() {
    let mut input = format!(":payload \"{}\"\n", "a".repeat(3 << 20));
    input.push_str(":payload [1]\n:payload\n");
    input.push_str(":payload [\n");
    for _ in 0..3 {
        input.push_str(&"1,".repeat(400_000));
        input.push('\n');
    }
    input.push_str("1]\n:payload [2]\n:payload\n");
    let run = repl(&input);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_contains(
        &run.stderr,
        "error: the line is larger than the 2097152-byte limit (`Limits::max_session_line_bytes`)",
    );
    assert_contains(
        &run.stderr,
        "error: the input is larger than the 2097152-byte limit (`Limits::max_session_line_bytes`)",
    );
    assert_contains(&run.stdout, "payload [1]");
    assert_contains(&run.stdout, "payload [2]");
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

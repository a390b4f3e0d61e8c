//! Tests that cannot decide, as the authoring tools show them: policy-test traces and the REPL
//! (the engine's side is in the engine crate's `undecidable` tests).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use capgate::{PolicyFormat, PolicyLoader};
use serde_json::{Value, json};

const CAP_HEAD: &str = "skill \"s\" {\n  version \"1\"\n  capability \"c\" {\n    resource http \"https://api.example.com/items\"\n    operations GET\n";

fn loaded(constraint: &str) -> capgate::PolicySet {
    let mut loader = PolicyLoader::default();
    loader.add_text(
        "p.cap",
        format!("{CAP_HEAD}    {constraint}\n  }}\n}}\n"),
        PolicyFormat::Cap,
        None,
    );
    loader.finish().unwrap()
}

// ---------- F2: captest trace hides the undecidable test of a failing check ----------

#[test]
/// `capgate test`'s trace listed only tests that did not hold, and an undecidable test under
/// `not` reported that it held: a check failed by one showed no reason line.
fn regression_a_policy_test_trace_names_the_undecidable_value() {
    let policy = loaded(r#"not { fieldEquals payload.user.role == "admin" }"#);
    let captest = "[defaults]\ntime = \"2026-12-01T12:00:00Z\"\nskill = \"s\"\noperation = \"GET\"\nresource = \"https://api.example.com/items\"\npayload = {\"user\": \"admin\"}\ngrant c as g\ngrant = \"g\"\n[case p]\nexpect allow\n";
    let report = capgate_authoring::testing::run_test_file("t.captest", captest, &policy);
    assert_eq!(report.failed, 1, "{report}");
    let text = report.failures[0].to_string();
    let after = text.split("FAILS").nth(1).expect(&text);
    assert!(
        after.contains("payload.user"),
        "the FAILS check lists no test:\n{text}"
    );
}

#[test]
/// The REPL marked an undecidable test under `not` as held.
fn regression_the_repl_does_not_mark_an_undecidable_test_as_held() {
    use capgate_authoring::repl::{ConstraintInput, evaluate_constraint};
    let payload = json!({"user": "admin"});
    let input = ConstraintInput {
        payload: &payload,
        agent: &Value::Null,
        context: &Value::Null,
        now: "2026-12-01T12:00:00Z".parse().unwrap(),
    };
    let evaluation = evaluate_constraint(
        r#"not { fieldEquals payload.user.role == "admin" }"#,
        &input,
        capgate::Limits::DEFAULT,
    )
    .unwrap();
    assert!(!evaluation.holds());
    let test = &evaluation.checks[0].tests[0];
    // The REPL prints `style.mark(test.holds)`: a ✓ next to "cannot follow the path".
    assert!(!test.holds, "{test:?}");
}

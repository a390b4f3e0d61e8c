//! `.cap` text → parse → compile. Never panics. When the text compiles, every program is
//! verified (by type: `compile_skills` only returns `VerifiedProgram`s), disassembles, and runs
//! on a few fixed requests without an internal VM error. A file that compiles also converts to
//! a JSON manifest (`capgate convert`) that parses and compiles again.
#![no_main]

use capgate::Limits;
use capgate::span::SourceMap;
use capgate::vm::{Input, VmError, resource::Bindings, resource::RequestResource};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = SourceMap::new();
    let file = sources.add("fuzz.cap", text);
    let Ok(parsed) = capgate::syntax::parse(file, text) else {
        return;
    };
    let files = [parsed];
    let compiled = capgate::compile::compile_skills(&files, &sources, &Limits::DEFAULT);
    match &compiled {
        Err(errors) => {
            assert!(!errors.is_empty(), "compile failed without an error");
            for error in errors {
                capgate_fuzz::check_span(&sources, error.span, text.len());
            }
        }
        Ok(skills) => {
            let payloads = [
                json!(null),
                json!({}),
                json!({"a": [1, "x", {"b": null}], "start": "2026-01-01T00:00:00Z"}),
            ];
            let resource = RequestResource::parse("https://example.com/a/b?q=1&q=2");
            let resource = resource.unwrap_or_else(|e| panic!("fixed resource rejected: {e:?}"));
            let bindings = Bindings::new();
            for skill in skills {
                for capability in &skill.capabilities {
                    let _ = capgate::bytecode::disasm::disassemble(capability.program().program());
                    for payload in &payloads {
                        let input = Input {
                            payload,
                            agent: payload,
                            context: payload,
                            resource: &resource,
                            bindings: &bindings,
                            skill: &skill.name,
                            operation: "GET",
                            transaction: None,
                            now: chrono::DateTime::UNIX_EPOCH,
                            max_array_scan: 16,
                            regex_budget: &capgate::vm::RegexBudget::unlimited(),
                            refuse_case_variants: true,
                        };
                        let outcome = capgate::vm::run(capability.program(), &input);
                        assert!(
                            !matches!(outcome, Err(VmError::Internal(_))),
                            "compiled program hit an internal VM error: {outcome:?}"
                        );
                    }
                }
            }
        }
    }
    // `capgate convert`: the JSON form of a file that compiles must load and compile too.
    if compiled.is_ok() {
        if let Ok(json) = capgate::manifest::to_json_text(&files[0]) {
            let mut json_sources = SourceMap::new();
            let json_file = json_sources.add("fuzz.json", json.as_str());
            let reparsed = capgate::manifest::parse_manifest(json_file, &json);
            let reparsed = reparsed
                .unwrap_or_else(|e| panic!("converted manifest does not parse: {e:?}\n{json}"));
            let recompiled =
                capgate::compile::compile_skills(&[reparsed], &json_sources, &Limits::DEFAULT);
            if let Err(e) = recompiled {
                panic!("converted manifest does not compile: {e:?}\n{json}");
            }
        }
    }
});

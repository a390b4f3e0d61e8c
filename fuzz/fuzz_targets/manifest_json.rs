//! JSON manifest text → AST. Never panics; every error span lies inside the input; a manifest
//! that parses can be emitted back to JSON and that JSON parses again.
#![no_main]

use capgate::span::SourceMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = SourceMap::new();
    let file = sources.add("fuzz.json", text);
    match capgate::manifest::parse_manifest(file, text) {
        Err(errors) => {
            assert!(!errors.is_empty(), "manifest failed without an error");
            for error in &errors {
                capgate_fuzz::check_span(&sources, error.span, text.len());
            }
        }
        Ok(parsed) => {
            // Emitting may refuse (e.g. a form JSON cannot express) but must not panic, and what
            // it emits must parse again.
            if let Ok(json) = capgate::manifest::to_json_text(&parsed) {
                let mut again = SourceMap::new();
                let file = again.add("emitted.json", json.as_str());
                if let Err(e) = capgate::manifest::parse_manifest(file, &json) {
                    panic!("emitted manifest does not parse: {e:?}\n{json}");
                }
            }
        }
    }
});

//! `.cap` text → AST. Never panics; every error span lies inside the input and can be turned
//! into a `file:line:column` location.
#![no_main]

use capgate::span::SourceMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = SourceMap::new();
    let file = sources.add("fuzz.cap", text);
    if let Err(errors) = capgate::syntax::parse(file, text) {
        assert!(!errors.is_empty(), "parse failed without an error");
        for error in &errors {
            capgate_fuzz::check_span(&sources, error.span, text.len());
        }
    }
});

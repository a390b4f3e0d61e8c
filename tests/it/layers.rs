//! The engine's modules form layers: a module uses only modules of a lower layer (or of its own
//! layer on the ground floor). The test reads every `crate::…` path in `src/` outside comments
//! and unit tests and checks it against the table below, which README's "What is where" lists.

#![allow(clippy::unwrap_used)]

use std::path::Path;

/// Each top-level module of `src/` with its layer, lowest first.
const LAYERS: &[(&str, u8)] = &[
    ("bytes", 0),
    ("convert", 0),
    ("fold", 0),
    ("limits", 0),
    ("name", 0),
    ("revision", 0),
    ("resource_kind", 0),
    ("vocabulary", 0),
    ("bounded", 1),
    ("span", 1),
    ("value", 1),
    ("syntax", 2),
    ("tape", 2),
    ("runtime", 2),
    ("manifest", 3),
    ("time", 3),
    ("bytecode", 4),
    ("compile", 5),
    ("vm", 5),
    ("engine", 6),
    ("compiled", 7),
    ("reference", 7),
    ("session", 7),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|&(_, layer)| layer)
}

/// The code of a source file without its comments and its `#[cfg(test)] mod tests`.
fn code(text: &str) -> String {
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `crate::NAME` names in `code`.
fn uses(code: &str) -> Vec<String> {
    code.match_indices("crate::")
        .map(|(at, needle)| {
            code.get(at + needle.len()..)
                .unwrap_or_default()
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect()
        })
        .collect()
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_uses_a_module_of_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    let mut wrong = Vec::new();
    for path in paths {
        let relative = path.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" || relative.file_name().is_some_and(|f| f == "tests.rs") {
            continue;
        }
        let Some(own) = layer(&top) else {
            wrong.push(format!(
                "{}: module `{top}` is not in LAYERS",
                relative.display()
            ));
            continue;
        };
        for used in uses(&code(&std::fs::read_to_string(&path).unwrap())) {
            if used == top {
                continue;
            }
            match layer(&used) {
                None => wrong.push(format!(
                    "{}: `crate::{used}` is not in LAYERS",
                    relative.display()
                )),
                Some(theirs) if theirs > own || (theirs == own && own > 0) => wrong.push(format!(
                    "{}: `{top}` (layer {own}) uses `{used}` (layer {theirs})",
                    relative.display()
                )),
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_use_of_a_higher_layer_is_found() {
    let text = "use crate::engine::Engine;\n// crate::vm in a comment\n#[cfg(test)]\nmod tests {\n    use crate::session;\n}";
    assert_eq!(uses(&code(text)), vec!["engine".to_owned()]);
}

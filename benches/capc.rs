//! Startup: loading 1,000 generated skills from `.cap` sources (parse + compile + verify) versus
//! from one `.capc` file (decode + verify, then each skill's embedded manifest compiled again and
//! compared), each up to a built engine.
//!
//! The skills are the bundled `.cap` policies, renamed `NAME-0` … `NAME-999` in turn, so every
//! constraint kind (regexes, schemas, windows, bounds, rate limits) is represented. Run with
//! `cargo bench --bench capc`.

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::path::Path;

use capgate::bytecode::encode::encode_capc;
use capgate::compile::load_capc;
use capgate::{Engine, Limits, PolicyFormat, PolicyLoader, PolicySet};
use criterion::{Criterion, criterion_group, criterion_main};

const SKILLS: usize = 1_000;

/// `(file name, text)` of each generated `.cap` file.
fn generated_sources() -> Vec<(String, String)> {
    let mut templates = Vec::new();
    for entry in std::fs::read_dir(Path::new("policies")).unwrap().flatten() {
        for file in std::fs::read_dir(entry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if file.path().extension().is_some_and(|e| e == "cap") {
                let text = std::fs::read_to_string(file.path()).unwrap();
                let name = file
                    .path()
                    .file_stem()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                templates.push((name, text));
            }
        }
    }
    templates.sort();
    assert!(!templates.is_empty(), "run from the crate root");
    (0..SKILLS)
        .map(|i| {
            let (name, text) = &templates[i % templates.len()];
            let renamed = text.replacen(
                &format!("skill \"{name}\""),
                &format!("skill \"{name}-{i}\""),
                1,
            );
            (format!("generated/{name}-{i}.cap"), renamed)
        })
        .collect()
}

fn load_sources(sources: &[(String, String)]) -> PolicySet {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    for (name, text) in sources {
        loader.add_text(name, text.clone(), PolicyFormat::Cap, None);
    }
    loader.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn startup(c: &mut Criterion) {
    let sources = generated_sources();
    let compiled = load_sources(&sources);
    assert_eq!(compiled.skills.len(), SKILLS);
    let bytes = encode_capc(&compiled.skills).unwrap();
    eprintln!(
        "{SKILLS} skills: {} bytes of .cap source, {} bytes of .capc",
        sources.iter().map(|(_, t)| t.len()).sum::<usize>(),
        bytes.len()
    );
    let mut group = c.benchmark_group("startup_1000_skills");
    group.sample_size(10);
    group.bench_function("from_cap", |b| {
        b.iter(|| Engine::builder(load_sources(black_box(&sources))).build());
    });
    group.bench_function("from_capc", |b| {
        b.iter(|| {
            let policy = load_capc(black_box(&bytes), &Limits::DEFAULT).unwrap();
            Engine::builder(PolicySet::from(policy)).build()
        });
    });
    group.finish();
}

criterion_group!(benches, startup);
criterion_main!(benches);

//! A small timing harness: each row is measured as the median of 11 samples of ~10 ms, in
//! `rounds` interleaved rounds, and keeps its best round's median.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Which timing a row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The request is already a `serde_json::Value`.
    PreParsed,
    /// Raw request bytes in, decision out.
    FromBytes,
    /// Only C3-C6 as a JSON Schema, on the payload value.
    Schema,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::PreParsed => "pre-parsed",
            Stage::FromBytes => "from bytes",
            Stage::Schema => "schema C3-C6",
        }
    }
}

/// One measured line of the table.
pub struct Row<'a> {
    stage: Stage,
    variant: &'static str,
    engine: &'static str,
    /// The row the others in its stage and variant are compared with.
    reference: bool,
    decide: Box<dyn FnMut() -> bool + 'a>,
    best_ns: f64,
}

impl<'a> Row<'a> {
    /// A row to measure.
    pub fn new(
        stage: Stage,
        variant: &'static str,
        engine: &'static str,
        reference: bool,
        decide: impl FnMut() -> bool + 'a,
    ) -> Self {
        Row {
            stage,
            variant,
            engine,
            reference,
            decide: Box::new(decide),
            best_ns: f64::INFINITY,
        }
    }
}

const SAMPLE: Duration = Duration::from_millis(10);
const SAMPLES: usize = 11;

/// Median nanoseconds per call of `decide`.
fn measure(decide: &mut dyn FnMut() -> bool) -> f64 {
    // Calibrate (and warm up): double the batch until it takes a sample's time.
    let mut iterations: u64 = 1;
    loop {
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(decide());
        }
        if start.elapsed() >= SAMPLE {
            break;
        }
        iterations *= 2;
    }
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                black_box(decide());
            }
            start.elapsed().as_nanos() as f64 / iterations as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[SAMPLES / 2]
}

/// Measures every row `rounds` times, interleaved, keeping each row's best median.
pub fn run(rows: &mut [Row<'_>], rounds: usize) {
    for round in 1..=rounds {
        eprintln!("round {round} of {rounds}");
        for row in rows.iter_mut() {
            let ns = measure(&mut row.decide);
            row.best_ns = row.best_ns.min(ns);
        }
    }
}

fn reference(rows: &[Row<'_>], stage: Stage, variant: &str) -> f64 {
    rows.iter()
        .find(|r| r.reference && r.stage == stage && r.variant == variant)
        .map_or(f64::NAN, |r| r.best_ns)
}

fn format_ns(ns: f64) -> String {
    if ns >= 10_000.0 {
        format!("{:.1} µs", ns / 1000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Prints the table as Markdown: median time per decision, the ratio to the hand-written
/// `Value` baseline of the same variant (pre-parsed), and to the stage's own reference row.
pub fn print(rows: &[Row<'_>], rounds: usize) {
    println!(
        "best of {rounds} rounds; each a median of {SAMPLES} samples of ~{} ms\n",
        SAMPLE.as_millis()
    );
    println!("| stage | variant | engine | median | × hand-written Value | × stage reference |");
    println!("|---|---|---|---:|---:|---:|");
    for row in rows {
        let value_baseline = reference(rows, Stage::PreParsed, row.variant);
        let stage_reference = reference(rows, row.stage, row.variant);
        let marker = if row.reference { " (reference)" } else { "" };
        println!(
            "| {} | {} | {}{} | {} | {:.2}× | {:.2}× |",
            row.stage.name(),
            row.variant,
            row.engine,
            marker,
            format_ns(row.best_ns),
            row.best_ns / value_baseline,
            row.best_ns / stage_reference,
        );
    }
}

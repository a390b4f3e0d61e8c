//! A small timing harness: each row is measured as the median of 11 samples of ~10 ms, in
//! `rounds` interleaved rounds, and keeps its best round's median.
//!
//! Each row's ratio to its stage's reference is also measured *paired*: 11 samples of the row
//! alternate with 11 of the reference (in ABBA order), each pair gives one ratio, and the round's
//! ratio is the median of those. Neighbours on a shared host change the speed of both engines
//! of a pair alike, so this ratio moves far less between rounds than the quotient of two
//! medians taken seconds apart; the table gives the median of the rounds' paired ratios and
//! their range.

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
    /// Each round's paired ratio to the stage reference (empty for the reference itself).
    paired: Vec<f64>,
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
            paired: Vec::new(),
        }
    }
}

const SAMPLE: Duration = Duration::from_millis(10);
const SAMPLES: usize = 11;

impl Row<'_> {
    /// Whether this is its stage's reference row.
    pub fn is_reference(&self) -> bool {
        self.reference
    }

    /// The engine's name in the table.
    pub fn engine(&self) -> &'static str {
        self.engine
    }
}

/// How many calls of `decide` take about one sample's time (and warms it up).
fn calibrate(decide: &mut dyn FnMut() -> bool) -> u64 {
    // Double the batch until it takes a sample's time.
    let mut iterations: u64 = 1;
    loop {
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(decide());
        }
        if start.elapsed() >= SAMPLE {
            return iterations;
        }
        iterations *= 2;
    }
}

/// Nanoseconds per call over one batch of `iterations` calls.
fn sample(decide: &mut dyn FnMut() -> bool, iterations: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        black_box(decide());
    }
    start.elapsed().as_nanos() as f64 / iterations as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Median nanoseconds per call of `decide`.
fn measure(decide: &mut dyn FnMut() -> bool) -> f64 {
    let iterations = calibrate(decide);
    median((0..SAMPLES).map(|_| sample(decide, iterations)).collect())
}

/// The median over `SAMPLES` pairs of (`row` time / `reference` time), each pair's two samples
/// taken back to back, the first pair reference first, the next row first, and so on.
fn paired(reference: &mut dyn FnMut() -> bool, row: &mut dyn FnMut() -> bool) -> f64 {
    let (reference_iterations, row_iterations) = (calibrate(reference), calibrate(row));
    let ratios = (0..SAMPLES)
        .map(|pair| {
            let (reference_ns, row_ns) = if pair % 2 == 0 {
                let reference_ns = sample(reference, reference_iterations);
                (reference_ns, sample(row, row_iterations))
            } else {
                let row_ns = sample(row, row_iterations);
                (sample(reference, reference_iterations), row_ns)
            };
            row_ns / reference_ns
        })
        .collect();
    median(ratios)
}

/// Measures every row `rounds` times, interleaved, keeping each row's best median, and each
/// round's paired ratio of every row to its stage's reference row.
pub fn run(rows: &mut [Row<'_>], rounds: usize) {
    for round in 1..=rounds {
        eprintln!("round {round} of {rounds}");
        for row in rows.iter_mut() {
            let ns = measure(&mut row.decide);
            row.best_ns = row.best_ns.min(ns);
        }
        for index in 0..rows.len() {
            let Some(reference) = rows.iter().position(|r| {
                r.reference && r.stage == rows[index].stage && r.variant == rows[index].variant
            }) else {
                continue;
            };
            if reference == index {
                continue;
            }
            let (row, reference) = pair_mut(rows, index, reference);
            let ratio = paired(&mut reference.decide, &mut row.decide);
            row.paired.push(ratio);
        }
    }
}

/// Mutable borrows of two distinct rows.
fn pair_mut<'r, 'a>(
    rows: &'r mut [Row<'a>],
    first: usize,
    second: usize,
) -> (&'r mut Row<'a>, &'r mut Row<'a>) {
    assert_ne!(first, second, "a row is not paired with itself");
    if first < second {
        let (low, high) = rows.split_at_mut(second);
        (&mut low[first], &mut high[0])
    } else {
        let (low, high) = rows.split_at_mut(first);
        (&mut high[0], &mut low[second])
    }
}

/// A ratio, or a dash when its reference row is not in the table.
fn format_ratio(ratio: f64) -> String {
    if ratio.is_nan() {
        "—".to_owned()
    } else {
        format!("{ratio:.2}×")
    }
}

/// The paired ratio column: the median of the rounds and, over more than one round, their range.
fn format_paired(row: &Row<'_>) -> String {
    if row.reference || row.paired.is_empty() {
        return "—".to_owned();
    }
    let middle = median(row.paired.clone());
    let low = row.paired.iter().copied().fold(f64::INFINITY, f64::min);
    let high = row.paired.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if row.paired.len() > 1 {
        format!("{middle:.2}× ({low:.2}–{high:.2})")
    } else {
        format!("{middle:.2}×")
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
        "best of {rounds} rounds; each a median of {SAMPLES} samples of ~{} ms; paired: the \
         median of the rounds' medians of {SAMPLES} paired ratios (range)\n",
        SAMPLE.as_millis()
    );
    println!(
        "| stage | variant | engine | median | × hand-written Value | × stage reference \
         | paired × stage reference |"
    );
    println!("|---|---|---|---:|---:|---:|---:|");
    for row in rows {
        let value_baseline = reference(rows, Stage::PreParsed, row.variant);
        let stage_reference = reference(rows, row.stage, row.variant);
        let marker = if row.reference { " (reference)" } else { "" };
        println!(
            "| {} | {} | {}{} | {} | {} | {} | {} |",
            row.stage.name(),
            row.variant,
            row.engine,
            marker,
            format_ns(row.best_ns),
            format_ratio(row.best_ns / value_baseline),
            format_ratio(row.best_ns / stage_reference),
            format_paired(row),
        );
    }
}

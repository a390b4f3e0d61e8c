//! Decision benchmarks. (Being written.)
fn main() {}

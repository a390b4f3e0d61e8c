//! The `capgate` command line.

fn main() {
    std::process::exit(2);
}

//! Benchmarks grouped by pipeline stage, over the policies in `policies/`:
//!
//! - `parse/<policy>`: text → AST (`.cap` grammar or JSON manifest);
//! - `compile/<policy>`: AST → verified bytecode; `compile/1000-capabilities`: one generated skill
//!   with 1,000 capabilities (the per-skill limit);
//! - `decide/<policy>`: the first allowed call of the policy's session, pre-parsed, on a
//!   stateless engine (which, having no recorded approvals, answers `approval_required` for the
//!   elevated payments-transfer after every constraint held); `decide/skills-1` vs `decide/skills-10000`: the same call with one skill
//!   loaded and with 10,000 more beside it;
//! - `state/commit-hot-key` and `state/commit-distinct-keys`: an allowed call that takes a
//!   rate-limit slot on a stateful engine, always on one key or cycling over 4,096 keys.
//!
//! `cargo bench --bench stages` also prints three reports criterion cannot express: the
//! throughput of one engine shared by one and by two threads (distinct keys), a check that two
//! threads on one hot key never exceed the limit, and the memory per rate-limit key and per grant
//! (resident set growth for 1 M keys and 100,000 grants). Under `cargo test` the reports are
//! skipped and each benchmark runs once.

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capgate::span::SourceMap;
use capgate::syntax::ast::PolicyFile;
use capgate::{
    Engine, InMemoryStore, JsonLinesAudit, Limits, PolicyFormat, PolicyLoader, Request,
    SimulatedClock, Verdict, parse_timestamp,
};
use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};

/// Every policy file under `policies/`, in name order, with its format.
fn policy_files() -> Vec<(PathBuf, PolicyFormat)> {
    let mut files = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("policies")
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.to_string_lossy();
            if name.ends_with(".cap") {
                files.push((path, PolicyFormat::Cap));
            } else if name.ends_with(".json") {
                files.push((path, PolicyFormat::Json));
            }
        }
    }
    files
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

fn parse(sources: &mut SourceMap, path: &Path, text: &str, format: PolicyFormat) -> PolicyFile {
    let id = sources.add(path.to_string_lossy().as_ref(), text);
    match format {
        PolicyFormat::Cap => capgate::syntax::parse(id, text)
            .unwrap_or_else(|e| panic!("{} must parse: {e:?}", path.display())),
        PolicyFormat::Json => capgate::manifest::parse_manifest(id, text)
            .unwrap_or_else(|e| panic!("{} must parse: {e:?}", path.display())),
    }
}

fn parse_and_compile(c: &mut Criterion) {
    let mut parse_group = c.benchmark_group("parse");
    for (path, format) in policy_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        parse_group.bench_function(stem(&path), |b| {
            b.iter(|| {
                let mut sources = SourceMap::new();
                parse(&mut sources, &path, black_box(&text), format)
            })
        });
    }
    parse_group.finish();

    let mut compile_group = c.benchmark_group("compile");
    for (path, format) in policy_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut sources = SourceMap::new();
        let files = vec![parse(&mut sources, &path, &text, format)];
        compile_group.bench_function(stem(&path), |b| {
            b.iter(|| {
                capgate::compile::compile_skills(black_box(&files), &sources, &Limits::DEFAULT)
                    .unwrap_or_else(|e| panic!("{} must compile: {e:?}", path.display()))
            })
        });
    }
    let text = many_capabilities(1_000);
    let path = Path::new("generated-1000.cap");
    let mut sources = SourceMap::new();
    let files = vec![parse(&mut sources, path, &text, PolicyFormat::Cap)];
    compile_group.bench_function("1000-capabilities", |b| {
        b.iter(|| {
            capgate::compile::compile_skills(black_box(&files), &sources, &Limits::DEFAULT)
                .unwrap_or_else(|e| panic!("1,000 capabilities must compile: {e:?}"))
        })
    });
    compile_group.bench_function("1000-capabilities-from-text", |b| {
        b.iter(|| {
            let mut loader = PolicyLoader::new(Limits::DEFAULT);
            loader.add_text("generated-1000.cap", text.clone(), PolicyFormat::Cap, None);
            loader.finish().unwrap_or_else(|e| panic!("{e:?}"))
        })
    });
    compile_group.finish();
}

/// One skill with `count` capabilities, each with a resource template, a field match, an
/// equality, a numeric range and a small schema: a realistic mix for compile time.
fn many_capabilities(count: usize) -> String {
    many_capabilities_with(count, false)
}

/// [`many_capabilities`], every capability with its own regex when `distinct_regexes` (the same
/// shape with the capability's number at the end): a load can then share no compiled regex.
fn many_capabilities_with(count: usize, distinct_regexes: bool) -> String {
    let mut text = String::from("skill \"generated\" {\n  version \"1.0.0\"\n");
    for i in 0..count {
        let tail = if distinct_regexes {
            format!("-{i}")
        } else {
            String::new()
        };
        text.push_str(&format!(
            r#"  capability "cap-{i}" {{
    resource http "https://api{i}.example.com/v1/orgs/{{org}}/items/{{id}}"
    operations GET, POST
    justification "Generated capability {i}."
    fieldEquals resource.org in ["acme", "globex"]
    fieldMatches payload.items[*].sku ~ /[A-Z]{{3}}-[0-9]{{4}}{tail}/
    fieldRange 0 <= payload.amount <= {i}
    payloadSchema {{ "type": "object", "required": ["items"], "properties": {{ "items": {{ "type": "array", "maxItems": 20 }} }} }}
  }}
"#
        ));
    }
    text.push_str("}\n");
    text
}

/// The session's simulated time and first call expected to be allowed.
fn first_allowed_call(session: &Path) -> (String, Value) {
    let text = std::fs::read_to_string(session).unwrap();
    let mut now = String::from("2026-12-01T15:00:00Z");
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).unwrap();
        if let Some(time) = value.get("time").and_then(Value::as_str) {
            now = time.to_owned();
        }
        if value.get("expect").and_then(Value::as_str) == Some("allow") {
            return (now, value["call"].clone());
        }
    }
    panic!("{} has no allowed call", session.display());
}

fn stateless_engine(policy: capgate::PolicySet, now: &str) -> Engine {
    let now = parse_timestamp(now).unwrap();
    Engine::builder(policy)
        .clock(Arc::new(SimulatedClock::new(now)))
        .build()
}

fn load(paths: &[&Path]) -> capgate::PolicySet {
    PolicyLoader::new(Limits::DEFAULT)
        .finish_paths(paths)
        .unwrap_or_else(|e| panic!("policies must load: {e:?}"))
}

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("policies")
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (now, call) = first_allowed_call(&dir.join(format!("{name}.session.jsonl")));
        let engine = stateless_engine(load(&[&dir]), &now);
        let request = Request::from_value(call, &Limits::DEFAULT).unwrap();
        // Every constraint holds; a stateless engine has no recorded approvals, so an elevated
        // skill (payments-transfer) ends in approval_required after passing them all.
        let decision = engine.check(&request);
        assert_ne!(decision.verdict, Verdict::Deny, "{name}: {decision:?}");
        group.bench_function(&name, |b| b.iter(|| engine.check(black_box(&request))));
    }

    // 10,000 other skills loaded beside the one decided.
    let dir = Path::new("policies/meeting-scheduler");
    let (now, call) = first_allowed_call(&dir.join("meeting-scheduler.session.jsonl"));
    let request = Request::from_value(call, &Limits::DEFAULT).unwrap();
    let one = stateless_engine(load(&[dir]), &now);
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_path(dir);
    for file in 0..10 {
        loader.add_text(
            &format!("generated-skills-{file}.cap"),
            many_skills(file * 1_000, 1_000),
            PolicyFormat::Cap,
            None,
        );
    }
    let many = stateless_engine(loader.finish().unwrap(), &now);
    assert_eq!(many.policy().skills().len(), 10_001);
    for (label, engine) in [("skills-1", &one), ("skills-10001", &many)] {
        assert_eq!(engine.check(&request).verdict, Verdict::Allow, "{label}");
        group.bench_function(label, |b| b.iter(|| engine.check(black_box(&request))));
    }

    // The same decision with an audit trail: JSON lines into `io::sink()`, so the row is the
    // record's CPU cost (a file adds its write per record).
    let (audited, request) = audited_scheduler();
    assert_eq!(audited.check(&request).verdict, Verdict::Allow);
    group.bench_function("audited-json-lines", |b| {
        b.iter(|| audited.check(black_box(&request)))
    });
    group.finish();
}

/// `count` one-capability skills named `skill-<first>`...
fn many_skills(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| {
            format!(
                "skill \"skill-{i}\" {{\n  version \"1.0.0\"\n  capability \"read\" {{\n    resource http \"https://svc{i}.example.com/v1/**\"\n    operations GET\n    fieldEquals agent.org == \"acme\"\n  }}\n}}\n"
            )
        })
        .collect()
}

/// A policy whose allowed calls each take one rate-limit slot: `bucket` is a token bucket keyed
/// by `agent.id` that never runs dry in a benchmark; `window` is an exact window of 1,000 calls
/// per hour on one key.
const RATE_POLICY: &str = r#"skill "rate-bench" {
  version "1.0.0"
  capability "bucket" {
    resource tool "search"
    operations call
    lifetime process
    justification "Benchmark: every call takes a token."
    rateLimit 1 per 1h burst 1000000000 by agent.id
  }
  capability "plain" {
    resource tool "ping"
    operations call
    lifetime process
    justification "Benchmark: a stateful call that charges no rate limit."
  }
  capability "granted" {
    resource tool "book"
    operations call
    lifetime wallClock 1h
    justification "Benchmark: a call on a grant, charging one rate limit."
    rateLimit 1 per 1h burst 1000000000 by agent.id
  }
  capability "minute" {
    resource tool "fetch"
    operations call
    lifetime process
    justification "Benchmark: keys that go idle."
    rateLimit 1 per 1m by agent.id
  }
  capability "window" {
    resource tool "lookup"
    operations call
    lifetime process
    justification "Benchmark: one hot key."
    rateLimit 1000 per hour
  }
}
"#;

fn stateful_engine() -> (Engine, Arc<InMemoryStore>) {
    // The system clock, as in a gateway: the simulated clock (tests, replay, REPL) serialises
    // readers on a mutex, which is not what production threads contend on.
    stateful_engine_with(None)
}

/// [`RATE_POLICY`], loaded.
fn rate_policy() -> capgate::PolicySet {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text(
        "rate-bench.cap",
        RATE_POLICY.to_owned(),
        PolicyFormat::Cap,
        None,
    );
    loader.finish().unwrap_or_else(|e| panic!("{e:?}"))
}

/// An engine on [`RATE_POLICY`] and a fresh store, with `clock` if given.
fn stateful_engine_with(clock: Option<Arc<SimulatedClock>>) -> (Engine, Arc<InMemoryStore>) {
    let policy = rate_policy();
    let store = Arc::new(InMemoryStore::new());
    let mut builder = Engine::builder(policy).state(store.clone());
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    (builder.build(), store)
}

fn tool_call(tool: &str, agent: &str) -> Request {
    let value = json!({
        "skill": "rate-bench",
        "operation": "call",
        "resource": format!("tool:{tool}"),
        "agent": {"id": agent},
    });
    Request::from_value(value, &Limits::DEFAULT).unwrap()
}

/// Requests for `count` distinct rate-limit keys, prefixed so threads never share one.
fn distinct_keys(prefix: &str, count: usize) -> Vec<Request> {
    (0..count)
        .map(|i| tool_call("search", &format!("{prefix}-agent-{i}")))
        .collect()
}

fn state(c: &mut Criterion) {
    let mut group = c.benchmark_group("state");
    let (engine, _) = stateful_engine();
    let hot = tool_call("search", "agent-hot");
    assert_eq!(engine.check(&hot).verdict, Verdict::Allow);
    group.bench_function("commit-hot-key", |b| {
        b.iter(|| engine.check(black_box(&hot)))
    });
    let plain = tool_call("ping", "agent-plain");
    assert_eq!(engine.check(&plain).verdict, Verdict::Allow);
    group.bench_function("commit-no-rate-limit", |b| {
        b.iter(|| engine.check(black_box(&plain)))
    });
    let token = engine
        .issue_grant("rate-bench", "granted", None, None)
        .unwrap();
    let granted = Request::from_value(
        json!({
            "skill": "rate-bench",
            "operation": "call",
            "resource": "tool:book",
            "agent": {"id": "agent-granted"},
            "grant": token,
        }),
        &Limits::DEFAULT,
    )
    .unwrap();
    assert_eq!(engine.check(&granted).verdict, Verdict::Allow);
    group.bench_function("commit-grant", |b| {
        b.iter(|| engine.check(black_box(&granted)))
    });
    let keys = distinct_keys("bench", 4_096);
    let mut next = 0usize;
    group.bench_function("commit-distinct-keys", |b| {
        b.iter(|| {
            next = (next + 1) % keys.len();
            engine.check(black_box(&keys[next]))
        })
    });
    group.finish();
}

/// [`RATE_POLICY`] on an engine without a state store: the same calls decided with no rate
/// limit, so no thread writes anything another thread reads (the threads report's control).
fn control_engine() -> Engine {
    Engine::builder(rate_policy()).build()
}

/// What the threads of [`throughput`] decide on.
#[derive(Clone, Copy, PartialEq)]
enum Sharing {
    /// One stateful engine: each call commits its rate-limit key to the one store.
    Store,
    /// A stateful engine and store per thread: the same work with nothing shared, what a
    /// shared store could at best scale to on the machine at the time.
    Apart,
    /// One engine without a store (the control): no call writes anything.
    Stateless,
}

/// The whole number the environment variable `name` holds, if it is set to one.
fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|n| n.parse().ok())
}

/// How many keys each thread of the threads report cycles over: 4,096, or
/// `STAGES_THREAD_KEYS` (fewer keys, less memory each call touches).
fn thread_keys() -> usize {
    env_number("STAGES_THREAD_KEYS")
        .filter(|&n| n > 0)
        .unwrap_or(4_096)
}

/// Allowed calls per second with `threads` threads, each on its own keys, deciding as
/// `sharing` says.
fn throughput(threads: usize, calls_per_thread: usize, sharing: Sharing) -> f64 {
    let engines: Vec<Engine> = match sharing {
        Sharing::Store => vec![stateful_engine().0],
        Sharing::Apart => (0..threads).map(|_| stateful_engine().0).collect(),
        Sharing::Stateless => vec![control_engine()],
    };
    let requests: Vec<Vec<Request>> = (0..threads)
        .map(|t| distinct_keys(&format!("t{t}"), thread_keys()))
        .collect();
    let engine_of = |t: usize| &engines[t % engines.len()];
    // Touch every key once so both runs measure updates, not first inserts.
    for (t, mine) in requests.iter().enumerate() {
        for request in mine {
            assert_eq!(engine_of(t).check(request).verdict, Verdict::Allow);
        }
    }
    let start = Instant::now();
    std::thread::scope(|scope| {
        for (t, mine) in requests.iter().enumerate() {
            let engine = engine_of(t);
            scope.spawn(move || {
                for i in 0..calls_per_thread {
                    let decision = engine.check(&mine[i % mine.len()]);
                    assert_eq!(decision.verdict, Verdict::Allow);
                }
            });
        }
    });
    (threads * calls_per_thread) as f64 / start.elapsed().as_secs_f64()
}

/// Audited decisions per second with `threads` threads sharing one engine whose audit trail
/// is JSON lines into `io::sink()`.
fn audited_throughput(engine: &Engine, request: &Request, threads: usize, calls: usize) -> f64 {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                for _ in 0..calls {
                    assert_eq!(engine.check(request).verdict, Verdict::Allow);
                }
            });
        }
    });
    (threads * calls) as f64 / start.elapsed().as_secs_f64()
}

/// The `meeting-scheduler` policy's engine with an audit trail of JSON lines into
/// `io::sink()`, and the first allowed call of its session.
fn audited_scheduler() -> (Engine, Request) {
    let dir = Path::new("policies/meeting-scheduler");
    let (now, call) = first_allowed_call(&dir.join("meeting-scheduler.session.jsonl"));
    let engine = Engine::builder(load(&[dir]))
        .clock(Arc::new(SimulatedClock::new(
            parse_timestamp(&now).unwrap(),
        )))
        .audit(JsonLinesAudit::new(std::io::sink()))
        .build();
    (engine, Request::from_value(call, &Limits::DEFAULT).unwrap())
}

fn report_audit_threads() {
    let (engine, request) = audited_scheduler();
    let (calls, rounds) = (300_000, 5);
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|_| {
            let one = audited_throughput(&engine, &request, 1, calls);
            audited_throughput(&engine, &request, 2, calls) / one
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let ratios: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    println!(
        "state/audit-threads: audited decisions (JSON lines into io::sink), 2 threads over 1: \
         per-round ratios {}",
        ratios.join(" ")
    );
}

fn report_threads() {
    // One and two threads alternate, so a neighbour on the shared host slows both alike; each
    // keeps its best round, and the per-round ratios are printed too.
    // The control runs the same calls on a stateless engine, which writes nothing shared: its
    // scaling is what the machine gives two threads at the time, whatever capgate does. Apart runs
    // them on an engine and store per thread: the same stateful work with nothing shared.
    let (calls, rounds) = (1_000_000, 5);
    let modes = [Sharing::Store, Sharing::Apart, Sharing::Stateless];
    let mut runs: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); modes.len()];
    for _ in 0..rounds {
        for (mode, (ones, twos)) in modes.iter().zip(&mut runs) {
            ones.push(throughput(1, calls, *mode));
            twos.push(throughput(2, calls, *mode));
        }
    }
    let best = |runs: &[f64]| runs.iter().copied().fold(0.0, f64::max);
    let per_round = |ones: &[f64], twos: &[f64]| {
        let mut ratios: Vec<f64> = ones.iter().zip(twos).map(|(o, t)| t / o).collect();
        ratios.sort_by(f64::total_cmp);
        let text: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        text.join(" ")
    };
    let labels = [
        format!(
            "state/threads: one engine and store ({} cores online)",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ),
        "state/threads-apart: an engine and store per thread (nothing shared)".to_owned(),
        "state/threads-control: the same calls on a stateless engine (nothing written)".to_owned(),
    ];
    for (label, (ones, twos)) in labels.iter().zip(&runs) {
        let (one, two) = (best(ones), best(twos));
        println!(
            "{label}: 1 thread {one:.0} calls/s, 2 threads {two:.0} calls/s, scaling {:.2}x \
             (best of {rounds} alternating rounds each; per-round ratios {})",
            two / one,
            per_round(ones, twos),
        );
    }
    let handoffs: Vec<String> = (0..3).map(|_| format!("{:.0}", handoff_ns())).collect();
    println!(
        "state/threads-handoff: one cache line handed between two threads: {} ns one way \
         (three runs; what each call that writes a line the other thread wrote last waits)",
        handoffs.join(", ")
    );

    // Two threads hammer the one exact-window key: exactly the limit is allowed.
    let (engine, _) = stateful_engine();
    let allowed = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                let request = tool_call("lookup", "agent-hot");
                for _ in 0..5_000 {
                    if engine.check(&request).verdict == Verdict::Allow {
                        allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let allowed = allowed.into_inner();
    assert_eq!(allowed, 1_000, "the hot key's limit of 1,000 was not held");
    println!("state/hot-key: 2 threads x 5,000 calls on `1000 per hour`: {allowed} allowed");
}

/// Nanoseconds for one thread to see a store of the other's and answer it: two threads take
/// turns incrementing one atomic, so each turn moves its cache line from one core to the other.
/// On a host whose two cores are far apart, every call of the stateful scaling test that takes
/// a lock or state last written on the other core waits this long.
fn handoff_ns() -> f64 {
    let turns = 100_000;
    let turn = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for me in 0..2 {
            let turn = &turn;
            scope.spawn(move || {
                let mut mine = me;
                while mine < 2 * turns {
                    while turn.load(Ordering::Acquire) != mine {
                        std::hint::spin_loop();
                    }
                    turn.store(mine + 1, Ordering::Release);
                    mine += 2;
                }
            });
        }
    });
    start.elapsed().as_nanos() as f64 / (2 * turns) as f64
}

/// The process's resident set in bytes (Linux), or `None` elsewhere.
fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn report_memory() {
    let (engine, store) = stateful_engine();
    let keys = 1_000_000;
    let before = resident_bytes();
    let mut agent = String::new();
    let start = Instant::now();
    for i in 0..keys {
        use std::fmt::Write;
        agent.clear();
        write!(agent, "agent-{i:07}").unwrap();
        let request = tool_call("search", &agent);
        assert_eq!(engine.check(&request).verdict, Verdict::Allow);
    }
    let per_call = start.elapsed().as_nanos() as f64 / keys as f64;
    let after = resident_bytes();
    assert_eq!(store.rate_key_count(), keys);
    if let (Some(before), Some(after)) = (before, after) {
        let grown = after.saturating_sub(before);
        println!(
            "state/memory: {keys} rate-limit keys (by agent.id, 13-byte ids): resident set grew \
             {:.1} MiB, {} bytes per key; {per_call:.0} ns per call (request built in the loop)",
            grown as f64 / 1048576.0,
            grown / keys
        );
    }
    let (grant_engine, grant_store) = stateful_engine();
    let grants = 100_000;
    let before = resident_bytes();
    for i in 0..grants {
        grant_engine
            .issue_grant("rate-bench", "bucket", None, Some(format!("g-{i:07}")))
            .unwrap();
    }
    let after = resident_bytes();
    assert_eq!(grant_store.grant_count(), grants);
    if let (Some(before), Some(after)) = (before, after) {
        let grown = after.saturating_sub(before);
        println!(
            "state/memory: {grants} grants (9-byte tokens): resident set grew {:.1} MiB, {} bytes \
             per grant",
            grown as f64 / 1048576.0,
            grown / grants
        );
    }
    drop(grant_engine);

    // Every key's bucket refills within the hour: a sweep two hours on forgets them all.
    let start = Instant::now();
    let forgotten = store.forget_idle(chrono::Utc::now() + chrono::Duration::hours(2));
    println!(
        "state/memory: forget_idle of {forgotten} idle keys took {:.1} ms",
        start.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(store.rate_key_count(), 0);
    drop(engine);
    report_forgetting(per_call);
}

/// A million keys over ten minutes, 100,000 new ones a minute on `1 per 1m`: the store holds
/// about the keys of the last minute or two, not all of them.
fn report_forgetting(kept_per_call: f64) {
    let clock = Arc::new(SimulatedClock::new("2026-12-01T12:00:00Z".parse().unwrap()));
    let (engine, store) = stateful_engine_with(Some(clock.clone()));
    let (mut held, mut agent) = (0, String::new());
    let start = Instant::now();
    for minute in 0..10 {
        for i in 0..100_000 {
            use std::fmt::Write;
            agent.clear();
            write!(agent, "agent-{minute}-{i:06}").unwrap();
            let request = tool_call("fetch", &agent);
            assert_eq!(engine.check(&request).verdict, Verdict::Allow);
        }
        held = held.max(store.rate_key_count());
        clock.advance(Duration::from_secs(60)).unwrap();
    }
    let per_call = start.elapsed().as_nanos() as f64 / 1e6;
    println!(
        "state/forget: 1,000,000 keys, 100,000 new a minute on `1 per 1m` (simulated clock): at \
         most {held} held at a minute's end; {per_call:.0} ns per call (every key kept: \
         {kept_per_call:.0} ns)"
    );
}

fn report_compile_1000() {
    // `STAGES_COMPILE_RUNS=1` (and `=0`, for the set-up) under callgrind counts one compile;
    // `STAGES_COMPILE_DISTINCT=0|1` keeps only the corpus with one shared regex, or only the one
    // with a regex per capability.
    let runs = env_number("STAGES_COMPILE_RUNS").unwrap_or(5);
    let only = std::env::var("STAGES_COMPILE_DISTINCT").ok();
    for (distinct, name) in [
        (false, "1000-capabilities"),
        (true, "1000-capabilities-distinct-regexes"),
    ] {
        if only
            .as_deref()
            .is_some_and(|only| (only == "1") != distinct)
        {
            continue;
        }
        let text = many_capabilities_with(1_000, distinct);
        let best = (0..runs)
            .map(|_| {
                let start = Instant::now();
                let mut loader = PolicyLoader::new(Limits::DEFAULT);
                loader.add_text("generated-1000.cap", text.clone(), PolicyFormat::Cap, None);
                black_box(loader.finish().unwrap_or_else(|e| panic!("{e:?}")));
                start.elapsed()
            })
            .min()
            .unwrap_or(Duration::ZERO);
        println!(
            "compile/{name}: parse + compile + verify of {} bytes in {:.1} ms (best of {runs})",
            text.len(),
            best.as_secs_f64() * 1000.0
        );
    }
}

criterion_group!(benches, parse_and_compile, decide, state);

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and skips the reports.
    // `STAGES_REPORT=threads` (or `compile`, `audit`, `memory`) runs that report alone.
    if std::env::args().any(|arg| arg == "--bench") {
        let only = std::env::var("STAGES_REPORT").ok();
        let reports: [(&str, fn()); 4] = [
            ("compile", report_compile_1000),
            ("threads", report_threads),
            ("audit", report_audit_threads),
            ("memory", report_memory),
        ];
        for (name, report) in reports {
            if only.as_deref().is_none_or(|only| only == name) {
                report();
            }
        }
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::runtime::rate::RateSpec;
use crate::runtime::rate::tests::BASE;

/// `rateLimit count per per_nanos ns`.
fn window(count: u64, per_nanos: u64) -> RateSpec {
    RateSpec::Window {
        count,
        per: Duration::from_nanos(per_nanos),
    }
}

/// `rateLimit count per per_nanos ns burst burst`.
fn bucket(count: u64, per_nanos: u64, burst: u64) -> RateSpec {
    RateSpec::Bucket {
        count,
        per: Duration::from_nanos(per_nanos),
        burst,
    }
}

/// One commit of one charge, as the store makes it: lock (inserting a new key), record,
/// release, then sweep for a new key.
/// A key named by up to 15 bytes (distinct names, distinct keys).
fn rk(name: &[u8]) -> RateKey {
    let mut bytes = [0; RateKey::LEN];
    bytes[0] = u8::try_from(name.len()).unwrap();
    bytes[1..=name.len()].copy_from_slice(name);
    RateKey::from_bytes(bytes)
}

fn admit(table: &RateTable, key: &[u8], spec: &RateSpec, now: i128) -> bool {
    let key = rk(key);
    let hash = table.hash(&key);
    let rates = [RateCharge { key, spec: *spec }];
    let guard = table.guard();
    let (mut cells, mut slots, mut inserted) = ([None], [None], [false]);
    table.lock(
        &guard,
        &rates,
        &[hash],
        &mut cells,
        &mut slots,
        &mut inserted,
    );
    let [slot] = &mut slots;
    let allowed = match (spec.limit(), slot.as_deref_mut()) {
        (Some(limit), Some(Some(state))) => state.admit(&limit, now),
        _ => false,
    };
    *slot = None;
    if inserted == [true] {
        table.sweep_step(hash, now);
    }
    allowed
}

fn admits(table: &RateTable, key: &[u8], spec: &RateSpec, now: i128) -> bool {
    let limit = spec.limit().unwrap();
    let key = rk(key);
    table.admits(table.hash(&key), &key, &limit, now)
}

/// A table of one shard: every key is in it.
fn one_shard() -> RateTable {
    RateTable::new(1)
}

/// The capacity of every shard's list of keys.
fn list_capacity(table: &RateTable) -> usize {
    (0..table.shards.len())
        .filter_map(|index| table.shard(index))
        .map(|shard| shard.cells.capacity())
        .sum()
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

#[test]
fn idle_keys_are_forgotten_and_the_others_kept() {
    let limit = window(1, 10);
    let table = one_shard();
    assert!(admit(&table, b"a", &limit, BASE));
    assert!(admit(&table, b"b", &limit, BASE + 5));
    // `a` stops counting at exactly +10; `b` still counts until +15.
    assert_eq!(table.forget_idle(BASE + 9), 0);
    assert_eq!(table.forget_idle(BASE + 10), 1);
    assert_eq!(table.len(), 1);
    assert!(!admits(&table, b"b", &limit, BASE + 14));
    assert!(admits(&table, b"a", &limit, BASE + 10));
}

#[test]
fn a_bucket_is_forgotten_once_it_has_refilled() {
    // I = 10ns, B = 2: two calls at 0 leave tat = 20.
    let limit = bucket(10, 100, 2);
    let table = one_shard();
    assert!(admit(&table, b"a", &limit, BASE));
    assert!(admit(&table, b"a", &limit, BASE));
    assert_eq!(table.forget_idle(BASE + 19), 0);
    assert_eq!(table.forget_idle(BASE + 20), 1);
    assert_eq!(table.len(), 0);
}

#[test]
fn a_window_is_idle_by_the_period_of_its_latest_call() {
    // A reload lengthened the window: the latest call's period decides.
    let table = one_shard();
    assert!(admit(&table, b"a", &window(5, 10), BASE));
    assert!(admit(&table, b"a", &window(5, 100), BASE + 1));
    assert_eq!(table.forget_idle(BASE + 100), 0);
    assert_eq!(table.forget_idle(BASE + 101), 1);
}

#[test]
fn a_window_key_forgotten_then_seen_by_a_clock_set_back_resumes_at_the_floor() {
    let limit = window(1, 10);
    let table = one_shard();
    assert!(admit(&table, b"a", &limit, BASE + 100));
    assert_eq!(table.forget_idle(BASE + 110), 1);
    // Read at +105, evaluated at the floor +110: on the key's own timeline the call at +100
    // stopped counting at +110, so one call is allowed — recorded at +110.
    assert!(admit(&table, b"a", &limit, BASE + 105));
    assert!(!admit(&table, b"a", &limit, BASE + 119));
    assert!(admit(&table, b"a", &limit, BASE + 120));
}

#[test]
fn a_bucket_key_forgotten_then_seen_by_a_clock_set_back_is_no_fuller_than_it_was() {
    // I = 10ns, B = 1, τ = 0: a call at +100 leaves tat = +110.
    let limit = bucket(10, 100, 1);
    let table = one_shard();
    assert!(admit(&table, b"a", &limit, BASE + 100));
    assert_eq!(table.forget_idle(BASE + 110), 1);
    // Kept, the state would refuse a reading of +105 (tat − now = 5 > τ); forgotten, the key
    // counts its arrival time as the floor, +110, and refuses it too.
    assert!(!admit(&table, b"a", &limit, BASE + 105));
    assert!(admit(&table, b"a", &limit, BASE + 110));
}

#[test]
fn a_full_table_forgets_idle_keys_instead_of_growing() {
    let limit = window(1, 10);
    let table = one_shard();
    for i in 0..1_000 {
        assert!(admit(&table, &key(i), &limit, BASE));
    }
    let capacity = list_capacity(&table);
    // Fifty more floods of a thousand new keys, each a period after the one before: at most a
    // thousand keys are busy at any time.
    for round in 1..=50_usize {
        let now = BASE + 10 * i128::try_from(round).unwrap();
        for i in 0..1_000 {
            assert!(admit(&table, &key(round * 1_000 + i), &limit, now));
        }
        assert!(table.len() <= 2_000, "round {round}: {} keys", table.len());
        assert!(list_capacity(&table) <= 2 * capacity);
    }
}

#[test]
fn a_new_key_forgets_only_the_few_idle_keys_its_sweep_step_looks_at() {
    let limit = window(1, 10);
    let table = one_shard();
    for i in 0..10_000 {
        assert!(admit(&table, &key(i), &limit, BASE));
    }
    // All 10,000 are idle from +10; one new key forgets at most a step's worth of them.
    assert!(admit(&table, b"new-0", &limit, BASE + 10));
    assert!(table.len() >= 10_001 - SWEEP_STEP, "{}", table.len());
    // Each step moves the cursor on or forgets the key under it, whose place the list's last
    // key takes: an idle one, or a new key (at most once per insert). So new keys forget all
    // 10,000 within about 10,000 / (SWEEP_STEP - 1) inserts (1,442 measured, the pass starting
    // where the cursor stood), and no busy key.
    let mut inserts = 1;
    while table.len() > inserts {
        assert!(admit(
            &table,
            format!("new-{inserts}").as_bytes(),
            &limit,
            BASE + 10
        ));
        inserts += 1;
        assert!(inserts <= 10_000 / (SWEEP_STEP - 2), "{} keys", table.len());
    }
    assert!(!admits(&table, b"new-0", &limit, BASE + 19));
}

#[test]
fn new_keys_forget_no_key_before_its_idle_instant() {
    let limit = window(1, 10);
    let table = one_shard();
    for i in 0..40 {
        assert!(admit(&table, &key(i), &limit, BASE));
    }
    // One nanosecond before those 40 go idle, 200 new keys' sweep steps pass over every bucket
    // several times: none of the 40 may be forgotten.
    for i in 0..200 {
        assert!(admit(
            &table,
            format!("late-{i}").as_bytes(),
            &limit,
            BASE + 9
        ));
    }
    assert_eq!(table.len(), 240);
    for i in 0..40 {
        assert!(!admits(&table, &key(i), &limit, BASE + 9), "key {i}");
    }
}

#[test]
fn a_small_shard_forgets_nothing_by_itself() {
    let limit = window(1, 10);
    let table = one_shard();
    for i in 0..SWEEP_FROM - 1 {
        assert!(admit(&table, &key(i), &limit, BASE));
    }
    // All idle from +10, but below `SWEEP_FROM` keys a new key sweeps nothing.
    assert!(admit(&table, b"new", &limit, BASE + 10));
    assert_eq!(table.len(), SWEEP_FROM);
}

#[test]
fn a_table_of_busy_keys_keeps_them_all_and_grows() {
    let limit = window(1, 10);
    let table = one_shard();
    for i in 0..1_000 {
        assert!(admit(&table, &key(i), &limit, BASE + 9));
    }
    assert_eq!(table.len(), 1_000);
    for i in 0..1_000 {
        assert!(!admits(&table, &key(i), &limit, BASE + 9));
    }
}

#[test]
fn forgetting_gives_back_the_table_memory_of_a_flood() {
    let limit = window(1, 10);
    let table = one_shard();
    for i in 0..10_000 {
        assert!(admit(&table, &key(i), &limit, BASE));
    }
    assert!(admit(&table, b"late", &limit, BASE + 5));
    assert_eq!(table.forget_idle(BASE + 10), 10_000);
    assert_eq!(table.len(), 1);
    assert!(list_capacity(&table) < 100, "{}", list_capacity(&table));
    assert!(!admits(&table, b"late", &limit, BASE + 14));
}

/// `forget_idle` takes its shard's lock a chunk of keys at a time, while new keys are
/// inserted and their sweeps move keys around the same list: no idle key may be missed.
#[test]
fn forget_idle_between_inserts_and_sweeps_misses_no_idle_key() {
    // Few enough new keys that their sweeps (8 keys each) cannot reach every idle key alone:
    // the walk must find the rest, over many chunks.
    const NEW: usize = 200;
    let limit = window(1, 10);
    for round in 0..50 {
        let table = one_shard();
        let idle = 125 * FORGET_CHUNK + 7;
        for i in 0..idle {
            assert!(admit(&table, &key(i), &limit, BASE));
        }
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                start.wait();
                for i in 0..NEW {
                    assert!(admit(&table, &key(idle + i), &limit, BASE + 20));
                }
            });
            start.wait();
            for _ in 0..round % 3 {
                std::thread::yield_now();
            }
            table.forget_idle(BASE + 20);
        });
        // Every first key was idle at `BASE + 10`: forgotten by the walk or by a new key's
        // sweep. The new keys were charged at `BASE + 20` and are all kept.
        assert_eq!(table.len(), NEW, "round {round}");
        let listed: usize = (0..table.shards.len())
            .filter_map(|index| table.shard(index))
            .map(|shard| shard.cells.len())
            .sum();
        assert_eq!(listed, NEW, "round {round}");
    }
}

/// One step of the model-checking property.
#[derive(Debug, Clone)]
enum Step {
    /// A call on key `key`, after the clock moves forward `advance` nanoseconds.
    Call { key: usize, advance: u8 },
    /// `forget_idle` at the current time.
    Forget,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        // Six keys called often, and enough others (48 in all) for the table to pass
        // `SWEEP_FROM` so that new keys sweep it too.
        8 => (prop_oneof![0..6_usize, 0..48_usize], 0..8_u8)
            .prop_map(|(key, advance)| Step::Call { key, advance }),
        1 => Just(Step::Forget),
    ];
    proptest::collection::vec(step, 1..300)
}

fn limits() -> impl Strategy<Value = RateSpec> {
    prop_oneof![
        (1..4_u64, 1..30_u64).prop_map(|(count, per)| window(count, per)),
        (1..4_u64, 1..30_u64, 1..4_u64).prop_map(|(count, per, burst)| bucket(count, per, burst)),
    ]
}

proptest! {
    /// While the clock never goes back, a table that forgets answers every call exactly as state
    /// kept forever does.
    #[test]
    fn forgetting_is_invisible_to_a_clock_that_never_goes_back(
        limit in limits(),
        steps in steps(),
    ) {
        let table = one_shard();
        let mut kept: HashMap<usize, RateState> = HashMap::new();
        let spec = limit;
        let limit = spec.limit().unwrap();
        let mut now = BASE;
        for step in steps {
            match step {
                Step::Call { key: k, advance } => {
                    now += i128::from(advance);
                    let state = kept.entry(k).or_insert_with(|| RateState::new(&limit));
                    let expected = state.admit(&limit, now);
                    prop_assert_eq!(admit(&table, &key(k), &spec, now), expected);
                }
                Step::Forget => {
                    table.forget_idle(now);
                }
            }
        }
    }

    /// Whatever the clock does, a bucket allows at most `B + (b − a) / I` calls whose clock
    /// readings lie in any `[a, b]` — forgetting included.
    #[test]
    fn a_bucket_never_exceeds_its_rate_over_any_interval_of_readings(
        count in 1..4_u64,
        per in 1..30_u64,
        burst in 1..4_u64,
        readings in proptest::collection::vec((0..60_i128, proptest::bool::weighted(0.2)), 1..120),
    ) {
        let limit = bucket(count, per, burst);
        let interval = i128::from(per.div_ceil(count));
        let table = one_shard();
        let mut allowed = Vec::new();
        // Each reading is a call, or (one in five) a sweep at that reading.
        for (reading, forget) in readings {
            if forget {
                table.forget_idle(BASE + reading);
            } else if admit(&table, b"k", &limit, BASE + reading) {
                allowed.push(reading);
            }
        }
        for &a in &allowed {
            for &b in allowed.iter().filter(|&&b| b >= a) {
                let inside = allowed.iter().filter(|&&t| (a..=b).contains(&t)).count();
                let bound = i128::from(burst) + (b - a) / interval;
                prop_assert!(
                    i128::try_from(inside).unwrap() <= bound,
                    "[{a}, {b}] holds {inside} > {bound}"
                );
            }
        }
    }
}

/// Regression: a key's state shared cache lines with neighbouring allocations, so two threads
/// on distinct keys slowed each other. The state must fill a line of its own, and the other
/// line of its 128-byte pair (fetched with it by the adjacent-line prefetcher) must not be
/// another cell's.
#[test]
fn a_cells_state_fills_a_cache_line_of_its_own() {
    assert_eq!(std::mem::align_of::<KeyCell>(), 64);
    assert_eq!(std::mem::offset_of!(KeyCell, state), 0);
    assert_eq!(std::mem::size_of::<Mutex<Option<RateState>>>(), 64);
    assert_eq!(std::mem::offset_of!(KeyCell, hash), 64);
    assert_eq!(std::mem::size_of::<KeyCell>(), 128);
    let table = one_shard();
    let guard = table.guard();
    let cells: Vec<usize> = (0..256)
        .map(|i| {
            assert!(admit(&table, &key(i), &bucket(1, 1_000, 10), BASE));
            let probe = Probe {
                hash: table.hash(&rk(&key(i))),
                key: &rk(&key(i)),
            };
            let cell = table.find(probe, &guard).expect("the key was inserted");
            std::ptr::from_ref(cell).addr()
        })
        .collect();
    for &cell in &cells {
        assert_eq!(cell % 64, 0, "a cell that does not start a line");
        let partner = cell ^ 64;
        let foreign = cells
            .iter()
            .filter(|&&other| other != cell)
            .any(|&other| (other..other + 128).contains(&partner));
        assert!(!foreign, "the state's pair partner is another cell's line");
    }
}

//! The two rate-limit algorithms of §5.3, as plain data structures.
//!
//! - [`RateSpec`] is what a `rateLimit` compiles to: an exact sliding window
//!   (`rateLimit N per T`) or a GCRA token bucket (`rateLimit N per T burst B`).
//! - `SlidingWindow` keeps the instants of the calls it *allowed* and admits a call only if fewer
//!   than N of them lie in the half-open interval `(now − T, now]`.
//! - `Gcra` keeps one theoretical arrival time and admits sustained N per T, at most B at once.
//! - `RateState` is one key's state, either of the two; the store keeps one per key, and forgets
//!   it once it is idle (`RateState::idle_at`), standing in `RateState::absent` for it.
//!
//! All arithmetic is in integer nanoseconds since the Unix epoch; nothing here rounds through
//! floating point. A spec that cannot be enforced exactly (zero count, zero period, zero burst, a
//! window over [`MAX_WINDOW_COUNT`], an overflowing bucket) refuses every call: the compiler rejects
//! such specs, and the runtime fails closed if one reaches it anyway.
//!
//! Time going backwards is handled per key: a window evaluates at `max(now, latest allowed
//! instant)`, so a clock set earlier never frees a slot; a bucket's test `tat − now ≤ τ` only gets
//! stricter as `now` decreases. See `docs/runtime.md` for the argument.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The largest `N` a plain sliding window enforces; larger windows must use `burst` (§5.3).
/// A window stores one instant per allowed call still inside it, so this bounds its memory.
/// Defined in [`crate::limits`], which refuses a `Limits::max_sliding_window` above it.
pub(crate) use crate::limits::MAX_SLIDING_WINDOW as MAX_WINDOW_COUNT;

/// One `rateLimit` of a capability, as the runtime enforces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateSpec {
    /// `rateLimit count per per`: exact sliding window over allowed calls.
    Window {
        /// At most this many allowed calls in any window.
        count: u64,
        /// The window length `T`.
        per: Duration,
    },
    /// `rateLimit count per per burst burst`: GCRA token bucket.
    Bucket {
        /// Sustained calls per `per`.
        count: u64,
        /// The period of the sustained rate.
        per: Duration,
        /// At most this many calls at once.
        burst: u64,
    },
}

/// True when a sliding window (`rateLimit N per T` without `burst`) can count a call at `at`:
/// it stores instants as 64-bit nanoseconds since the Unix epoch, from 1677-09-21T00:12:43Z to
/// 2262-04-11T23:47:16Z. Outside that range every call is refused (the window could not count
/// it), and the engine says why instead of "rate limit reached".
pub(crate) fn window_counts_at(at: DateTime<Utc>) -> bool {
    i64::try_from(epoch_nanos(at)).is_ok()
}

/// Nanoseconds since the Unix epoch; exact for every instant chrono represents.
pub(crate) fn epoch_nanos(at: DateTime<Utc>) -> i128 {
    i128::from(at.timestamp())
        .saturating_mul(1_000_000_000)
        .saturating_add(i128::from(at.timestamp_subsec_nanos()))
}

/// A validated [`RateSpec`] in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    Window(WindowLimit),
    Bucket(BucketLimit),
}

/// `count` allowed calls per `period` nanoseconds.
// INVARIANT (window-limit): 1 <= count <= MAX_WINDOW_COUNT and period >= 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowLimit {
    count: u64,
    period: i128,
}

/// GCRA parameters: emission interval and tolerance, in nanoseconds.
// INVARIANT (bucket-limit): interval >= 1 and tolerance >= 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BucketLimit {
    interval: i128,
    tolerance: i128,
}

impl RateSpec {
    /// The enforceable limit, or `None` if this spec must refuse every call.
    pub(crate) fn limit(&self) -> Option<Limit> {
        match *self {
            RateSpec::Window { count, per } => WindowLimit::new(count, per).map(Limit::Window),
            RateSpec::Bucket { count, per, burst } => {
                BucketLimit::new(count, per, burst).map(Limit::Bucket)
            }
        }
    }
}

impl WindowLimit {
    fn new(count: u64, per: Duration) -> Option<Self> {
        let period = i128::try_from(per.as_nanos()).ok()?;
        // INVARIANT (window-limit): checked here, the only constructor.
        ((1..=MAX_WINDOW_COUNT).contains(&count) && period >= 1).then_some(Self { count, period })
    }
}

impl BucketLimit {
    /// Emission interval `I = ceil(T / N)` and tolerance `τ = (B − 1) · I`, in nanoseconds.
    ///
    /// Rounding `I` up means the sustained rate is at most `N` per `T`, never more.
    fn new(count: u64, per: Duration, burst: u64) -> Option<Self> {
        if count == 0 || burst == 0 {
            return None;
        }
        let interval = per.as_nanos().div_ceil(u128::from(count));
        let interval = i128::try_from(interval).ok()?;
        let tolerance = interval.checked_mul(i128::from(burst.checked_sub(1)?))?;
        // INVARIANT (bucket-limit): count >= 1 makes interval >= 1 whenever per >= 1ns.
        (interval >= 1).then_some(Self {
            interval,
            tolerance,
        })
    }
}

/// One rate-limit key's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RateState {
    Window(SlidingWindow),
    Bucket(Gcra),
}

impl RateState {
    /// Fresh state for `limit`.
    pub(crate) fn new(limit: &Limit) -> Self {
        match limit {
            Limit::Window(_) => RateState::Window(SlidingWindow::default()),
            Limit::Bucket(_) => RateState::Bucket(Gcra::default()),
        }
    }

    /// Whether a call at `now` would be allowed; read-only.
    ///
    /// State of the other kind (the policy switched a limit between window and bucket across a
    /// reload) counts as fresh state.
    pub(crate) fn admits(&self, limit: &Limit, now: i128) -> bool {
        match (self, limit) {
            (RateState::Window(window), Limit::Window(limit)) => window.admits(*limit, now),
            (RateState::Bucket(bucket), Limit::Bucket(limit)) => bucket.admits(*limit, now),
            (_, limit) => RateState::new(limit).admits(limit, now),
        }
    }

    /// The state of a key the store holds nothing for: never used, or forgotten when it was idle
    /// at or before `floor` (the store's record of the latest instant a key it forgot became
    /// idle; `i128::MIN` when it forgot none).
    ///
    /// A window evaluates calls no earlier than `floor`, a bucket counts its arrival time as
    /// `floor`. For a forgotten key either is what its own state would answer from `floor` on —
    /// a window whose calls all lie at or before `floor − T` counts none of them; a bucket with
    /// `tat ≤ floor` is full — so a clock that never goes back cannot tell the key was forgotten.
    /// A clock set back below `floor` sees the key's timeline resume at `floor` (window: the
    /// guarantee on that timeline holds) or a bucket at least as empty as the forgotten one.
    pub(crate) fn absent(limit: &Limit, floor: i128) -> Self {
        match limit {
            Limit::Window(_) => RateState::Window(SlidingWindow::since(floor)),
            Limit::Bucket(_) => RateState::Bucket(Gcra {
                tat: (floor > i128::MIN).then_some(floor),
            }),
        }
    }

    /// The instant from which this state answers every call as fresh state would: a window's
    /// latest allowed call plus its period (the period in force at that call), a bucket's
    /// arrival time. `i128::MIN` for state that never allowed a call.
    pub(crate) fn idle_at(&self) -> i128 {
        match self {
            RateState::Window(window) => window.idle_at(),
            RateState::Bucket(bucket) => bucket.tat.unwrap_or(i128::MIN),
        }
    }

    /// Gives back a window's ring-buffer memory beyond twice what it holds (it keeps its peak
    /// capacity otherwise, up to `N` instants after a burst).
    pub(crate) fn shrink(&mut self) {
        if let RateState::Window(window) = self {
            let (len, capacity) = (window.allowed.len(), window.allowed.capacity());
            if capacity > SHRINK_ABOVE && len < capacity / 4 {
                window.allowed.shrink_to(len.saturating_mul(2));
            }
        }
    }

    /// Allows and records a call at `now` if [`RateState::admits`] says so; returns whether it did.
    pub(crate) fn admit(&mut self, limit: &Limit, now: i128) -> bool {
        match (&mut *self, limit) {
            (RateState::Window(window), Limit::Window(limit)) => window.admit(*limit, now),
            (RateState::Bucket(bucket), Limit::Bucket(limit)) => bucket.admit(*limit, now),
            (_, limit) => {
                let mut fresh = RateState::new(limit);
                let allowed = fresh.admit(limit, now);
                if allowed {
                    *self = fresh;
                }
                allowed
            }
        }
    }
}

/// A ring buffer's capacity (in instants) up to which [`RateState::shrink`] leaves it alone.
const SHRINK_ABOVE: usize = 16;

/// The instants of allowed calls that may still count, oldest first.
// INVARIANT (window-order): `allowed` is sorted ascending and no element is after `clock`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlidingWindow {
    /// A plain ring buffer: one of cache-line-aligned blocks costs as many instructions per
    /// call or more (callgrind) and gains two threads on window keys about 5 %
    /// (`docs/runtime.md`, *Concurrency*).
    allowed: VecDeque<i64>,
    /// The window's high-water mark: the latest instant it admitted a call at, or the floor it
    /// was created with ([`RateState::absent`]); `i64::MIN` for fresh state.
    clock: i64,
    /// The period, in nanoseconds (saturated to `i64`), of the limit of the latest allowed call;
    /// with `clock` it says when the window is idle.
    period: i64,
}

impl Default for SlidingWindow {
    fn default() -> Self {
        Self::since(i128::MIN)
    }
}

impl SlidingWindow {
    /// An empty window that evaluates calls no earlier than `floor` (clamped to `i64`).
    fn since(floor: i128) -> Self {
        let clock = i64::try_from(floor).unwrap_or(if floor < 0 { i64::MIN } else { i64::MAX });
        Self {
            allowed: VecDeque::new(),
            clock,
            period: 0,
        }
    }

    /// The instant a call at `now` is evaluated at: never earlier than a call already allowed.
    fn effective_now(&self, now: i64) -> i64 {
        self.clock.max(now)
    }

    /// When no call it holds counts any more: `clock + period`. Every later evaluation is at
    /// `clock` or after, and a call at `t ≤ clock` stops counting at `t + period`.
    fn idle_at(&self) -> i128 {
        i128::from(self.clock).saturating_add(i128::from(self.period))
    }

    /// `(now, start)`: the window is `(start, now]`, or `None` if `now` does not fit in i64
    /// nanoseconds (before 1677 or after 2262), which refuses the call.
    fn bounds(&self, limit: WindowLimit, now: i128) -> Option<(i64, i128)> {
        let now = self.effective_now(i64::try_from(now).ok()?);
        Some((now, i128::from(now).saturating_sub(limit.period)))
    }

    fn live_calls(&self, start: i128) -> usize {
        let stale = self.allowed.partition_point(|&t| i128::from(t) <= start);
        self.allowed.len().saturating_sub(stale)
    }

    fn admits(&self, limit: WindowLimit, now: i128) -> bool {
        let Some((_, start)) = self.bounds(limit, now) else {
            return false;
        };
        u64::try_from(self.live_calls(start)).is_ok_and(|live| live < limit.count)
    }

    fn admit(&mut self, limit: WindowLimit, now: i128) -> bool {
        let Some((now, start)) = self.bounds(limit, now) else {
            return false;
        };
        while self
            .allowed
            .front()
            .is_some_and(|&t| i128::from(t) <= start)
        {
            self.allowed.pop_front();
        }
        // A window that cannot store the instant refuses the call: it could not count it.
        if u64::try_from(self.allowed.len()).is_ok_and(|live| live < limit.count)
            && self.allowed.try_reserve(1).is_ok()
        {
            // INVARIANT (window-order): `now` is at least `clock`, so at least every element.
            self.allowed.push_back(now);
            self.clock = now;
            self.period = i64::try_from(limit.period).unwrap_or(i64::MAX);
            true
        } else {
            false
        }
    }

    /// How many instants are stored (for tests and memory estimates).
    #[cfg(test)]
    fn stored(&self) -> usize {
        self.allowed.len()
    }
}

/// Generic cell rate algorithm state: the theoretical arrival time of the next conforming call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// `None` until the first allowed call: the bucket starts full.
    tat: Option<i128>,
}

impl Gcra {
    /// The arrival time after allowing a call at `now`, or `None` if the call is refused.
    ///
    /// Allowed iff `max(tat, now) − now ≤ τ`; then `tat := max(tat, now) + I`.
    fn next_tat(&self, limit: BucketLimit, now: i128) -> Option<i128> {
        let start = self.tat.map_or(now, |tat| tat.max(now));
        let wait = start.checked_sub(now)?;
        if wait > limit.tolerance {
            return None;
        }
        start.checked_add(limit.interval)
    }

    fn admits(&self, limit: BucketLimit, now: i128) -> bool {
        self.next_tat(limit, now).is_some()
    }

    fn admit(&mut self, limit: BucketLimit, now: i128) -> bool {
        match self.next_tat(limit, now) {
            Some(tat) => {
                self.tat = Some(tat);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const BASE: i128 = 1_800_000_000_000_000_000;

    /// The limit of `rateLimit count per per_nanos ns`.
    pub(crate) fn window(count: u64, per_nanos: u64) -> Limit {
        RateSpec::Window {
            count,
            per: Duration::from_nanos(per_nanos),
        }
        .limit()
        .unwrap()
    }

    /// The limit of `rateLimit count per per_nanos ns burst burst`.
    pub(crate) fn bucket(count: u64, per_nanos: u64, burst: u64) -> Limit {
        RateSpec::Bucket {
            count,
            per: Duration::from_nanos(per_nanos),
            burst,
        }
        .limit()
        .unwrap()
    }

    #[test]
    fn window_allows_n_then_refuses_at_the_same_instant() {
        let limit = window(3, 10);
        let mut state = RateState::new(&limit);
        for _ in 0..3 {
            assert!(state.admits(&limit, BASE));
            assert!(state.admit(&limit, BASE));
        }
        assert!(!state.admits(&limit, BASE));
        assert!(!state.admit(&limit, BASE));
    }

    #[test]
    fn window_call_still_counts_one_nanosecond_before_t() {
        let limit = window(1, 10);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE));
        assert!(!state.admits(&limit, BASE + 9));
        assert!(!state.admit(&limit, BASE + 9));
    }

    #[test]
    fn window_call_stops_counting_at_exactly_t() {
        let limit = window(1, 10);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE));
        assert!(state.admits(&limit, BASE + 10));
        assert!(state.admit(&limit, BASE + 10));
    }

    #[test]
    fn window_call_does_not_count_after_t() {
        let limit = window(1, 10);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE));
        assert!(state.admit(&limit, BASE + 11));
    }

    #[test]
    fn window_counts_only_allowed_calls() {
        let limit = window(1, 10);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE));
        // Refused calls at +5 must not extend the window.
        assert!(!state.admit(&limit, BASE + 5));
        assert!(state.admit(&limit, BASE + 10));
    }

    #[test]
    fn window_prunes_instants_that_left_the_window() {
        let limit = window(2, 10);
        let mut state = SlidingWindow::default();
        let Limit::Window(limit) = limit else {
            unreachable!()
        };
        assert!(state.admit(limit, BASE));
        assert!(state.admit(limit, BASE + 1));
        assert!(state.admit(limit, BASE + 11));
        assert_eq!(state.stored(), 1);
    }

    /// States are compared by what they hold (the model tests compare them), not by where their
    /// buffer happens to start after calls were pruned from it.
    #[test]
    fn windows_holding_the_same_calls_compare_equal_whatever_their_history() {
        let limit = window(4, 4);
        let (mut spent, mut fresh) = (RateState::new(&limit), RateState::new(&limit));
        for t in 0..10 {
            assert!(spent.admit(&limit, BASE + t));
        }
        for t in 6..10 {
            assert!(fresh.admit(&limit, BASE + t));
        }
        assert_eq!(spent, fresh);
        assert!(fresh.admit(&limit, BASE + 10));
        assert_ne!(spent, fresh);
    }

    #[test]
    fn window_never_frees_a_slot_when_time_goes_backwards() {
        let limit = window(1, 10);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE + 100));
        assert!(!state.admits(&limit, BASE));
        assert!(!state.admit(&limit, BASE));
        assert!(!state.admit(&limit, BASE + 109));
        assert!(state.admit(&limit, BASE + 110));
    }

    #[test]
    fn window_records_a_backwards_call_at_its_high_water_mark() {
        let limit = window(2, 10);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE + 100));
        assert!(state.admit(&limit, BASE + 50));
        // Both count until +110 on the key's own timeline.
        assert!(!state.admit(&limit, BASE + 109));
        assert!(state.admit(&limit, BASE + 110));
    }

    #[test]
    fn window_works_before_1970() {
        // Fresh state has no high-water mark: negative instants are not clamped to the epoch.
        let limit = window(1, 10);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, -1_000));
        assert!(!state.admit(&limit, -991));
        assert!(state.admit(&limit, -990));
        assert_eq!(state.idle_at(), -980);
    }

    #[test]
    fn absent_state_evaluates_from_the_floor() {
        let limit = window(1, 10);
        let mut state = RateState::absent(&limit, BASE + 100);
        assert!(state.admit(&limit, BASE));
        // Recorded at the floor, so it counts until +110.
        assert!(!state.admits(&limit, BASE + 109));
        assert!(state.admits(&limit, BASE + 110));
        // A bucket counts its arrival time as the floor: τ = 10ns here.
        let limit = bucket(10, 100, 2);
        let state = RateState::absent(&limit, BASE + 100);
        assert!(!state.admits(&limit, BASE + 89));
        assert!(state.admits(&limit, BASE + 90));
        // No floor: fresh state.
        assert_eq!(RateState::absent(&limit, i128::MIN), RateState::new(&limit));
    }

    #[test]
    fn shrink_gives_back_the_ring_buffer_of_a_burst() {
        let limit = window(1_000, 10);
        let mut state = RateState::new(&limit);
        for _ in 0..1_000 {
            assert!(state.admit(&limit, BASE));
        }
        assert!(state.admit(&limit, BASE + 10));
        state.shrink();
        let RateState::Window(window) = &state else {
            unreachable!()
        };
        assert_eq!(window.stored(), 1);
        assert!(
            window.allowed.capacity() <= SHRINK_ABOVE,
            "{}",
            window.allowed.capacity()
        );
        // A small buffer is left alone.
        let before = window.allowed.capacity();
        state.shrink();
        let RateState::Window(window) = &state else {
            unreachable!()
        };
        assert_eq!(window.allowed.capacity(), before);
    }

    #[test]
    fn window_refuses_instants_outside_i64_nanoseconds() {
        let limit = window(5, 10);
        let state = RateState::new(&limit);
        assert!(!state.admits(&limit, i128::from(i64::MAX) + 1));
        assert!(!state.admits(&limit, i128::from(i64::MIN) - 1));
    }

    #[test]
    fn unenforceable_specs_have_no_limit() {
        let zero = Duration::ZERO;
        let one = Duration::from_nanos(1);
        assert_eq!(RateSpec::Window { count: 0, per: one }.limit(), None);
        assert_eq!(
            RateSpec::Window {
                count: 1,
                per: zero
            }
            .limit(),
            None
        );
        let too_many = MAX_WINDOW_COUNT + 1;
        assert_eq!(
            RateSpec::Window {
                count: too_many,
                per: one
            }
            .limit(),
            None
        );
        let bucket = |count, per, burst| RateSpec::Bucket { count, per, burst }.limit();
        assert_eq!(bucket(0, one, 1), None);
        assert_eq!(bucket(1, zero, 1), None);
        assert_eq!(bucket(1, one, 0), None);
        assert_eq!(bucket(1, Duration::MAX, u64::MAX), None);
    }

    #[test]
    fn window_of_the_maximum_count_is_enforced() {
        let limit = window(MAX_WINDOW_COUNT, 10);
        let mut state = RateState::new(&limit);
        for _ in 0..MAX_WINDOW_COUNT {
            assert!(state.admit(&limit, BASE));
        }
        assert!(!state.admit(&limit, BASE));
    }

    #[test]
    fn bucket_interval_rounds_up() {
        // 3 per 10ns: I = ceil(10/3) = 4, never 3.
        let Limit::Bucket(limit) = bucket(3, 10, 1) else {
            unreachable!()
        };
        assert_eq!(limit.interval, 4);
        assert_eq!(limit.tolerance, 0);
        let Limit::Bucket(limit) = bucket(3, 10, 4) else {
            unreachable!()
        };
        assert_eq!(limit.tolerance, 12);
    }

    #[test]
    fn bucket_allows_exactly_burst_at_once() {
        let limit = bucket(10, 100, 4);
        let mut state = RateState::new(&limit);
        for _ in 0..4 {
            assert!(state.admit(&limit, BASE));
        }
        assert!(!state.admits(&limit, BASE));
        assert!(!state.admit(&limit, BASE));
    }

    #[test]
    fn bucket_refills_one_call_per_interval_at_the_burst_edge() {
        // I = 10ns, B = 2, τ = 10ns.
        let limit = bucket(10, 100, 2);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE));
        assert!(state.admit(&limit, BASE));
        // tat = BASE + 20; allowed iff tat − now ≤ 10, i.e. now ≥ BASE + 10.
        assert!(!state.admits(&limit, BASE + 9));
        assert!(state.admits(&limit, BASE + 10));
        assert!(state.admit(&limit, BASE + 10));
        assert!(!state.admit(&limit, BASE + 10));
    }

    #[test]
    fn bucket_sustains_at_most_n_per_t() {
        // 3 per 10ns, no burst: I = 4, so over 100ns at most 25 calls, which is ≤ 30.
        let limit = bucket(3, 10, 1);
        let mut state = RateState::new(&limit);
        let allowed = (0..100).filter(|t| state.admit(&limit, BASE + t)).count();
        assert_eq!(allowed, 25);
    }

    #[test]
    fn bucket_never_allows_more_when_time_goes_backwards() {
        let limit = bucket(10, 100, 2);
        let mut state = RateState::new(&limit);
        assert!(state.admit(&limit, BASE + 100));
        assert!(state.admit(&limit, BASE + 100));
        assert!(!state.admit(&limit, BASE));
        assert!(!state.admit(&limit, BASE + 109));
        assert!(state.admit(&limit, BASE + 110));
    }

    #[test]
    fn switching_kind_starts_fresh_state() {
        let window = window(1, 10);
        let bucket = bucket(1, 10, 1);
        let mut state = RateState::new(&window);
        assert!(state.admit(&window, BASE));
        assert!(state.admits(&bucket, BASE));
        assert!(state.admit(&bucket, BASE));
        assert!(matches!(state, RateState::Bucket(_)));
        assert!(!state.admit(&bucket, BASE));
    }

    #[test]
    fn a_window_counts_within_64_bit_nanoseconds_only() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert!(window_counts_at(at("2026-12-01T15:00:00Z")));
        assert!(window_counts_at(at("2262-04-11T23:47:16Z")));
        assert!(!window_counts_at(at("2262-04-11T23:47:17Z")));
        assert!(window_counts_at(at("1677-09-21T00:12:44Z")));
        assert!(!window_counts_at(at("1677-09-21T00:12:43Z")));
        assert!(!window_counts_at(at("9999-12-31T00:00:00Z")));
        let limit = window(5, 60_000_000_000);
        let mut state = RateState::new(&limit);
        assert!(!state.admit(&limit, epoch_nanos(at("9999-12-31T00:00:00Z"))));
    }

    #[test]
    fn epoch_nanos_is_exact() {
        let at: DateTime<Utc> = "2026-12-01T15:00:00.000000007Z".parse().unwrap();
        assert_eq!(epoch_nanos(at), 1_796_137_200_000_000_007);
    }

    /// What a step of the window model test does: a call (or a read-only check) after moving
    /// the clock, which may go back, or giving back ring-buffer memory.
    #[derive(Debug, Clone)]
    enum WindowOp {
        Admit(i16),
        Admits(i16),
        Shrink,
    }

    /// A window's `count` and `period` (mostly a few steps long), and the steps of a test: most
    /// within a period (bursts, then memory to give back), many exactly a period (calls on the
    /// edge of the window), some far either way.
    fn window_case() -> impl proptest::strategy::Strategy<Value = (u64, u64, Vec<WindowOp>)> {
        use proptest::prelude::*;
        (1..40_u64, prop_oneof![3 => 1..40_u64, 1 => 1..5_000_u64]).prop_flat_map(
            |(count, period)| {
                let edge = i16::try_from(period).unwrap_or(i16::MAX);
                let step = move || {
                    prop_oneof![4 => 0..8_i16, 2 => Just(edge), 1 => -100..400_i16, 1 => any::<i16>()]
                };
                let ops = prop::collection::vec(
                    prop_oneof![
                        5 => step().prop_map(WindowOp::Admit),
                        3 => step().prop_map(WindowOp::Admits),
                        1 => Just(WindowOp::Shrink),
                    ],
                    0..300,
                );
                (Just(count), Just(period), ops)
            },
        )
    }

    proptest::proptest! {
        /// A window answers every call as a plain list of its allowed calls does: evaluated at
        /// its high-water mark, admitting while fewer than `count` of them lie in
        /// `(at − period, at]`; giving back memory changes no answer, and leaves no more than
        /// four times the instants held (or the few below `SHRINK_ABOVE`).
        #[test]
        fn a_window_answers_as_a_list_of_its_allowed_calls(
            (count, period, ops) in window_case(),
        ) {
            let limit = window(count, period);
            let mut state = RateState::new(&limit);
            let (mut allowed, mut clock): (Vec<i128>, Option<i128>) = (Vec::new(), None);
            let mut now = BASE;
            for op in ops {
                let (step, record) = match op {
                    WindowOp::Admit(step) => (step, true),
                    WindowOp::Admits(step) => (step, false),
                    WindowOp::Shrink => {
                        state.shrink();
                        let RateState::Window(window) = &state else {
                            unreachable!()
                        };
                        let (len, capacity) = (window.allowed.len(), window.allowed.capacity());
                        proptest::prop_assert!(
                            capacity <= SHRINK_ABOVE.max(4 * len + 3),
                            "{capacity} slots for {len} instants"
                        );
                        continue;
                    }
                };
                now += i128::from(step);
                let at = clock.map_or(now, |clock| clock.max(now));
                let period = i128::from(period);
                let live = allowed.iter().filter(|&&t| t > at - period && t <= at).count();
                let expected = (live as u64) < count;
                if record {
                    proptest::prop_assert_eq!(state.admit(&limit, now), expected);
                    if expected {
                        allowed.push(at);
                        clock = Some(at);
                    }
                } else {
                    proptest::prop_assert_eq!(state.admits(&limit, now), expected);
                }
            }
        }
    }
}

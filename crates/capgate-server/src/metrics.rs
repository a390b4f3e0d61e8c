//! The server's Prometheus metrics (`GET /metrics`, text format).
//!
//! Every label value comes from the loaded policies or from a closed list, never from a
//! request: a skill the policies do not name counts as `skill="(unknown)"` and its capability
//! as `""`, so a caller cannot grow the label set.

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use capgate::engine::SkillIndex;
use capgate::{Decision, Verdict};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The label of a skill the loaded policies do not name.
pub const UNKNOWN_SKILL: &str = "(unknown)";

/// Labels of `capgate_decisions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    verdict: &'static str,
    skill: String,
    capability: String,
    refusal: &'static str,
}

/// Labels of `capgate_reloads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: &'static str,
}

/// Labels of `capgate_policy_revision`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabels {
    skill: String,
    revision: String,
}

/// The metrics, registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    latency: Histogram,
    reloads: Family<ReloadLabels, Counter>,
    revisions: Family<RevisionLabels, Gauge>,
    in_flight: Gauge,
    audit_dropped: Counter,
    unauthorized: Counter,
    /// The skill names of the loaded policies, each with its capability names: the only label
    /// values.
    names: RwLock<HashMap<String, HashSet<String>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The metrics, all zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("capgate");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decisions by verdict, skill, capability and refusal kind",
            decisions.clone(),
        );
        // 1 µs to ~1 s.
        let latency = Histogram::new(exponential_buckets(1e-6, 2.0, 21));
        registry.register(
            "decision_seconds",
            "Time to decide a request, from its body read to its decision",
            latency.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "reloads",
            "Policy reloads by result (ok, error)",
            reloads.clone(),
        );
        let revisions = Family::<RevisionLabels, Gauge>::default();
        registry.register(
            "policy_revision",
            "1 for the revision of each loaded skill",
            revisions.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "in_flight_requests",
            "Requests being served",
            in_flight.clone(),
        );
        let audit_dropped = Counter::default();
        registry.register(
            "audit_failures",
            "Audit records lost: the queue was full or the log could not be written",
            audit_dropped.clone(),
        );
        let unauthorized = Counter::default();
        registry.register(
            "unauthorized",
            "Requests refused for a missing or unknown credential",
            unauthorized.clone(),
        );
        Metrics {
            registry,
            decisions,
            latency,
            reloads,
            revisions,
            in_flight,
            audit_dropped,
            unauthorized,
            names: RwLock::new(HashMap::new()),
        }
    }

    /// Records the skills of a newly loaded policy: their revisions, and their names as label
    /// values.
    pub fn loaded(&self, policy: &SkillIndex) {
        self.revisions.clear();
        let mut names = self
            .names
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for skill in policy.skills() {
            self.revisions
                .get_or_create(&RevisionLabels {
                    skill: skill.name.to_string(),
                    revision: skill.revision.to_string(),
                })
                .set(1);
            let capabilities = names.entry(skill.name.to_string()).or_default();
            for capability in &skill.capabilities {
                capabilities.insert(capability.name.to_string());
            }
        }
    }

    /// Counts one decision for a request that named `skill`, and its latency.
    pub fn decided(&self, skill: &str, decision: &Decision, seconds: f64) {
        let verdict = decision.observed.unwrap_or(decision.verdict);
        let capability = decision
            .capability
            .as_deref()
            .or_else(|| {
                decision
                    .reasons
                    .first()
                    .and_then(|r| r.capability.as_deref())
            })
            .unwrap_or_default();
        let refusal = match verdict {
            Verdict::Allow => "",
            _ => decision
                .reasons
                .first()
                .map_or("", |r| r.constraint.as_str()),
        };
        let names = self
            .names
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (skill, capability) = match names.get(skill) {
            None => (UNKNOWN_SKILL.to_owned(), String::new()),
            Some(capabilities) if capabilities.contains(capability) => {
                (skill.to_owned(), capability.to_owned())
            }
            Some(_) => (skill.to_owned(), String::new()),
        };
        drop(names);
        self.decisions
            .get_or_create(&DecisionLabels {
                verdict: verdict.as_str(),
                skill,
                capability,
                refusal,
            })
            .inc();
        self.latency.observe(seconds);
    }

    /// Counts a reload.
    pub fn reloaded(&self, ok: bool) {
        self.reloads
            .get_or_create(&ReloadLabels {
                result: if ok { "ok" } else { "error" },
            })
            .inc();
    }

    /// The in-flight gauge.
    pub fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// The counter of lost audit records, for the audit log to count into.
    pub fn audit_failures(&self) -> Counter {
        self.audit_dropped.clone()
    }

    /// Counts a request refused for its credential.
    pub fn unauthorized(&self) {
        self.unauthorized.inc();
    }

    /// The metrics in Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a `String` cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

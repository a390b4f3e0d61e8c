//! Which parts of a policy the tests exercised.
//!
//! - [`Coverage`]: one [`CapabilityCoverage`] per capability of every loaded skill.
//! - [`CapabilityCoverage`]: whether some test call was allowed by the capability, and one
//!   [`ConstraintCoverage`] per top-level constraint (rate limits included) saying whether some
//!   test call made it fail.
//!
//! A constraint "failed" in a call when [`capgate::Engine::explain`] traced it as not holding for
//! that capability, or when the decision carries a reason for it (the only way a `rateLimit`,
//! which `explain` does not evaluate, is seen failing).

use std::fmt;

use capgate::engine::{CandidateTrace, Decision, PolicySet, ReasonKind, Verdict};

/// What the tests exercised, per capability.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Every capability of every skill, in load order.
    pub capabilities: Vec<CapabilityCoverage>,
}

/// One capability's coverage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityCoverage {
    /// The skill.
    pub skill: String,
    /// The capability.
    pub capability: String,
    /// Some test call was allowed by this capability.
    pub allowed: bool,
    /// Its top-level constraints, in source order.
    pub constraints: Vec<ConstraintCoverage>,
    /// For each program check, in program order, its index in `constraints`.
    checks: Vec<usize>,
}

/// One top-level constraint's coverage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstraintCoverage {
    /// The constraint kind (`fieldMatches`, `rateLimit`, ...).
    pub constraint: ReasonKind,
    /// The constraint in short form (`fieldEquals resource.calendar in ["primary", "team"]`).
    pub summary: String,
    /// `file:line:column` where it is written.
    pub source: Option<String>,
    /// Some test call made it fail.
    pub failed: bool,
    /// (line, column), for ordering.
    position: (u32, u32),
}

impl Coverage {
    /// Coverage of a policy with nothing exercised yet.
    pub fn of(policy: &PolicySet) -> Self {
        let mut capabilities = Vec::new();
        for skill in &policy.skills {
            for capability in &skill.capabilities {
                let mut constraints: Vec<ConstraintCoverage> = capability
                    .checks()
                    .iter()
                    .map(|check| ConstraintCoverage {
                        constraint: ReasonKind::from(check.constraint),
                        summary: check.summary.clone(),
                        source: check.location.as_ref().map(ToString::to_string),
                        failed: false,
                        position: check
                            .location
                            .as_ref()
                            .map_or((u32::MAX, u32::MAX), |l| (l.line, l.column)),
                    })
                    .collect();
                let check_count = constraints.len();
                constraints.extend(capability.rate_limits().iter().map(|limit| {
                    ConstraintCoverage {
                        constraint: ReasonKind::RateLimit,
                        summary: format!("rateLimit {}", limit.summary),
                        source: limit.location.as_ref().map(ToString::to_string),
                        failed: false,
                        position: limit
                            .location
                            .as_ref()
                            .map_or((u32::MAX, u32::MAX), |l| (l.line, l.column)),
                    }
                }));
                // Source order, remembering where each program check went.
                let mut order: Vec<usize> = (0..constraints.len()).collect();
                order.sort_by_key(|&i| constraints.get(i).map(|c| c.position));
                let mut checks = vec![0; check_count];
                for (new, &old) in order.iter().enumerate() {
                    if let Some(slot) = checks.get_mut(old) {
                        *slot = new;
                    }
                }
                let sorted = order
                    .iter()
                    .filter_map(|&i| constraints.get(i).cloned())
                    .collect();
                capabilities.push(CapabilityCoverage {
                    skill: skill.name.to_string(),
                    capability: capability.name.to_string(),
                    allowed: false,
                    constraints: sorted,
                    checks,
                });
            }
        }
        Coverage { capabilities }
    }

    fn find_mut(&mut self, skill: &str, capability: &str) -> Option<&mut CapabilityCoverage> {
        self.capabilities
            .iter_mut()
            .find(|c| c.skill == skill && c.capability == capability)
    }

    /// Records one call: its decision and the trace of every candidate.
    pub fn record(&mut self, decision: &Decision, traces: &[CandidateTrace]) {
        let skill = decision.skill.to_string();
        if decision.effective() == Verdict::Allow
            && let Some(capability) = &decision.capability
            && let Some(entry) = self.find_mut(&skill, capability)
        {
            entry.allowed = true;
        }
        for reason in &decision.reasons {
            let Some(capability) = &reason.capability else {
                continue;
            };
            let Some(entry) = self.find_mut(&skill, capability) else {
                continue;
            };
            if let Some(constraint) = entry.constraints.iter_mut().find(|c| {
                c.constraint == reason.constraint && c.source.is_some() && c.source == reason.source
            }) {
                constraint.failed = true;
            }
        }
        for trace in traces {
            let Some(entry) = self.find_mut(&skill, &trace.capability) else {
                continue;
            };
            for (index, (summary, holds, _)) in trace.checks.iter().enumerate() {
                if *holds {
                    continue;
                }
                // The trace lists the program's checks in order; the summary guards the match.
                let by_index = entry.checks.get(index).copied().filter(|&i| {
                    entry
                        .constraints
                        .get(i)
                        .is_some_and(|c| &c.summary == summary)
                });
                let slot = by_index
                    .or_else(|| entry.constraints.iter().position(|c| &c.summary == summary));
                if let Some(constraint) = slot.and_then(|i| entry.constraints.get_mut(i)) {
                    constraint.failed = true;
                }
            }
        }
    }

    /// Adds what `other` exercised (capabilities matched by skill and name, constraints by
    /// summary and source).
    pub fn merge(&mut self, other: Coverage) {
        for theirs in other.capabilities {
            match self.find_mut(&theirs.skill, &theirs.capability) {
                Some(ours) => {
                    ours.allowed |= theirs.allowed;
                    for constraint in theirs.constraints {
                        if let Some(mine) = ours.constraints.iter_mut().find(|c| {
                            c.summary == constraint.summary && c.source == constraint.source
                        }) {
                            mine.failed |= constraint.failed;
                        }
                    }
                }
                None => self.capabilities.push(theirs),
            }
        }
    }

    /// The capabilities no test call was allowed by.
    pub fn never_allowed(&self) -> impl Iterator<Item = &CapabilityCoverage> {
        self.capabilities.iter().filter(|c| !c.allowed)
    }

    /// Every constraint no test call made fail, with its capability.
    pub fn never_failed(&self) -> impl Iterator<Item = (&CapabilityCoverage, &ConstraintCoverage)> {
        self.capabilities.iter().flat_map(|capability| {
            capability
                .constraints
                .iter()
                .filter(|c| !c.failed)
                .map(move |c| (capability, c))
        })
    }
}

impl fmt::Display for Coverage {
    /// The per-capability table, then the untested list.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "coverage:")?;
        for capability in &self.capabilities {
            writeln!(
                f,
                "  {}/{}: {}",
                capability.skill,
                capability.capability,
                if capability.allowed {
                    "allowed"
                } else {
                    "NEVER ALLOWED"
                }
            )?;
            for constraint in &capability.constraints {
                write!(
                    f,
                    "    {}  {}",
                    if constraint.failed {
                        "failed  "
                    } else {
                        "untested"
                    },
                    constraint.summary
                )?;
                if let Some(source) = &constraint.source {
                    write!(f, "  ({source})")?;
                }
                writeln!(f)?;
            }
        }
        let total_capabilities = self.capabilities.len();
        let total_constraints: usize = self.capabilities.iter().map(|c| c.constraints.len()).sum();
        let never_allowed: Vec<&CapabilityCoverage> = self.never_allowed().collect();
        let never_failed: Vec<(&CapabilityCoverage, &ConstraintCoverage)> =
            self.never_failed().collect();
        writeln!(
            f,
            "untested: {} of {total_capabilities} capabilities never allowed, {} of \
             {total_constraints} constraints never failed",
            never_allowed.len(),
            never_failed.len()
        )?;
        for capability in never_allowed {
            writeln!(
                f,
                "  {}/{}: never allowed",
                capability.skill, capability.capability
            )?;
        }
        for (capability, constraint) in never_failed {
            write!(
                f,
                "  {}/{}: {} never failed",
                capability.skill, capability.capability, constraint.summary
            )?;
            if let Some(source) = &constraint.source {
                write!(f, "  ({source})")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

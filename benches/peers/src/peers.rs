//! The scenario on each peer engine, each behind the same three entry points: from a
//! `serde_json::Value` (`decide`), from input already in the engine's own form (`decide_native`),
//! and from raw bytes (`decide_bytes`).

#[cfg(feature = "cedar")]
pub use cedar::{Cedar, Outcomes};
use serde_json::Value;

#[cfg(feature = "cedar")]
mod cedar {
    use std::str::FromStr;

    use cedar_policy::{
        Authorizer, Context, Decision, Entities, EntityId, EntityTypeName, EntityUid, PolicySet,
    };
    use serde_json::{Value, json};

    use crate::baseline::Matcher;

    /// cedar-policy: C1, C2 and C5 in the policy; C3, C4 and C6 computed in Rust and passed as
    /// context booleans, since Cedar has no regex, no "every element" and no length of a set or a
    /// string.
    pub struct Cedar {
        policies: PolicySet,
        entities: Entities,
        authorizer: Authorizer,
        agent: EntityTypeName,
        action: EntityTypeName,
        resource: EntityTypeName,
    }

    /// The three constraints Cedar cannot express, computed in Rust.
    #[derive(Clone, Copy)]
    struct Computed {
        c3: bool,
        c4: bool,
        c6: bool,
    }

    impl Computed {
        /// The three booleans of the `index`-th of [`Outcomes`]' requests.
        fn at(index: usize) -> Computed {
            Computed {
                c3: index & 1 != 0,
                c4: index & 2 != 0,
                c6: index & 4 != 0,
            }
        }

        /// Where these booleans' request is in [`Outcomes`] (the inverse of [`Computed::at`]).
        fn index(self) -> usize {
            usize::from(self.c3) | usize::from(self.c4) << 1 | usize::from(self.c6) << 2
        }

        fn of(payload: &Value, matcher: &Matcher) -> Computed {
            Computed {
                c3: matcher.attendees_on_domain(payload),
                c4: Matcher::at_most_50_attendees(payload),
                c6: Matcher::summary_ok(payload),
            }
        }
    }

    /// One scenario request as eight prebuilt Cedar requests, indexed by the bits of C3, C4, C6.
    pub struct Outcomes {
        requests: Vec<cedar_policy::Request>,
    }

    impl Cedar {
        /// Parses the policy.
        pub fn new(policy: &str) -> Self {
            Cedar {
                policies: PolicySet::from_str(policy)
                    .unwrap_or_else(|e| panic!("cedar policy: {e}")),
                entities: Entities::empty(),
                authorizer: Authorizer::new(),
                agent: EntityTypeName::from_str("Agent").unwrap(),
                action: EntityTypeName::from_str("Action").unwrap(),
                resource: EntityTypeName::from_str("Resource").unwrap(),
            }
        }

        /// The Cedar request for a scenario request: principal, action and resource entities from
        /// the agent id, operation and URL; context = agent, payload and the three booleans.
        pub fn native(&self, request: &Value, matcher: &Matcher) -> cedar_policy::Request {
            self.build(request, matcher)
                .unwrap_or_else(|| panic!("cedar request must build"))
        }

        fn build(&self, request: &Value, matcher: &Matcher) -> Option<cedar_policy::Request> {
            let payload = request.get("payload")?;
            let computed = Computed::of(payload, matcher);
            self.build_with(request, computed)
        }

        /// The Cedar request for a scenario request whose three computed booleans are `computed`.
        fn build_with(&self, request: &Value, computed: Computed) -> Option<cedar_policy::Request> {
            let str_at = |key: &str| request.get(key).and_then(Value::as_str);
            let agent = request.get("agent")?;
            let payload = request.get("payload")?;
            let uid = |ty: &EntityTypeName, id: &str| {
                EntityUid::from_type_name_and_id(ty.clone(), EntityId::new(id))
            };
            let principal = uid(&self.agent, agent.get("id").and_then(Value::as_str)?);
            let action = uid(&self.action, str_at("operation")?);
            let resource = uid(&self.resource, str_at("resource")?);
            let context = Context::from_json_value(
                json!({
                    "agent": agent,
                    "payload": payload,
                    "c3_attendees_on_domain": computed.c3,
                    "c4_at_most_50_attendees": computed.c4,
                    "c6_summary_length_ok": computed.c6,
                }),
                None,
            )
            .ok()?;
            cedar_policy::Request::new(principal, action, resource, context, None).ok()
        }

        /// The eight Cedar requests for a scenario request, one for each value of the three
        /// booleans Cedar cannot compute, so that [`Cedar::decide_outcomes`] can compute them in
        /// its timed region and hand the authorizer a prebuilt request.
        pub fn outcomes(&self, request: &Value) -> Outcomes {
            let requests = (0..8)
                .map(|index| {
                    self.build_with(request, Computed::at(index))
                        .unwrap_or_else(|| panic!("cedar request must build"))
                })
                .collect();
            Outcomes { requests }
        }

        /// C3, C4 and C6 computed in Rust from the request value (the work Cedar cannot do),
        /// then the authorizer on the prebuilt request with those three booleans: the least a
        /// Cedar decision of the whole scenario costs, with no `Context` built.
        pub fn decide_outcomes(
            &self,
            outcomes: &Outcomes,
            request: &Value,
            matcher: &Matcher,
        ) -> bool {
            let Some(payload) = request.get("payload") else {
                return false;
            };
            let at = Computed::of(payload, matcher).index();
            self.decide_native(&outcomes.requests[at])
        }

        /// Builds the Cedar request from the value, then authorizes.
        pub fn decide(&self, request: &Value, matcher: &Matcher) -> bool {
            self.build(request, matcher)
                .is_some_and(|request| self.decide_native(&request))
        }

        /// Authorizes a prebuilt Cedar request.
        pub fn decide_native(&self, request: &cedar_policy::Request) -> bool {
            self.authorizer
                .is_authorized(request, &self.policies, &self.entities)
                .decision()
                == Decision::Allow
        }

        /// Parses the bytes into a `Value`, then [`Cedar::decide`].
        pub fn decide_bytes(&self, bytes: &[u8], matcher: &Matcher) -> bool {
            serde_json::from_slice::<Value>(bytes)
                .is_ok_and(|request| self.decide(&request, matcher))
        }
    }
}

/// regorus: C1-C6 all in Rego. A `regorus::Engine` is `&mut` to evaluate, so each row owns a
/// clone (cloning an engine with its policy loaded is the documented way to share one).
#[derive(Clone)]
pub struct Rego {
    engine: regorus::Engine,
}

/// The rule whose value is the decision.
const REGO_RULE: &str = "data.scheduler.allow";

impl Rego {
    /// Loads the policy.
    pub fn new(policy: &str) -> Self {
        let mut engine = regorus::Engine::new();
        engine
            .add_policy("scenario.rego".to_owned(), policy.to_owned())
            .unwrap_or_else(|e| panic!("rego policy: {e}"));
        Rego { engine }
    }

    /// Sets the input from a `serde_json::Value`.
    pub fn set_input(&mut self, request: &Value) {
        self.engine.set_input(regorus::Value::from(request.clone()));
    }

    /// Converts and sets the input, then evaluates.
    pub fn decide(&mut self, request: &Value) -> bool {
        self.set_input(request);
        self.decide_native()
    }

    /// Evaluates the rule on the input already set.
    pub fn decide_native(&mut self) -> bool {
        self.engine
            .eval_rule(REGO_RULE.to_owned())
            .is_ok_and(|v| v == regorus::Value::from(true))
    }

    /// Parses the bytes with regorus' own JSON reader, then evaluates.
    pub fn decide_bytes(&mut self, bytes: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return false;
        };
        self.engine.set_input_json(text).is_ok() && self.decide_native()
    }
}

/// cel (the successor of cel-interpreter): C1-C6 all in one CEL expression over `request`.
pub struct Cel {
    program: cel::Program,
}

impl Cel {
    /// Compiles the expression.
    pub fn new(expression: &str) -> Self {
        Cel {
            program: cel::Program::compile(expression)
                .unwrap_or_else(|e| panic!("cel expression: {e}")),
        }
    }

    /// The request as a CEL value.
    pub fn native(&self, request: &Value) -> cel::Value {
        cel::to_value(request).unwrap_or_else(|e| panic!("cel value: {e}"))
    }

    /// Converts the value, then executes.
    pub fn decide(&self, request: &Value) -> bool {
        cel::to_value(request).is_ok_and(|request| self.decide_native(&request))
    }

    /// Executes on a CEL value (binding it to `request` is a reference-count increment).
    pub fn decide_native(&self, request: &cel::Value) -> bool {
        let mut context = cel::Context::default();
        context.add_variable_from_value("request", request.clone());
        matches!(self.program.execute(&context), Ok(cel::Value::Bool(true)))
    }

    /// Parses the bytes into a `Value`, then [`Cel::decide`].
    pub fn decide_bytes(&self, bytes: &[u8]) -> bool {
        serde_json::from_slice::<Value>(bytes).is_ok_and(|request| self.decide(&request))
    }
}

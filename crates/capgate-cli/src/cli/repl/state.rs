//! The repl's state: one stateful engine with a simulated clock, the policies it was built from,
//! and the current agent, context and payload that fill in requests and constraint lines.
//!
//! [`Repl::handle`] takes one complete input (a command, a request, a constraint or a skill
//! block) and prints what it did; it never panics and never stops on a bad input.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::{Map, Value};

use capgate::compiled::{CompiledSkill, LifetimeSpec};
use capgate::span::SourceMap;
use capgate::value::{escape_controls, escape_controls_in_lines, truncate_for_message};
use capgate::vocabulary::CONSTRAINT_WORDS;
use capgate::{
    Clock, Decision, Diagnostic, Engine, InMemoryStore, Limits, PolicyFormat, PolicyLoader,
    PolicySet, Request, SimulatedClock, parse_strict_json,
};
use capgate_authoring::repl::{
    ConstraintError, ConstraintInput, constraint_request, evaluate_constraint, value_at,
};

use super::style::Style;
use super::vocabulary::Vocabulary;

/// What the loop does after an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Read the next input.
    Continue,
    /// Exit (`:quit`).
    Quit,
}

/// The repl's commands, with their arguments and what they do, for `:help` and completion.
pub const COMMANDS: [(&str, &str, &str); 19] = [
    (
        ":load",
        "FILE...",
        "load policy files or directories (added to those loaded)",
    ),
    (":reload", "", "read every loaded file again"),
    (":policies", "", "list skills and capabilities"),
    (
        ":agent",
        "[JSON]",
        "set (or show) the agent that requests and constraints see",
    ),
    (":context", "[JSON]", "set (or show) the context"),
    (":payload", "[JSON]", "set (or show) the payload"),
    (":time", "[RFC3339]", "set (or show) the simulated clock"),
    (
        ":advance",
        "DURATION",
        "move the clock forward, e.g. `:advance 30s`",
    ),
    (":begin", "TX", "open a transaction"),
    (":end", "TX", "close a transaction (ends its grants)"),
    (
        ":grant",
        "SKILL CAP [TX]",
        "issue a grant and print its token",
    ),
    (":revoke", "grant G | skill S | capability S C", "revoke"),
    (
        ":approve",
        "SKILL",
        "record the first-use approval of a skill",
    ),
    (
        ":explain",
        "",
        "trace every constraint of every candidate of the last request",
    ),
    (":disasm", "SKILL CAP", "print a capability's bytecode"),
    (":help", "", "this help"),
    (":quit", "", "exit (so does end of input)"),
    (":exit", "", "exit"),
    (
        ":clear",
        "agent|context|payload",
        "forget the current agent, context or payload",
    ),
];

/// The repl's engine and everything typed so far.
pub struct Repl {
    engine: Engine,
    clock: Arc<SimulatedClock>,
    limits: Limits,
    /// Files and directories loaded, in order, for `:reload`.
    files: Vec<PathBuf>,
    /// The skills the files define, as last loaded successfully.
    file_skills: Vec<CompiledSkill>,
    file_sources: SourceMap,
    /// Skills typed as `skill` blocks; each replaces a same-named skill from the files.
    typed_skills: Vec<CompiledSkill>,
    typed_blocks: usize,
    agent: Option<Value>,
    context: Option<Value>,
    payload: Option<Value>,
    last: Option<(Request, Decision)>,
    style: Style,
    vocabulary: Vocabulary,
}

fn empty_policy() -> PolicySet {
    PolicySet {
        skills: Vec::new(),
        sources: SourceMap::new(),
    }
}

impl Repl {
    /// A repl with no policy, the clock at `now` (whole seconds), printing in `style`.
    pub fn new(style: Style, vocabulary: Vocabulary, now: DateTime<Utc>) -> Self {
        let limits = Limits::DEFAULT;
        let clock = Arc::new(SimulatedClock::new(now.trunc_subsecs(0)));
        // `limits` is `Limits::DEFAULT`, the builder's own.
        let engine = Engine::builder(empty_policy())
            .clock(clock.clone())
            .state(Arc::new(InMemoryStore::new()))
            .build();
        Repl {
            engine,
            clock,
            limits,
            files: Vec::new(),
            file_skills: Vec::new(),
            file_sources: SourceMap::new(),
            typed_skills: Vec::new(),
            typed_blocks: 0,
            agent: None,
            context: None,
            payload: None,
            last: None,
            style,
            vocabulary,
        }
    }

    fn error(&self, message: &str) {
        eprintln!("{} {}", self.style.error("error:"), shown(message));
    }

    /// Handles one complete input.
    pub fn handle(&mut self, input: &str) -> Flow {
        let trimmed = input.trim();
        if trimmed.is_empty() || trimmed.starts_with("//") || trimmed.starts_with('#') {
            return Flow::Continue;
        }
        if let Some(command) = trimmed.strip_prefix(':') {
            return self.command(command);
        }
        let first_word = trimmed
            .split(|c: char| c.is_whitespace() || c == '{' || c == '"')
            .next()
            .unwrap_or("");
        if trimmed.starts_with('{') {
            self.request(trimmed);
        } else if first_word == "skill" {
            self.skill_block(input);
        } else if CONSTRAINT_WORDS.contains(&first_word) {
            self.constraint(trimmed);
        } else {
            self.error(&format!(
                "`{}` is not a command (`:help`), a request (`{{...}}`), a constraint line or a \
                 `skill` block",
                cut(trimmed, 40)
            ));
        }
        Flow::Continue
    }

    fn command(&mut self, text: &str) -> Flow {
        let (name, rest) = match text.split_once(char::is_whitespace) {
            Some((name, rest)) => (name, rest.trim()),
            None => (text, ""),
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        match name {
            "quit" | "q" | "exit" => return Flow::Quit,
            "help" | "h" | "?" => self.help(),
            "load" => self.load(&words),
            "reload" => self.reload(&words),
            "policies" => self.policies(&words),
            "agent" => self.set_value("agent", rest),
            "context" => self.set_value("context", rest),
            "payload" => self.set_value("payload", rest),
            "clear" => self.clear(&words),
            "time" => self.time(rest),
            "advance" => self.advance(rest),
            "begin" => self.transaction(&words, true),
            "end" => self.transaction(&words, false),
            "grant" => self.grant(&words),
            "revoke" => self.revoke(&words),
            "approve" => self.approve(&words),
            "explain" => self.explain(&words),
            "disasm" => self.disasm(&words),
            _ => self.error(&format!("unknown command `:{name}` (`:help` lists them)")),
        }
        Flow::Continue
    }

    fn help(&self) {
        outln!("Inputs:");
        outln!("  {{\"skill\": ..., \"operation\": ..., \"resource\": ...}}   decide a request");
        outln!("      (the :agent, :context and :payload set fill in fields it omits)");
        outln!("  fieldMatches payload.email ~ /.*@example\\.com/      evaluate a constraint");
        outln!("  skill \"name\" {{ ... }}                               add or replace a skill");
        outln!("Commands:");
        for (name, args, what) in COMMANDS {
            let usage = if args.is_empty() {
                name.to_owned()
            } else {
                format!("{name} {args}")
            };
            outln!("  {usage:<44} {what}");
        }
    }

    fn expect_no_arguments(&self, command: &str, words: &[&str]) -> bool {
        if words.is_empty() {
            true
        } else {
            self.error(&format!("`:{command}` takes no arguments"));
            false
        }
    }

    // --- policies -------------------------------------------------------------------------

    fn load(&mut self, words: &[&str]) {
        if words.is_empty() {
            self.error("`:load` needs one or more policy files or directories");
            return;
        }
        let mut files = self.files.clone();
        files.extend(words.iter().map(PathBuf::from));
        if self.load_files(files) {
            outln!(
                "loaded {} skill(s) from {} path(s)",
                self.file_skills.len(),
                self.files.len()
            );
        }
    }

    fn reload(&mut self, words: &[&str]) {
        if !self.expect_no_arguments("reload", words) {
            return;
        }
        if self.files.is_empty() {
            self.error("no policy files are loaded (`:load FILE`)");
            return;
        }
        if self.load_files(self.files.clone()) {
            outln!("reloaded {} skill(s)", self.file_skills.len());
        }
    }

    /// Loads the initial `-p` paths; they are kept for `:reload` even when loading fails.
    pub fn load_initial(&mut self, paths: Vec<PathBuf>) {
        if paths.is_empty() {
            return;
        }
        if self.load_files(paths.clone()) {
            outln!(
                "loaded {} skill(s) from {} path(s)",
                self.file_skills.len(),
                self.files.len()
            );
        } else {
            self.files = paths;
            self.error("starting with no policy; fix the files and `:reload`");
        }
    }

    /// Loads `files` whole; on failure prints every problem and keeps the last good policy.
    fn load_files(&mut self, files: Vec<PathBuf>) -> bool {
        let mut loader = PolicyLoader::new(self.limits);
        for file in &files {
            loader.add_path(file);
        }
        match loader.finish() {
            Ok(policy) => {
                // The most recent definition of a skill wins: loading a file replaces a typed
                // skill of the same name.
                for skill in &policy.skills {
                    if self.typed_skills.iter().any(|t| t.name == skill.name) {
                        outln!(
                            "note: skill `{}` from the files replaces the one typed here",
                            shown(&skill.name)
                        );
                    }
                }
                self.typed_skills
                    .retain(|t| !policy.skills.iter().any(|s| s.name == t.name));
                self.files = files;
                self.file_skills = policy.skills;
                self.file_sources = policy.sources;
                self.install();
                true
            }
            Err(error) => {
                print_diagnostics(self.style, &error.diagnostics, &error.sources, None);
                self.error("policy rejected; the last good policy stays loaded");
                false
            }
        }
    }

    /// Rebuilds the engine's policy: file skills not replaced by typed ones, then typed ones.
    fn install(&mut self) {
        let mut skills: Vec<CompiledSkill> = self
            .file_skills
            .iter()
            .filter(|s| !self.typed_skills.iter().any(|t| t.name == s.name))
            .cloned()
            .collect();
        skills.extend(self.typed_skills.iter().cloned());
        self.vocabulary.set_skills(&skills);
        self.engine.reload(PolicySet {
            skills,
            sources: self.file_sources.clone(),
        });
    }

    fn skill_block(&mut self, text: &str) {
        self.typed_blocks = self.typed_blocks.saturating_add(1);
        let name = format!("<repl:{}>", self.typed_blocks);
        let mut loader = PolicyLoader::new(self.limits);
        loader.add_text(&name, text.to_owned(), PolicyFormat::Cap, None);
        let policy = match loader.finish() {
            Ok(policy) => policy,
            Err(error) => {
                print_diagnostics(self.style, &error.diagnostics, &error.sources, None);
                self.error("skill rejected; the policy is unchanged");
                return;
            }
        };
        for skill in policy.skills {
            let replaced = self.file_skills.iter().any(|s| s.name == skill.name)
                || self.typed_skills.iter().any(|s| s.name == skill.name);
            outln!(
                "{} skill `{}` ({} capabilit{})",
                if replaced { "replaced" } else { "added" },
                shown(&skill.name),
                skill.capabilities.len(),
                if skill.capabilities.len() == 1 {
                    "y"
                } else {
                    "ies"
                }
            );
            self.typed_skills.retain(|s| s.name != skill.name);
            self.typed_skills.push(skill);
        }
        self.install();
    }

    fn policies(&self, words: &[&str]) {
        if !self.expect_no_arguments("policies", words) {
            return;
        }
        let policy = self.engine.policy();
        if policy.skills().is_empty() {
            outln!("no skills loaded (`:load FILE` or type a `skill` block)");
            return;
        }
        for skill in policy.skills() {
            let origin = if self.typed_skills.iter().any(|t| t.name == skill.name) {
                "typed here".to_owned()
            } else {
                skill
                    .location
                    .as_ref()
                    .map_or_else(String::new, |l| l.file.to_string())
            };
            outln!(
                "{} {} {}",
                self.style
                    .heading(&format!("skill `{}`", shown(&skill.name))),
                shown(&skill.version),
                self.style.dim(&format!("({})", shown(&origin)))
            );
            for capability in &skill.capabilities {
                outln!(
                    "  {}, lifetime {}",
                    crate::cli::disasm::summary(capability),
                    lifetime_text(capability.lifetime)
                );
            }
        }
    }

    fn disasm(&self, words: &[&str]) {
        let [skill_name, capability_name] = words else {
            self.error("usage: `:disasm SKILL CAP`");
            return;
        };
        let policy = self.engine.policy();
        let Some(skill) = policy.skill(skill_name) else {
            self.error(&format!("unknown skill `{skill_name}`"));
            return;
        };
        let Some(capability) = skill.capability(capability_name) else {
            self.error(&format!(
                "skill `{skill_name}` has no capability `{capability_name}`"
            ));
            return;
        };
        crate::cli::disasm::print_capability(capability);
    }

    // --- request parts and clock ------------------------------------------------------------

    fn slot(&mut self, which: &str) -> Option<&mut Option<Value>> {
        match which {
            "agent" => Some(&mut self.agent),
            "context" => Some(&mut self.context),
            "payload" => Some(&mut self.payload),
            _ => None,
        }
    }

    fn set_value(&mut self, which: &str, text: &str) {
        if text.is_empty() {
            let current = self.slot(which).and_then(|v| v.clone());
            match current {
                Some(value) => outln!("{which} {}", truncate_for_message(&value, ECHO_CHARS)),
                None => outln!("{which} is not set"),
            }
            return;
        }
        let value = match parse_strict_json(text) {
            Ok(value) => value,
            Err(e) => {
                self.error(&format!("`:{which}` needs JSON: {e}"));
                return;
            }
        };
        if capgate::engine::depth_exceeds(&value, self.limits.max_payload_depth) {
            self.error(&format!(
                "`{which}` is nested deeper than the limit of {}",
                self.limits.max_payload_depth
            ));
            return;
        }
        outln!("{which} {}", truncate_for_message(&value, ECHO_CHARS));
        if let Some(slot) = self.slot(which) {
            *slot = Some(value);
        }
    }

    fn clear(&mut self, words: &[&str]) {
        let [which] = words else {
            self.error("usage: `:clear agent|context|payload`");
            return;
        };
        match self.slot(which) {
            Some(slot) => {
                *slot = None;
                outln!("{which} cleared");
            }
            None => self.error(&format!(
                "`{which}` is not one of `agent`, `context`, `payload`"
            )),
        }
    }

    fn time(&self, text: &str) {
        if text.is_empty() {
            outln!("time {}", self.clock.now().to_rfc3339());
            return;
        }
        match capgate::parse_timestamp(text) {
            Some(time) => {
                self.clock.set(time);
                outln!("time {}", time.to_rfc3339());
            }
            None => self.error(&format!("`{text}` is not an RFC 3339 timestamp")),
        }
    }

    fn advance(&self, text: &str) {
        if text.is_empty() {
            self.error("usage: `:advance DURATION`, e.g. `:advance 30s`");
            return;
        }
        let duration = match capgate::parse_duration(text) {
            Ok(duration) => duration,
            Err(e) => {
                self.error(&e);
                return;
            }
        };
        match self.clock.advance(duration) {
            Ok(now) => outln!("time {}", now.to_rfc3339()),
            Err(e) => self.error(&format!("cannot advance the clock: {e}")),
        }
    }

    // --- runtime state ----------------------------------------------------------------------

    fn transaction(&self, words: &[&str], begin: bool) {
        let verb = if begin { "begin" } else { "end" };
        let [tx] = words else {
            self.error(&format!("usage: `:{verb} TX`"));
            return;
        };
        let result = if begin {
            self.engine.begin_transaction(tx)
        } else {
            self.engine.end_transaction(tx)
        };
        match result {
            Ok(()) => outln!("{verb} transaction `{}`", shown(tx)),
            Err(e) => self.error(&e.to_string()),
        }
    }

    fn grant(&self, words: &[&str]) {
        let (skill, capability, transaction) = match words {
            [skill, capability] => (*skill, *capability, None),
            [skill, capability, tx] => (*skill, *capability, Some(*tx)),
            _ => {
                self.error("usage: `:grant SKILL CAP [TX]`");
                return;
            }
        };
        match self
            .engine
            .issue_grant(skill, capability, transaction, None)
        {
            Ok(token) => {
                let scope = transaction.map_or_else(String::new, |tx| format!(" in `{tx}`"));
                let line = format!("grant `{token}` for `{skill}`/`{capability}`{scope}");
                outln!("{}", shown(&line));
            }
            Err(e) => self.error(&e.to_string()),
        }
    }

    fn revoke(&self, words: &[&str]) {
        let (result, what) = match words {
            ["grant", token] => (self.engine.revoke_grant(token), format!("grant `{token}`")),
            ["skill", skill] => (self.engine.revoke_skill(skill), format!("skill `{skill}`")),
            ["capability", skill, capability] => (
                self.engine.revoke_capability(skill, capability),
                format!("capability `{skill}`/`{capability}`"),
            ),
            _ => {
                self.error("usage: `:revoke grant G | skill S | capability S C`");
                return;
            }
        };
        match result {
            Ok(()) => outln!("revoked {}", shown(&what)),
            Err(e) => self.error(&e.to_string()),
        }
    }

    fn approve(&self, words: &[&str]) {
        let [skill] = words else {
            self.error("usage: `:approve SKILL`");
            return;
        };
        // The store records approvals of any name; an unknown skill is more likely a typo.
        if self.engine.policy().skill(skill).is_none() {
            self.error(&format!("unknown skill `{skill}`"));
            return;
        }
        match self.engine.approve(skill) {
            Ok(()) => outln!("approved skill `{}`", shown(skill)),
            Err(e) => self.error(&e.to_string()),
        }
    }

    // --- decisions --------------------------------------------------------------------------

    fn request(&mut self, text: &str) {
        let value = match capgate::engine::parse_json_with_depth(text, self.limits.parse_depth()) {
            Ok(value) => value,
            Err(e) => {
                self.error(&format!("malformed JSON: {e}"));
                return;
            }
        };
        let Value::Object(mut object) = value else {
            self.error("a request must be a JSON object");
            return;
        };
        self.fill(&mut object);
        // A request's own `time` moves the clock, as in a session (SPEC §5.4); `null` is absent.
        // Here a time that is not a timestamp is said at once, as an authoring error.
        if let Some(time) = object.get("time").filter(|time| !time.is_null()) {
            match time.as_str().and_then(capgate::parse_timestamp) {
                Some(t) => self.clock.set(t),
                None => {
                    self.error(&format!("`time` {time} is not an RFC 3339 timestamp"));
                    return;
                }
            }
        }
        let value = Value::Object(object);
        match Request::from_value(value.clone(), &self.limits) {
            Ok(request) => {
                let decision = self.engine.check(&request);
                out!("{}", decision_text(self.style, &decision));
                self.last = Some((request, decision));
            }
            // Not a valid request: the engine denies it with reason `input`, as on the wire.
            Err(_) => {
                let decision = self.engine.check_value(value);
                out!("{}", decision_text(self.style, &decision));
                self.last = None;
            }
        }
    }

    /// Fills the fields a request omits from the current agent, context and payload.
    fn fill(&self, object: &mut Map<String, Value>) {
        for (key, value) in [
            ("agent", &self.agent),
            ("context", &self.context),
            ("payload", &self.payload),
        ] {
            if let Some(value) = value
                && !object.contains_key(key)
            {
                object.insert(key.to_owned(), value.clone());
            }
        }
    }

    fn constraint(&self, text: &str) {
        let input = ConstraintInput {
            payload: self.payload.as_ref().unwrap_or(&Value::Null),
            agent: self.agent.as_ref().unwrap_or(&Value::Null),
            context: self.context.as_ref().unwrap_or(&Value::Null),
            now: self.clock.now(),
        };
        match evaluate_constraint(text, &input, self.limits) {
            Ok(evaluation) => {
                let request = constraint_request(&input);
                outln!("{}", self.style.truth(evaluation.holds()));
                for check in &evaluation.checks {
                    if evaluation.checks.len() > 1 {
                        outln!(
                            "  {} {}",
                            self.style.mark(check.holds),
                            shown(&check.summary)
                        );
                    }
                    for test in &check.tests {
                        print_test(self.style, test, &request, "  ");
                    }
                }
            }
            Err(ConstraintError::Invalid(diagnostics)) => {
                let mut sources = SourceMap::new();
                sources.add(capgate_authoring::repl::CONSTRAINT_SOURCE, text);
                print_diagnostics(self.style, &diagnostics, &sources, Some(text));
                self.error("the constraint does not compile");
            }
            Err(ConstraintError::NotEvaluable(message)) => self.error(&message),
            Err(ConstraintError::Limits(error)) => self.error(&error.to_string()),
        }
    }

    fn explain(&self, words: &[&str]) {
        if !self.expect_no_arguments("explain", words) {
            return;
        }
        let Some((request, decision)) = &self.last else {
            self.error("no valid request yet: type one as JSON first");
            return;
        };
        outln!(
            "request: {} {} {}",
            shown(&request.skill),
            shown(&request.operation),
            shown(&request.resource)
        );
        let traces = self.engine.explain(request);
        if traces.is_empty() {
            outln!("no candidate capability (unknown skill, resource or operation)");
        }
        let policy = self.engine.policy();
        for trace in &traces {
            let holds = trace.checks.iter().all(|(_, holds, _)| *holds);
            outln!(
                "{} {}",
                self.style.mark(holds),
                self.style
                    .heading(&format!("candidate `{}`", shown(&trace.capability)))
            );
            let checks = policy
                .skill(&request.skill)
                .and_then(|s| s.capability(&trace.capability))
                .map(|c| c.checks());
            if trace.checks.is_empty() {
                outln!("    (no constraints)");
            }
            for (index, (summary, holds, tests)) in trace.checks.iter().enumerate() {
                let location = checks
                    .and_then(|c| c.get(index))
                    .filter(|c| &c.summary == summary)
                    .and_then(|c| c.location.as_ref())
                    .map_or_else(String::new, |l| {
                        format!("  {}", self.style.dim(&shown(&l.to_string())))
                    });
                outln!(
                    "    {} {}{location}",
                    self.style.mark(*holds),
                    shown(summary)
                );
                for test in tests {
                    print_test(self.style, test, request, "        ");
                }
            }
            if let Some(capability) = policy
                .skill(&request.skill)
                .and_then(|s| s.capability(&trace.capability))
            {
                for limit in capability.rate_limits() {
                    outln!(
                        "    {} rateLimit {} (stateful: see the decision)",
                        self.style.dim("·"),
                        shown(&limit.summary)
                    );
                }
            }
        }
        out!("decision: {}", decision_text(self.style, decision));
    }
}

/// The most characters of a value echoed back (`:payload {...}` prints what it set).
const ECHO_CHARS: usize = 200;

/// Policy or request text as the repl prints it: control and bidirectional characters escaped
/// (`capgate::value::is_hidden`), so what a reviewer sees is what the engine reads.
fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(text)
}

fn lifetime_text(lifetime: LifetimeSpec) -> String {
    match lifetime {
        LifetimeSpec::Call(n) => format!("call {n}"),
        LifetimeSpec::Transaction => "transaction".to_owned(),
        LifetimeSpec::WallClock {
            duration,
            renewable,
        } => format!(
            "wallClock {}s{}",
            duration.as_secs(),
            if renewable { " renewable" } else { "" }
        ),
        LifetimeSpec::Process => "process".to_owned(),
    }
}

/// A decision as `capgate check --format text` prints it, the verdict coloured.
fn decision_text(style: Style, decision: &Decision) -> String {
    let text = decision.to_text();
    if !style.coloured() {
        return text;
    }
    match text.split_once(' ') {
        Some((verdict, rest)) => format!("{} {rest}", style.verdict(decision.effective(), verdict)),
        None => text,
    }
}

/// One test of a trace: its mark, the path and the value it saw there, and the message.
fn print_test(style: Style, test: &capgate::engine::TestReport, request: &Request, indent: &str) {
    let path = match test.path.as_deref() {
        Some(path) => match value_at(request, path) {
            Some(value) => format!("{path} = {}: ", truncate_for_message(&value, 64)),
            None => format!("{path}: "),
        },
        None => String::new(),
    };
    outln!(
        "{indent}{} {}{}",
        style.mark(test.holds),
        shown(&path),
        shown(&test.message)
    );
}

/// Prints diagnostics with the offending source line and a caret under the column. `typed` is
/// the text of a constraint line, whose diagnostics were moved into it.
fn print_diagnostics(
    style: Style,
    diagnostics: &[Diagnostic],
    sources: &SourceMap,
    typed: Option<&str>,
) {
    for diagnostic in diagnostics {
        eprintln!(
            "{}: {} {}",
            shown(&diagnostic.location.to_string()),
            style.error("error:"),
            shown(&diagnostic.message)
        );
        let text = match typed {
            Some(text) => Some(text.to_owned()),
            None => sources
                .file(diagnostic.span.file)
                .map(|f| f.text.to_string()),
        };
        let line = usize::try_from(diagnostic.location.line).unwrap_or(0);
        if let Some(source_line) = text
            .as_deref()
            .and_then(|t| t.lines().nth(line.saturating_sub(1)))
            .filter(|_| line > 0)
        {
            // The caret goes under the column as the escaped line shows it.
            let column = usize::try_from(diagnostic.location.column).unwrap_or(1);
            let before: String = source_line.chars().take(column.saturating_sub(1)).collect();
            let indent = shown(&before).chars().count();
            eprintln!("  {line:>4} | {}", shown(source_line));
            eprintln!("       | {}^", " ".repeat(indent));
        }
        if let Some(help) = &diagnostic.help {
            eprintln!("  help: {}", escape_controls_in_lines(help));
        }
    }
}

/// At most `max` characters of `text`, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    let first_line = text.lines().next().unwrap_or("");
    if first_line.chars().count() > max || first_line.len() < text.len() {
        let head: String = first_line.chars().take(max).collect();
        format!("{head}…")
    } else {
        first_line.to_owned()
    }
}

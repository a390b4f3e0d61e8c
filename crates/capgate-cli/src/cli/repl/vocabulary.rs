//! The words tab completion offers: commands, language keywords, and the skill names,
//! capability names and paths of the loaded policies. [`Vocabulary`] is shared between the
//! repl (which updates it on every load) and the line editor's completer (which reads it).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use capgate::compiled::CompiledSkill;
use capgate::syntax::ast::ResourceKind;
use capgate::vocabulary::{CONSTRAINT_WORDS, ITEM_WORDS};

use super::state::COMMANDS;

/// Words of the `.cap` language besides the constraint words, the item words and the resource
/// kinds, and the path roots.
const KEYWORDS: [&str; 19] = [
    "call",
    "transaction",
    "wallClock",
    "renewable",
    "process",
    "in",
    "now",
    "file",
    "per",
    "burst",
    "by",
    "from",
    "until",
    "payload.",
    "agent.",
    "context.",
    "resource.",
    "request.",
    "daily",
];

#[derive(Debug, Default)]
struct Names {
    skills: BTreeSet<String>,
    capabilities: BTreeSet<String>,
    paths: BTreeSet<String>,
}

/// The completion vocabulary; cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    names: Rc<RefCell<Names>>,
}

impl Vocabulary {
    /// Replaces the names with those of `skills`.
    pub fn set_skills(&self, skills: &[CompiledSkill]) {
        let mut names = Names::default();
        for skill in skills {
            names.skills.insert(skill.name.to_string());
            for capability in &skill.capabilities {
                names.capabilities.insert(capability.name.to_string());
                for path in capability.paths() {
                    names.paths.insert(path.to_owned());
                }
            }
        }
        *self.names.borrow_mut() = names;
    }

    /// Every word that starts with `prefix`, for the word at the start of the line when
    /// `line_start`, else for a later word; sorted, without duplicates.
    pub fn complete(&self, prefix: &str, line_start: bool, command: Option<&str>) -> Vec<String> {
        let names = self.names.borrow();
        let mut words: BTreeSet<&str> = BTreeSet::new();
        if line_start {
            words.extend(COMMANDS.iter().map(|(name, _, _)| *name));
        }
        match command {
            // Arguments of a command: only names make sense.
            Some(":revoke") => {
                words.extend(["grant", "skill", "capability"]);
                words.extend(names.skills.iter().map(String::as_str));
                words.extend(names.capabilities.iter().map(String::as_str));
            }
            Some(":clear") => words.extend(["agent", "context", "payload"]),
            Some(_) => {
                words.extend(names.skills.iter().map(String::as_str));
                words.extend(names.capabilities.iter().map(String::as_str));
            }
            None => {
                words.extend(CONSTRAINT_WORDS);
                words.extend(ITEM_WORDS);
                words.extend(ResourceKind::ALL.map(|(_, name)| name));
                words.extend(KEYWORDS);
                words.extend(names.skills.iter().map(String::as_str));
                words.extend(names.capabilities.iter().map(String::as_str));
                words.extend(names.paths.iter().map(String::as_str));
            }
        }
        words
            .into_iter()
            .filter(|w| w.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }
}

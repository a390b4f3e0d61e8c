//! Colour for the repl: ANSI on a terminal, none with `NO_COLOR` set or when stdout is not one.

use std::io::IsTerminal;

use capgate::Verdict;

/// Whether output is coloured.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    colour: bool,
}

const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const BLUE: &str = "34";
const DIM: &str = "2";
const BOLD: &str = "1";

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn detect() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            colour: !no_color && std::io::stdout().is_terminal(),
        }
    }

    /// Whether this style colours.
    pub fn coloured(self) -> bool {
        self.colour
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// An error line's `error:` label.
    pub fn error(self, text: &str) -> String {
        self.paint(RED, text)
    }

    /// Something that held.
    pub fn holds(self, text: &str) -> String {
        self.paint(GREEN, text)
    }

    /// Something that failed.
    pub fn fails(self, text: &str) -> String {
        self.paint(RED, text)
    }

    /// A heading (a candidate, a skill).
    pub fn heading(self, text: &str) -> String {
        self.paint(BOLD, text)
    }

    /// A source location or other secondary text.
    pub fn dim(self, text: &str) -> String {
        self.paint(DIM, text)
    }

    /// The prompt.
    pub fn prompt(self, text: &str) -> String {
        self.paint(BLUE, text)
    }

    /// A verdict word in its colour.
    pub fn verdict(self, verdict: Verdict, text: &str) -> String {
        let code = match verdict {
            Verdict::Allow => GREEN,
            Verdict::Deny => RED,
            Verdict::ApprovalRequired => YELLOW,
        };
        self.paint(code, text)
    }

    /// `true`/`false` for a constraint result.
    pub fn truth(self, holds: bool) -> String {
        if holds {
            self.holds("true")
        } else {
            self.fails("false")
        }
    }

    /// A mark for a check in a trace.
    pub fn mark(self, holds: bool) -> String {
        if holds {
            self.holds("✓")
        } else {
            self.fails("✗")
        }
    }
}

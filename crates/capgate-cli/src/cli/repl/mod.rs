//! `capgate repl`: interactive policy authoring on one stateful engine with a simulated clock.
//!
//! - [`state::Repl`] holds the engine, the policies and the current agent, context and payload,
//!   and handles one complete input at a time.
//! - [`editor::ReplHelper`] gives the terminal editor (rustyline) completion and multi-line
//!   input; [`vocabulary::Vocabulary`] is what it completes.
//! - On a terminal, input is edited with history; otherwise standard input is read line by line
//!   without prompts (a line with an open `{` or `[` continues until balanced), so the repl can
//!   be scripted.

mod editor;
mod state;
mod style;
mod vocabulary;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::Args;
use rustyline::error::ReadlineError;
use rustyline::{Config, Editor};

use capgate::Limits;
use capgate::bounded::{ByteLimit, Line, LineReader, ReadError};
use capgate_authoring::repl::line_depth;

use self::editor::{Block, CONTINUATION, ReplHelper};
use self::state::{Flow, Repl};
use self::style::Style;
use self::vocabulary::Vocabulary;
use super::{EXIT_INPUT, EXIT_OK};

/// Arguments of `capgate repl`.
#[derive(Debug, Args)]
pub struct ReplArgs {
    /// Policy files (.cap, .json) or directories to start with.
    #[arg(short = 'p', long = "policy", num_args = 1..)]
    policies: Vec<PathBuf>,
    /// Where the simulated clock starts (RFC 3339; default: the system time).
    #[arg(long)]
    now: Option<String>,
}

const PROMPT: &str = "capgate> ";

/// Runs `capgate repl`.
pub fn run(args: ReplArgs) -> u8 {
    let now = match args.now.as_deref() {
        Some(text) => match capgate::parse_timestamp(text) {
            Some(now) => now,
            None => {
                eprintln!("error: `{text}` is not an RFC 3339 timestamp");
                return EXIT_INPUT;
            }
        },
        None => chrono::Utc::now(),
    };
    let style = Style::detect();
    let vocabulary = Vocabulary::default();
    let mut repl = Repl::new(style, vocabulary.clone(), now);
    if std::io::stdin().is_terminal() {
        outln!("capgate repl — `:help` lists commands, `:quit` or Ctrl-D exits");
        repl.load_initial(args.policies);
        interactive(&mut repl, vocabulary, style)
    } else {
        repl.load_initial(args.policies);
        scripted(&mut repl)
    }
}

/// Reads standard input line by line, without prompts. A line, and a block of lines, is held
/// to `Limits::max_session_line_bytes` as a session line is: a longer one is an error, and no
/// more of it than the limit is held.
fn scripted(repl: &mut Repl) -> u8 {
    let limit = ByteLimit::session_line(&Limits::DEFAULT);
    let mut lines = LineReader::new(std::io::stdin().lock(), limit.bytes);
    let too_large = |what: &str| ReadError::TooLarge {
        what: what.to_owned(),
        limit,
    };
    let mut pending = String::new();
    let mut depth: i64 = 0;
    loop {
        let raw = match lines.next_line() {
            Ok(None) => break,
            Ok(Some(Line::Complete(raw))) => raw,
            Ok(Some(Line::TooLong)) => {
                eprintln!("error: {}", too_large("the line"));
                continue;
            }
            Err(e) => {
                eprintln!("error: cannot read standard input: {e}");
                break;
            }
        };
        let line = match std::str::from_utf8(raw) {
            Ok(line) => line.trim_end_matches(['\n', '\r']),
            Err(e) => {
                eprintln!(
                    "error: the line is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                );
                continue;
            }
        };
        // A command never continues an unfinished block: the block is handled (and reported)
        // first, so a script cannot lose its `:quit` to a stray `{`.
        if !pending.is_empty() && line.starts_with(':') {
            let unfinished = std::mem::take(&mut pending);
            depth = 0;
            repl.handle(&unfinished);
        }
        let joined = pending.len() + usize::from(!pending.is_empty()) + line.len();
        if joined > limit.bytes {
            // The block is dropped, and what follows of it read as new input.
            eprintln!("error: {}", too_large("the input"));
            pending.clear();
            depth = 0;
            continue;
        }
        if !pending.is_empty() {
            pending.push('\n');
        }
        pending.push_str(line);
        // A running total of the open brackets, one line at a time (regression: rescanning the
        // whole block after every line made a 40,000-line request take 40 s).
        depth = depth.saturating_add(line_depth(line));
        if depth > 0 {
            continue;
        }
        depth = 0;
        let input = std::mem::take(&mut pending);
        let flow = repl.handle(&input);
        let _ = std::io::stdout().flush();
        if flow == Flow::Quit {
            return EXIT_OK;
        }
    }
    // End of input inside an open block: report it rather than drop it silently.
    if !pending.trim().is_empty() {
        repl.handle(&pending);
    }
    EXIT_OK
}

/// The history file: `$CAPGATE_HISTORY`, else `$XDG_STATE_HOME/capgate/history`, else
/// `~/.capgate_history`.
fn history_path() -> Option<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = non_empty("CAPGATE_HISTORY") {
        return Some(PathBuf::from(path));
    }
    if let Some(state) = non_empty("XDG_STATE_HOME") {
        return Some(PathBuf::from(state).join("capgate").join("history"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".capgate_history"))
}

/// Edits input on a terminal with history, completion and multi-line blocks.
fn interactive(repl: &mut Repl, vocabulary: Vocabulary, style: Style) -> u8 {
    // Each complete input (a whole block) is one history entry, added below.
    let config = Config::builder().history_ignore_space(true).build();
    let mut editor: Editor<ReplHelper, _> = match Editor::with_config(config) {
        Ok(editor) => editor,
        Err(e) => {
            // No usable terminal after all: fall back to reading lines.
            eprintln!("note: line editing is unavailable ({e}); reading lines");
            return scripted(repl);
        }
    };
    editor.set_helper(Some(ReplHelper::new(vocabulary, style)));
    let history = history_path();
    if let Some(path) = &history {
        // A missing or unreadable history is not an error.
        let _ = editor.load_history(path);
    }
    let mut block = Block::default();
    'read: loop {
        let prompt = if block.is_open() {
            CONTINUATION
        } else {
            PROMPT
        };
        match editor.readline(prompt) {
            Ok(line) => {
                for input in block.push(&line) {
                    let _ = editor.add_history_entry(input.as_str());
                    if repl.handle(&input) == Flow::Quit {
                        break 'read;
                    }
                }
            }
            // Ctrl-C abandons the input being typed, an open block included, as in a shell.
            Err(ReadlineError::Interrupted) => block.abandon(),
            Err(ReadlineError::Eof) => {
                // End of input inside an open block: report it rather than drop it silently.
                if let Some(unfinished) = block.take() {
                    repl.handle(&unfinished);
                }
                break;
            }
            Err(e) => {
                eprintln!("error: cannot read input: {e}");
                break;
            }
        }
    }
    if let Some(path) = &history {
        save_history(&mut editor, path);
    }
    EXIT_OK
}

/// Saves the history, creating its directory; never fails the repl.
fn save_history(
    editor: &mut Editor<ReplHelper, rustyline::history::DefaultHistory>,
    path: &PathBuf,
) {
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if let Err(e) = editor.save_history(path) {
        eprintln!(
            "note: cannot write the history file `{}`: {e}",
            path.display()
        );
    }
}

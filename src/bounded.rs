//! Reading input within a byte limit: every file, pipe, standard input and session line that
//! capgate reads comes through here, so no input can hold more memory than its limit allows.
//!
//! - [`read_at_most`] is the one primitive: it reads at most `limit + 1` bytes from any reader,
//!   so a caller learns that an input is over its limit without holding more of it (a FIFO or
//!   `/dev/zero` is read no further).
//! - [`read`] and [`read_file`] name the input and the limit in their [`ReadError`]; a regular
//!   file whose size is over the limit is refused from its metadata, before any of it is read.
//! - [`files_under`] is the one directory walk (policies, `.captest` files, `capgate fmt`): it
//!   visits each directory once however symlinks reach it, so a link to `.` cannot make it loop.
//! - [`regular_file`] is for what a walk finds: only a regular file (through a symlink too) is
//!   opened; a FIFO, a socket or a device is refused unopened, since opening a FIFO blocks and a
//!   device may never end.
//! - [`LineReader`] splits a stream into lines of at most a limit, reading the rest of a longer
//!   line only to drop it, so that line is an error of its own and the next one still runs.
//! - [`ByteLimit`] is a limit together with the [`Limits`] field it comes from, for messages.

use std::collections::HashSet;
use std::fs::{File, FileType};
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};

use crate::limits::Limits;

/// A byte limit and the name of the [`Limits`] field (or method) it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteLimit {
    /// The most bytes accepted.
    pub bytes: usize,
    /// The [`Limits`] member it comes from, as messages name it (`max_request_bytes`).
    pub name: &'static str,
}

impl ByteLimit {
    /// A request (`capgate check -r FILE`, standard input): [`Limits::max_request_bytes`].
    pub const fn request(limits: &Limits) -> ByteLimit {
        ByteLimit {
            bytes: limits.max_request_bytes,
            name: "max_request_bytes",
        }
    }

    /// A policy (`.cap`, `.json`, `.capc`), a schema file or a `.captest` file:
    /// [`Limits::max_policy_file_bytes`].
    pub const fn policy_file(limits: &Limits) -> ByteLimit {
        ByteLimit {
            bytes: limits.max_policy_file_bytes,
            name: "max_policy_file_bytes",
        }
    }

    /// One line of a session or of REPL input: [`Limits::max_session_line_bytes`].
    pub const fn session_line(limits: &Limits) -> ByteLimit {
        ByteLimit {
            bytes: limits.max_session_line_bytes(),
            name: "max_session_line_bytes",
        }
    }
}

/// An input that could not be read within its limit.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ReadError {
    /// The operating system refused (missing file, permissions, a directory).
    #[error("cannot read {what}: {source}")]
    Io {
        /// The input, as messages name it (`` `policy.cap` ``, `standard input`).
        what: String,
        /// Why.
        source: io::Error,
    },
    /// More bytes than the limit; no more than one byte past it was read.
    #[error("{what} is larger than the {}-byte limit (`Limits::{}`)", .limit.bytes, .limit.name)]
    TooLarge {
        /// The input, as messages name it.
        what: String,
        /// The limit it broke.
        limit: ByteLimit,
    },
    /// Found in a directory walk, and not a regular file: never opened.
    #[error("{what} is {kind}, not a regular file")]
    NotRegularFile {
        /// The input, as messages name it.
        what: String,
        /// What it is instead (`a FIFO`, `a socket`, `a device`).
        kind: &'static str,
    },
}

/// How messages name a file: its path in backticks.
fn quoted(path: &Path) -> String {
    format!("`{}`", path.display())
}

/// `limit + 1` as a read count, saturating (a limit of `usize::MAX` reads everything).
fn past(limit: usize) -> u64 {
    u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1)
}

/// Reads `reader` to its end or to `limit + 1` bytes, whichever comes first, and never asks it
/// for more: a result longer than `limit` means the input is over the limit (and was not read
/// further). Short reads and interruptions are retried as [`Read::read_to_end`] does.
pub fn read_at_most(reader: impl Read, limit: usize) -> io::Result<Vec<u8>> {
    read_with_hint(reader, limit, 0)
}

/// [`read_at_most`], allocating `hint` bytes up front (a regular file's size) when that is
/// within the limit, so a file is read into one allocation of its own size.
fn read_with_hint(reader: impl Read, limit: usize, hint: u64) -> io::Result<Vec<u8>> {
    let most = past(limit);
    let mut bytes = Vec::new();
    let first = usize::try_from(hint.min(most)).unwrap_or(0);
    bytes
        .try_reserve_exact(first)
        .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e))?;
    reader.take(most).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads all of `reader` if it holds at most `limit.bytes` bytes; `what` names it in errors
/// (`standard input`).
pub fn read(reader: impl Read, what: &str, limit: ByteLimit) -> Result<Vec<u8>, ReadError> {
    let bytes = read_at_most(reader, limit.bytes).map_err(|source| ReadError::Io {
        what: what.to_owned(),
        source,
    })?;
    within(bytes, what, limit)
}

fn within(bytes: Vec<u8>, what: &str, limit: ByteLimit) -> Result<Vec<u8>, ReadError> {
    if bytes.len() > limit.bytes {
        return Err(ReadError::TooLarge {
            what: what.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// Reads the file at `path` (a regular file, a FIFO, `/dev/stdin`: whatever the caller named)
/// if it holds at most `limit.bytes` bytes. A regular file over the limit is refused from its
/// size alone; anything else is read to one byte past the limit at most.
pub fn read_file(path: &Path, limit: ByteLimit) -> Result<Vec<u8>, ReadError> {
    let what = quoted(path);
    let io = |source| ReadError::Io {
        what: what.clone(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let size = if meta.is_file() { meta.len() } else { 0 };
    if u64::try_from(limit.bytes).is_ok_and(|most| size > most) {
        return Err(ReadError::TooLarge { what, limit });
    }
    let bytes = read_with_hint(file, limit.bytes, size).map_err(io)?;
    within(bytes, &what, limit)
}

/// Whether a file found in a directory walk may be opened: only a regular file (a symlink to one
/// included) is; a FIFO, a socket, a device or a dangling link is an error, and is never opened.
pub fn regular_file(path: &Path) -> Result<(), ReadError> {
    let meta = std::fs::metadata(path).map_err(|source| ReadError::Io {
        what: quoted(path),
        source,
    })?;
    if meta.is_file() {
        return Ok(());
    }
    Err(ReadError::NotRegularFile {
        what: quoted(path),
        kind: kind(meta.file_type()),
    })
}

/// Which subdirectories [`files_under`] enters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Descend {
    /// Every one.
    Everywhere,
    /// All but hidden ones (a name starting with `.`) and `target`, cargo's build directory.
    SkipHiddenAndTarget,
}

/// Every file under `dir` that `wanted` accepts, recursively, in name order. Symlinks are
/// followed, and each directory is visited once however they reach it (regression: a link to
/// `.` made the walk loop forever, or find every file again under `loop/loop/...`): under the
/// first of its paths in name order. A directory that cannot be read is skipped. Nothing found
/// is opened: check it with [`regular_file`] first.
pub fn files_under(dir: &Path, descend: Descend, wanted: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    walk(dir, descend, &wanted, &mut found, &mut HashSet::new());
    found
}

/// [`files_under`] from `dir`, skipping the directories in `seen` (canonical paths). Entries are
/// taken in name order, so `found` is in name order (paths compare component by component).
fn walk(
    dir: &Path,
    descend: Descend,
    wanted: &impl Fn(&Path) -> bool,
    found: &mut Vec<PathBuf>,
    seen: &mut HashSet<PathBuf>,
) {
    let Ok(real) = std::fs::canonicalize(dir) else {
        return;
    };
    if !seen.insert(real) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            let name = path.file_name().unwrap_or_default();
            let skipped = descend == Descend::SkipHiddenAndTarget
                && (name.to_string_lossy().starts_with('.') || name == "target");
            if !skipped {
                walk(&path, descend, wanted, found, seen);
            }
        } else if wanted(&path) {
            found.push(path);
        }
    }
}

/// What a file that is not a regular file is, for messages.
fn kind(file_type: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
    }
    if file_type.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// One line from a [`LineReader`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// The line's bytes, without the `\n` that ended it (a `\r` before it is kept).
    Complete(&'a [u8]),
    /// The line was longer than the limit; its bytes were dropped as they were read.
    TooLong,
}

/// Reads lines of at most a byte limit each from a buffered reader, holding at most
/// `limit + 1` bytes of any line.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: R,
    limit: usize,
    line: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of at most `limit` bytes (the `\n` not counted) from `reader`.
    pub fn new(reader: R, limit: usize) -> Self {
        LineReader {
            reader,
            limit,
            line: Vec::new(),
        }
    }

    /// The next line, or `None` at the end of the input. A line longer than the limit is read
    /// to its end without being stored and comes back as [`Line::TooLong`].
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.line.clear();
        let read = (&mut self.reader)
            .take(past(self.limit))
            .read_until(b'\n', &mut self.line)?;
        if read == 0 {
            return Ok(None);
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
            return Ok(Some(Line::Complete(&self.line)));
        }
        if self.line.len() <= self.limit {
            // The last line, without a final `\n`.
            return Ok(Some(Line::Complete(&self.line)));
        }
        self.line.clear();
        self.skip_line()?;
        Ok(Some(Line::TooLong))
    }

    /// Reads up to and including the next `\n` (or the end of the input), keeping nothing.
    fn skip_line(&mut self) -> io::Result<()> {
        loop {
            let buffer = match self.reader.fill_buf() {
                Ok(buffer) => buffer,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buffer.is_empty() {
                return Ok(());
            }
            match buffer.iter().position(|&byte| byte == b'\n') {
                Some(at) => {
                    self.reader.consume(at.saturating_add(1));
                    return Ok(());
                }
                None => {
                    let all = buffer.len();
                    self.reader.consume(all);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A reader over `data` that hands out at most the next chunk size per call (cycling through
    /// `chunks`, a 0 standing for an `Interrupted` error) and counts every byte it gives.
    struct Trickle<'a> {
        data: &'a [u8],
        chunks: Vec<usize>,
        call: usize,
        given: usize,
    }

    impl<'a> Trickle<'a> {
        fn new(data: &'a [u8], chunks: Vec<usize>) -> Self {
            Trickle {
                data,
                chunks,
                call: 0,
                given: 0,
            }
        }
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let chunk = self.chunks[self.call % self.chunks.len()];
            self.call += 1;
            if chunk == 0 {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let n = chunk.min(buf.len()).min(self.data.len() - self.given);
            buf[..n].copy_from_slice(&self.data[self.given..self.given + n]);
            self.given += n;
            Ok(n)
        }
    }

    /// The bytes `0, 1, 2, …` (wrapping), `len` of them, with `\n` nowhere.
    fn data(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i % 251) as u8 + 1)
            .map(|b| if b == b'\n' { b'x' } else { b })
            .collect()
    }

    proptest! {
        /// Whatever the size around the limit and however the reader splits its data, the
        /// bounded read returns exactly the data when it is within the limit, reports it as over
        /// the limit otherwise, and never takes more than `limit + 1` bytes from the reader.
        #[test]
        fn a_bounded_read_returns_the_data_or_refuses_it_never_reading_past_the_limit(
            limit in 0usize..300,
            offset in -3i64..4,
            extra in prop_oneof![Just(0usize), 1usize..5_000],
            chunks in proptest::collection::vec(0usize..70, 1..6)
                .prop_filter("some chunk reads", |c| c.iter().any(|&n| n > 0)),
        ) {
            let len = usize::try_from((limit as i64 + offset).max(0)).unwrap() + extra;
            let data = data(len);
            let mut reader = Trickle::new(&data, chunks);
            let limit = ByteLimit { bytes: limit, name: "max_test_bytes" };
            let result = read(&mut reader, "the input", limit);
            prop_assert!(reader.given <= limit.bytes + 1, "read {} bytes", reader.given);
            if len <= limit.bytes {
                prop_assert_eq!(result.unwrap(), data);
            } else {
                let message = result.unwrap_err().to_string();
                prop_assert_eq!(
                    message,
                    format!(
                        "the input is larger than the {}-byte limit (`Limits::max_test_bytes`)",
                        limit.bytes
                    )
                );
            }
        }

        /// Lines around the limit, over a reader that splits them anywhere: each line within the
        /// limit comes back exactly, each longer one as `TooLong` without its bytes, and the
        /// lines after a long one are read as they were written.
        #[test]
        fn a_line_reader_returns_each_line_or_refuses_it_and_goes_on(
            limit in 0usize..40,
            lengths in proptest::collection::vec(0usize..80, 1..8),
            final_newline in any::<bool>(),
            chunks in proptest::collection::vec(1usize..50, 1..6),
            capacity in 1usize..64,
        ) {
            let lines: Vec<Vec<u8>> = lengths.iter().map(|&n| data(n)).collect();
            let mut text = lines.join(&b'\n');
            if final_newline {
                text.push(b'\n');
            }
            let reader = io::BufReader::with_capacity(capacity, Trickle::new(&text, chunks));
            let mut reader = LineReader::new(reader, limit);
            for (index, expected) in lines.iter().enumerate() {
                let last = index + 1 == lines.len();
                if last && expected.is_empty() && !final_newline {
                    break; // nothing after the last `\n`: no line
                }
                let line = reader.next_line().unwrap();
                if expected.len() <= limit {
                    prop_assert_eq!(line, Some(Line::Complete(expected.as_slice())));
                } else {
                    prop_assert_eq!(line, Some(Line::TooLong));
                }
                prop_assert!(reader.line.capacity() <= 2 * (limit + 1) + 64);
            }
            prop_assert_eq!(reader.next_line().unwrap(), None);
        }
    }

    #[test]
    fn a_regular_file_over_the_limit_is_refused_from_its_size() {
        let dir = std::env::temp_dir().join(format!("capgate-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sparse.cap");
        // A terabyte, sparse: reading it would take minutes and more memory than there is.
        File::create(&path).unwrap().set_len(1 << 40).unwrap();
        let limits = Limits::DEFAULT;
        let error = read_file(&path, ByteLimit::policy_file(&limits)).unwrap_err();
        assert!(matches!(error, ReadError::TooLarge { .. }), "{error}");
        assert!(
            error.to_string().ends_with(
                "is larger than the 4194304-byte limit (`Limits::max_policy_file_bytes`)"
            ),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_at_the_limit_is_read_whole() {
        let dir = std::env::temp_dir().join(format!("capgate-bounded-at-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        std::fs::write(&path, data(100)).unwrap();
        let limit = ByteLimit {
            bytes: 100,
            name: "max_test_bytes",
        };
        assert_eq!(read_file(&path, limit).unwrap(), data(100));
        let limit = ByteLimit {
            bytes: 99,
            name: "max_test_bytes",
        };
        assert!(matches!(
            read_file(&path, limit),
            Err(ReadError::TooLarge { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_walk_visits_each_directory_once_in_name_order_and_may_skip_hidden_and_target() {
        let dir = std::env::temp_dir().join(format!("capgate-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["b", "b/c", ".hidden", "target"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for file in [
            "a.cap",
            "b/c/d.cap",
            "b.cap",
            "b/e.txt",
            ".hidden/h.cap",
            "target/t.cap",
        ] {
            std::fs::write(dir.join(file), "").unwrap();
        }
        // Two links back to the top, which would loop without the visit-once rule, and one to
        // `b/c` whose name comes first: the directory is walked under that name only.
        std::os::unix::fs::symlink(".", dir.join("loop")).unwrap();
        std::os::unix::fs::symlink("..", dir.join("b/up")).unwrap();
        std::os::unix::fs::symlink("b/c", dir.join("a-link")).unwrap();
        let cap = |path: &Path| path.extension().is_some_and(|e| e == "cap");
        let names = |descend| -> Vec<String> {
            files_under(&dir, descend, cap)
                .iter()
                .map(|path| path.strip_prefix(&dir).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            names(Descend::Everywhere),
            [
                ".hidden/h.cap",
                "a-link/d.cap",
                "a.cap",
                "b.cap",
                "target/t.cap"
            ]
        );
        assert_eq!(
            names(Descend::SkipHiddenAndTarget),
            ["a-link/d.cap", "a.cap", "b.cap"]
        );
        assert!(files_under(&dir.join("missing"), Descend::Everywhere, cap).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

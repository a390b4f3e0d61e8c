//! Source files and spans.
//!
//! A [`Span`] is a byte range inside one [`SourceFile`], named by a [`FileId`]. Every AST node
//! carries a span so that compile errors and deny reasons can point at `file:line:column`. A
//! [`SourceMap`] owns the loaded files and turns a span into a human [`Location`].

use std::fmt;
use std::sync::Arc;

/// Index of a file inside a [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range `[start, end)` inside one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// The file the range belongs to.
    pub file: FileId,
    /// First byte of the range.
    pub start: u32,
    /// One past the last byte of the range.
    pub end: u32,
}

impl Span {
    /// A span from byte offsets; offsets beyond `u32::MAX` saturate (files are limited to 4 MiB).
    pub fn new(file: FileId, start: usize, end: usize) -> Self {
        Span {
            file,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }

    /// The smallest span covering both `self` and `other` (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// Byte offset of the start, for indexing into the file text.
    pub fn start_usize(self) -> usize {
        crate::convert::usize_from(self.start)
    }

    /// Length in bytes.
    pub fn len(self) -> usize {
        usize::try_from(self.end.saturating_sub(self.start)).unwrap_or(0)
    }

    /// True when the span covers no bytes.
    pub fn is_empty(self) -> bool {
        self.end <= self.start
    }
}

/// A 1-based line and column (in characters) inside a named file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The file name as given when it was loaded.
    pub file: Arc<str>,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in Unicode scalar values.
    pub column: u32,
}

impl Location {
    /// `file:line:column`, as [`fmt::Display`] prints it, in one allocation: every deny reason
    /// carries its check's location, and `to_string` cost ~5x as much.
    pub fn to_text(&self) -> String {
        let (mut line, mut column) = (itoa::Buffer::new(), itoa::Buffer::new());
        let (line, column) = (line.format(self.line), column.format(self.column));
        let mut text = String::with_capacity(self.file.len() + line.len() + column.len() + 2);
        text.push_str(&self.file);
        text.push(':');
        text.push_str(line);
        text.push(':');
        text.push_str(column);
        text
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One loaded source file.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The name used in messages, usually the path as given on the command line.
    pub name: Arc<str>,
    /// The whole text.
    pub text: Arc<str>,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// Wraps a file's text, indexing its line starts.
    pub fn new(name: impl Into<Arc<str>>, text: impl Into<Arc<str>>) -> Self {
        let text: Arc<str> = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// Line and column of a byte offset (clamped to the text).
    pub fn line_col(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1) - 1;
        let line_start = self.line_starts.get(line).copied().unwrap_or(0);
        let column = self
            .text
            .get(line_start..offset)
            .map_or(offset - line_start, |s| s.chars().count());
        (to_u32(line + 1), to_u32(column + 1))
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The set of files a policy was loaded from.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<Arc<str>>, text: impl Into<Arc<str>>) -> FileId {
        let id = FileId(to_u32(self.files.len()));
        self.files.push(SourceFile::new(name, text));
        id
    }

    /// The file behind an id, if it was loaded into this map.
    pub fn file(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(usize::try_from(id.0).ok()?)
    }

    /// The `file:line:column` of a span's start.
    pub fn location(&self, span: Span) -> Location {
        match self.file(span.file) {
            Some(file) => {
                let (line, column) = file.line_col(span.start_usize());
                Location {
                    file: file.name.clone(),
                    line,
                    column,
                }
            }
            None => Location {
                file: Arc::from("<unknown>"),
                line: 0,
                column: 0,
            },
        }
    }

    /// All loaded files in load order.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_characters() {
        let mut map = SourceMap::new();
        let id = map.add("a.cap", "ab\nçd e\n");
        let loc = map.location(Span::new(id, 6, 7));
        assert_eq!((loc.line, loc.column), (2, 3));
        assert_eq!(loc.to_string(), "a.cap:2:3");
        assert_eq!(loc.to_text(), "a.cap:2:3");
        let first = map.location(Span::new(id, 0, 1));
        assert_eq!((first.line, first.column), (1, 1));
    }

    #[test]
    fn to_text_is_what_display_prints() {
        for (file, line, column) in [("", 0, 0), ("p/ç.cap", 1, 9), ("a:b", u32::MAX, 10)] {
            let location = Location {
                file: Arc::from(file),
                line,
                column,
            };
            assert_eq!(location.to_text(), location.to_string());
        }
    }
}

//! Loading policies: files and directories → parsed, schema files resolved → compiled skills.
//!
//! A policy set is loaded whole or not at all: every error of every file is collected into one
//! [`LoadError`], each with `file:line:column` and a help line.

use std::path::{Path, PathBuf};

use crate::bounded::{ByteLimit, Descend, ReadError};
use crate::bytecode::program::CompiledSkill;
use crate::limits::Limits;
use crate::span::{FileId, Location, SourceMap, Span};
use crate::syntax::ast::{Constraint, ConstraintKind, PolicyFile, SchemaSource, Spanned};

/// One problem found while loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where.
    pub location: Location,
    /// The span, for snippets.
    pub span: Span,
    /// One line, lowercase.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: error: {}", self.location, self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// A policy set that could not be loaded, with every problem found.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic)]
#[error("{}", render(.diagnostics))]
pub struct LoadError {
    /// Every problem, in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// The files read, for rendering snippets.
    pub sources: SourceMap,
}

fn render(diagnostics: &[Diagnostic]) -> String {
    let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

/// A parsed and compiled policy set.
#[derive(Debug, Clone)]
pub struct PolicySet {
    /// The compiled skills.
    pub skills: Vec<CompiledSkill>,
    /// The files they came from.
    pub sources: SourceMap,
}

/// The two policy languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyFormat {
    /// `.cap`
    Cap,
    /// A JSON manifest.
    Json,
}

/// Collects policy files from paths and builds a policy set.
#[derive(Debug, Default)]
pub struct PolicyLoader {
    sources: SourceMap,
    files: Vec<(PolicyFile, Option<PathBuf>)>,
    /// Files a front end read only in part, with the spans of the errors it reported; they are
    /// compiled for their errors only (`compile::check_partial`).
    partial: Vec<(PolicyFile, Vec<Span>)>,
    diagnostics: Vec<Diagnostic>,
    limits: Limits,
    /// Skills loaded from `.capc` files, with the file each came from.
    compiled: Vec<(FileId, CompiledSkill)>,
}

impl PolicyLoader {
    /// A loader with the given limits.
    /// Limits with a field above its fixed bound make [`PolicyLoader::finish`] fail, naming it.
    pub fn new(limits: Limits) -> Self {
        let mut loader = PolicyLoader {
            limits,
            ..Self::default()
        };
        if let Err(error) = limits.check() {
            loader.file_error("Limits", error.to_string());
        }
        loader
    }

    fn diagnostic(&mut self, span: Span, message: String, help: Option<String>) {
        self.diagnostics.push(Diagnostic {
            location: self.sources.location(span),
            span,
            message,
            help,
        });
    }

    fn file_error(&mut self, name: &str, message: String) {
        let id = self.sources.add(name, "");
        self.diagnostic(Span::new(id, 0, 0), message, None);
    }

    /// Adds a file or, for a directory, every `.cap` file and every `.json` manifest within
    /// (recursively, in name order). Inside directories a `.json` file that is valid JSON is a
    /// manifest only when its top level is an object with a `skill` member; other JSON files
    /// (schemas, data) are skipped, and one that is not JSON is loaded so its error is reported.
    /// A `.cap` or `.json` entry that is not a regular file (a FIFO, a socket, a device, or a
    /// symlink to one) is an error and is never opened. Named files are always loaded, and read
    /// no further than one byte past [`Limits::max_policy_file_bytes`].
    pub fn add_path(&mut self, path: &Path) {
        if let Err(e) = std::fs::metadata(path) {
            let name = path.display().to_string();
            self.file_error(&name, format!("cannot read `{name}`: {e}"));
            return;
        }
        if path.is_dir() {
            let found = crate::bounded::files_under(path, Descend::Everywhere, |file| {
                file.extension().is_some_and(|e| e == "cap" || e == "json")
            });
            for file in found {
                // Opening a FIFO blocks and a device may never end: refused unopened, and an
                // error rather than a silent skip, so no skill is left out unnoticed.
                if let Err(e) = crate::bounded::regular_file(&file) {
                    self.file_error(&file.display().to_string(), e.to_string());
                    continue;
                }
                let is_json = file.extension().is_some_and(|e| e == "json");
                if is_json && !looks_like_manifest(&file, &self.limits) {
                    continue;
                }
                self.add_file(&file);
            }
        } else {
            self.add_file(path);
        }
    }

    fn add_file(&mut self, path: &Path) {
        let name = path.display().to_string();
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("cap") => PolicyFormat::Cap,
            Some("json") => PolicyFormat::Json,
            Some("capc") => return self.add_compiled_file(&name, path),
            _ => {
                self.file_error(
                    &name,
                    format!(
                        "`{name}` is neither a `.cap` file, a `.json` manifest nor a `.capc` file"
                    ),
                );
                return;
            }
        };
        match crate::bounded::read_file(path, ByteLimit::policy_file(&self.limits)) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => self.add_text(&name, text, format, Some(path.to_path_buf())),
                Err(e) => self.file_error(
                    &name,
                    format!(
                        "`{name}` is not UTF-8 (invalid byte at offset {})",
                        e.utf8_error().valid_up_to()
                    ),
                ),
            },
            Err(e) => self.file_error(&name, e.to_string()),
        }
    }

    /// Adds a compiled `.capc` file (see [`crate::compile::load_capc`]): its skills join the set
    /// as compiled, after the verifier has checked every program and each skill has been
    /// checked against its embedded manifest. Directories never contribute `.capc` files, so a
    /// compiled file next to its sources is not loaded twice.
    fn add_compiled_file(&mut self, name: &str, path: &Path) {
        let bytes = match crate::bounded::read_file(path, ByteLimit::policy_file(&self.limits)) {
            Ok(bytes) => bytes,
            Err(e) => return self.file_error(name, e.to_string()),
        };
        let id = self.sources.add(name, "");
        match crate::compile::load_capc(&bytes, &self.limits) {
            Ok(policy) => self
                .compiled
                .extend(policy.skills.into_iter().map(|skill| (id, skill))),
            Err(e) => self.diagnostic(
                Span::new(id, 0, 0),
                format!("`{name}`: {e}"),
                Some("recompile it with `capgate compile -p POLICY... -o FILE.capc`".to_owned()),
            ),
        }
    }

    /// Adds policy text under a name; `path` (if any) is where relative schema files resolve.
    pub fn add_text(
        &mut self,
        name: &str,
        text: String,
        format: PolicyFormat,
        path: Option<PathBuf>,
    ) {
        if text.len() > self.limits.max_policy_file_bytes {
            let error = ReadError::TooLarge {
                what: format!("`{name}`"),
                limit: ByteLimit::policy_file(&self.limits),
            };
            self.file_error(name, error.to_string());
            return;
        }
        let id: FileId = self.sources.add(name, text.as_str());
        // Each front end returns what it could read with its errors, so that the compiler checks
        // the well-formed parts too and one pass lists every error (SPEC §7).
        let (parsed, errors) = match format {
            PolicyFormat::Cap => {
                let (parsed, errors) = crate::syntax::parse_partial(id, &text);
                let errors: Vec<_> = errors
                    .into_iter()
                    .map(|e| (e.span, e.message, e.help))
                    .collect();
                (parsed, errors)
            }
            PolicyFormat::Json => {
                let (parsed, errors) = crate::manifest::parse_manifest_partial(id, &text);
                let errors: Vec<_> = errors
                    .into_iter()
                    .map(|e| (e.span, e.message, e.help))
                    .collect();
                (parsed, errors)
            }
        };
        let reported: Vec<Span> = errors.iter().map(|(span, _, _)| *span).collect();
        for (span, message, help) in errors {
            self.diagnostic(span, message, help);
        }
        let Some(mut file) = parsed else {
            return;
        };
        let base = path
            .as_ref()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        for skill in &mut file.skills {
            for capability in &mut skill.capabilities {
                for constraint in &mut capability.constraints {
                    self.resolve_schema_files(constraint, base.as_deref());
                }
            }
        }
        if reported.is_empty() {
            self.files.push((file, path));
        } else {
            self.partial.push((file, reported));
        }
    }

    fn resolve_schema_files(&mut self, constraint: &mut Constraint, base: Option<&Path>) {
        match &mut constraint.kind {
            ConstraintKind::PayloadSchema(source) => {
                let SchemaSource::File(file) = source else {
                    return;
                };
                let span = file.span;
                let path = match base {
                    Some(base) => base.join(&file.node),
                    None => PathBuf::from(&file.node),
                };
                let read = crate::bounded::read_file(&path, ByteLimit::policy_file(&self.limits));
                let text = match read.map(String::from_utf8) {
                    Ok(Ok(text)) => text,
                    Ok(Err(e)) => {
                        let message = format!(
                            "schema file `{}` is not UTF-8 (invalid byte at offset {})",
                            path.display(),
                            e.utf8_error().valid_up_to()
                        );
                        self.diagnostic(span, message, None);
                        return;
                    }
                    Err(e) => {
                        let message = match e {
                            ReadError::Io { source, .. } => {
                                format!("cannot read schema file `{}`: {source}", path.display())
                            }
                            other => format!("schema file {other}"),
                        };
                        self.diagnostic(
                            span,
                            message,
                            Some("the path is relative to the policy file".to_owned()),
                        );
                        return;
                    }
                };
                match crate::engine::request::parse_strict_json(&text) {
                    Ok(value) => *source = SchemaSource::Inline(Spanned::new(value, span)),
                    Err(e) => {
                        let message =
                            format!("schema file `{}` is not valid JSON: {e}", path.display());
                        self.diagnostic(span, message, None);
                    }
                }
            }
            ConstraintKind::Any(items) | ConstraintKind::All(items) => {
                for item in items {
                    self.resolve_schema_files(item, base);
                }
            }
            ConstraintKind::Not(inner) => self.resolve_schema_files(inner, base),
            _ => {}
        }
    }

    /// Adds every path and compiles: the one-call form of `add_path` + `finish`.
    pub fn finish_paths(mut self, paths: &[&Path]) -> Result<PolicySet, LoadError> {
        for path in paths {
            self.add_path(path);
        }
        self.finish()
    }

    /// Compiles everything added; fails with every problem found.
    pub fn finish(mut self) -> Result<PolicySet, LoadError> {
        let files: Vec<PolicyFile> = self.files.iter().map(|(f, _)| f.clone()).collect();
        if self.diagnostics.is_empty() && files.iter().all(|f| f.skills.is_empty()) {
            // Nothing to load is an error: an empty policy would deny everything silently.
            if files.is_empty() && self.compiled.is_empty() {
                self.file_error("<policies>", "no policy files found".to_owned());
            }
        }
        for e in crate::compile::check_partial(&self.partial, &self.sources, &self.limits) {
            self.diagnostic(e.span, e.message, e.help);
        }
        let compiled = crate::compile::compile_skills(&files, &self.sources, &self.limits);
        let compiled = compiled.map(|skills| self.join_compiled(skills));
        match compiled {
            Ok(skills) if self.diagnostics.is_empty() => Ok(PolicySet {
                skills,
                sources: self.sources,
            }),
            Ok(_) => Err(LoadError {
                diagnostics: self.diagnostics,
                sources: self.sources,
            }),
            Err(errors) => {
                for e in errors {
                    self.diagnostic(e.span, e.message, e.help);
                }
                Err(LoadError {
                    diagnostics: self.diagnostics,
                    sources: self.sources,
                })
            }
        }
    }
}

impl PolicyLoader {
    /// Appends the skills of `.capc` files to those compiled from sources; a skill name seen
    /// twice (in either form) is an error, as it is between source files.
    fn join_compiled(&mut self, mut skills: Vec<CompiledSkill>) -> Vec<CompiledSkill> {
        for (file, skill) in std::mem::take(&mut self.compiled) {
            if skills.iter().any(|s| s.name == skill.name) {
                let message = format!("skill `{}` is declared twice", skill.name);
                self.diagnostic(Span::new(file, 0, 0), message, None);
            } else {
                skills.push(skill);
            }
        }
        skills
    }
}

impl From<crate::bytecode::decode::CapcContents> for PolicySet {
    /// A policy loaded from a `.capc` file; the source map names the files the skills were
    /// compiled from (their text is not stored, so it is empty).
    fn from(policy: crate::bytecode::decode::CapcContents) -> Self {
        let mut sources = SourceMap::new();
        for file in policy.source_files {
            sources.add(file, "");
        }
        PolicySet {
            skills: policy.skills,
            sources,
        }
    }
}

/// Whether a `.json` file found in a directory is loaded as a manifest: when its top level is an
/// object with a `skill` member, and also when it cannot be read or is not JSON at all, so that a
/// broken manifest is reported with its position instead of skipped (regression: a syntax error
/// made a manifest "not a manifest", and the set loaded without its skill). A file over the
/// policy size limit is loaded too, so the limit is what is reported.
fn looks_like_manifest(path: &Path, limits: &Limits) -> bool {
    crate::bounded::read_file(path, ByteLimit::policy_file(limits))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_none_or(|value| value.get("skill").is_some())
}

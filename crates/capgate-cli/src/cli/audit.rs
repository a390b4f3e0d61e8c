//! `--audit FILE` for `check` and `replay`: open the file for appending, and after the run say
//! whether every record reached it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capgate::JsonLinesAudit;

use super::EXIT_INPUT;

/// The audit sink of a run and the file it writes, kept so its failures can be read at the end.
pub struct AuditFile {
    sink: Arc<JsonLinesAudit<File>>,
    path: PathBuf,
}

impl AuditFile {
    /// Opens `path` for appending (creating it), or prints why not and gives the exit code.
    ///
    /// No `BufWriter`: the sink hands each record to the file in one `write_all`. A file that
    /// ends mid-line (an earlier run's write failed part-way) gets a newline first, so this run's
    /// records are whole lines of their own.
    pub fn open(path: &Path) -> Result<AuditFile, u8> {
        let opened = File::options()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| {
                if ends_mid_line(path) {
                    file.write_all(b"\n")?;
                }
                Ok(file)
            });
        match opened {
            Ok(file) => Ok(AuditFile {
                sink: JsonLinesAudit::new(file),
                path: path.to_owned(),
            }),
            Err(e) => {
                eprintln!("error: cannot open audit file `{}`: {e}", path.display());
                Err(EXIT_INPUT)
            }
        }
    }

    /// The sink, for the engine.
    pub fn sink(&self) -> Arc<JsonLinesAudit<File>> {
        self.sink.clone()
    }

    /// Prints an error if some records could not be written; `Err(EXIT_INPUT)` then, so a run
    /// whose audit trail is incomplete never exits as a success or an allow.
    pub fn check_written(&self) -> Result<(), u8> {
        match self.sink.write_failures() {
            None => Ok(()),
            Some(failures) => {
                eprintln!(
                    "error: {} audit record(s) could not be written to `{}`: {}",
                    failures.records,
                    self.path.display(),
                    failures.first_error
                );
                Err(EXIT_INPUT)
            }
        }
    }
}

/// Whether the file at `path` is non-empty and its last byte is not a newline. A file that
/// cannot be read (write-only permissions, a device) is taken as ending a line: appending needs
/// no read access, and this check must not add that requirement.
fn ends_mid_line(path: &Path) -> bool {
    let last_byte = || -> std::io::Result<Option<u8>> {
        let mut file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(None);
        }
        file.seek(SeekFrom::End(-1))?;
        let mut last = [0u8; 1];
        file.read_exact(&mut last)?;
        Ok(Some(last[0]))
    };
    matches!(last_byte(), Ok(Some(byte)) if byte != b'\n')
}

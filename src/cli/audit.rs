//! `--audit FILE` for `check` and `replay`: open the file for appending, and after the run say
//! whether every record reached it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use capgate::JsonLinesAudit;

use super::EXIT_INPUT;

/// The audit sink of a run, kept so its failures can be read at the end.
pub type AuditFile = Arc<JsonLinesAudit<File>>;

/// Opens `path` for appending (creating it), or prints why not and gives the exit code.
///
/// No `BufWriter`: the sink hands each record to the file in one `write_all`. A file that does
/// not end with a newline (an earlier run's write failed part-way) gets one first, so this run's
/// records are whole lines of their own.
pub fn open(path: &Path) -> Result<AuditFile, u8> {
    let opened = File::options()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .and_then(|mut file| {
            if !ends_with_newline(&mut file)? {
                file.write_all(b"\n")?;
            }
            Ok(file)
        });
    match opened {
        Ok(file) => Ok(JsonLinesAudit::new(file)),
        Err(e) => {
            eprintln!("error: cannot open audit file `{}`: {e}", path.display());
            Err(EXIT_INPUT)
        }
    }
}

/// Whether `file` is empty or its last byte is a newline.
fn ends_with_newline(file: &mut File) -> std::io::Result<bool> {
    if file.metadata()?.len() == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last == *b"\n")
}

/// Prints an error if some records could not be written; `Err(EXIT_INPUT)` then, so a run whose
/// audit trail is incomplete never exits as a success or an allow.
pub fn check_written(audit: &AuditFile, path: &Path) -> Result<(), u8> {
    match audit.write_failures() {
        None => Ok(()),
        Some(failures) => {
            eprintln!(
                "error: {} audit record(s) could not be written to `{}`: {}",
                failures.records,
                path.display(),
                failures.first_error
            );
            Err(EXIT_INPUT)
        }
    }
}

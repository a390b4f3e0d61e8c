//! `--audit FILE` for `check` and `replay`: open the file for appending, and after the run say
//! whether every record reached it.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use capgate::JsonLinesAudit;

use super::EXIT_INPUT;

/// The audit sink of a run, kept so its failures can be read at the end.
pub type AuditFile = Arc<JsonLinesAudit<File>>;

/// Opens `path` for appending (creating it), or prints why not and gives the exit code.
///
/// No `BufWriter`: the sink hands each record to the file in one `write_all`.
pub fn open(path: &Path) -> Result<AuditFile, u8> {
    match File::options().create(true).append(true).open(path) {
        Ok(file) => Ok(JsonLinesAudit::new(file)),
        Err(e) => {
            eprintln!("error: cannot open audit file `{}`: {e}", path.display());
            Err(EXIT_INPUT)
        }
    }
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

//! `capgate compile`: write policies as a `.capc` file that gateways load without the compiler.

use std::path::PathBuf;

use clap::Args;

use capgate::Limits;
use capgate::compiled::{CAPC_MAGIC as MAGIC, encode_capc, load_capc};

use super::{EXIT_INPUT, EXIT_OK, load_policies};

/// Arguments of `capgate compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// Policy files (.cap, .json, .capc) or directories.
    #[arg(short = 'p', long = "policy", required = true, num_args = 1..)]
    policies: Vec<PathBuf>,
    /// The `.capc` file to write.
    #[arg(short = 'o', long = "output", required = true)]
    output: PathBuf,
}

/// Runs `capgate compile`: exit 0 when the file was written, 2 when the policies do not load
/// or the file cannot be written.
pub fn run(args: CompileArgs) -> u8 {
    let policy = match load_policies(&args.policies, Limits::DEFAULT) {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    // Never write over a file that is not a `.capc` (a schema file the policy reads was not in
    // the list below: regression), nor over a file the policy was read from (regression:
    // `-p s.cap -o s.cap` replaced the source, comments and all, with bytecode).
    // Only a regular file with content is looked into (opening a FIFO would block; an empty
    // file is a placeholder, as `mktemp` makes).
    let occupied = std::fs::metadata(&args.output).is_ok_and(|m| m.is_file() && m.len() > 0);
    if occupied {
        let mut head = [0u8; MAGIC.len()];
        let is_capc = std::fs::File::open(&args.output)
            .and_then(|mut existing| std::io::Read::read_exact(&mut existing, &mut head))
            .is_ok()
            && head == MAGIC;
        if !is_capc {
            eprintln!(
                "error: `{}` exists and is not a `.capc` file; remove it or write elsewhere",
                args.output.display()
            );
            return EXIT_INPUT;
        }
    }
    if let Ok(output) = std::fs::canonicalize(&args.output) {
        let read_from = policy
            .sources
            .files()
            .iter()
            .filter_map(|file| std::fs::canonicalize(&*file.name).ok())
            .any(|source| source == output);
        if read_from {
            eprintln!(
                "error: `{}` is one of the policy files read; write the `.capc` elsewhere",
                args.output.display()
            );
            return EXIT_INPUT;
        }
    }
    let bytes = match encode_capc(&policy.skills) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INPUT;
        }
    };
    // A file that would not load is not written. Loading compiles each skill's embedded manifest
    // again and compares; a difference is a compiler bug, better reported here than when a
    // gateway starts.
    if let Err(e) = load_capc(&bytes, &Limits::DEFAULT) {
        eprintln!("error: internal error: the compiled file would not load: {e}");
        return EXIT_INPUT;
    }
    // Write beside the target and rename, so a gateway never reads a half-written file.
    let mut partial = args.output.clone().into_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let written =
        std::fs::write(&partial, &bytes).and_then(|()| std::fs::rename(&partial, &args.output));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        eprintln!("error: cannot write `{}`: {e}", args.output.display());
        return EXIT_INPUT;
    }
    eprintln!(
        "wrote {} ({} skills, {} bytes)",
        args.output.display(),
        policy.skills.len(),
        bytes.len()
    );
    EXIT_OK
}

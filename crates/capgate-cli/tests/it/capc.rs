//! The `.capc` compiled-policy file: round trips, decisions equal to the sources', header and
//! checksum rejection, the verifier at load, each skill checked against its embedded manifest
//! (revision and bytecode), the loader and CLI wiring, and properties over random and mutated
//! bytes: never a panic, and never a policy that decides otherwise than the original.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};

use capgate::bytecode::decode::CapcError;
use capgate::bytecode::disasm::{disassemble, required_checks};
use capgate::bytecode::encode::{FORMAT_VERSION, MAGIC, encode_capc, fnv1a64};
use capgate::bytecode::index::{CheckIdx, Index};
use capgate::bytecode::op::Op;
use capgate::bytecode::program::{CheckInfo, CompiledSkill, Program};
use capgate::bytecode::verify::{VerifyReason, verify};
use capgate::compile::load_capc;
use capgate::{
    ConstraintKeyword, Limits, PolicyFormat, PolicyLoader, PolicySet, Revision, Session,
    SessionOptions,
};
use proptest::prelude::*;

fn policies_dir() -> PathBuf {
    Path::new(crate::common::REPO).join("policies")
}

fn load_sources() -> PolicySet {
    PolicyLoader::new(Limits::DEFAULT)
        .finish_paths(&[&policies_dir()])
        .unwrap_or_else(|e| panic!("policies/ does not load:\n{e}"))
}

fn policies_capc() -> Vec<u8> {
    encode_capc(&load_sources().skills).unwrap()
}

fn load_bytes(bytes: &[u8]) -> Result<PolicySet, CapcError> {
    load_capc(bytes, &Limits::DEFAULT).map(PolicySet::from)
}

fn policy_text(skill: &str, body: &str) -> PolicySet {
    let text = format!("skill \"{skill}\" {{\n  version \"1.0.0\"\n{body}\n}}\n");
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text(&format!("{skill}.cap"), text, PolicyFormat::Cap, None);
    loader.finish().unwrap_or_else(|e| panic!("{e}"))
}

/// Offset of the body: magic, version, crate-version length and text, body length, checksum.
fn body_offset(bytes: &[u8]) -> usize {
    let version_len = usize::from(bytes[MAGIC.len() + 2]);
    MAGIC.len() + 2 + 1 + version_len + 8 + 8
}

/// Rewrites the header's length and checksum to match the body, so a mutation reaches the decoder.
fn reseal(bytes: &mut [u8]) {
    let offset = body_offset(bytes);
    if bytes.len() < offset {
        return;
    }
    let body_len = (bytes.len() - offset) as u64;
    let checksum = fnv1a64(&bytes[offset..]);
    bytes[offset - 16..offset - 8].copy_from_slice(&body_len.to_le_bytes());
    bytes[offset - 8..offset].copy_from_slice(&checksum.to_le_bytes());
}

fn disassembly(skills: &[CompiledSkill]) -> Vec<String> {
    skills
        .iter()
        .flat_map(|s| s.capabilities.iter())
        .map(|c| disassemble(c.program().program()))
        .collect()
}

fn session_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(policies_dir()).unwrap().flatten() {
        if entry.path().is_dir() {
            for file in std::fs::read_dir(entry.path()).unwrap().flatten() {
                if file.path().to_string_lossy().ends_with(".session.jsonl") {
                    out.push(file.path());
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_session_decides_the_same_from_capc_as_from_source() {
    let bytes = policies_capc();
    let sessions = session_files();
    assert!(sessions.len() >= 6, "expected the bundled sessions");
    for path in sessions {
        let text = std::fs::read_to_string(&path).unwrap();
        let from_source = Session::new(load_sources(), SessionOptions::default())
            .unwrap()
            .run_text(&text);
        let from_capc = Session::new(load_bytes(&bytes).unwrap(), SessionOptions::default())
            .unwrap()
            .run_text(&text);
        assert_eq!(from_source.len(), from_capc.len(), "{}", path.display());
        for (a, b) in from_source.iter().zip(&from_capc) {
            assert_eq!(a, b, "{}", path.display());
        }
    }
}

#[test]
fn every_check_of_the_policies_is_self_contained_compiled_or_decoded() {
    // A deny explains its failing check by running that check alone, which the verifier allows
    // only for self-contained checks (others are traced from the start of the program).
    let decoded = load_bytes(&policies_capc()).unwrap();
    let mut checks = 0;
    for policy in [load_sources(), decoded] {
        for skill in &policy.skills {
            for capability in &skill.capabilities {
                for i in 0..capability.program().checks.len() {
                    checks += 1;
                    assert!(
                        capability
                            .program()
                            .self_contained(CheckIdx::from_usize(i).unwrap()),
                        "{} / {}: check {i}",
                        skill.name,
                        capability.name
                    );
                }
            }
        }
    }
    assert!(checks > 20, "{checks} checks");
}

#[test]
fn encoding_a_decoded_file_gives_the_same_bytes() {
    let bytes = policies_capc();
    let decoded = load_capc(&bytes, &Limits::DEFAULT).unwrap();
    assert_eq!(encode_capc(&decoded.skills).unwrap(), bytes);
}

#[test]
fn decoded_skills_keep_identity_gating_and_programs() {
    let source = load_sources();
    let decoded = load_capc(&policies_capc(), &Limits::DEFAULT).unwrap();
    assert_eq!(decoded.written_by, env!("CARGO_PKG_VERSION"));
    assert_eq!(source.skills.len(), decoded.skills.len());
    for (a, b) in source.skills.iter().zip(&decoded.skills) {
        assert_eq!(
            (
                &a.name,
                &a.version,
                &a.hash,
                &a.signer,
                &a.location,
                a.revision,
                &a.manifest
            ),
            (
                &b.name,
                &b.version,
                &b.hash,
                &b.signer,
                &b.location,
                b.revision,
                &b.manifest
            )
        );
        for (x, y) in a.capabilities.iter().zip(&b.capabilities) {
            assert_eq!(x.name, y.name);
            assert_eq!(x.location, y.location);
            assert_eq!(x.resource(), y.resource());
            assert_eq!(x.operations, y.operations);
            assert_eq!(x.lifetime, y.lifetime);
            assert_eq!(x.required_autonomy, y.required_autonomy);
            assert_eq!(x.sensitivity, y.sensitivity);
            assert_eq!(x.justification, y.justification);
            assert_eq!(x.rate_limits(), y.rate_limits());
            assert_eq!(x.program().code, y.program().code);
            assert_eq!(x.program().debug, y.program().debug);
            assert_eq!(x.program().consts, y.program().consts);
            assert_eq!(x.program().paths, y.program().paths);
            assert_eq!(x.program().windows, y.program().windows);
            assert_eq!(x.program().bounds, y.program().bounds);
            assert_eq!(x.program().checks, y.program().checks);
            assert_eq!(x.program().max_stack(), y.program().max_stack());
            // Derived from the verified code: a decoded program gets the compiled one's plan,
            // flat schemas and all.
            assert_eq!(x.program().plan(), y.program().plan());
            assert!(
                x.program().plan().is_some(),
                "every compiled program has a plan"
            );
        }
    }
    assert_eq!(disassembly(&source.skills), disassembly(&decoded.skills));
}

#[test]
fn json_numbers_keep_their_integer_or_float_form() {
    let policy = policy_text(
        "numbers",
        r#"capability "c" {
    resource http "https://api.example.com/x"
    operations GET
    fieldEquals payload.a == 1
    fieldEquals payload.b == -1
    fieldEquals payload.c == 1.0
    fieldEquals payload.d in [18446744073709551615, 0.1, "1", null, true, {"k": [1, 2.5]}]
  }"#,
    );
    let decoded = load_capc(&encode_capc(&policy.skills).unwrap(), &Limits::DEFAULT).unwrap();
    let (a, b) = (
        &policy.skills[0].capabilities[0].program(),
        &decoded.skills[0].capabilities[0].program(),
    );
    assert_eq!(a.consts, b.consts);
    assert_eq!(a.sets, b.sets);
    assert!(b.consts.iter().any(|v| v.is_f64()));
}

#[test]
fn a_file_without_the_magic_bytes_is_not_capc() {
    assert_eq!(load_bytes(b"").unwrap_err(), CapcError::BadMagic);
    assert_eq!(
        load_bytes(b"skill \"x\" {}").unwrap_err(),
        CapcError::BadMagic
    );
    let mut bytes = policies_capc();
    bytes[1] = b'X';
    assert_eq!(load_bytes(&bytes).unwrap_err(), CapcError::BadMagic);
}

#[test]
fn another_format_version_is_rejected_before_the_body_is_read() {
    let mut bytes = policies_capc();
    let next = FORMAT_VERSION + 1;
    bytes[MAGIC.len()..MAGIC.len() + 2].copy_from_slice(&next.to_le_bytes());
    assert_eq!(
        load_bytes(&bytes).unwrap_err(),
        CapcError::UnsupportedVersion {
            found: next,
            supported: FORMAT_VERSION
        }
    );
}

#[test]
fn a_flipped_body_byte_fails_the_checksum() {
    let mut bytes = policies_capc();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    assert!(matches!(
        load_bytes(&bytes).unwrap_err(),
        CapcError::ChecksumMismatch { .. }
    ));
}

#[test]
fn a_truncated_or_extended_file_fails_the_body_length() {
    let bytes = policies_capc();
    let short = &bytes[..bytes.len() - 1];
    assert!(matches!(
        load_bytes(short).unwrap_err(),
        CapcError::BodyLength { .. }
    ));
    let mut long = bytes.clone();
    long.push(0);
    assert!(matches!(
        load_bytes(&long).unwrap_err(),
        CapcError::BodyLength { .. }
    ));
    // A header cut inside its own fields is truncated, not a panic.
    for cut in 0..body_offset(&bytes) {
        assert!(load_bytes(&bytes[..cut]).is_err());
    }
}

#[test]
fn trailing_body_bytes_after_the_last_skill_are_malformed() {
    let mut bytes = policies_capc();
    bytes.push(0);
    reseal(&mut bytes);
    assert!(matches!(
        load_bytes(&bytes).unwrap_err(),
        CapcError::Malformed { .. }
    ));
}

/// A one-capability skill with no constraints compiles to `accept` alone; the test finds that
/// instruction in the body (code count 1, opcode 0x0f, then a debug table of 1).
fn accept_only() -> (Vec<u8>, usize) {
    let policy = policy_text(
        "open",
        "capability \"c\" {\n    resource http \"https://api.example.com/x\"\n    operations GET\n  }",
    );
    let bytes = encode_capc(&policy.skills).unwrap();
    let needle = [1, 0, 0, 0, 0x0f, 1, 0, 0, 0];
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the accept-only program")
        + 4;
    (bytes, at)
}

#[test]
fn a_program_the_verifier_rejects_is_not_loaded() {
    let (mut bytes, at) = accept_only();
    assert!(load_bytes(&bytes).is_ok());
    bytes[at] = 0x0b; // `not` on an empty stack
    reseal(&mut bytes);
    match load_bytes(&bytes).unwrap_err() {
        CapcError::Verify {
            skill,
            capability,
            error,
        } => {
            assert_eq!((skill.as_str(), capability.as_str()), ("open", "c"));
            assert_eq!(error.reason, VerifyReason::StackUnderflow);
        }
        other => panic!("expected a verifier error, got {other}"),
    }
}

#[test]
fn an_unknown_opcode_is_malformed() {
    let (mut bytes, at) = accept_only();
    bytes[at] = 0xee;
    reseal(&mut bytes);
    let error = load_bytes(&bytes).unwrap_err();
    assert!(error.to_string().contains("unknown opcode 0xee"), "{error}");
}

#[test]
fn regexes_are_rebuilt_under_the_loading_limits() {
    let policy = policy_text(
        "regex",
        r#"capability "c" {
    resource http "https://api.example.com/x"
    operations GET
    fieldMatches payload.a ~ /[a-z]{1,30}/
  }"#,
    );
    let bytes = encode_capc(&policy.skills).unwrap();
    assert!(load_capc(&bytes, &Limits::DEFAULT).is_ok());
    let tight = Limits {
        max_regex_bytes: 64,
        ..Limits::DEFAULT
    };
    let error = load_capc(&bytes, &tight).unwrap_err();
    assert!(error.to_string().contains("does not compile"), "{error}");
}

/// Found in review: `payloadSchema` patterns were built under a fixed 1 MiB whatever the
/// engine's `Limits::max_regex_bytes`, from source and from `.capc` alike, while a
/// `fieldMatches` regex obeyed it.
#[test]
fn regression_schema_patterns_obey_the_configured_regex_size_limit() {
    let body = r#"capability "c" {
    resource http "https://api.example.com/x"
    operations GET
    payloadSchema {"properties": {"a": {"pattern": "\\pL{10}"}}}
  }"#;
    let tight = Limits {
        max_regex_bytes: 10_000,
        ..Limits::DEFAULT
    };
    let text = format!("skill \"regex\" {{\n  version \"1\"\n  {body}\n}}");
    let mut loader = PolicyLoader::new(tight);
    loader.add_text("regex.cap", text, PolicyFormat::Cap, None);
    let errors = loader.finish().unwrap_err();
    assert!(
        format!("{errors:?}").contains("exceeds the size limit of 10000"),
        "{errors:?}"
    );
    let policy = policy_text("regex", body);
    let bytes = encode_capc(&policy.skills).unwrap();
    assert!(load_capc(&bytes, &Limits::DEFAULT).is_ok());
    let error = load_capc(&bytes, &tight).unwrap_err();
    assert!(error.to_string().contains("does not compile"), "{error}");
}

#[test]
fn the_capability_limit_applies_at_load() {
    let bytes = policies_capc();
    let tight = Limits {
        max_capabilities_per_skill: 1,
        ..Limits::DEFAULT
    };
    let error = load_capc(&bytes, &tight).unwrap_err();
    assert!(error.to_string().contains("capabilities"), "{error}");
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capgate-capc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_loader_accepts_a_named_capc_file() {
    let dir = temp_dir("loader");
    let file = dir.join("all.capc");
    std::fs::write(&file, policies_capc()).unwrap();
    let loaded = PolicyLoader::new(Limits::DEFAULT)
        .finish_paths(&[&file])
        .unwrap();
    assert_eq!(loaded.skills.len(), load_sources().skills.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_skill_in_both_a_capc_file_and_a_source_is_declared_twice() {
    let dir = temp_dir("twice");
    let file = dir.join("all.capc");
    std::fs::write(&file, policies_capc()).unwrap();
    let source = policies_dir().join("email-send/email-send.cap");
    let error = PolicyLoader::new(Limits::DEFAULT)
        .finish_paths(&[&file, &source])
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("skill `email-send` is declared twice"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn directories_do_not_pick_up_capc_files() {
    let dir = temp_dir("dir");
    std::fs::write(dir.join("all.capc"), policies_capc()).unwrap();
    let error = PolicyLoader::new(Limits::DEFAULT)
        .finish_paths(&[&dir])
        .unwrap_err();
    assert!(
        error.to_string().contains("no policy files found"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_corrupt_capc_file_is_a_load_error_naming_the_file() {
    let dir = temp_dir("corrupt");
    let file = dir.join("bad.capc");
    let mut bytes = policies_capc();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&file, bytes).unwrap();
    let error = PolicyLoader::new(Limits::DEFAULT)
        .finish_paths(&[&file])
        .unwrap_err();
    assert!(error.to_string().contains("bad.capc"), "{error}");
    assert!(error.to_string().contains("checksum"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

use crate::common::run as capgate;

#[test]
fn capgate_compile_writes_a_file_that_check_and_replay_load() {
    let dir = temp_dir("cli");
    let out = dir.join("all.capc");
    let out_text = out.to_str().unwrap();
    let compile = capgate(&["compile", "-p", "policies", "-o", out_text]);
    assert_eq!(compile.status.code(), Some(0), "{compile:?}");
    let written = load_capc(&std::fs::read(&out).unwrap(), &Limits::DEFAULT).unwrap();
    assert_eq!(written.skills.len(), load_sources().skills.len());
    for session in session_files() {
        let session = session.to_str().unwrap();
        let from_source = capgate(&["replay", "-p", "policies", session]);
        let from_capc = capgate(&["replay", "-p", out_text, session]);
        assert_eq!(from_source.stdout, from_capc.stdout, "{session}");
        assert_eq!(from_source.status.code(), from_capc.status.code());
    }
    let request =
        r#"{"skill":"email-send","operation":"GET","resource":"https://nowhere.example/"}"#;
    let request_file = dir.join("request.json");
    std::fs::write(&request_file, request).unwrap();
    let request_text = request_file.to_str().unwrap();
    let a = capgate(&[
        "check",
        "-p",
        "policies",
        "-r",
        request_text,
        "--format",
        "json",
    ]);
    let b = capgate(&[
        "check",
        "-p",
        out_text,
        "-r",
        request_text,
        "--format",
        "json",
    ]);
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.status.code(), b.status.code());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn capgate_compile_exits_2_when_policies_do_not_load() {
    let dir = temp_dir("cli-bad");
    let bad = dir.join("bad.cap");
    std::fs::write(&bad, "skill \"x\" {").unwrap();
    let out = dir.join("out.capc");
    let result = capgate(&[
        "compile",
        "-p",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Found in review: `compile -p s.cap -o s.cap` replaced the policy source, comments and all,
/// with bytecode (and said "wrote"), and `-o sch.json` did the same to a schema file the policy
/// reads (`payloadSchema file "sch.json"`). An existing output that is not a `.capc` is refused,
/// and so is a `.capc` the policy was read from; an older `.capc` is replaced.
#[test]
fn regression_capgate_compile_never_writes_over_a_policy_it_read() {
    let dir = temp_dir("cli-self");
    let source = dir.join("s.cap");
    let schema = dir.join("sch.json");
    let text = "skill \"s\" {\n  version \"1\"\n  // a comment\n  capability \"c\" {\n    resource tool \"t\"\n    operations call\n    justification \"j\"\n    payloadSchema file \"sch.json\"\n  }\n}\n";
    std::fs::write(&source, text).unwrap();
    std::fs::write(&schema, r#"{"type": "object"}"#).unwrap();
    let compile = |policy: &Path, output: &Path| {
        capgate(&[
            "compile",
            "-p",
            policy.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ])
    };
    for (policy, output) in [(&source, &source), (&dir, &source), (&source, &schema)] {
        let result = compile(policy, output);
        assert_eq!(result.status.code(), Some(2), "{}", output.display());
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(stderr.contains("is not a `.capc` file"), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(&source).unwrap(), text);
    assert_eq!(
        std::fs::read_to_string(&schema).unwrap(),
        r#"{"type": "object"}"#
    );
    // An empty placeholder (as `mktemp` makes) is written over.
    let placeholder = dir.join("placeholder.capc");
    std::fs::write(&placeholder, "").unwrap();
    assert_eq!(compile(&source, &placeholder).status.code(), Some(0));
    // A `.capc` output is written, and written again; one read as a policy is refused.
    let out = dir.join("s.capc");
    assert_eq!(compile(&source, &out).status.code(), Some(0));
    assert_eq!(compile(&source, &out).status.code(), Some(0));
    let result = compile(&out, &out);
    assert_eq!(result.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stderr.contains("is one of the policy files read"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One mutation of a valid file.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
    /// Overwrite four bytes with a little-endian count (hits length and index fields).
    Count(usize, u32),
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len().max(1);
    match *mutation {
        Mutation::Flip(at, bit) => {
            if let Some(b) = bytes.get_mut(at % len) {
                *b ^= 1 << (bit % 8);
            }
        }
        Mutation::Set(at, v) => {
            if let Some(b) = bytes.get_mut(at % len) {
                *b = v;
            }
        }
        Mutation::Insert(at, v) => bytes.insert((at % len).min(bytes.len()), v),
        Mutation::Remove(at) => {
            if !bytes.is_empty() {
                bytes.remove(at % len);
            }
        }
        Mutation::Truncate(at) => bytes.truncate(at % len),
        Mutation::Count(at, n) => {
            let at = at % len;
            for (i, b) in n.to_le_bytes().into_iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + i) {
                    *slot = b;
                }
            }
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Flip(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Set(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Insert(a, b)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            prop_oneof![Just(0u32), Just(1), Just(2), Just(u32::MAX), any::<u32>()]
        )
            .prop_map(|(a, n)| Mutation::Count(a, n)),
    ]
}

/// Whatever the decoder accepts must be usable: it re-encodes and decodes to the same bytes.
fn accepted_is_consistent(bytes: &[u8]) {
    if let Ok(policy) = load_capc(bytes, &Limits::DEFAULT) {
        let again = encode_capc(&policy.skills).unwrap();
        let reloaded = load_capc(&again, &Limits::DEFAULT).unwrap();
        assert_eq!(encode_capc(&reloaded.skills).unwrap(), again);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_are_rejected_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        prop_assert!(load_capc(&bytes, &Limits::DEFAULT).is_err());
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        with_magic.extend_from_slice(&bytes);
        accepted_is_consistent(&with_magic);
    }

    #[test]
    fn mutated_files_are_accepted_or_rejected_without_panicking(
        mutations in proptest::collection::vec(mutation(), 1..4),
        resealed in any::<bool>(),
    ) {
        let mut bytes = SMALL.with(Clone::clone);
        for m in &mutations {
            apply(&mut bytes, m);
        }
        if resealed && bytes.len() > MAGIC.len() + 3 && bytes.len() >= body_offset(&bytes) {
            reseal(&mut bytes);
        }
        accepted_is_consistent(&bytes);
    }
}

thread_local! {
    /// A small file exercising every table (meeting-scheduler: regexes, schema, window, bounds,
    /// rate limits, bindings), so mutations land in interesting fields often.
    static SMALL: Vec<u8> = {
        let policy = PolicyLoader::new(Limits::DEFAULT)
            .finish_paths(&[&policies_dir().join("meeting-scheduler")])
            .unwrap();
        encode_capc(&policy.skills).unwrap()
    };
}

#[test]
fn every_single_byte_flip_of_a_resealed_file_is_handled() {
    let original = SMALL.with(Clone::clone);
    let start = body_offset(&original);
    for at in start..original.len() {
        for value in [0x00, 0x01, 0x7f, 0xff] {
            let mut bytes = original.clone();
            bytes[at] = value;
            reseal(&mut bytes);
            accepted_is_consistent(&bytes);
        }
    }
}

/// Replaces a schema's limits as the compiler writes them (512, 2^22) with `depth`, `steps`.
fn patch_schema_limits(bytes: &mut [u8], depth: u32, steps: u64) {
    let mut written = 512u32.to_le_bytes().to_vec();
    written.extend_from_slice(&(1u64 << 22).to_le_bytes());
    let at = bytes
        .windows(written.len())
        .position(|w| w == written.as_slice())
        .expect("the schema limits as compiled");
    bytes[at..at + 4].copy_from_slice(&depth.to_le_bytes());
    bytes[at + 4..at + 12].copy_from_slice(&steps.to_le_bytes());
    reseal(bytes);
}

/// Found in review: a `.capc` file carried its own schema depth and step limits, and the loader
/// trusted them. Raised by hand (the checksum resealed), a step limit of 2^64 - 1 let a schema
/// of 60 chained `anyOf`s run a decision on `{}` for ~2^60 steps, and a depth limit of
/// 2^32 - 1 let a chain of `$ref`s overflow the stack. Limits above the compiler's are refused.
#[test]
fn regression_schema_limits_above_the_compilers_are_refused_at_load() {
    let mut defs = serde_json::Map::new();
    for i in 0..60 {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            serde_json::json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert("d60".to_owned(), serde_json::json!(false));
    let schema = serde_json::json!({"$defs": defs, "$ref": "#/$defs/d0"});
    let policy = policy_text(
        "dag",
        &format!(
            "  capability \"c\" {{\n    resource tool \"x\"\n    operations call\n    justification \"j\"\n    payloadSchema {schema}\n  }}"
        ),
    );
    let compiled = encode_capc(&policy.skills).unwrap();
    assert!(load_bytes(&compiled).is_ok());
    for (depth, steps) in [(512, u64::MAX), (u32::MAX, 1 << 22), (513, 1 << 22)] {
        let mut crafted = compiled.clone();
        patch_schema_limits(&mut crafted, depth, steps);
        let message = load_bytes(&crafted).unwrap_err().to_string();
        assert!(
            message.contains("skill `dag` capability `c`: a schema's limits"),
            "{message}"
        );
    }
    // Tighter limits are not what the manifest compiles to either: the bytecode must be exactly
    // that (before the manifest was embedded, tighter limits were the file's own business).
    let mut tighter = compiled;
    patch_schema_limits(&mut tighter, 64, 1_000);
    assert_eq!(
        load_bytes(&tighter).unwrap_err(),
        CapcError::ManifestMismatch {
            skill: "dag".to_owned(),
            capability: Some("c".to_owned())
        }
    );
}

/// Found in review: a decode error gave only a byte offset; it names the skill and the
/// capability being read (here a regex too large for the loader's tighter limits).
#[test]
fn decode_errors_name_the_skill_and_capability() {
    let policy = policy_text(
        "sk-alpha",
        "  capability \"cap-beta\" {\n    resource tool \"x\"\n    operations call\n    justification \"j\"\n    fieldMatches payload.id ~ /[a-z]{1,30}/\n  }",
    );
    let bytes = encode_capc(&policy.skills).unwrap();
    let tight = Limits {
        max_regex_bytes: 64,
        ..Limits::DEFAULT
    };
    let message = load_capc(&bytes, &tight).unwrap_err().to_string();
    assert!(
        message.contains("skill `sk-alpha` capability `cap-beta`: regex `[a-z]{1,30}`"),
        "{message}"
    );
}

/// Found in review: the skill and capability named in decode errors (the case above) were
/// never reset, so an error after the last skill named its last capability, and a truncation
/// named neither. A message names what is being read, and nothing between skills.
#[test]
fn decode_errors_name_only_what_is_being_read() {
    let policy = policy_text(
        "aa",
        "  capability \"first\" {\n    resource tool \"x\"\n    operations call\n    justification \"j\"\n    fieldMatches payload.id ~ /[a-z]+/\n  }\n}\nskill \"ab\" {\n  version \"1\"\n  capability \"last\" {\n    resource tool \"y\"\n    operations call\n    justification \"j\"\n  }",
    );
    let bytes = encode_capc(&policy.skills).unwrap();
    let mut trailing = bytes.clone();
    trailing.push(0);
    reseal(&mut trailing);
    let message = load_bytes(&trailing).unwrap_err().to_string();
    assert!(message.contains("trailing"), "{message}");
    assert!(!message.contains("capability"), "{message}");
    let mut cut = bytes;
    cut.truncate(cut.len() - 3);
    reseal(&mut cut);
    let message = load_bytes(&cut).unwrap_err().to_string();
    assert!(
        message.contains("of skill `ab` capability `last`"),
        "{message}"
    );
}

// --- integrity: each skill is what its embedded manifest compiles to --------------------------

/// Skill `guarded`: one capability that admits only `payload.role == "user"`.
fn guarded() -> PolicySet {
    policy_text(
        "guarded",
        "  capability \"c\" {\n    resource http \"https://api.example.com/x\"\n    operations GET\n    fieldEquals payload.role == \"user\"\n  }",
    )
}

fn admin_request() -> capgate::Request {
    let mut request = capgate::Request::new("guarded", "GET", "https://api.example.com/x");
    request.payload = serde_json::json!({"role": "admin"});
    request
}

/// Where `needle` starts in `bytes`.
fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the bytes searched for")
}

#[test]
fn a_capc_whose_bytecode_differs_from_its_manifest_is_refused() {
    let policy = guarded();
    let honest = encode_capc(&policy.skills).unwrap();
    assert!(load_bytes(&honest).is_ok());
    let refused = CapcError::ManifestMismatch {
        skill: "guarded".to_owned(),
        capability: Some("c".to_owned()),
    };

    // A hand-made file: `guarded`'s manifest and revision, the checksum right, every program
    // verified, and the capability's program `accept` alone (as the same capability compiles
    // without its constraint).
    let open = policy_text(
        "guarded",
        "  capability \"c\" {\n    resource http \"https://api.example.com/x\"\n    operations GET\n  }",
    );
    let mut forged = policy.skills.clone();
    forged[0].capabilities[0].set_program(open.skills[0].capabilities[0].program().clone());
    // Loaded, it would allow what the manifest denies.
    let engine = |skills: Vec<CompiledSkill>| {
        capgate::Engine::builder(PolicySet {
            skills,
            sources: capgate::span::SourceMap::new(),
        })
        .build()
    };
    assert_eq!(
        engine(policy.skills.clone())
            .check(&admin_request())
            .verdict,
        capgate::Verdict::Deny
    );
    assert_eq!(
        engine(forged.clone()).check(&admin_request()).verdict,
        capgate::Verdict::Allow
    );
    let bytes = encode_capc(&forged).unwrap();
    assert_eq!(load_bytes(&bytes).unwrap_err(), refused);

    // The same by editing bytes: `eq p0 c0` made `optional` (it then holds for a request without
    // `role`), the checksum recomputed.
    let mut edited = honest.clone();
    let eq_require_accept = [0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0e, 0, 0, 0, 0, 0x0f];
    let optional = find(&edited, &eq_require_accept) + 9;
    edited[optional] = 1;
    reseal(&mut edited);
    assert_eq!(load_bytes(&edited).unwrap_err(), refused);

    // The manifest edited and its revision recomputed, the bytecode left as it was.
    let manifest = policy.skills[0].manifest.to_string();
    let edited_manifest = manifest.replace("\"user\"", "\"root\"");
    assert_ne!(manifest, edited_manifest);
    let mut edited = honest.clone();
    let at = find(&edited, manifest.as_bytes());
    edited[at..at + manifest.len()].copy_from_slice(edited_manifest.as_bytes());
    let revision = find(&edited, policy.skills[0].revision.as_bytes());
    edited[revision..revision + 32]
        .copy_from_slice(Revision::of_manifest(edited_manifest.as_bytes()).as_bytes());
    reseal(&mut edited);
    assert_eq!(load_bytes(&edited).unwrap_err(), refused);

    // A skill's own field changed (its version), the manifest left as it was.
    let mut other_version = policy.skills.clone();
    other_version[0].version = "9.9.9".to_owned();
    assert_eq!(
        load_bytes(&encode_capc(&other_version).unwrap()).unwrap_err(),
        CapcError::ManifestMismatch {
            skill: "guarded".to_owned(),
            capability: None,
        }
    );

    // The loader, and so every command that takes `-p FILE.capc`, names the file and the place.
    let dir = temp_dir("forged");
    let file = dir.join("forged.capc");
    std::fs::write(&file, &bytes).unwrap();
    let error = PolicyLoader::new(Limits::DEFAULT)
        .finish_paths(&[&file])
        .unwrap_err()
        .to_string();
    assert!(error.contains("forged.capc"), "{error}");
    assert!(
        error.contains("skill `guarded` capability `c`: the bytecode is not what the skill's embedded manifest compiles to"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_capc_whose_stored_revision_differs_is_refused() {
    let policy = guarded();
    let skill = &policy.skills[0];
    assert_eq!(
        skill.revision,
        Revision::of_manifest(skill.manifest.as_bytes())
    );
    let mut bytes = encode_capc(&policy.skills).unwrap();
    let at = find(&bytes, skill.revision.as_bytes());
    bytes[at] ^= 1;
    reseal(&mut bytes);
    let mut stored = *skill.revision.as_bytes();
    stored[0] ^= 1;
    assert_eq!(
        load_bytes(&bytes).unwrap_err(),
        CapcError::RevisionMismatch {
            skill: "guarded".to_owned(),
            stored: Revision::from_bytes(stored),
            computed: skill.revision,
        }
    );
}

#[test]
fn an_embedded_manifest_that_is_not_canonical_or_does_not_compile_is_refused() {
    let policy = guarded();
    let with_manifest = |manifest: String| {
        let mut skills = policy.skills.clone();
        skills[0].revision = Revision::of_manifest(manifest.as_bytes());
        skills[0].manifest = manifest.into();
        load_bytes(&encode_capc(&skills).unwrap())
            .unwrap_err()
            .to_string()
    };
    // Valid JSON for the same skill, but not the canonical text the revision is defined over.
    let spaced = format!("{} ", policy.skills[0].manifest);
    let message = with_manifest(spaced);
    assert!(
        message.contains("skill `guarded`: the embedded manifest is not canonical"),
        "{message}"
    );
    let message = with_manifest("{}".to_owned());
    assert!(
        message.contains("skill `guarded`: the embedded manifest does not compile: "),
        "{message}"
    );
    let broken = policy.skills[0]
        .manifest
        .replace("payload.role", "payload.role[*");
    let message = with_manifest(broken);
    assert!(
        message.contains("skill `guarded`: the embedded manifest does not compile: "),
        "{message}"
    );
}

#[test]
fn an_old_format_capc_is_refused_with_a_recompile_hint() {
    let mut bytes = policies_capc();
    let old = FORMAT_VERSION - 1;
    bytes[MAGIC.len()..MAGIC.len() + 2].copy_from_slice(&old.to_le_bytes());
    let error = load_bytes(&bytes).unwrap_err();
    assert_eq!(
        error,
        CapcError::UnsupportedVersion {
            found: old,
            supported: FORMAT_VERSION
        }
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "`.capc` format version {old} is older than version {FORMAT_VERSION}"
        )) && message.contains("recompile the policy sources with `capgate compile`"),
        "{message}"
    );
    // As a command reports it.
    let dir = temp_dir("old");
    let file = dir.join("old.capc");
    std::fs::write(&file, &bytes).unwrap();
    let request = dir.join("request.json");
    std::fs::write(
        &request,
        r#"{"skill":"email-send","operation":"GET","resource":"https://nowhere.example/"}"#,
    )
    .unwrap();
    let check = capgate(&[
        "check",
        "-p",
        file.to_str().unwrap(),
        "-r",
        request.to_str().unwrap(),
    ]);
    assert_eq!(check.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(stderr.contains("old.capc"), "{stderr}");
    assert!(stderr.contains("recompile"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn disasm_lists_only_checks_that_the_instructions_run() {
    let policy = guarded();
    let compiled = policy.skills[0].capabilities[0].program().program();
    let check0 = CheckIdx::from_usize(0).unwrap();
    assert_eq!(required_checks(compiled), vec![check0]);
    let listed = "check0   fieldEquals payload.role == \"user\"";
    assert!(disassemble(compiled).contains(listed));

    // A hand-made program: `accept` first, the compiled code after it where it never runs; the
    // check table and its ranges kept. The verifier accepts it (unreachable code cannot run).
    let mut program: Program = compiled.clone();
    program.code.insert(0, Op::Accept);
    program.debug.insert(0, None);
    for check in &mut program.checks {
        let code = check.code();
        check.set_code(code.start + 1..code.end + 1);
    }
    assert!(verify(program.clone()).is_ok());
    assert!(required_checks(&program).is_empty());
    let text = disassemble(&program);
    assert!(!text.contains("checks:"), "{text}");
    assert!(!text.contains("fieldEquals"), "{text}");
    // The code is still shown as it is, `require check0` included, after the `accept`.
    assert!(text.contains("0000  accept"), "{text}");

    // Of two checks in the table, the one no `require` names is not listed.
    let info = |summary: &str| {
        CheckInfo::new(
            ConstraintKeyword::FieldEquals,
            None,
            summary.to_owned(),
            0..2,
        )
    };
    let check1 = CheckIdx::from_usize(1).unwrap();
    let program = Program {
        code: vec![Op::Push(true), Op::Require { check: check1 }, Op::Accept],
        debug: vec![None; 3],
        checks: vec![info("never required"), info("required")],
        ..Program::default()
    };
    assert!(verify(program.clone()).is_ok());
    assert_eq!(required_checks(&program), vec![check1]);
    let text = disassemble(&program);
    assert!(text.contains("check1   required"), "{text}");
    assert!(!text.contains("never required"), "{text}");
}

/// The bundled meeting-scheduler session run on `policy`: each line's output, less the
/// `source` of its reasons (the policy lines they point to; a `.capc` file's locations are not
/// part of its manifest).
fn scheduler_decisions(policy: PolicySet) -> Vec<serde_json::Value> {
    fn without_sources(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(members) => {
                members.remove("source");
                members.values_mut().for_each(without_sources);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(without_sources),
            _ => {}
        }
    }
    let session = policies_dir().join("meeting-scheduler/meeting-scheduler.session.jsonl");
    let text = std::fs::read_to_string(session).unwrap();
    Session::new(policy, SessionOptions::default())
        .unwrap()
        .run_text(&text)
        .into_iter()
        .map(|line| {
            let mut output = line.output;
            without_sources(&mut output);
            output
        })
        .collect()
}

thread_local! {
    static SCHEDULER_DECISIONS: Vec<serde_json::Value> =
        scheduler_decisions(load_bytes(&SMALL.with(Clone::clone)).unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever bytes of a valid file change (the checksum recomputed, as a hand-made file's
    /// would be), the file is refused or loads to a policy that decides every line of the
    /// session as the original does: a mutation never yields another accepted policy.
    #[test]
    fn a_mutated_capc_is_refused_or_decides_as_the_original(
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = SMALL.with(Clone::clone);
        for m in &mutations {
            apply(&mut bytes, m);
        }
        if bytes.len() > MAGIC.len() + 3 && bytes.len() >= body_offset(&bytes) {
            reseal(&mut bytes);
        }
        if let Ok(policy) = load_bytes(&bytes) {
            let original = SCHEDULER_DECISIONS.with(Clone::clone);
            prop_assert_eq!(scheduler_decisions(policy), original);
        }
    }
}

#!/usr/bin/env bash
# Builds the seed corpora under fuzz/corpus/ (gitignored) from the policies in the repository:
#   parse, compile     <- policies/**/*.cap, tests' .cap files, docs examples
#   manifest_json      <- policies/**/*.json manifests, plus each .cap converted with
#                         `capgate convert --to json` when the CLI builds
#   tape               <- JSON: the `call` objects (and whole lines) of policies/**/*.session.jsonl,
#                         the .json files of policies/ and tests/, the raw-string JSON snippets of
#                         the tests' .rs files, and the JSON Schema suite under ../shared/conformance (each
#                         file, each schema and each test instance); needs jq (and python3 for
#                         the snippets of the tests)
#   session            <- policies/**/*.session.jsonl in windows of 48 lines
#   matcher            <- every `fieldMatches` regex of policies/, tests/ and docs/ (as the
#                         compiler wraps it, with its `i` flag) followed by sample texts
# The structured targets (verify, decide, differential) need no seeds: their inputs are built
# from the policies at start-up, and libFuzzer starts them from an empty corpus.
set -euo pipefail
cd "$(dirname "$0")"
root=..
mkdir -p corpus/parse corpus/compile corpus/manifest_json corpus/verify corpus/decide corpus/differential \
  corpus/tape corpus/matcher corpus/session

seed() { # seed TARGET FILE: copies FILE under a name derived from its content
  local name
  name=$(sha1sum "$2" | cut -c1-16)
  cp "$2" "corpus/$1/$name"
}

seed_lines() { # seed_lines TARGET < LINES: each non-empty line of stdin as one seed
  local tmp line
  tmp=$(mktemp)
  while IFS= read -r line || [ -n "$line" ]; do
    [ -n "$line" ] || continue
    printf '%s' "$line" >"$tmp"
    seed "$1" "$tmp"
  done
  rm -f "$tmp"
}

mapfile -t caps < <(find "$root/policies" "$root/tests" "$root/crates" "$root/docs" -name '*.cap' 2>/dev/null | sort)
for f in "${caps[@]}"; do
  seed parse "$f"
  seed compile "$f"
done

# Fenced ```cap and ```json blocks of the docs (snippets too: the parser must survive them).
blocks() { # blocks LANG TARGET...
  local lang=$1
  shift
  local dir
  dir=$(mktemp -d)
  awk -v lang="$lang" -v dir="$dir" '
    $0 ~ "^```" lang "$" { n++; out = dir "/" n; inside = 1; next }
    /^```/ { inside = 0; next }
    inside { print > out }
  ' "$root"/docs/*.md "$root/README.md"
  for f in "$dir"/*; do
    [ -f "$f" ] || continue
    for target in "$@"; do seed "$target" "$f"; done
  done
  rm -rf "$dir"
}
blocks cap parse compile
blocks json manifest_json

mapfile -t manifests < <(find "$root/policies" "$root/tests" "$root/crates" -name '*.json' 2>/dev/null \
  -exec grep -l '"skill"' {} + | sort)
for f in "${manifests[@]}"; do
  seed manifest_json "$f"
done

# Convert each .cap to its JSON form with the CLI, if it builds.
if cargo build --quiet -j1 --manifest-path "$root/Cargo.toml" --bin capgate; then
  bin="${CARGO_TARGET_DIR:-$root/target}/debug/capgate"
  tmp=$(mktemp)
  for f in "${caps[@]}"; do
    if "$bin" convert --to json "$f" >"$tmp" 2>/dev/null; then
      seed manifest_json "$tmp"
    fi
  done
  rm -f "$tmp"
fi

# The tape target: JSON documents of every shape the repository has.
mapfile -t sessions < <(find "$root/policies" -name '*.session.jsonl' 2>/dev/null | sort)
mapfile -t json_files < <(find "$root/policies" "$root/tests" "$root/crates" -name '*.json' 2>/dev/null | sort)
for f in "${json_files[@]}"; do
  seed tape "$f"
done
blocks json tape
# The JSON Schema suite: next to the repository (main checkout) or one level up (a worktree).
suite=""
for dir in "$root/../shared/conformance" "$root/../../shared/conformance"; do
  if [ -d "$dir" ]; then
    suite=$dir
    break
  fi
done
if command -v jq >/dev/null; then
  for f in "${sessions[@]}"; do
    grep -v '^[[:space:]]*$' "$f" | seed_lines tape
    jq -c 'select(type == "object") | .call // empty' "$f" 2>/dev/null | seed_lines tape
  done
  if [ -n "$suite" ]; then
    while IFS= read -r f; do
      seed tape "$f"
      jq -c '.[]? | .schema, (.tests[]? | .data)' "$f" 2>/dev/null | seed_lines tape
    done < <(find "$suite" -name '*.json' | sort)
  fi
else
  echo "jq not found: the tape corpus lacks the session calls and schema-suite instances" >&2
fi
# The session target: each replay session of policies/ in windows of 48 lines (the target reads
# 64 at most), so later parts of long sessions are seeds too.
for f in "${sessions[@]}"; do
  tmp=$(mktemp -d)
  split -l 48 "$f" "$tmp/part-"
  for part in "$tmp"/part-*; do seed session "$part"; done
  rm -rf "$tmp"
done
# Objects around the tape's switch from a linear duplicate-key scan to its key set (16 members):
# one key byte erased or changed makes a duplicate of an earlier key, on either side of it.
large_object() { # large_object N PREFIX: an object with N members "PREFIX0".."PREFIX<N-1>"
  local i out="{"
  for ((i = 0; i < $1; i++)); do
    [ "$i" -gt 0 ] && out+=","
    out+="\"$2$i\":$i"
  done
  printf '%s}' "$out"
}
for n in 16 17 18 33 70; do
  large_object "$n" k | seed_lines tape
  printf '[%s,%s]' "$(large_object "$n" "")" "$(large_object "$n" a)" | seed_lines tape
done

# Raw-string JSON snippets (r#"{...}"# / r#"[...]"#) of the tests, valid JSON or not: the
# tape must refuse exactly what the reference refuses.
if command -v python3 >/dev/null; then
  python3 - "$root" corpus/tape <<'PY'
import hashlib, pathlib, re, sys
root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
tests = [root / "tests"] + sorted(root.glob("crates/*/tests"))
for path in sorted(p for d in tests for p in d.rglob("*.rs")):
    for block in re.findall(r'r#"\s*([\[{].*?)"#', path.read_text(), re.S):
        data = block.encode()
        (out / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)
PY
fi

# The regexes of `fieldMatches` constraints: flags byte (bit 0 = `i`, bits 1-2 = 1 for the
# compiler's `^(?:…)$` wrapping), the pattern, then NUL-separated texts.
if command -v python3 >/dev/null; then
  python3 - "$root" corpus/matcher <<'PY'
import hashlib, pathlib, re, sys
root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
texts = ["alice@example.com", "eve@evil.com", "", "x", "src/lib.rs", "rec_0123456789ab",
         "turn-12", "ALICE@EXAMPLE.COM", "k\u212a", "\u00e9@example.com"]
for path in sorted(p for d in ("policies", "tests", "crates", "docs") for p in (root / d).rglob("*")
                   if p.suffix in (".cap", ".md", ".rs")):
    for pattern, flag in re.findall(r"~ /((?:[^/\\\n]|\\.)+)/(i?)", path.read_text(errors="ignore")):
        pattern = pattern.replace("\\/", "/")
        data = bytes([2 | (flag == "i")]) + "\0".join([pattern] + texts).encode()
        (out / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)
PY
fi

for target in parse compile manifest_json tape matcher session; do
  echo "$target: $(find "corpus/$target" -type f | wc -l) seeds"
done

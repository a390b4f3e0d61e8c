#!/usr/bin/env bash
# Builds the seed corpora under fuzz/corpus/ (gitignored) from the policies in the repository:
#   parse, compile     <- policies/**/*.cap, tests' .cap files, docs examples
#   manifest_json      <- policies/**/*.json manifests, plus each .cap converted with
#                         `capgate convert --to json` when the CLI builds
# The structured targets (verify, decide, differential) need no seeds: their inputs are built
# from the policies at start-up, and libFuzzer starts them from an empty corpus.
set -euo pipefail
cd "$(dirname "$0")"
root=..
mkdir -p corpus/parse corpus/compile corpus/manifest_json corpus/verify corpus/decide corpus/differential

seed() { # seed TARGET FILE: copies FILE under a name derived from its content
  local name
  name=$(sha1sum "$2" | cut -c1-16)
  cp "$2" "corpus/$1/$name"
}

mapfile -t caps < <(find "$root/policies" "$root/tests" "$root/docs" -name '*.cap' 2>/dev/null | sort)
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

mapfile -t manifests < <(find "$root/policies" "$root/tests" -name '*.json' 2>/dev/null \
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

for target in parse compile manifest_json; do
  echo "$target: $(find "corpus/$target" -type f | wc -l) seeds"
done

#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), one at a time, without a sanitizer
# (stable toolchain), seeding the corpora first. Crashes land in fuzz/artifacts/TARGET/.
# Usage: fuzz/run-all.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(parse manifest_json compile verify decide differential tape matcher session)
fi
./seed.sh
for target in "${targets[@]}"; do
  dict=()
  case "$target" in
    parse | compile | manifest_json) dict=(-dict=dict/capgate.dict) ;;
    tape | session) dict=(-dict=dict/json.dict) ;;
    matcher) dict=(-dict=dict/regex.dict) ;;
  esac
  echo "== $target (${seconds}s)"
  cargo fuzz run -s none "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 "${dict[@]}"
done

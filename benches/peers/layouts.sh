#!/usr/bin/env bash
# The from-bytes ratio (`check_slice` against the `IgnoredAny` floor) over many code layouts
# of the same code.
#
# A rebuild moves the from-bytes ratio by 5-10 % through where the linker puts the functions
# alone, the floor's included (docs/performance.md). One binary is one draw of that. This
# script draws several: it links the peers binary once per seed with lld's `--shuffle-sections`
# over the code sections (the objects are the same; only their order in `.text` changes), for
# the own build (`--no-default-features`) and the cedar build (the default), then times every
# binary's split rows in back-to-back pairs with the floor (`PEERS_SPLIT=paired`), alternating
# the binaries, and prints each one's paired ratios, then each build's median and range of the
# `check_slice` ratio.
#
#   benches/peers/layouts.sh [SEEDS] [PASSES]
#
# SEEDS (default "0 1 2 3 4 5"; 0 is the linker's own order) and PASSES (default 2: every binary
# is run that many times, all binaries once per pass) as arguments; PEERS_ROUNDS (default 3)
# rounds per run. Binaries go to $LAYOUTS_DIR (default target/layouts); the builds use
# $OWN_TARGET and $CEDAR_TARGET as cargo target directories (default target/peers-own and
# target/peers-cedar) so that only the final link is redone per seed. Needs the toolchain's
# default linker on x86_64 Linux (rust-lld since Rust 1.90).
set -euo pipefail

seeds=${1:-"0 1 2 3 4 5"}
passes=${2:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
manifest="$root/benches/peers/Cargo.toml"
out=${LAYOUTS_DIR:-"$root/target/layouts"}
own_target=${OWN_TARGET:-"$root/target/peers-own"}
cedar_target=${CEDAR_TARGET:-"$root/target/peers-cedar"}
mkdir -p "$out"

build() {
    local name=$1 target=$2 seed=$3
    shift 3
    local link=()
    if [ "$seed" != 0 ]; then
        link=(-C "link-arg=-Wl,--shuffle-sections=.text*=$seed")
    fi
    CARGO_TARGET_DIR=$target cargo rustc --quiet --release --manifest-path "$manifest" \
        --bin capgate-peers "$@" -- "${link[@]}"
    cp "$target/release/capgate-peers" "$out/$name-$seed"
}

for seed in $seeds; do
    echo "linking seed $seed" >&2
    build own "$own_target" "$seed" --no-default-features
    build cedar "$cedar_target" "$seed"
done

echo "| binary | pass | floor | parse alone | check_doc on a parsed tape | check_slice |"
echo "|---|---:|---:|---:|---:|---:|"
# Every check_slice ratio per build, for the medians printed at the end.
declare -A ratios=([own]="" [cedar]="")
# Column N of the row of the last run's table ($table) whose engine starts with ROW, trimmed
# (5: the median; 8: the ratio to the floor measured in back-to-back pairs).
cell() { grep -F "| $1" <<<"$table" | awk -F'|' -v n="$2" '{gsub(/^ +| +$/, "", $n); print $n}'; }
for pass in $(seq 1 "$passes"); do
    for seed in $seeds; do
        for build in own cedar; do
            bin="$out/$build-$seed"
            table=$(PEERS_SPLIT=paired PEERS_ROUNDS=${PEERS_ROUNDS:-3} "$bin" 2>/dev/null)
            slice=$(cell 'check_slice |' 8)
            echo "| $build-$seed | $pass | $(cell 'IgnoredAny scan (floor)' 5) |" \
                "$(cell 'Tape::parse alone |' 8) | $(cell 'check_doc on a parsed tape |' 8) | $slice |"
            ratios[$build]+=" ${slice%%×*}"
        done
    done
done

# The median and range of each build's check_slice ratios over all layouts and passes.
echo
for build in own cedar; do
    # shellcheck disable=SC2086 # one ratio per word
    printf '%s\n' ${ratios[$build]} | sort -n | awk -v build="$build" '
        { r[NR] = $1 }
        END {
            median = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
            printf "%s build: check_slice median %.2f× (%.2f–%.2f×) over %d runs\n", build, median, r[1], r[NR], NR
        }'
done

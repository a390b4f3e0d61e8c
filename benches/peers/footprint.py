#!/usr/bin/env python3
"""The code one decision runs: hot instruction-cache lines and how they share the L1i's sets.

Reads two callgrind dumps of the same peers loop, one with PEERS_ITERATIONS=N and one with 0
(the set-up), both written with

    valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \
        --callgrind-out-file=FILE target/release/capgate-peers

and counts the 64-byte code lines whose instructions ran at least N/2 more times in the first:
the code every iteration runs. It prints their number, how many fall into each of the 64 sets of
a 32 KiB 8-way L1 instruction cache (a common L1i; with 4 KiB per way the set is
bits 6-11 of the address, the same in virtual and physical addresses), the sets that need more
than 8 ways (lines that evict one another on every iteration), and the functions the lines
belong to. Simulated misses per iteration come from a run with --cache-sim=yes
(docs/performance.md, *Reproduce*).
"""

import argparse
import collections
import re

LINE = 64
SETS = 64
WAYS = 8
COST = re.compile(r"^(0x[0-9a-f]+)\s+\d+\s+(\d+)")


def load(path):
    """Self instruction counts per (object, address), and each address's function."""
    counts, functions = {}, {}
    obj = function = None
    after_call = False
    with open(path, encoding="utf-8", errors="replace") as dump:
        for line in dump:
            if line.startswith("ob="):
                obj = line[3:].strip()
            elif line.startswith("fn="):
                function = line[3:].strip()
            elif line.startswith("calls="):
                # The next cost line is the call's inclusive cost, not this address's own.
                after_call = True
            else:
                match = COST.match(line)
                if not match:
                    continue
                if after_call:
                    after_call = False
                    continue
                key = (obj, int(match.group(1), 16))
                counts[key] = counts.get(key, 0) + int(match.group(2))
                functions[key] = function
    return counts, functions


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", help="the callgrind dump of the run with N iterations")
    parser.add_argument("setup", help="the callgrind dump of the run with 0 iterations")
    parser.add_argument("iterations", type=int, help="N")
    parser.add_argument(
        "--functions", type=int, default=12, help="how many functions to list (default 12)"
    )
    args = parser.parse_args()
    run, functions = load(args.run)
    setup, _ = load(args.setup)
    iterations, shown = args.iterations, args.functions
    hot, per_function = set(), collections.Counter()
    for key, count in run.items():
        if count - setup.get(key, 0) >= iterations / 2:
            line = (key[0], key[1] // LINE)
            if line not in hot:
                hot.add(line)
                per_function[functions[key]] += 1
    ways = collections.Counter(line % SETS for _, line in hot)
    over = {s: n for s, n in ways.items() if n > WAYS}
    print(f"hot code lines: {len(hot)} ({len(hot) * LINE} bytes)")
    print(f"most lines in one set: {max(ways.values(), default=0)} (of {WAYS} ways)")
    print(f"sets over {WAYS} ways: {len(over)}, holding {sum(over.values())} lines")
    for function, lines in per_function.most_common(shown):
        print(f"{lines:5d}  {function[:120]}")


if __name__ == "__main__":
    main()

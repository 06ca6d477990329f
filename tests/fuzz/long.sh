#!/usr/bin/env bash
# A long fuzz run outside the suite (issue 19: 10^8 executions per target):
# builds the targets like run.sh (clang, ASan + UBSan, build-fuzz), then runs
# each TARGET to RUNS executions on a copy of its seeds (and of the corpus
# the last long run reached, tests/fuzz/long-corpus/TARGET), at the lowest CPU
# priority (it takes only what the machine leaves idle), and prints its
# final statistics. Nothing is written into the tree; the work folder is
# build-fuzz/fuzz-long/TARGET (corpus, artifacts, fuzz.log).
#
#   bash tests/fuzz/long.sh [RUNS] TARGET...     e.g. bash tests/fuzz/long.sh 100000000 wire workers
set -u
runs=${1:?usage: tests/fuzz/long.sh RUNS TARGET...}; shift
[ $# -gt 0 ] || { echo "usage: tests/fuzz/long.sh RUNS TARGET..."; exit 2; }
cd "$(dirname "$0")/../.."
src=$PWD
build=${JRPC_FUZZ_BUILD:-$src/build-fuzz}
bins=()
for t in "$@"; do bins+=(--target "jrpc-fuzz-$t"); done
CC=clang cmake -S "$src" -B "$build" -DJRPC_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build "$build" -j"$(nproc)" "${bins[@]}" >"$build/fuzz-build.log" 2>&1 ||
    { grep -E 'error' "$build/fuzz-build.log" | head -20; echo "fuzz: build failed"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
for t in "$@"; do
    w=$build/fuzz-long/$t
    rm -rf "$w"
    mkdir -p "$w/corpus" "$w/artifacts"
    cp -r "$src/tests/fuzz/corpus/$t/." "$w/corpus/"
    # the corpus an earlier long run reached, to resume on (long-corpus/README.md)
    [ -d "$src/tests/fuzz/long-corpus/$t" ] && cp -r "$src/tests/fuzz/long-corpus/$t/." "$w/corpus/"
    start=$(date +%s)
    # -timeout counts wall time: at nice 19 beside a benchmark or the suite
    # (same autogroup) one unit of 0.1 ms once waited 6 s for a core and was
    # reported as a timeout (28 Nov 2026, ws). 60 s still catches a hang.
    (cd "$w" && nice -n 19 "$build/bin/jrpc-fuzz-$t" -runs="$runs" -timeout=60 -rss_limit_mb=2048 \
        -dict="$src/tests/fuzz/$t.dict" -print_final_stats=1 -artifact_prefix="$w/artifacts/" \
        corpus >"$w/fuzz.log" 2>&1)
    rc=$?
    [ $rc -eq 0 ] || failed=$((failed + 1))
    echo "$t: exit $rc, $(( $(date +%s) - start )) s, $(grep -E '^stat::number_of_executed_units' "$w/fuzz.log" | tr -s ' ')," \
         "$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' "$w/fuzz.log" | tail -1)"
done
[ $failed -eq 0 ]

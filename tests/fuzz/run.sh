#!/usr/bin/env bash
# A short fuzz run: builds the libFuzzer targets with clang (ASan + UBSan) in
# build-fuzz and runs each for SECONDS (default 60; some a third or two thirds
# of it, below) on a copy of its seed corpus and its kept regressions
# (tests/fuzz/regressions/TARGET-*), so nothing is ever written into the tree. Prints, per target, the
# executions, exec/s, corpus size reached and crashes; exits non-zero when any
# target crashed, leaked, timed out or ran out of memory (the reproducer is
# kept under build-fuzz/fuzz-run/TARGET/, and its path printed).
#
#   bash tests/fuzz/run.sh [SECONDS]
#   JRPC_FUZZ_BUILD=dir JRPC_FUZZ_TARGETS="body wire" bash tests/fuzz/run.sh 600
set -u
secs=${1:-60}
cd "$(dirname "$0")/../.."
src=$PWD
build=${JRPC_FUZZ_BUILD:-$src/build-fuzz}
all_targets="body http http-reader http-diff wire workers redis tls zmtp ws stdio-frame proxy"
targets=${JRPC_FUZZ_TARGETS:-$all_targets}
# tls runs a third of SECONDS (20 s at 60, at ~400 exec/s on a shared
# machine: a real handshake per input), so that it adds about 30 s to the
# suite's fuzz_short with its build; long.sh gives it as many runs as any.
# http-diff (issue 18: the HTTP reader against the http-parser-based one it
# replaced) runs a third too: at 40-80 thousand inputs a second, 15 s is
# about a million, and the suite grows by 15 s, not 45.
# stdio-frame (jrpc-stdio's frame reader, pure, ~10^5 exec/s or more) runs
# a third too: 15 s at 45 is over a million inputs. proxy (who the client is
# behind a trusted proxy: a few hundred bytes of headers) as well.
short_targets=" tls http-diff stdio-frame proxy "
# zmtp (a small pure decoder, ~10^5 exec/s) and ws (the WebSocket session,
# three runs per input) get two thirds: 30 s each at 45.
mid_targets=" zmtp ws "

# It never installs: clang and its runtime come from deploy/deps.sh (the suite
# list), which tests/run.sh runs before ctest.
if ! command -v clang >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null |
        grep -q 'install ok installed'; then
    echo "fuzz: clang and libclang-rt-14-dev are needed: bash deploy/deps.sh"
    exit 1
fi

echo "fuzz: building in $build"
bins=()
for t in $targets; do bins+=(--target "jrpc-fuzz-$t"); done
if ! { CC=clang cmake -S "$src" -B "$build" -DJRPC_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
       cmake --build "$build" -j"$(nproc)" "${bins[@]}" >"$build/fuzz-build.log" 2>&1; }; then
    grep -E 'error|warning' "$build/fuzz-build.log" | head -40
    echo "fuzz: build failed"
    exit 1
fi

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
printf '%-12s %12s %8s %10s %8s %s\n' target executions exec/s corpus crashes result
for t in $targets; do
    work=$build/fuzz-run/$t
    rm -rf "$work"
    mkdir -p "$work/corpus" "$work/artifacts"
    cp -r "$src/tests/fuzz/corpus/$t/." "$work/corpus/"
    # The kept regressions (tests/fuzz/regressions/TARGET-*) join the seeds,
    # so each is run again first; a file of a longer target name (http-diff-*
    # for http) is that target's.
    for f in "$src"/tests/fuzz/regressions/"$t"-*; do
        [ -f "$f" ] || continue
        mine=1
        for t2 in $all_targets; do
            case $t2 in "$t"-*) case ${f##*/} in "$t2"-*) mine=0 ;; esac ;; esac
        done
        [ $mine = 1 ] && cp "$f" "$work/corpus/regression-${f##*/}"
    done
    log=$work/fuzz.log
    t_secs=$secs
    case $short_targets in *" $t "*) t_secs=$(( secs >= 3 ? secs / 3 : 1 )) ;; esac
    case $mid_targets in *" $t "*) t_secs=$(( secs >= 3 ? secs * 2 / 3 : 1 )) ;; esac
    (cd "$work" && "$build/bin/jrpc-fuzz-$t" -max_total_time="$t_secs" -timeout=5 -rss_limit_mb=2048 \
        -dict="$src/tests/fuzz/$t.dict" -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
        corpus >"$log" 2>&1)
    rc=$?
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
    rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
    corp=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2)
    crashes=$(find "$work/artifacts" -type f | wc -l)
    result=ok
    if [ $rc -ne 0 ] || [ "$crashes" -ne 0 ]; then
        result="FAILED (exit $rc)"
        failed=$((failed + 1))
    fi
    printf '%-12s %12s %8s %10s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${corp:-?}" "$crashes" "$result"
    if [ "$result" != ok ]; then
        grep -E 'ERROR|SUMMARY|invariant|not JSON|no valid HTTP|not finished|Test unit written' "$log" | head -20
        find "$work/artifacts" -type f | sed 's/^/  reproducer: /'
        echo "  log: $log"
    fi
done
[ $failed -eq 0 ] && echo "fuzz: no crashes" || echo "fuzz: $failed target(s) failed"
[ $failed -eq 0 ]

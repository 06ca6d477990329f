#!/usr/bin/env bash
# The whole test suite: installs what is needed (and only here), builds twice (plain with
# gcc and warnings as errors, then AddressSanitizer + UndefinedBehaviorSanitizer with clang
# and warnings as errors) and runs every test in both, the two passes at once; builds
# Release -O3 with gcc and warnings as errors at the lowest priority beside them.
# The last line is the total: "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
# Everything is installed here, before ctest: the Debian packages, then the
# deploy/ checks' npm validators (tests/deploy/node_modules), the MCP SDK
# and server (tests/mcp/node_modules, for e2e_mcp), the TypeScript client's
# pinned tsc (client/ts/node_modules, for e2e_ts_client and e2e_ts_browser)
# and the Python package (worker/python into a fresh venv, build-py/venv:
# test_py and e2e_py_*). Inside ctest nothing installs or downloads.
# Each phase's start, in seconds since the suite began (issue 35 keeps the
# whole run under 10 minutes on 2 cores: these say where it goes).
stamp() { echo "=== $1 [$SECONDS s]"; }
stamp "install"
bash deploy/deps.sh || { echo "0 passed, 1 failed"; exit 1; }
bash tests/py_install.sh || { echo "0 passed, 1 failed"; exit 1; }
bash tests/deploy/npm_install.sh || { echo "0 passed, 1 failed"; exit 1; }
bash tests/mcp/npm_install.sh || { echo "0 passed, 1 failed"; exit 1; }
bash client/ts/npm_install.sh || { echo "0 passed, 1 failed"; exit 1; }
jobs=$(nproc)
total_pass=0
total_fail=0
# build DIR CMAKE_OPTION...: configures and builds DIR quietly; on failure
# prints its errors and warnings and returns non-zero.
build() {
    local dir=$1; shift
    if ! { cmake -S . -B "$dir" "$@" >/dev/null && cmake --build "$dir" -j"$jobs" >/dev/null 2>&1; }; then
        cmake --build "$dir" 2>&1 | grep -E 'error|warning' | head -40
        return 1
    fi
}
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DJRPC_WERROR=ON)
# Two builds first, at full speed: plain with gcc, then ASan + UBSan with
# clang (its warnings as errors are the clang check: clang warns where gcc
# does not, -Wstring-concatenation reached CI that way; and its UBSan also
# refuses arithmetic on a NULL pointer). Then both test passes at once, each
# running more tests than there are cores (most tests wait on sockets and
# timers, not on the CPU: issue 35), while a Release build with gcc and
# warnings as errors (-O3 finds warnings, -Wrestrict and
# -Wmaybe-uninitialized, that -O2 does not) takes what CPU is left, at the
# lowest priority, built only. The ASan pass's output is printed whole when
# it ends, after the plain pass's, so that the two do not interleave.
stamp "build (plain)"
plain_ok=1
build build-test-plain "${common[@]}" || plain_ok=0
stamp "build (asan, clang)"
asan_ok=1
CC=clang build build-test-asan "${common[@]}" -DJRPC_SANITIZE=ON || asan_ok=0
rm -rf build-test-logs && mkdir -p build-test-logs
(
    CC=gcc nice -n 19 bash -c "$(declare -f build); jobs=$jobs; build build-test-release-gcc \
        -DCMAKE_BUILD_TYPE=Release -DJRPC_WERROR=ON" > build-test-logs/release.log 2>&1
    echo $? > build-test-logs/release.rc
) &
release=$!
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
tjobs=$((jobs * 2))
asan=
if [ $asan_ok = 1 ]; then
    ctest --test-dir build-test-asan -j"$tjobs" --output-on-failure -LE fuzz \
        > build-test-asan/ctest.out 2>&1 &   # the fuzz run has its own sanitizers
    asan=$!
fi
# count VARIANT: adds the counts of build-test-VARIANT/ctest.out to the totals.
count() {
    local out=build-test-$1/ctest.out line failed all
    line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$out" 2>/dev/null | tail -n 1)
    failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
    all=$(echo "$line" | sed -E 's/.* tests failed out of ([0-9]+).*/\1/')
    if [ -z "$line" ]; then failed=1; all=1; fi
    total_pass=$((total_pass + all - failed))
    total_fail=$((total_fail + failed))
}
if [ $plain_ok = 1 ]; then
    stamp "tests (plain, and asan beside it)"
    ctest --test-dir build-test-plain -j"$tjobs" --output-on-failure 2>&1 | tee build-test-plain/ctest.out
    count plain
else
    total_fail=$((total_fail + 1))
fi
stamp "waiting for the ASan tests"
if [ -n "$asan" ]; then
    wait $asan
    echo "=== tests (asan), run beside the plain ones"
    cat build-test-asan/ctest.out
    count asan
else
    total_fail=$((total_fail + 1))
fi
stamp "waiting for the Release build (gcc -O3, -Werror; no tests)"
wait $release
cat build-test-logs/release.log
if [ "$(cat build-test-logs/release.rc)" = 0 ]; then
    total_pass=$((total_pass + 1))
else
    total_fail=$((total_fail + 1))
fi
stamp "done"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]

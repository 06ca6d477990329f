#!/usr/bin/env bash
# The whole test suite: installs what is needed (and only here), builds twice (plain with
# warnings as errors, then AddressSanitizer + UndefinedBehaviorSanitizer) and
# runs every test in both; builds Release with warnings as errors, with gcc and with clang
# (those three builds at the lowest priority, beside the plain tests). The last line is the total: "N passed, N failed".
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
# The plain build first; then, while its tests run (they mostly wait on
# sockets and timers), the other builds at the lowest priority, one after
# another: ASan + UBSan, whose tests come next, then a Release build with
# warnings as errors with gcc (-O3 finds warnings, -Wrestrict and
# -Wmaybe-uninitialized, that the passes above do not) and with clang (whose
# warnings differ again: -Wstring-concatenation reached CI that way). The
# two Release builds count as one check, built only.
stamp "build (plain)"
plain_ok=1
build build-test-plain "${common[@]}" || plain_ok=0
rm -rf build-test-logs && mkdir -p build-test-logs
(
    nice -n 19 bash -c "$(declare -f build); jobs=$jobs; build build-test-asan ${common[*]} -DJRPC_SANITIZE=ON" \
        > build-test-logs/asan.log 2>&1
    echo $? > build-test-logs/asan.rc
    rc=0
    for cc in gcc clang; do
        CC=$cc nice -n 19 bash -c "$(declare -f build); jobs=$jobs; build build-test-release-$cc \
            -DCMAKE_BUILD_TYPE=Release -DJRPC_WERROR=ON" >> build-test-logs/release.log 2>&1 || rc=1
    done
    echo $rc > build-test-logs/release.rc
) &
builds=$!
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# tests VARIANT [CTEST_OPTION...]: runs the ctest of build-test-VARIANT and
# adds its counts to the totals.
tests() {
    local dir=build-test-$1; shift
    stamp "tests (${dir#build-test-})"
    ctest --test-dir "$dir" -j"$jobs" --output-on-failure "$@" 2>&1 | tee "$dir/ctest.out"
    local line failed all
    line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$dir/ctest.out" | tail -n 1)
    failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
    all=$(echo "$line" | sed -E 's/.* tests failed out of ([0-9]+).*/\1/')
    if [ -z "$line" ]; then failed=1; all=1; fi
    total_pass=$((total_pass + all - failed))
    total_fail=$((total_fail + failed))
}
if [ $plain_ok = 1 ]; then tests plain; else total_fail=$((total_fail + 1)); fi
stamp "waiting for the ASan build"
while [ ! -f build-test-logs/asan.rc ]; do sleep 1; done
cat build-test-logs/asan.log
if [ "$(cat build-test-logs/asan.rc)" = 0 ]; then
    tests asan -LE fuzz   # the fuzz run has its own sanitizers
else
    total_fail=$((total_fail + 1))
fi
stamp "waiting for the Release builds (gcc and clang, -Werror; no tests)"
wait $builds
cat build-test-logs/release.log
if [ "$(cat build-test-logs/release.rc)" = 0 ]; then
    total_pass=$((total_pass + 1))
else
    total_fail=$((total_fail + 1))
fi
stamp "done"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]

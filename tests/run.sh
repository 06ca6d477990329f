#!/usr/bin/env bash
# The whole test suite: installs what is needed (and only here), builds twice (plain with
# gcc and warnings as errors, then AddressSanitizer + UndefinedBehaviorSanitizer with clang
# and warnings as errors) and runs every test in both; builds Release -O3 with gcc and
# warnings as errors (the last two builds at the lowest priority, beside the plain tests).
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
# The plain build (gcc) first; then, while its tests run, the other builds at
# the lowest priority, one after another: ASan + UBSan with clang (its
# warnings differ from gcc's, -Wstring-concatenation reached CI that way, so
# this build with warnings as errors is also the clang check), then Release
# with gcc and warnings as errors (-O3 finds warnings, -Wrestrict and
# -Wmaybe-uninitialized, that -O2 does not), built only.
# Most tests wait on sockets and timers, not on the CPU (issue 35: 915 s
# of wall time used ~55 % of two cores): each pass runs twice as many tests
# as there are cores, and the ASan pass starts as soon as its build is
# done, beside the end of the plain one. Its output is printed whole when
# it ends, so that the two passes do not interleave.
stamp "build (plain)"
plain_ok=1
build build-test-plain "${common[@]}" || plain_ok=0
rm -rf build-test-logs && mkdir -p build-test-logs
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
tjobs=$((jobs * 2))
# ctest_pass VARIANT [CTEST_OPTION...]: runs the ctest of build-test-VARIANT
# into build-test-VARIANT/ctest.out.
ctest_pass() {
    local dir=build-test-$1; shift
    ctest --test-dir "$dir" -j"$tjobs" --output-on-failure "$@" > "$dir/ctest.out" 2>&1
}
(
    CC=clang nice -n 19 bash -c "$(declare -f build); jobs=$jobs; build build-test-asan ${common[*]} -DJRPC_SANITIZE=ON" \
        > build-test-logs/asan.log 2>&1
    rc=$?
    echo $rc > build-test-logs/asan.rc
    [ $rc = 0 ] && { echo "=== tests (asan) started [$SECONDS s]" > build-test-logs/asan.start
                     ctest_pass asan -LE fuzz; }   # the fuzz run has its own sanitizers
    echo done > build-test-logs/asan.done
) &
asan=$!
(
    while [ ! -f build-test-logs/asan.rc ]; do sleep 1; done   # one build at a time
    CC=gcc nice -n 19 bash -c "$(declare -f build); jobs=$jobs; build build-test-release-gcc \
        -DCMAKE_BUILD_TYPE=Release -DJRPC_WERROR=ON" > build-test-logs/release.log 2>&1
    echo $? > build-test-logs/release.rc
) &
release=$!
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
    stamp "tests (plain)"
    ctest --test-dir build-test-plain -j"$tjobs" --output-on-failure 2>&1 | tee build-test-plain/ctest.out
    count plain
else
    total_fail=$((total_fail + 1))
fi
stamp "waiting for the ASan tests"
wait $asan
cat build-test-logs/asan.log
if [ "$(cat build-test-logs/asan.rc)" = 0 ]; then
    cat build-test-logs/asan.start build-test-asan/ctest.out
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

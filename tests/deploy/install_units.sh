#!/usr/bin/env bash
# `cmake --install` puts the programs, the libraries with their headers, the
# example config and the systemd units where deploy/ says; the units pass
# `systemd-analyze verify` with no complaint at all (it exits 0 even on a
# warning, so its output must be empty) once their /usr/local paths point at
# the installed copy; a broken unit is seen to be refused.
source "$JRPC_E2E_LIB"
: "${JRPC_BUILD:?set JRPC_BUILD to the build directory}"
P=$E2E_TMP/prefix
cmake --install "$JRPC_BUILD" --prefix "$P" > "$E2E_TMP/install.out" 2>&1
check "cmake --install exits 0" 0 $?
for f in bin/jrpc-broker bin/jrpc-worker bin/jrpc bin/jrpc-bench \
         lib/libjrpc-worker.a lib/libjrpc-client.a include/jrpc/jrpc_worker.h include/jrpc/jrpc_client.h \
         share/jrpc/README.md share/jrpc/config/broker.conf share/jrpc/config/worker.conf \
         share/jrpc/systemd/jrpc-broker.service share/jrpc/systemd/jrpc-worker@.service; do
    check "installed $f" 1 "$([ -s "$P/$f" ] && echo 1 || echo 0)"
done
check "the installed broker runs" 0 "$("$P/bin/jrpc-broker" --version >/dev/null 2>&1; echo $?)"

# A C worker builds against the installed headers and libraries alone.
cat > "$E2E_TMP/w.c" <<'C'
#include <jrpc/jrpc_worker.h>
int main(void) { jrpc_worker_t *w = jrpc_worker_new(NULL); jrpc_worker_destroy(&w); return 0; }
C
san=()   # a sanitized build installs sanitized libraries
grep -q '^JRPC_SANITIZE:BOOL=ON' "$JRPC_BUILD/CMakeCache.txt" && san=(-fsanitize=address,undefined)
cc "${san[@]}" -I"$P/include" -I"$P/include/jrpc" "$E2E_TMP/w.c" -o "$E2E_TMP/w" -L"$P/lib" -ljrpc-worker -ljrpc_io \
    -ljrpc_proto $(pkg-config --libs libzmq libuv msgpack libcrypto) -lm > "$E2E_TMP/cc.out" 2>&1
check "a worker compiles and links against the installed library" "0 " "$? $(head -c 600 "$E2E_TMP/cc.out")"

if ! command -v systemd-analyze >/dev/null; then
    check "systemd-analyze installed (deploy/deps.sh)" 0 1; e2e_finish
fi
U=$E2E_TMP/units
mkdir -p "$U"
for f in "$P"/share/jrpc/systemd/*; do
    sed "s#/usr/local/#$P/#g" "$f" > "$U/$(basename "$f")"
done
verify() { systemd-analyze verify --man=no "$@" 2>&1; echo "rc=$?"; }
check "systemd-analyze verify jrpc-broker.service" "rc=0" "$(verify "$U/jrpc-broker.service")"
check "systemd-analyze verify jrpc-worker@.service" "rc=0" "$(verify "$U/jrpc-worker@.service")"
cp "$U/jrpc-worker@.service" "$U/jrpc-worker@7.service"
check "systemd-analyze verify jrpc-worker@7.service (an instance)" "rc=0" "$(verify "$U/jrpc-worker@7.service")"
for key in Type=notify DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes; do
    check "both units have $key" 2 "$(cat "$U/jrpc-broker.service" "$U/jrpc-worker@.service" | grep -cx "$key")"
done
sed -i 's/^ProtectSystem=strict/ProtectSytem=strict/' "$U/jrpc-broker.service"
check "a misspelt option is reported" 1 "$(verify "$U/jrpc-broker.service" | grep -c "Unknown key 'ProtectSytem'")"
e2e_finish

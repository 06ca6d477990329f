#!/usr/bin/env bash
# The installed C libraries are usable as they are: after `cmake --install`
# into a fresh prefix, a tiny client and a tiny worker compile and link with
# nothing but `pkg-config --cflags --libs jrpc-client` / `jrpc-worker`, and a
# tiny CMake project with find_package(jrpc) and jrpc::client links too. The
# installed headers do not expose the wire codec. Then the worker serves a
# real broker and both clients call it.
source "$JRPC_E2E_LIB"
BUILD=$(cd "$JRPC_BIN/.." && pwd)
P=$E2E_TMP/prefix
cmake --install "$BUILD" --prefix "$P" > "$E2E_TMP/install.out" 2>&1
check "cmake --install exits 0" 0 $?
check "no wire codec among the installed headers" "" \
    "$(ls "$P/include/jrpc" | grep -E 'jrpc_(wire|trace|json|batch|sign)\.h')"
export PKG_CONFIG_PATH=$(dirname "$(find "$P" -name jrpc-client.pc)")
san=()   # a sanitized build installs sanitized libraries
grep -q '^JRPC_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" && san=(-fsanitize=address,undefined)

cat > "$E2E_TMP/client.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <jrpc_client.h>
int main(int argc, char **argv)
{
    jrpc_client_t *c = jrpc_client_new(argv[1], NULL);
    if (c == NULL)
        return 2;
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    jrpc_client_header_t h = { .timeout_ms = 5000 };
    int rc = jrpc_client_send(c, argv[2], strlen(argv[2]), &h, &reply, -1);
    if (rc < 0)
        fprintf(stderr, "%s\n", jrpc_client_last_error(c));
    else
        printf("%.*s\n", (int)reply.len, reply.p);
    jrpc_buf_dispose(&reply);
    jrpc_client_destroy(&c);
    return rc < 0;
}
C
cat > "$E2E_TMP/worker.c" <<'C'
#include <jrpc_errors.h>
#include <jrpc_worker.h>
static void on_triple(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)arg;
    if (params->type != MSGPACK_OBJECT_ARRAY || params->via.array.size != 1
        || params->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        jrpc_wcall_error(call, JRPC_INVALID_PARAMS, "Invalid params");
        return;
    }
    msgpack_pack_uint64(jrpc_wcall_result(call), params->via.array.ptr[0].via.u64 * 3);
    jrpc_wcall_finish(call);
}
int main(int argc, char **argv)
{
    jrpc_worker_t *w = jrpc_worker_new(NULL);
    if (w == NULL || jrpc_worker_handle(w, "triple", on_triple, NULL) < 0
        || jrpc_worker_connect(w, argv[1]) < 0)
        return 1;
    int rc = jrpc_worker_run(w);
    jrpc_worker_destroy(&w);
    return rc < 0;
}
C
cc "${san[@]}" "$E2E_TMP/client.c" -o "$E2E_TMP/client" $(pkg-config --cflags --libs jrpc-client) \
    > "$E2E_TMP/cc-client.out" 2>&1
check "client: cc x.c \$(pkg-config --cflags --libs jrpc-client)" "0 " "$? $(head -c 800 "$E2E_TMP/cc-client.out")"
cc "${san[@]}" "$E2E_TMP/worker.c" -o "$E2E_TMP/worker" $(pkg-config --cflags --libs jrpc-worker) \
    > "$E2E_TMP/cc-worker.out" 2>&1
check "worker: cc x.c \$(pkg-config --cflags --libs jrpc-worker)" "0 " "$? $(head -c 800 "$E2E_TMP/cc-worker.out")"

mkdir -p "$E2E_TMP/proj"
cp "$E2E_TMP/client.c" "$E2E_TMP/proj/"
cat > "$E2E_TMP/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(jrpc_user C)
find_package(jrpc 0.1 REQUIRED)
add_executable(client client.c)
target_link_libraries(client PRIVATE jrpc::client)
CM
cflags=; [ ${#san[@]} -gt 0 ] && cflags=-fsanitize=address,undefined
{ cmake -S "$E2E_TMP/proj" -B "$E2E_TMP/proj/build" -DCMAKE_PREFIX_PATH="$P" \
      -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$cflags" &&
  cmake --build "$E2E_TMP/proj/build"; } > "$E2E_TMP/cmake-proj.out" 2>&1
check "a CMake project with find_package(jrpc) and jrpc::client builds" "0 " \
    "$? $(grep -iE 'error' "$E2E_TMP/cmake-proj.out" | head -c 800)"

E2E_HTTP=1 e2e_start_broker
"$E2E_TMP/worker" "$WORKERS_EP" > "$E2E_TMP/tiny-worker.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_workers 1
CALL='{"jsonrpc":"2.0","method":"triple","params":[14],"id":1}'
check "the pkg-config client calls the pkg-config worker (zmq)" '{"jsonrpc":"2.0","result":42,"id":1}' \
    "$("$E2E_TMP/client" "$URL" "$CALL" 2>&1)"
check "... and over http" '{"jsonrpc":"2.0","result":42,"id":1}' \
    "$("$E2E_TMP/client" "$HTTP_URL" "$CALL" 2>&1)"
check "the find_package(jrpc) client too" '{"jsonrpc":"2.0","result":42,"id":1}' \
    "$("$E2E_TMP/proj/build/client" "$URL" "$CALL" 2>&1)"
e2e_finish

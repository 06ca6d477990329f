#!/usr/bin/env bash
# The include graph keeps its layers: proto/ includes only proto/; http/
# (the HTTP layer, pure code) only proto/ and http/; io/ (loop glue, and the
# admin server over http/'s reader) only proto/, http/ and io/;
# broker/ proto/, http/, io/ and broker/, in three rooms (issue 31): the
# process at broker/'s top (main, metrics, reload) may include every room;
# broker/front/ (the transports) broker/ and broker/core/, never
# broker/guard/; broker/core/ (admission, dispatch, gathering) broker/ and
# broker/guard/, never a front; broker/guard/ (signatures, Redis, claims,
# budgets) only broker/ and itself; worker/ and client/ only proto/,
# io/ and their own folder (never each other); and no header of ours includes itself back
# through others (tsort finds any cycle). The link lines say the same for
# libraries; this says it for every #include, headers included.
#
#   bash tests/layers.sh            the self-test, then this repository (ctest test_layers)
#   bash tests/layers.sh ROOT       the tree at ROOT only
#   bash tests/layers.sh --self-test
#                                   that it fails where it must: trees made up in a
#                                   temporary folder with an upward include, a
#                                   sibling include, a cycle, two headers of one name
# Exit 0 when the layers hold, 1 with one line per offending #include.
set -u

# allowed FOLDER: the folders whose headers FOLDER's files may include.
allowed() {
    case $1 in
    proto)  echo "proto" ;;
    http)   echo "proto http" ;;
    io)     echo "proto http io" ;;
    broker) echo "proto http io broker broker/front broker/core broker/guard" ;;
    broker/front) echo "proto http io broker broker/front broker/core" ;;   # never guard
    broker/core)  echo "proto http io broker broker/core broker/guard" ;;   # no transport
    broker/guard) echo "proto http io broker broker/guard" ;;               # no connection
    worker) echo "proto io worker" ;;
    client) echo "proto io client" ;;
    esac
}
LAYERS="proto http io broker broker/front broker/core broker/guard worker client"

# check ROOT: prints the offences, returns 1 when there is any.
check() {
    local root=$1 bad=0 dir f h inc owner line
    declare -A home=()          # header basename -> its folder
    for dir in $LAYERS; do
        for h in "$root/$dir"/*.h; do
            [ -e "$h" ] || continue
            inc=${h##*/}
            if [ -n "${home[$inc]:-}" ]; then
                echo "layers: $inc is in both ${home[$inc]}/ and $dir/: includes are ambiguous"
                bad=1
            fi
            home[$inc]=$dir
        done
    done
    local edges
    edges=$(mktemp)
    for dir in $LAYERS; do
        for f in "$root/$dir"/*.c "$root/$dir"/*.h; do
            [ -e "$f" ] || continue
            while IFS= read -r line; do
                [[ ${line#*:} =~ include[[:space:]]*[\<\"]([^\>\"]+) ]] || continue
                inc=${BASH_REMATCH[1]##*/}
                owner=${home[$inc]:-}
                [ -n "$owner" ] || continue          # a system or library header
                if [[ " $(allowed "$dir") " != *" $owner "* ]]; then
                    echo "layers: $dir/${f##*/}:${line%%:*}: includes $owner/$inc ($dir/ may include $(allowed "$dir" | sed 's/ /\/, /g')/ only)"
                    bad=1
                fi
                [[ $f == *.h ]] && echo "$dir/${f##*/} $owner/$inc" >>"$edges"
            done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$f")
        done
    done
    # A header that includes itself, directly or through others.
    local loop
    if ! loop=$(tsort "$edges" 2>&1 >/dev/null); then
        echo "layers: include cycle among headers:"
        sed -e '/input contains a loop/d' -e 's/^tsort: /  /' <<<"$loop"
        bad=1
    fi
    rm -f "$edges"
    return $bad
}

# A made-up tree: files given as PATH=CONTENT pairs.
make_tree() {
    local root=$1 spec
    shift
    for spec in "$@"; do
        mkdir -p "$root/$(dirname "${spec%%=*}")"
        printf '%b\n' "${spec#*=}" >"$root/${spec%%=*}"
    done
}

self_test() {
    local t fails=0 name want root
    t=$(mktemp -d)
    # name, exit status wanted, then the files
    run_case() {
        name=$1 want=$2
        shift 2
        root=$t/$name
        make_tree "$root" "$@"
        check "$root" >"$t/$name.out"
        local got=$?
        if [ "$got" != "$want" ]; then
            echo "layers self-test: $name: exit $got, wanted $want"
            cat "$t/$name.out"
            fails=1
        fi
    }
    local base=(
        'proto/jrpc_a.h=#include <stdint.h>\n#include "jrpc_b.h"'
        'proto/jrpc_b.h=#include <msgpack.h>'
        'io/jrpc_io.h=#include "jrpc_a.h"'
        'broker/jrpc_br.h=#include "jrpc_io.h"'
        'worker/jrpc_wk.h=#include "jrpc_a.h"'
        'client/jrpc_cl.h=#include "jrpc_b.h"\n#include "jrpc_io.h"'
        'broker/front/jrpc_fr.h=#include "jrpc_co.h"\n#include "jrpc_br.h"'
        'broker/core/jrpc_co.h=#include "jrpc_gu.h"'
        'broker/guard/jrpc_gu.h=#include "jrpc_br.h"\n#include "jrpc_a.h"'
    )
    run_case good 0 "${base[@]}" 'broker/x.c=#include "jrpc_br.h"\n#include "jrpc_a.h"'
    run_case rooms_good 0 "${base[@]}" 'broker/main.c=#include "jrpc_fr.h"\n#include "jrpc_gu.h"'
    run_case front_to_guard 1 "${base[@]}" 'broker/front/x.c=#include "jrpc_gu.h"'
    run_case core_to_front 1 "${base[@]}" 'broker/core/x.c=#include "jrpc_fr.h"'
    run_case guard_to_core 1 "${base[@]}" 'broker/guard/x.c=#include "jrpc_co.h"'
    run_case guard_to_front 1 "${base[@]}" 'broker/guard/jrpc_g2.h=#include "jrpc_fr.h"'
    run_case worker_to_room 1 "${base[@]}" 'worker/x.c=#include "jrpc_co.h"'
    run_case proto_up 1 "${base[@]}" 'proto/x.c=#include "jrpc_io.h"'
    run_case proto_to_broker 1 "${base[@]}" 'proto/x.c=#include "../broker/jrpc_br.h"'
    run_case io_up 1 "${base[@]}" 'io/x.c=  #  include <jrpc_wk.h>'
    run_case sibling 1 "${base[@]}" 'worker/x.c=#include "jrpc_cl.h"'
    run_case header_up 1 "${base[@]}" 'proto/jrpc_c.h=#include "jrpc_cl.h"'
    run_case cycle 1 "${base[@]}" 'proto/jrpc_c.h=#include "jrpc_d.h"' 'proto/jrpc_d.h=#include "jrpc_c.h"'
    run_case same_name 1 "${base[@]}" 'io/jrpc_a.h=/* a second jrpc_a.h */'
    # And the offence is named.
    grep -q 'proto/x.c:1: includes io/jrpc_io.h' "$t/proto_up.out" ||
        { echo "layers self-test: proto_up: offence not named"; cat "$t/proto_up.out"; fails=1; }
    grep -q 'broker/front/x.c:1: includes broker/guard/jrpc_gu.h' "$t/front_to_guard.out" ||
        { echo "layers self-test: front_to_guard: offence not named"; cat "$t/front_to_guard.out"; fails=1; }
    [ "$fails" = 0 ] && echo "layers self-test: every made-up offence was caught"
    rm -rf "$t"
    return $fails
}

case ${1:-} in
--self-test)
    self_test
    exit $? ;;
"")
    self_test || exit 1
    root=$(cd "$(dirname "$0")/.." && pwd) ;;
*)
    root=$1 ;;
esac
if check "$root"; then
    echo "layers: ok (proto < http < io < broker (front -> core -> guard) | worker | client, no include cycle)"
    exit 0
fi
exit 1

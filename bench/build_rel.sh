# Sourced by the bench scripts: one way to build what a benchmark runs.
#
#   build_rel DIR [-DOPTION...] [TARGET...]
#
# Configures DIR as a Release build of the tree this file is in (or of
# BUILD_REL_SRC, for a scratch worktree), with any -D options given, then
# builds the TARGETs (all when none), -j as many cores as the machine has.
# Quiet when it works; on failure prints the build's errors (the whole log
# is DIR/build-rel.log) and returns non-zero, so a `set -e` script stops.
build_rel() {
    local dir=$1 src=${BUILD_REL_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
    shift
    local opts=() targets=() a
    for a in "$@"; do
        case $a in
            -D*) opts+=("$a") ;;
            *)   targets+=(--target "$a") ;;
        esac
    done
    mkdir -p "$dir"
    if ! { cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release "${opts[@]}" &&
           cmake --build "$dir" -j"$(nproc)" "${targets[@]}"; } >"$dir/build-rel.log" 2>&1; then
        grep -E 'error|Error|\*\*\*' "$dir/build-rel.log" | head -20 >&2
        echo "build_rel: building $dir failed (see $dir/build-rel.log)" >&2
        return 1
    fi
}

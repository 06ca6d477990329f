# tests/deploy/npm_tools.sh — sourced: sets NODE_TOOLS to the node_modules of
# the pinned npm validators (tests/deploy/package-lock.json). It never
# installs: tests/run.sh runs tests/deploy/npm_install.sh before ctest, so a
# test only uses what is there ($JRPC_DEPLOY_TOOLS overrides the folder).
deploy_npm_tools() {
    local src dir
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    dir=${JRPC_DEPLOY_TOOLS:-$src/node_modules}
    if ! cmp -s "$src/package-lock.json" "$dir/.jrpc-lock.json"; then
        echo "the npm validators are not installed or not at the lock file's versions: bash tests/deploy/npm_install.sh"
        return 1
    fi
    NODE_TOOLS=$dir
}

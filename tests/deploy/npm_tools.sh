# tests/deploy/npm_tools.sh — sourced: installs the pinned npm validators of
# tests/deploy/package-lock.json into $JRPC_DEPLOY_TOOLS (default
# build/deploy-tools) once, then sets NODE_TOOLS to their node_modules.
# Serialised with flock: several checks may ask at once.
deploy_npm_tools() {
    local src dir
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    dir=${JRPC_DEPLOY_TOOLS:-$src/../../build/deploy-tools}
    command -v npm >/dev/null || { echo "npm is not installed (the validators come from the npm registry)"; return 1; }
    mkdir -p "$dir"
    (
        flock 9
        if ! cmp -s "$src/package-lock.json" "$dir/package-lock.json" || [ ! -d "$dir/node_modules" ]; then
            cp "$src/package.json" "$src/package-lock.json" "$dir/"
            (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1) ||
                { cat "$dir/npm.log"; rm -f "$dir/package-lock.json"; exit 1; }
        fi
    ) 9>"$dir/.lock" || return 1
    NODE_TOOLS=$dir/node_modules
}

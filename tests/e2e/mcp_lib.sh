# tests/e2e/mcp_lib.sh — what the MCP e2e scripts share: curl required, no
# node is a SKIP (exit 0), NODE_MODS is tests/mcp/node_modules, and the SDK
# and the servers a script names must be installed there (else exit 1:
# tests/mcp/npm_install.sh installs them, never the test). Source it after
# lib.sh, then:
#   mcp_need server-everything [server-memory ...]
HERE=$(dirname "$JRPC_E2E_LIB")
NODE_MODS=$(cd "$HERE/../mcp" && pwd)/node_modules

mcp_need() {
    command -v curl >/dev/null || { echo "curl is required"; exit 1; }
    if ! command -v node >/dev/null; then
        echo "SKIP: node is not installed, so the MCP SDK check cannot run (bash deploy/deps.sh)"
        exit 0
    fi
    local p
    for p in sdk/package.json "${@/%//dist/index.js}"; do
        [ -f "$NODE_MODS/@modelcontextprotocol/$p" ] ||
            { echo "@modelcontextprotocol/${p%%/*} is not installed: bash tests/mcp/npm_install.sh (tests/run.sh does)"; exit 1; }
    done
}

# Sourced by .ci/run and by the load bench (benches/load/mcp.rs), after .ci/node22.sh: installs
# the MCP reference servers the bridge tests mount and the bench measures, pinned, under
# `$CARGO_TARGET_DIR/mcp-servers` (once; reused while each package there is its pinned
# version), and exports where they are: TOOLD_TEST_MCP_SERVERS (the npm prefix, absolute) and
# TOOLD_TEST_NODE (the Node 22 first on PATH; the packages declare no `engines`, Node 22 is the
# one the other MCP checks use). The versions were npm's latest when pinned.
MCP_SERVER_FILESYSTEM_VERSION=2026.8.31
MCP_SERVER_EVERYTHING_VERSION=2026.8.31
MCP_SERVERS_PREFIX="${CARGO_TARGET_DIR:-target}/mcp-servers"
mcp_server_is() { # package version: whether the installed package is that version
  node -e "process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)" \
    "$(realpath -m "$MCP_SERVERS_PREFIX/node_modules/@modelcontextprotocol/$1/package.json")" "$2" \
    2>/dev/null
}
if ! mcp_server_is server-filesystem "$MCP_SERVER_FILESYSTEM_VERSION" \
    || ! mcp_server_is server-everything "$MCP_SERVER_EVERYTHING_VERSION"; then
  rm -rf "$MCP_SERVERS_PREFIX"
  npm install --prefix "$MCP_SERVERS_PREFIX" --no-save --no-audit --no-fund --silent \
    "@modelcontextprotocol/server-filesystem@$MCP_SERVER_FILESYSTEM_VERSION" \
    "@modelcontextprotocol/server-everything@$MCP_SERVER_EVERYTHING_VERSION"
fi
TOOLD_TEST_MCP_SERVERS="$(cd "$MCP_SERVERS_PREFIX" && pwd)"
TOOLD_TEST_NODE="$(command -v node)"
export TOOLD_TEST_MCP_SERVERS TOOLD_TEST_NODE

# Sourced by .ci/run after .ci/node22.sh: installs the old and per-call MCP clients the MCP
# tests drive (tests/it/mcp/old_clients.rs, tests/it/mcp/langchain.rs), pinned, under the
# target directory (once; reused while each still answers its pinned version), and exports
# where they are:
# - TOOLD_TEST_MCP_TS_SDK_OLD: an npm prefix holding the TypeScript SDK 1.11.0 (its content
#   schemas predate `resource_link`);
# - TOOLD_TEST_MCP_PY_OLD: a Python with the Python SDK 1.9.4 (the 2025-03-26 era SDK), with a
#   pydantic it works with;
# - TOOLD_TEST_LANGCHAIN_PY: a Python with langchain-mcp-adapters 0.3.2 and an `mcp` 1.x it
#   works with (it opens a new MCP session per tool call by default).
MCP_TS_SDK_OLD_VERSION=1.11.0
MCP_PY_OLD_VERSION=1.9.4
MCP_PY_OLD_PYDANTIC=2.11.7
LANGCHAIN_MCP_ADAPTERS_VERSION=0.3.2
LANGCHAIN_MCP_VERSION=1.30.0
MCP_CLIENTS_PREFIX="${CARGO_TARGET_DIR:-target}/mcp-clients"
mkdir -p "$MCP_CLIENTS_PREFIX"
MCP_TS_SDK_OLD_PREFIX="$MCP_CLIENTS_PREFIX/ts-sdk-$MCP_TS_SDK_OLD_VERSION"
if ! node -e "process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)" \
    "$(realpath -m "$MCP_TS_SDK_OLD_PREFIX/node_modules/@modelcontextprotocol/sdk/package.json")" \
    "$MCP_TS_SDK_OLD_VERSION" 2>/dev/null; then
  rm -rf "$MCP_TS_SDK_OLD_PREFIX"
  npm install --prefix "$MCP_TS_SDK_OLD_PREFIX" --no-save --no-audit --no-fund --silent \
    "@modelcontextprotocol/sdk@$MCP_TS_SDK_OLD_VERSION"
fi
mcp_clients_venv() { # dir check-python pip-requirements...: a venv at dir passing the check
  local dir="$1" check="$2"
  shift 2
  if ! "$dir/bin/python" -c "$check" 2>/dev/null; then
    python3 -m venv --help >/dev/null 2>&1 || (apt-get update && apt-get install -y python3-venv)
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
  fi
}
MCP_PY_OLD_VENV="$MCP_CLIENTS_PREFIX/py-mcp-$MCP_PY_OLD_VERSION"
mcp_clients_venv "$MCP_PY_OLD_VENV" \
  "import importlib.metadata as m, mcp.client.streamable_http; assert m.version('mcp') == '$MCP_PY_OLD_VERSION'" \
  "mcp==$MCP_PY_OLD_VERSION" "pydantic==$MCP_PY_OLD_PYDANTIC"
LANGCHAIN_VENV="$MCP_CLIENTS_PREFIX/py-langchain-mcp-adapters-$LANGCHAIN_MCP_ADAPTERS_VERSION"
mcp_clients_venv "$LANGCHAIN_VENV" \
  "import importlib.metadata as m, langchain_mcp_adapters.client; assert m.version('langchain-mcp-adapters') == '$LANGCHAIN_MCP_ADAPTERS_VERSION' and m.version('mcp') == '$LANGCHAIN_MCP_VERSION'" \
  "langchain-mcp-adapters==$LANGCHAIN_MCP_ADAPTERS_VERSION" "mcp==$LANGCHAIN_MCP_VERSION"
TOOLD_TEST_MCP_TS_SDK_OLD="$(cd "$MCP_TS_SDK_OLD_PREFIX" && pwd)"
TOOLD_TEST_MCP_PY_OLD="$(cd "$MCP_PY_OLD_VENV" && pwd)/bin/python"
TOOLD_TEST_LANGCHAIN_PY="$(cd "$LANGCHAIN_VENV" && pwd)/bin/python"
export TOOLD_TEST_MCP_TS_SDK_OLD TOOLD_TEST_MCP_PY_OLD TOOLD_TEST_LANGCHAIN_PY

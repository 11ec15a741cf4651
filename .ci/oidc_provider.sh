# Sourced by .ci/run after .ci/node22.sh: installs the authorization server of the OIDC tests
# (tests/it/oidc/): panva's oidc-provider, pinned, under `$CARGO_TARGET_DIR/oidc-provider`
# (once; reused while it is that version), and exports TOOLD_TEST_OIDC_PROVIDER (the npm
# prefix, absolute) for `cargo test`. The tests run tests/it/oidc/provider.mjs under the Node 22
# first on PATH (TOOLD_TEST_NODE). The version was npm's latest 9.x when pinned.
OIDC_PROVIDER_VERSION=9.13.3
OIDC_PROVIDER_PREFIX="${CARGO_TARGET_DIR:-target}/oidc-provider"
if ! node -e "process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)" \
    "$(realpath -m "$OIDC_PROVIDER_PREFIX/node_modules/oidc-provider/package.json")" \
    "$OIDC_PROVIDER_VERSION" 2>/dev/null; then
  rm -rf "$OIDC_PROVIDER_PREFIX"
  npm install --prefix "$OIDC_PROVIDER_PREFIX" --no-save --no-audit --no-fund --silent \
    "oidc-provider@$OIDC_PROVIDER_VERSION"
fi
TOOLD_TEST_OIDC_PROVIDER="$(cd "$OIDC_PROVIDER_PREFIX" && pwd)"
export TOOLD_TEST_OIDC_PROVIDER

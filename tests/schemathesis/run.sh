#!/usr/bin/env bash
# Schemathesis holds the daemon to its own OpenAPI document (issue 21): every phase
# (examples, coverage, fuzzing, stateful), every check, against a real daemon with a token.
# Zero failures pass; afterwards the daemon must still answer /healthz.
#
# Usage: tests/schemathesis/run.sh TOOLD_BINARY VENV_DIR
# Installs schemathesis (pinned) into VENV_DIR once and reuses it while it is that version.
# The number of generated requests is in the summary it prints ("Test cases: N generated").
set -euo pipefail
TOOLD="$(realpath "$1")"
# Per-operation settings (why each one is there: in the file).
CONFIG="$(realpath "$(dirname "$0")/schemathesis.toml")"
VENV="$(realpath -m "$2")"
VERSION=4.32.5
if [[ "$("$VENV/bin/st" --version 2>/dev/null)" != *"$VERSION"* ]]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
fi
WORK="$(mktemp -d)"
TOKEN="schemathesis-$RANDOM$RANDOM"
coproc DAEMON { exec "$TOOLD" serve --listen 127.0.0.1:0 --data-dir "$WORK/data" \
  --auth-token "$TOKEN" 2>"$WORK/toold.log"; }
DAEMON_CHILD=$DAEMON_PID
trap 'kill "$DAEMON_CHILD" 2>/dev/null || true; rm -rf "$WORK"' EXIT
read -r -t 120 LISTENING <&"${DAEMON[0]}"
BASE="${LISTENING#toold listening on }"
status=0
# A request that hangs (an event stream the stateful phase opened) ends after 10 s. Run from
# the scratch directory: schemathesis keeps a cache (.schemathesis/) where it runs.
cd "$WORK"
"$VENV/bin/st" --config-file "$CONFIG" run "$BASE/openapi.json" ${TOOLD_SCHEMATHESIS_ONLY:+--include-path-regex "$TOOLD_SCHEMATHESIS_ONLY"} --checks all --continue-on-failure \
  --header "Authorization: Bearer $TOKEN" --request-timeout 10 \
  --max-examples "${TOOLD_SCHEMATHESIS_EXAMPLES:-50}" --no-color || status=$?
if ! curl -fsS "$BASE/healthz" >/dev/null; then
  echo "schemathesis: the daemon no longer answers /healthz; its log:" >&2
  tail -50 "$WORK/toold.log" >&2
  exit 1
fi
if [[ $status -ne 0 ]]; then
  echo "schemathesis: failures (above); the daemon's log ends:" >&2
  tail -20 "$WORK/toold.log" >&2
  exit "$status"
fi
echo "schemathesis: no failures, and the daemon answers /healthz"

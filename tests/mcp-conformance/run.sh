#!/usr/bin/env bash
# Runs the official MCP conformance suite against a toold built with the feature
# mcp-conformance-fixtures (README.md here says why and what passes), once per required
# revision: starts the daemon on 127.0.0.1:0 with a fresh data dir, runs
# `conformance server --requirements REVISION` for 2025-11-25 and 2026-07-28, prints each
# run's summary, and fails if either run fails (a scored scenario failed).
#
# usage: run.sh TOOLD_BINARY CONFORMANCE_BINARY
set -euo pipefail
TOOLD="$1"
CONFORMANCE="$2"
WORK="$(mktemp -d)"
coproc FIXTURE_TOOLD { exec "$TOOLD" serve --listen 127.0.0.1:0 --data-dir "$WORK/data" 2>"$WORK/toold.log"; }
FIXTURE_TOOLD_CHILD=$FIXTURE_TOOLD_PID
trap 'kill "$FIXTURE_TOOLD_CHILD" 2>/dev/null || true; rm -rf "$WORK"' EXIT
read -r -t 120 LISTENING <&"${FIXTURE_TOOLD[0]}"
URL="http://${LISTENING#toold listening on http://}/mcp"
FAILED=""
for REVISION in 2025-11-25 2026-07-28; do
  echo "MCP conformance suite, --requirements $REVISION, against $URL"
  # The suite writes its checks under the output dir; its summary goes to stdout.
  if ! "$CONFORMANCE" server --url "$URL" --requirements "$REVISION" \
      --output-dir "$WORK/results-$REVISION" >"$WORK/suite-$REVISION.txt" 2>&1; then
    FAILED="$FAILED $REVISION"
    # The whole run's output, so the failing checks' messages are in the CI log.
    cat "$WORK/suite-$REVISION.txt"
  else
    sed -n '/=== SUMMARY ===/,$p' "$WORK/suite-$REVISION.txt"
  fi
done
if [ -n "$FAILED" ]; then
  echo "the MCP conformance suite failed for:$FAILED; daemon log:" >&2
  cat "$WORK/toold.log" >&2
  exit 1
fi

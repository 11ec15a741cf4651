#!/usr/bin/env bash
# toold's MCP door driven by the MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`,
# 2.x, unmodified): the same checks as python_client.py, one Inspector invocation per request.
#
#   inspector.sh http  BASE_URL [--token TOKEN]   # Streamable HTTP, e.g. http://127.0.0.1:7070
#   inspector.sh stdio TOOLD_BINARY               # `toold mcp` over stdio, spawned per request
#
# The Inspector is `$MCP_INSPECTOR` (default: `mcp-inspector` on PATH); it needs Node >= 22.
#
# Each Inspector invocation is its own MCP connection (it connects, sends one request, exits
# without ending the MCP session), so the state a run builds up (a file written, then read
# and grepped; an offloaded output, then read) has to live in one toold session across
# invocations:
#
# - http, legacy era (2025-11-25, `initialize`): on `/v1/sessions/{id}/mcp`, a session this
#   script creates over HTTP first. On `/mcp` every `initialize` gets a session of its own
#   (with a fresh workspace), so there only `tools/list` is checked.
# - http, modern era (2026-07-28, stateless): on `/mcp`, the caller's default session.
# - stdio, both eras: `toold mcp --working-directory DIR --data-dir DATA`, the same DIR and
#   DATA for every invocation (an offloaded output is in DATA's store, so a later process
#   reads it back).
#
# In each: tools/list names read_file, write_file, bash and grep_search; write_file then
# read_file give the content back; bash `echo hi` (passed with `--tool-arg key=value`, the
# others with `--tool-args-json`); grep_search finds the word written; read_file of a missing
# file is a tool failure (`isError: true`, the Inspector's exit 5); a bash output too large to
# inline is a preview plus a `resource_link` to `toold://results/{id}`, read back with
# `--method resources/read --uri 'toold://results/{id}?offset=&limit='` in pages (and one page
# without a limit) that reassemble to the whole output. The era is checked too: rmcp stamps
# `ttlMs` on a 2026-era result and leaves it off a 2025-era one. Any mismatch exits non-zero
# with what was expected and what came back.
set -euo pipefail

INSPECTOR="${MCP_INSPECTOR:-mcp-inspector}"
REQUIRED_TOOLS="read_file,write_file,bash,grep_search"
# Larger than bash's offload threshold, so the output is offloaded; read back in PAGE pages.
LARGE_COUNT=100000
PAGE=200000

usage() {
  sed -n '2,8p' "$0" >&2
  exit 2
}

fail() {
  echo "MCP Inspector ($LABEL): $*" >&2
  exit 1
}

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# The Inspector keeps its catalog and client config under ~/.mcp-inspector: a private HOME
# keeps a run from reading or leaving anything there.
mkdir -p "$WORK/home"

# The transport's arguments, set per target; they go last (`--` then the stdio command).
TARGET_ARGS=()
LABEL=""

# inspect OUT [ARGS...]: one Inspector request; its JSON result in OUT, its exit code returned.
inspect() {
  local out="$1"
  shift
  local status=0
  HOME="$WORK/home" timeout 120 "$INSPECTOR" --cli --format json --quiet "$@" "${TARGET_ARGS[@]}" \
    >"$out" 2>"$out.err" || status=$?
  return "$status"
}

# inspect_ok OUT WHAT [ARGS...]: a request that must succeed.
inspect_ok() {
  local out="$1" what="$2"
  shift 2
  inspect "$out" "$@" || fail "$what: the Inspector exited $? ($(cat "$out.err"))"
}

# check WHAT FILE PYTHON [ARGS...]: runs PYTHON with `r` = the file's JSON `result` and `args`;
# it prints nothing when the answer is right, else what is wrong (then this exits 1).
check() {
  local what="$1" file="$2" code="$3"
  shift 3
  local problem
  problem="$(python3 - "$file" "$@" <<EOF
import json, sys
r = json.load(open(sys.argv[1])).get("result")
args = sys.argv[2:]
def text(r):
    content = (r or {}).get("content") or []
    if r.get("isError") or not content or content[0].get("type") != "text":
        print(f"not a successful text result: {json.dumps(r)[:400]}")
        sys.exit()
    return content[0]["text"]
$code
EOF
)" || fail "$what: the check itself failed"
  [[ -z "$problem" ]] || fail "$what: $problem"
}

# exercise ERA: the whole run in the current target, with that Inspector protocol era.
exercise() {
  local era="$1"
  local word="marker$RANDOM$RANDOM$RANDOM"
  local path="mcp-inspector/$era-$word.txt"
  local content
  content=$'first line\nthe word '"$word"$' is here\n'
  TARGET_ARGS=(--protocol-era "$era" "${TARGET_BASE[@]}")

  inspect_ok "$WORK/list.json" "tools/list" --method tools/list
  check "tools/list" "$WORK/list.json" '
names = {tool["name"] for tool in r["tools"]}
missing = set(args[0].split(",")) - names
if missing:
    print(f"lacks {sorted(missing)}: {sorted(names)}")' "$REQUIRED_TOOLS"

  local write
  write="$(python3 -c 'import json, sys; print(json.dumps({"file_path": sys.argv[1], "content": sys.argv[2]}))' "$path" "$content")"
  inspect_ok "$WORK/write.json" "write_file" --method tools/call --tool-name write_file --tool-args-json "$write"
  check "write_file" "$WORK/write.json" 'text(r)'

  inspect_ok "$WORK/read.json" "read_file" --method tools/call --tool-name read_file \
    --tool-args-json "{\"file_path\": \"$path\"}"
  # read_file numbers its lines (`cat -n` style): compare the lines' text.
  check "read_file" "$WORK/read.json" '
read = text(r)
lines = [line.split("\t", 1)[1] for line in read.splitlines() if "\t" in line]
if lines != args[0].splitlines():
    print(f"gave {read!r}, expected {args[0]!r} numbered")' "$content"

  inspect_ok "$WORK/echo.json" "bash echo" --method tools/call --tool-name bash --tool-arg "command=echo hi"
  check "bash echo" "$WORK/echo.json" '
if text(r).strip() != "hi":
    print(f"bash `echo hi` gave {text(r)!r}")'

  inspect_ok "$WORK/grep.json" "grep_search" --method tools/call --tool-name grep_search \
    --tool-args-json "{\"pattern\": \"$word\", \"path\": \"mcp-inspector\", \"output_mode\": \"content\"}"
  check "grep_search" "$WORK/grep.json" '
if f"the word {args[0]} is here" not in text(r):
    print(f"grep for {args[0]} gave {text(r)!r}")' "$word"

  # A tool's failure is a result with isError, which the Inspector reports as exit 5.
  local status=0
  inspect "$WORK/missing.json" --method tools/call --tool-name read_file \
    --tool-args-json "{\"file_path\": \"mcp-inspector/missing-$word.txt\"}" || status=$?
  [[ "$status" == 5 ]] || fail "read_file of a missing file: the Inspector exited $status, expected 5 (a tool error): $(cat "$WORK/missing.json" "$WORK/missing.json.err")"
  check "read_file of a missing file" "$WORK/missing.json" '
content = r.get("content") or [{}]
if r.get("isError") is not True or "missing" not in content[0].get("text", ""):
    print(f"expected isError with a message naming the file, got {json.dumps(r)[:400]}")'

  read_offloaded "$era"
  echo "MCP Inspector ($LABEL): write/read/bash/grep, a tool error and an offloaded output: ok"
}

# read_offloaded ERA: `seq 1 LARGE_COUNT` is offloaded; its pages reassemble to the output.
read_offloaded() {
  local era="$1"
  seq 1 "$LARGE_COUNT" >"$WORK/expected.txt"
  local total
  total="$(wc -c <"$WORK/expected.txt")"
  inspect_ok "$WORK/seq.json" "bash seq" --method tools/call --tool-name bash \
    --tool-args-json "{\"command\": \"seq 1 $LARGE_COUNT\"}"
  check "bash seq" "$WORK/seq.json" '
preview = text(r)
links = [block for block in r["content"] if block.get("type") == "resource_link"]
if len(links) != 1:
    print(f"expected one resource_link, got {json.dumps(r)[:400]}")
elif not links[0]["uri"].startswith("toold://results/") or links[0].get("size") != int(args[0]):
    print(f"resource_link {links[0]}, expected toold://results/… of size {args[0]}")
elif not (preview.startswith("1\n2\n3\n") and len(preview) < int(args[0])):
    print(f"the preview ({len(preview)} characters) starts {preview[:40]!r}")' "$total"
  local uri
  uri="$(python3 -c 'import json, sys; print(next(b["uri"] for b in json.load(sys.stdin)["result"]["content"] if b["type"] == "resource_link"))' <"$WORK/seq.json")"

  # The era shows in the result: rmcp adds `ttlMs` for a 2026-era request only.
  local stamped="False"
  [[ "$era" == "modern" ]] && stamped="True"
  inspect_ok "$WORK/head.json" "resources/read ?offset=0&limit=6" --method resources/read --uri "$uri?offset=0&limit=6"
  check "resources/read ?offset=0&limit=6" "$WORK/head.json" '
page = r["contents"][0]["text"]
ttl = r.get("ttlMs")
if page != "1\n2\n3\n":
    print(f"gave {page!r}")
elif ("ttlMs" in r) != (args[0] == "True"):
    print(f"a {args[1]}-era answer with ttlMs={ttl!r}: not the era asked for")' "$stamped" "$era"

  inspect_ok "$WORK/default.json" "resources/read (no limit)" --method resources/read --uri "$uri"
  check "resources/read (no limit)" "$WORK/default.json" '
page = r["contents"][0]["text"]
expected = open(args[0]).read()
if not (0 < len(page) < len(expected) and expected.startswith(page)):
    print(f"the default page ({len(page)} characters) is not a proper start of the output")' "$WORK/expected.txt"

  : >"$WORK/whole.txt"
  local offset=0 got
  while ((offset < total)); do
    inspect_ok "$WORK/page.json" "resources/read at $offset" --method resources/read \
      --uri "$uri?offset=$offset&limit=$PAGE"
    got="$(python3 -c '
import json, sys
text = json.load(open(sys.argv[1]))["result"]["contents"][0]["text"]
open(sys.argv[2], "a").write(text)
print(len(text))' "$WORK/page.json" "$WORK/whole.txt")"
    ((got > 0)) || fail "an empty page at offset $offset of $total"
    offset=$((offset + got))
  done
  cmp -s "$WORK/whole.txt" "$WORK/expected.txt" \
    || fail "the pages reassemble to $(wc -c <"$WORK/whole.txt") characters that differ from seq's"
}

run_http() {
  local base="${1%/}" token="${2:-}"
  local auth=()
  [[ -n "$token" ]] && auth=(--header "Authorization: Bearer $token")
  local curl_auth=()
  [[ -n "$token" ]] && curl_auth=(-H "Authorization: Bearer $token")

  # Legacy era on /mcp: every initialize is a session of its own, so only tools/list.
  LABEL="http /mcp legacy"
  TARGET_BASE=(--transport http "${auth[@]}" --server-url "$base/mcp")
  TARGET_ARGS=(--protocol-era legacy "${TARGET_BASE[@]}")
  inspect_ok "$WORK/list.json" "tools/list" --method tools/list
  check "tools/list" "$WORK/list.json" '
names = {tool["name"] for tool in r["tools"]}
if not set(args[0].split(",")) <= names:
    print(f"lacks some of {args[0]}: {sorted(names)}")' "$REQUIRED_TOOLS"
  echo "MCP Inspector ($LABEL): tools/list: ok"

  # Legacy era on a session made over HTTP, so that the invocations share its workspace.
  local session
  session="$(curl -sS --fail-with-body "${curl_auth[@]}" -H 'content-type: application/json' \
    -d '{}' "$base/v1/sessions" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')" \
    || fail "POST /v1/sessions failed"
  LABEL="http /v1/sessions/$session/mcp legacy"
  TARGET_BASE=(--transport http "${auth[@]}" --server-url "$base/v1/sessions/$session/mcp")
  exercise legacy
  curl -sS --fail-with-body -X DELETE "${curl_auth[@]}" "$base/v1/sessions/$session" >/dev/null

  LABEL="http /mcp modern"
  TARGET_BASE=(--transport http "${auth[@]}" --server-url "$base/mcp")
  exercise modern
}

run_stdio() {
  local toold
  toold="$(realpath "$1")"
  mkdir -p "$WORK/workspace"
  for era in legacy modern; do
    LABEL="stdio $era"
    TARGET_BASE=(-- "$toold" mcp --data-dir "$WORK/data" --working-directory "$WORK/workspace")
    exercise "$era"
  done
}

[[ $# -ge 2 ]] || usage
mode="$1"
shift
case "$mode" in
  http)
    base="$1"
    shift
    token=""
    if [[ $# -gt 0 ]]; then
      [[ "$1" == "--token" && $# -eq 2 ]] || usage
      token="$2"
    fi
    [[ "$base" == *://* ]] || base="http://$base"
    run_http "$base" "$token"
    ;;
  stdio)
    [[ $# -eq 1 ]] || usage
    run_stdio "$1"
    ;;
  *) usage ;;
esac

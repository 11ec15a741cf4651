"""toold's MCP door driven by the official Python MCP SDK (`mcp` 2.x), unmodified.

For each of the SDK's two connect modes, over `streamable_http_client` to `{base}/mcp`:

- `legacy`: the `initialize` handshake (2025-11-25 era; toold creates a session for it and
  closes it when the SDK's DELETE ends the MCP session);
- `auto`: the SDK probes `server/discover` and, toold answering it, talks the 2026-07-28 era
  statelessly (every request on the caller's default session).

In each: `tools/list` names read_file, write_file, bash and grep_search; write_file then
read_file give the content back; bash `echo hi`; grep_search finds the word written; a bash
output too large to inline comes back as a preview plus a `resource_link` to
`toold://results/{id}`, read back through `resources/read` in `?offset=&limit=` pages that
reassemble to the whole output. Any surprise exits non-zero with what was expected and got.

    python python_client.py http://127.0.0.1:7070 [--token TOKEN]
"""

import argparse
import sys
import uuid

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

REQUIRED_TOOLS = {"read_file", "write_file", "bash", "grep_search"}
# Larger than what toold inlines (bash's output offload threshold), so it is offloaded.
LARGE_COUNT = 400_000
# A legacy-era answer is one SSE event and the SDK refuses events past 1 MiB by default
# (`max_sse_event_size`): pages are asked for well under that.
PAGE = 200_000
TIMEOUT_S = 60


class Mismatch(Exception):
    """What the daemon answered is not what this client expected."""


def check(condition, message):
    if not condition:
        raise Mismatch(message)


def text_of(result, what):
    """The first text block of a tools/call result that must have succeeded."""
    check(not result.is_error, f"{what}: the call failed: {result.content}")
    check(result.content and result.content[0].type == "text", f"{what}: no text block: {result.content}")
    return result.content[0].text


async def exercise(base_url, mode, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(TIMEOUT_S)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            session = client.session  # the SDK's ClientSession, after the mode's handshake
            version = session.protocol_version
            if mode == "legacy":
                check(version in HANDSHAKE_PROTOCOL_VERSIONS, f"legacy mode negotiated {version!r}")
                check(session.initialize_result is not None, "legacy mode: no initialize result")
            else:
                # toold answers server/discover, so auto must land in the 2026 era, not fall back.
                check(version in MODERN_PROTOCOL_VERSIONS, f"auto mode fell back to {version!r}")
                check(session.discover_result is not None, "auto mode: no discover result")

            tools = await session.list_tools()
            names = {tool.name for tool in tools.tools}
            check(REQUIRED_TOOLS <= names, f"tools/list lacks {sorted(REQUIRED_TOOLS - names)}: {sorted(names)}")

            # A word of its own per run: in auto mode every run shares the default session.
            word = f"marker{uuid.uuid4().hex}"
            path = f"mcp-python/{mode}-{word}.txt"
            content = f"first line\nthe word {word} is here\n"
            text_of(await session.call_tool("write_file", {"file_path": path, "content": content}), "write_file")
            read = text_of(await session.call_tool("read_file", {"file_path": path}), "read_file")
            # read_file numbers its lines (`cat -n` style): compare the lines' text.
            lines = [line.split("\t", 1)[1] for line in read.splitlines() if "\t" in line]
            check(lines == content.splitlines(), f"read_file gave {read!r}, expected {content!r} numbered")

            hi = text_of(await session.call_tool("bash", {"command": "echo hi"}), "bash echo")
            check(hi.strip() == "hi", f"bash `echo hi` gave {hi!r}")

            found = text_of(
                await session.call_tool(
                    "grep_search", {"pattern": word, "path": "mcp-python", "output_mode": "content"}
                ),
                "grep_search",
            )
            check(f"the word {word} is here" in found, f"grep_search for {word} gave {found!r}")

            await read_offloaded(session, mode)
            print(f"{mode}: {version}, {len(names)} tools, write/read/bash/grep and an offloaded output: ok")


async def read_offloaded(session, mode):
    """bash output past the offload threshold: a preview, a resource_link, and resources/read pages."""
    result = await session.call_tool("bash", {"command": f"seq 1 {LARGE_COUNT}"})
    preview = text_of(result, "bash seq")
    expected = "".join(f"{n}\n" for n in range(1, LARGE_COUNT + 1))
    links = [block for block in result.content if block.type == "resource_link"]
    check(len(links) == 1, f"{mode}: expected one resource_link, got {result.content}")
    link = links[0]
    uri = str(link.uri)
    check(uri.startswith("toold://results/"), f"{mode}: resource_link to {uri!r}")
    check(link.size == len(expected), f"{mode}: resource_link size {link.size}, expected {len(expected)}")
    check(len(preview) < len(expected), f"{mode}: the preview is the whole output ({len(preview)} characters)")
    check(preview.startswith("1\n2\n3\n"), f"{mode}: the preview starts {preview[:40]!r}")

    # A small range first, the default page (no limit), then the whole output in pages.
    head = await session.read_resource(f"{uri}?offset=0&limit=6")
    check(head.contents[0].text == "1\n2\n3\n", f"{mode}: ?offset=0&limit=6 gave {head.contents[0].text!r}")
    default = (await session.read_resource(uri)).contents[0].text
    check(0 < len(default) < len(expected), f"{mode}: the default page has {len(default)} characters")
    check(expected.startswith(default), f"{mode}: the default page is not the output's start")
    output = []
    offset = 0
    while offset < len(expected):
        page = await session.read_resource(f"{uri}?offset={offset}&limit={PAGE}")
        text = page.contents[0].text
        check(text, f"{mode}: an empty page at offset {offset} of {len(expected)}")
        output.append(text)
        offset += len(text)
    whole = "".join(output)
    check(whole == expected, f"{mode}: the pages reassemble to {len(whole)} characters that differ from seq's")


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_url", help="the daemon's base URL, e.g. http://127.0.0.1:7070")
    parser.add_argument("--token", help="a bearer token, when the daemon requires one")
    args = parser.parse_args()
    base_url = args.base_url.rstrip("/")
    if "://" not in base_url:
        base_url = f"http://{base_url}"
    for mode in ("legacy", "auto"):
        try:
            await exercise(base_url, mode, args.token)
        except Mismatch as mismatch:
            print(f"python MCP SDK, {mode} mode: {mismatch}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    anyio.run(main)

#!/usr/bin/env python3
"""An MCP server over stdio that misbehaves on purpose, for the bridge's containment tests.

tools/list offers: `fine` (echoes), `not_an_object` (an input schema that is not an object),
`huge` (answers with a text block of `megabytes` MB), `garbage` (writes a line that is not
JSON, then a proper answer), `no_answer` (never answers), `die` (exits mid-call).
Each line on stdin is one JSON-RPC message (the MCP stdio transport); answers go to stdout.
"""

import json
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "fine", "description": "Echoes its text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "not_an_object", "description": "Its schema is not an object.",
     "inputSchema": {"type": "string"}},
    {"name": "huge", "description": "Answers with many megabytes.",
     "inputSchema": {"type": "object", "properties": {"megabytes": {"type": "integer"}}}},
    {"name": "garbage", "description": "Writes a line that is not JSON first.",
     "inputSchema": {"type": "object"}},
    {"name": "no_answer", "description": "Never answers.", "inputSchema": {"type": "object"}},
    {"name": "die", "description": "Exits mid-call.", "inputSchema": {"type": "object"}},
]


def text_result(request_id, text):
    send({"jsonrpc": "2.0", "id": request_id,
          "result": {"content": [{"type": "text", "text": text}]}})


def main():
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        request_id = message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "misbehaving", "version": "1.0.0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = message["params"]["name"]
            arguments = message["params"].get("arguments") or {}
            if name == "fine":
                text_result(request_id, "fine: " + str(arguments.get("text", "")))
            elif name == "huge":
                text_result(request_id, "x" * (int(arguments.get("megabytes", 50)) * 1024 * 1024))
            elif name == "garbage":
                sys.stdout.write("this is not JSON {\n")
                sys.stdout.flush()
                text_result(request_id, "after the garbage")
            elif name == "die":
                sys.exit(3)
            elif name == "no_answer":
                pass
        elif request_id is not None and method is not None:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "method not found: " + method}})


main()

"""The Python MCP SDK 1.9 (revision 2025-03-26, before `resource_link`) against toold's `/mcp`:
calls TOOL with ARGS (JSON) and reads the rest of an offloaded output through the resource its
text names. Prints one JSON line: the content blocks' types and texts, and the first characters
read back. Any exception (the SDK's models refusing a block) exits non-zero.

Usage: python old_py_sdk.py URL TOKEN TOOL ARGS_JSON
"""

import asyncio
import importlib.metadata
import json
import re
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from pydantic import AnyUrl


async def main(url: str, token: str, tool: str, args: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            result = await session.call_tool(tool, json.loads(args))
            texts = [getattr(block, "text", "") for block in result.content]
            found = re.search(r"toold://results/[A-Za-z0-9_-]+", "\n".join(texts))
            page = None
            if found:
                answer = await session.read_resource(AnyUrl(f"{found.group(0)}?limit=12"))
                page = answer.contents[0].text
            print(json.dumps({
                "sdk": importlib.metadata.version("mcp"),
                "protocol": init.protocolVersion,
                "types": [block.type for block in result.content],
                "texts": texts,
                "read": page,
            }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))

"""langchain-mcp-adapters with its default per-call sessions against toold's `/mcp`: every tool
invocation opens a new MCP session (initialize ... DELETE), so a file written by one call is
read back by the next only if both MCP sessions run in one workspace. Prints one JSON line:
what the read returned, and how many MCP sessions the calls opened.

Usage: python langchain_per_call.py URL TOKEN
"""

import asyncio
import importlib.metadata
import json
import sys

import mcp.client.session
from langchain_mcp_adapters.client import MultiServerMCPClient

# Counts MCP sessions as the client initializes them: one per tool call, plus get_tools'.
INITIALIZED = 0
_initialize = mcp.client.session.ClientSession.initialize


async def counting_initialize(self, *args, **kwargs):
    global INITIALIZED
    INITIALIZED += 1
    return await _initialize(self, *args, **kwargs)


mcp.client.session.ClientSession.initialize = counting_initialize


def text_of(answer) -> str:
    """A tool's answer as text, whichever shape this version gives it."""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, tuple):
        return text_of(answer[0])
    if isinstance(answer, list):
        return "".join(text_of(part) for part in answer)
    if isinstance(answer, dict):
        return answer.get("text", "")
    return getattr(answer, "text", str(answer))


async def main(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = MultiServerMCPClient(
        {"toold": {"transport": "streamable_http", "url": url, "headers": headers}}
    )
    tools = {tool.name: tool for tool in await client.get_tools()}
    wrote = await tools["write_file"].ainvoke(
        {"file_path": "kept.txt", "content": "kept between sessions\n"}
    )
    read = await tools["read_file"].ainvoke({"file_path": "kept.txt"})
    print(json.dumps({
        "adapters": importlib.metadata.version("langchain-mcp-adapters"),
        "mcp": importlib.metadata.version("mcp"),
        "wrote": text_of(wrote),
        "read": text_of(read),
        "sessions": INITIALIZED,
    }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))

"""The official Python MCP SDK (`mcp` 2.x) against toold's MCP door with OAuth: given only
the `/mcp` URL, a client id and its secret, `ClientCredentialsOAuthProvider` meets toold's 401,
reads its protected-resource metadata (RFC 9728), then the provider's metadata, and fetches
the access token itself (client credentials, with the resource indicator). Both of the SDK's
connect modes (`legacy`: the 2025-11-25 handshake; `auto`: 2026-07-28, stateless) list the
tools and call bash. Prints one JSON line per mode ({"mode", "tools", "echo"}); any surprise
exits non-zero with what was expected and got. Run by tests/it/oidc/sdk.rs.

    python sdk_client.py MCP_URL CLIENT_ID CLIENT_SECRET ISSUER WORD
"""

import json
import sys

import anyio
import httpx2
from mcp.client import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client

TIMEOUT_S = 60


class MemoryStorage:
    """Tokens and client information kept in memory (the SDK's TokenStorage protocol)."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


async def exercise(url, client_id, secret, issuer, word, mode):
    auth = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=MemoryStorage(),
        client_id=client_id,
        client_secret=secret,
        issuer=issuer,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(TIMEOUT_S)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            session = client.session
            tools = sorted(tool.name for tool in (await session.list_tools()).tools)
            result = await session.call_tool("bash", {"command": f"echo {word}-{mode}"})
            if result.is_error:
                raise SystemExit(f"{mode}: bash failed: {result.content}")
            echo = result.content[0].text
            print(json.dumps({"mode": mode, "tools": tools, "echo": echo}), flush=True)


async def main():
    url, client_id, secret, issuer, word = sys.argv[1:6]
    for mode in ("legacy", "auto"):
        await exercise(url, client_id, secret, issuer, word, mode)


if __name__ == "__main__":
    anyio.run(main)

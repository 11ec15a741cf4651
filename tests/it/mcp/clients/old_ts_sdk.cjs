// The TypeScript MCP SDK 1.11 (revision 2025-03-26, before `resource_link`) against toold's
// `/mcp`: calls `tool` with `args` (JSON) and reads the rest of an offloaded output through the
// resource its text names. Prints one JSON line: the content blocks' types and texts, and the
// first characters read back. Any throw (the SDK's schema refusing a block) exits non-zero.
// Usage: node old_ts_sdk.cjs SDK_PREFIX URL TOKEN TOOL ARGS_JSON
const { createRequire } = require("node:module");
const [prefix, url, token, tool, args] = process.argv.slice(2);
const sdk = createRequire(`${prefix}/node_modules/`);
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");
// The package's `exports` do not include its package.json: read the file.
const { version } = JSON.parse(require("node:fs").readFileSync(
  `${prefix}/node_modules/@modelcontextprotocol/sdk/package.json`, "utf8"));

async function main() {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "old-ts-sdk", version: "1" });
  await client.connect(transport);
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  const texts = result.content.map((block) => block.text ?? "");
  const uri = texts.join("\n").match(/toold:\/\/results\/[A-Za-z0-9_-]+/)?.[0];
  let read = null;
  if (uri) {
    const page = await client.readResource({ uri: `${uri}?limit=12` });
    read = page.contents[0].text;
  }
  console.log(JSON.stringify({
    sdk: version,
    types: result.content.map((block) => block.type),
    texts,
    read,
  }));
  await client.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

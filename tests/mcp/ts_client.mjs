// The official TypeScript MCP SDK's client against a mainspring MCP server.
// Usage: node ts_client.mjs SDK_DIR URL — prints one JSON object of what it saw.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [, , sdk, url] = process.argv;
const load = (p) => import(pathToFileURL(path.join(sdk, "dist", "esm", p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { ElicitRequestSchema } = await load("types.js");

const asked = [];
const client = new Client(
  { name: "ts-sdk-test", version: "0" },
  { capabilities: { elicitation: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  const approve = !request.params.message.includes("nope");
  return { action: "accept", content: { approve } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const listed = await client.listTools();
const tools = listed.tools.map((t) => ({
  name: t.name,
  readOnly: t.annotations?.readOnlyHint ?? null,
  destructive: t.annotations?.destructiveHint ?? null,
}));
const progress = [];
const add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
const crunch = await client.callTool({ name: "crunch", arguments: {} }, undefined, {
  onprogress: (p) => progress.push(p),
});
const approved = await client.callTool({ name: "delete_account", arguments: { account: "acme" } });
const refused = await client.callTool({ name: "delete_account", arguments: { account: "nope" } });
const invalid = await client.callTool({ name: "add", arguments: { a: "x" } });
let unknown = null;
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
} catch (error) {
  unknown = String(error.message ?? error);
}
console.log(
  JSON.stringify({ server: client.getServerVersion(), tools, add, crunch, progress, approved, refused, invalid, unknown, asked }),
);
await client.close();

// One tools/call through an official TypeScript SDK client over stdio, as a script a test runs:
//   node ts_call.mjs <1|2> <tool> <arguments JSON> <command> [args...]
// 1 is @modelcontextprotocol/sdk (the 1.x line), 2 is @modelcontextprotocol/client (2.x). Prints
// one JSON line: {"result": …} when the call returned, or {"thrown": {class, code, message, data}}
// when the SDK threw — how the client's own code would see the answer.
import { createRequire } from "node:module";
import path from "node:path";

const [line, tool, argumentsJson, command, ...args] = process.argv.slice(2);
// The SDKs sit in .ci/node/node_modules (installed by .ci/setup-interop), not beside this file.
const modules = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../../.ci/node/node_modules");
const load = async (specifier) => import(createRequire(path.join(modules, "x.js")).resolve(specifier));

let Client, StdioClientTransport;
if (line === "1") {
  ({ Client } = await load("@modelcontextprotocol/sdk/client/index.js"));
  ({ StdioClientTransport } = await load("@modelcontextprotocol/sdk/client/stdio.js"));
} else {
  ({ Client } = await load("@modelcontextprotocol/client"));
  ({ StdioClientTransport } = await load("@modelcontextprotocol/client/stdio"));
}
const client = new Client({ name: "loom-interop-ts", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "ignore" }));
let out;
try {
  out = { result: await client.callTool({ name: tool, arguments: JSON.parse(argumentsJson) }) };
} catch (error) {
  out = { thrown: { class: error?.constructor?.name, code: error?.code, message: error?.message, data: error?.data ?? null } };
}
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
process.exit(0);

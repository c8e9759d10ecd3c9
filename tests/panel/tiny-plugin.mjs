// The smallest MCP server over stdio (newline-delimited JSON-RPC): one
// tool, `echo`. The panel test runs it as a plugin and kills it to see the
// restart and its last error on the plugins page.
import { createInterface } from "node:readline";

const answer = (id, result) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, result })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { id, method, params } = JSON.parse(line);
  if (id === undefined) continue;
  if (method === "initialize") {
    answer(id, { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "tiny", version: "1.0.0" } });
  } else if (method === "tools/list") {
    answer(id, { tools: [{ name: "echo", description: "Answers its text", inputSchema: { type: "object", properties: { text: { type: "string" } } } }] });
  } else if (method === "tools/call") {
    answer(id, { content: [{ type: "text", text: String(params.arguments?.text ?? "") }] });
  } else {
    answer(id, {});
  }
}

// The daemon driven by the official TypeScript SDKs, as Claude Code, VS
// Code, Cursor and the Inspector drive it: `@modelcontextprotocol/sdk` (1.x,
// the 2025-11-25 era) on Streamable HTTP and legacy SSE, and
// `@modelcontextprotocol/client` (2.x) negotiating the 2026-07-28 era on
// Streamable HTTP. Every tool is called once to succeed and once to fail
// after `listTools`, so the SDK validates each result against the tool's
// output schema: no call may throw, and each failure must reach the caller
// as an `isError` result whose text names our code, message and details.
// Then the agent registry's resources: a published agent is read, and an
// unknown one is the "resource not found" the SDK throws, with E0068; and
// agents published over MCP (`opcode.define` with `agent`).
//
// Usage: node ts_clients.mjs BASE_URL (run from the folder holding the
// node_modules of tests/mcp/package.json).

import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport as LegacySse } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport as LegacyHttp } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const base = process.argv[2];
const TOOLS = ["opcode.define", "opcode.run", "opcode.status", "opcode.signal", "opcode.query", "opcode.diagram"];

function check(condition, what) {
  if (!condition) throw new Error(what);
}

const gate = (name) => ({
  name,
  definition: {
    steps: [
      { id: "greet", action: "workflow.log", params: { message: "hello" } },
      {
        id: "approve", type: "reasoning", depends_on: ["greet"],
        config: { prompt_context: "Ship it?", options: [{ id: "yes" }, { id: "no" }] },
      },
    ],
  },
});

/** Calls `tool`; the result must not throw and must be a success. */
async function ok(client, label, tool, args) {
  const result = await client.callTool({ name: tool, arguments: args });
  check(!result.isError, `${label}: ${tool} failed: ${JSON.stringify(result)}`);
  check(result.structuredContent, `${label}: ${tool} gave no structured content`);
  return result.structuredContent;
}

/** Calls `tool` to fail: an `isError` result without structured content,
 * whose text is our `{"error": {code, message, ...}}`; `code` is expected. */
async function fails(client, label, tool, args, code) {
  const result = await client.callTool({ name: tool, arguments: args });
  check(result.isError === true, `${label}: ${tool} should fail: ${JSON.stringify(result)}`);
  check(result.structuredContent === undefined, `${label}: ${tool}'s error carries structured content`);
  const { error } = JSON.parse(result.content[0].text);
  check(error.code === code && error.message, `${label}: ${tool} failed with ${JSON.stringify(error)}, not ${code}`);
  return error;
}

async function scenario(client, label) {
  const name = `gate_${label.replace(/[^a-z0-9]+/gi, "_")}`;
  // A template exposed as a tool of its own, with its own output schema.
  await ok(client, label, "opcode.define", {
    name: `${name}_tool`, expose: true, description: "logs a greeting",
    input_schema: { type: "object", properties: { who: { type: "string" } }, required: ["who"] },
    definition: { steps: [{ id: "hi", action: "workflow.log", params: { message: "hi ${{inputs.who}}" } }] },
  });
  const listed = (await client.listTools()).tools.map((t) => t.name);
  check([...TOOLS, `${name}_tool`].every((t) => listed.includes(t)), `${label}: tools ${listed}`);
  const greeted = await ok(client, label, `${name}_tool`, { who: "ts" });
  check(greeted.status === "completed", `${label}: the template's tool gave ${JSON.stringify(greeted)}`);
  await fails(client, label, `${name}_tool`, {}, "R0108");

  const defined = await ok(client, label, "opcode.define", gate(name));
  check(defined.version === "v1", `${label}: define gave ${JSON.stringify(defined)}`);
  const broken = await fails(client, label, "opcode.define", {
    name: `${name}-broken`, definition: { steps: [{ id: "a", action: "crypto.hsh" }] },
  }, "R0123");
  const first = broken.details.diagnostics.find((d) => d.severity === "error");
  check(first.pointer === "/definition/steps/0/action" && first.fix && first.line >= 1,
    `${label}: the define's diagnostic is ${JSON.stringify(first)}`);

  const run = await ok(client, label, "opcode.run", { template_name: name });
  check(run.status === "suspended" && run.workflow_id, `${label}: run gave ${JSON.stringify(run)}`);
  await fails(client, label, "opcode.run", { template_name: `${name}-nowhere` }, "R0120");

  const status = await ok(client, label, "opcode.status", { workflow_id: run.workflow_id });
  check(status.status === "suspended", `${label}: status gave ${JSON.stringify(status)}`);
  await fails(client, label, "opcode.status", { workflow_id: "no-such-run" }, "R0121");

  const wrong = await fails(client, label, "opcode.signal", {
    workflow_id: run.workflow_id, signal_type: "decision", step_id: "approve", payload: { choice: "maybe" },
  }, "R0114");
  check(wrong.message.includes("maybe"), `${label}: a wrong choice said ${wrong.message}`);
  const answered = await ok(client, label, "opcode.signal", {
    workflow_id: run.workflow_id, signal_type: "decision", step_id: "approve", payload: { choice: "yes" },
  });
  check(answered.status === "completed", `${label}: signal gave ${JSON.stringify(answered)}`);

  const found = await ok(client, label, "opcode.query", { resource: "workflows", filter: { template_name: name } });
  check(found.workflows.some((w) => w.id === run.workflow_id), `${label}: query gave ${JSON.stringify(found)}`);
  await fails(client, label, "opcode.query", { resource: "nothing" }, "R0122");

  const drawn = await ok(client, label, "opcode.diagram", { template_name: name, format: "ascii" });
  check(drawn.diagram.includes("approve"), `${label}: diagram gave ${JSON.stringify(drawn)}`);
  await fails(client, label, "opcode.diagram", { template_name: `${name}-nowhere` }, "R0120");
  console.log(`ok - TypeScript SDK (${label}): every tool's success and failure, no exception, codes seen`);
}

/** The agent node_clients.py published, as resources; an unknown one is
 * the JSON-RPC error "resource not found" the SDK throws, carrying E0068. */
async function agents(client, label) {
  const listed = (await client.listResources()).resources.map((r) => r.uri);
  check(listed.includes("opcode://agents") && listed.includes("opcode://agents/db-analyzer"),
    `${label}: resources ${listed}`);
  const read = await client.readResource({ uri: "opcode://agents/db-analyzer" });
  const release = JSON.parse(read.contents[0].text);
  check(release.version === "1.0.0" && release.definition.skills[0].content === "Read the indexes first.\n",
    `${label}: the agent's release ${JSON.stringify(release)}`);
  let thrown = null;
  try {
    await client.readResource({ uri: "opcode://agents/db-analyser" });
  } catch (e) {
    thrown = e;
  }
  // Resource not found: -32002 at 2025-11-25, -32602 at 2026-07-28; our
  // coded error, with the closest name, in the error's data.
  check(thrown && [-32002, -32602].includes(thrown.code) && thrown.data?.error?.code === "E0068"
    && thrown.data.error.details.help.includes("db-analyzer"),
    `${label}: an unknown agent gave ${thrown} (code ${thrown?.code}, data ${JSON.stringify(thrown?.data)})`);
  console.log(`ok - TypeScript SDK (${label}): a published agent read as a resource, an unknown one not found`);
}

/** Publishing over MCP: `opcode.define` with `agent` publishes a release
 * (the SDK validates the answer against the output schema); bad
 * definitions are refused with pointers under /agent; the second release's
 * resource carries its diff from the first. */
async function publishing(client, label) {
  const name = `ts-${label.replace(/[^a-z0-9]+/gi, "-").toLowerCase()}`.slice(0, 60).replace(/-+$/, "");
  const agent = (version, skill) => ({
    name, version, role: "scout", skills: [{ name: "review", content: skill }],
  });
  const first = await ok(client, label, "opcode.define", { agent: agent("1.0.0", "Read it.\n") });
  check(first.kind === "agent" && first.version === "1.0.0" && first.digest.startsWith("sha256:")
    && first.unchanged === false, `${label}: published ${JSON.stringify(first)}`);
  const again = await ok(client, label, "opcode.define", { agent: JSON.stringify(agent("1.0.0", "Read it.\n")) });
  check(again.unchanged === true && again.digest === first.digest, `${label}: republished ${JSON.stringify(again)}`);
  const taken = await fails(client, label, "opcode.define", { agent: agent("1.0.0", "Other.\n") }, "E0067");
  check(taken.details.help.includes(`${name}@1.0.1`), `${label}: a taken version ${JSON.stringify(taken)}`);
  const bad = await fails(client, label, "opcode.define",
    { agent: { ...agent("1.0", "x"), skills: [{ name: "s", path: "/etc/passwd" }] } }, "R0123");
  const seen = bad.details.diagnostics.map((d) => `${d.code} ${d.pointer}`);
  check(seen.includes("E0065 /agent/version") && seen.some((d) => d.startsWith("E0066 /agent/skills/0")),
    `${label}: a bad definition's diagnostics ${JSON.stringify(seen)}`);
  const fix = bad.details.diagnostics.find((d) => d.code === "E0065").fix;
  check(fix.patch[0].path === "/agent/version" && fix.patch[0].value === "1.0.0",
    `${label}: the version's fix ${JSON.stringify(fix)}`);
  await ok(client, label, "opcode.define", { agent: agent("1.1.0", "Read it.\nNever write.\n") });
  const read = await client.readResource({ uri: `opcode://agents/${name}/1.1.0` });
  const release = JSON.parse(read.contents[0].text);
  check(release.changes.from === "1.0.0" && release.changes.diff.includes("+Never write."),
    `${label}: the release's changes ${JSON.stringify(release.changes)}`);
  console.log(`ok - TypeScript SDK (${label}): an agent published over MCP, refused with pointers, its diff read`);
}

async function session(client, transport, label, era) {
  await client.connect(transport);
  try {
    const version = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
    if (era) check(version === era, `${label}: negotiated ${version}, not ${era}`);
    await scenario(client, label);
    await agents(client, label);
    await publishing(client, label);
  } finally {
    await client.close();
  }
}

const info = { name: "opcode-tests", version: "1.0.0" };
await session(new LegacyClient(info), new LegacyHttp(new URL(`${base}/mcp`)), "sdk 1.x, Streamable HTTP, 2025-11-25");
await session(new LegacyClient(info), new LegacySse(new URL(`${base}/sse`)), "sdk 1.x, SSE, 2025-11-25");
await session(
  new Client(info, { versionNegotiation: { mode: "auto" } }),
  new StreamableHTTPClientTransport(new URL(`${base}/mcp`)),
  "client 2.x, Streamable HTTP, 2026-07-28",
  "2026-07-28",
);

// The AG-UI run streams, parsed and verified by the official client: an
// HttpAgent runs to the decision's interrupt, resumes with the answer and
// runs to completion; a finished run replays; a wrong answer is a RUN_ERROR.
import { HttpAgent, runHttpRequest, transformHttpEventStream, verifyEvents } from "@ag-ui/client";
import { lastValueFrom, toArray } from "rxjs";
import { approval, check, define, run, untilDecision } from "./panel-client.mjs";

const base = process.argv[2];
await define(base, approval("agui-approval"));

// 1. Run to the interrupt, then resume with the interrupt's answer.
const id = await run(base, "agui-approval");
await untilDecision(base, id);
const agent = new HttpAgent({ url: `${base}/api/runs/${encodeURIComponent(id)}/ag-ui`, threadId: id });
const seen = [];
agent.subscribe({ onEvent: ({ event }) => { seen.push(event.type); } });
await agent.runAgent();
check(agent.pendingInterrupts.length === 1, `one interrupt expected, got ${JSON.stringify(agent.pendingInterrupts)}`);
const [interrupt] = agent.pendingInterrupts;
check(interrupt.id === "gate" && interrupt.reason === "decision", `interrupt: ${JSON.stringify(interrupt)}`);
check(JSON.stringify(interrupt.responseSchema.properties.choice.enum) === '["yes","no"]', "the options as a JSON schema enum");
check(agent.state.status === "suspended" && agent.state.steps.prepare.status === "completed", `state: ${JSON.stringify(agent.state)}`);

seen.length = 0;
const { result } = await agent.runAgent({ resume: [{ interruptId: "gate", status: "resolved", payload: { choice: "yes", reasoning: "looks good" } }] });
check(agent.pendingInterrupts.length === 0, "no interrupt after resuming");
check(agent.state.status === "completed", `completed state expected: ${JSON.stringify(agent.state)}`);
check(agent.state.steps.gate.status === "completed" && agent.state.steps.gate.output.choice === "yes", "the decision's output in the state");
check(seen.includes("STEP_STARTED") && seen.includes("STEP_FINISHED") && seen.at(-1) === "RUN_FINISHED", `events: ${seen}`);
console.log(`ag-ui: interrupt, resume and completion verified (${seen.length} events in the resumed run; result ${JSON.stringify(result)})`);

// 2. A finished run over GET: the raw stream through the client's parser and verifier.
const events = await lastValueFrom(
  transformHttpEventStream(runHttpRequest(() => fetch(`${base}/api/runs/${encodeURIComponent(id)}/ag-ui`)))
    .pipe(verifyEvents(false), toArray()),
);
const types = events.map((e) => e.type);
check(types[0] === "RUN_STARTED" && types[1] === "STATE_SNAPSHOT" && types.at(-1) === "RUN_FINISHED", `replay: ${types}`);
check(events.at(-1).outcome.type === "success", "the replay ends in success");

// 3. An answer that is not an option: the decision stays pending and the run errors.
const other = await run(base, "agui-approval");
await untilDecision(base, other);
const wrong = new HttpAgent({ url: `${base}/api/runs/${encodeURIComponent(other)}/ag-ui`, threadId: other });
let error = null;
wrong.subscribe({ onRunErrorEvent: ({ event }) => { error = event; } });
await wrong.runAgent().catch(() => {});
await wrong.runAgent({ resume: [{ interruptId: "gate", status: "resolved", payload: "maybe" }] }).catch(() => {});
check(error && /^R01/.test(error.code), `a RUN_ERROR with the tool's code expected, got ${JSON.stringify(error)}`);
await untilDecision(base, other);
console.log(`ag-ui: a wrong answer is ${error.code}: ${error.message}`);

// 4. Resuming streams live: the steps after the answer arrive as they run,
// not all at once when the run stops again.
const slow = approval("agui-slow");
slow.definition.steps.splice(2, 0, { id: "pause", type: "wait", depends_on: ["gate"], config: { duration: "1500ms" } });
slow.definition.steps[3].depends_on = ["pause"];
await define(base, slow);
const slowId = await run(base, "agui-slow");
await untilDecision(base, slowId);
const live = new HttpAgent({ url: `${base}/api/runs/${encodeURIComponent(slowId)}/ag-ui`, threadId: slowId });
await live.runAgent();
const arrivals = {};
live.subscribe({ onEvent: ({ event }) => { arrivals[`${event.type}:${event.stepName ?? ""}`] ??= Date.now(); } });
await live.runAgent({ resume: [{ interruptId: "gate", status: "resolved", payload: { choice: "yes" } }] });
const ahead = arrivals["RUN_FINISHED:"] - arrivals["STEP_STARTED:pause"];
check(ahead >= 1000, `the wait step's start should arrive about 1.5 s before the end, got ${ahead} ms`);
check(live.state.status === "completed", "the slow run completes");
console.log(`ag-ui: resumed run streamed live (the wait started ${ahead} ms before the end)`);

// 4b. A client that joins while a step runs sees it start at once, not
// when it ends.
await define(base, {
  name: "agui-join",
  definition: { steps: [{ id: "pause", type: "wait", config: { duration: "3s" } }, { id: "after", action: "workflow.log", depends_on: ["pause"], params: { message: "done" } }] },
});
const joinId = await run(base, "agui-join");
await new Promise((resolve) => setTimeout(resolve, 700));
const joiner = new HttpAgent({ url: `${base}/api/runs/${encodeURIComponent(joinId)}/ag-ui`, threadId: joinId });
const joined = {};
joiner.subscribe({ onEvent: ({ event }) => { joined[`${event.type}:${event.stepName ?? ""}`] ??= Date.now(); } });
await joiner.runAgent();
const early = joined["RUN_FINISHED:"] - joined["STEP_STARTED:pause"];
check(joiner.state.status === "completed" && early >= 1000,
  `a late joiner should see the running step start about 2.3 s before the end, got ${early} ms (${JSON.stringify(joined)})`);
console.log(`ag-ui: a client joining mid-step saw it start ${early} ms before the end`);

// 5. Reasoning first, then reasoning again: answering the first resumes the
// run, which suspends again at once; the stream ends on the second interrupt.
const ask = (id, after) => ({
  id, type: "reasoning", ...(after ? { depends_on: [after] } : {}),
  config: { prompt_context: `${id}?`, options: [{ id: "yes", description: "go" }, { id: "no", description: "stop" }] },
});
await define(base, { name: "agui-twice", definition: { steps: [ask("first"), ask("second", "first")] } });
const twiceId = await run(base, "agui-twice");
await untilDecision(base, twiceId);
const twice = new HttpAgent({ url: `${base}/api/runs/${encodeURIComponent(twiceId)}/ag-ui`, threadId: twiceId });
await twice.runAgent();
check(twice.pendingInterrupts.map((i) => i.id).join() === "first", `first interrupt: ${JSON.stringify(twice.pendingInterrupts)}`);
const within = (promise, what) => Promise.race([promise,
  new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} never ended`)), 10000))]);
await within(twice.runAgent({ resume: [{ interruptId: "first", status: "resolved", payload: { choice: "yes" } }] }),
  "the stream resuming a run that suspends again");
check(twice.pendingInterrupts.map((i) => i.id).join() === "second", `second interrupt: ${JSON.stringify(twice.pendingInterrupts)}`);
check(twice.state.status === "suspended", `suspended again: ${JSON.stringify(twice.state)}`);
await within(twice.runAgent({ resume: [{ interruptId: "second", status: "resolved", payload: { choice: "no" } }] }),
  "the last resume");
check(twice.state.status === "completed" && twice.pendingInterrupts.length === 0, `completed: ${JSON.stringify(twice.state)}`);
console.log("ag-ui: reasoning then reasoning: the resumed stream ends on the next interrupt, then completes");

// 6. A delegated agent's stream (spec/agents.md): while its step runs, its
// words are text messages, its tool calls tool calls, its plan and metrics
// a state delta under /agents/<step> — verified by the client as they arrive.
await define(base, { name: "agui-agent", definition: { steps: [{ id: "look", action: "agent.scout", params: {
  prompt: ["sleep 1.5", "say looking around", "run echo hi", "plan read, report", "say done looking"].join("\n") } }] } });
const agentRun = await run(base, "agui-agent");
const watcher = new HttpAgent({ url: `${base}/api/runs/${encodeURIComponent(agentRun)}/ag-ui`, threadId: agentRun });
const stream = [];
watcher.subscribe({ onEvent: ({ event }) => { stream.push(event); } });
await within(watcher.runAgent(), "the agent's stream");
const kinds = stream.map((e) => e.type);
const said = stream.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta);
const toolResult = stream.find((e) => e.type === "TOOL_CALL_RESULT");
check(said.includes("looking around") && said.includes("done looking"), `text: ${JSON.stringify(said)}`);
check(stream.some((e) => e.type === "TOOL_CALL_START" && e.toolCallName === "bash"), `tool calls: ${kinds}`);
check(toolResult && toolResult.content.trim() === "hi", `tool result: ${JSON.stringify(toolResult)}`);
check(kinds.indexOf("TEXT_MESSAGE_START") > kinds.indexOf("STEP_STARTED")
  && kinds.lastIndexOf("TEXT_MESSAGE_END") < kinds.lastIndexOf("STEP_FINISHED"), `order: ${kinds}`);
const agentState = watcher.state.agents.look;
check(JSON.stringify(agentState.todos) === '["read","report"]' && agentState.metrics.steps >= 3,
  `the agent's state: ${JSON.stringify(watcher.state)}`);
const stepState = watcher.state.steps.look;
check(stepState.status === "completed" && stepState.output.summary === "done looking", `the step: ${JSON.stringify(stepState)}`);
check(watcher.messages.some((m) => m.role === "assistant" && m.content === "looking around"), "the agent's words as messages");
console.log(`ag-ui: a delegated agent streamed live (${stream.length} events: text, tool calls, plan, metrics)`);

// 7. A delegated agent's permission request (spec/agents.md): the AG-UI run
// stops on its interrupt while the workflow stays active; resuming with the
// answer writes it to the agent, and the stream follows to the end.
await define(base, { name: "agui-permission", definition: { steps: [{ id: "peek", action: "agent.scout", params: {
  prompt: ["ask read secrets.txt", "say asked"].join("\n") } }] } });
const permissionRun = await run(base, "agui-permission");
await untilDecision(base, permissionRun);
const asker = new HttpAgent({ url: `${base}/api/runs/${encodeURIComponent(permissionRun)}/ag-ui`, threadId: permissionRun });
await within(asker.runAgent(), "the stream up to the permission request");
const [permission] = asker.pendingInterrupts;
check(asker.pendingInterrupts.length === 1 && permission.id.startsWith("peek.ask.")
  && JSON.stringify(permission.responseSchema.properties.choice.enum) === '["allow","deny"]',
  `the permission's interrupt: ${JSON.stringify(asker.pendingInterrupts)}`);
await within(asker.runAgent({ resume: [{ interruptId: permission.id, status: "resolved", payload: { choice: "allow" } }] }),
  "the stream after the answer");
const peeked = asker.state.steps.peek;
check(asker.state.status === "completed" && peeked.output.permissions[0].answer === "allow",
  `after allowing: ${JSON.stringify(asker.state)}`);
console.log("ag-ui: an agent's permission request is an interrupt; resuming answers the agent");

// Headless Chromium (Debian's) walks what an operator reaches for: times
// in their zone, a live run timeline, events paged and filtered, forms
// made from input schemas, bulk cancel and search, version compare, the
// plugins page, and every page on a 390 px phone screen.
import { execSync } from "node:child_process";
import { approval, check, define, launchBrowser, postForm, run, untilDecision } from "./panel-client.mjs";

const [base, artifacts] = process.argv.slice(2);
const browser = await launchBrowser();
const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: "Europe/Madrid" });
await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
const problems = [];
const watch = (p) => {
  p.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  p.on("console", (m) => {
    // 422 answers a form with mistakes and 404 the unknown page, both on purpose.
    if (m.type() === "error" && !/status of (422|404)/.test(m.text())) problems.push(`console: ${m.text()} (${m.location().url})`);
  });
};
const page = await context.newPage();
watch(page);
const shot = (p, name) => p.screenshot({ path: `${artifacts}/${name}.png`, fullPage: true });
const text = (p, selector) => p.locator(selector).first().innerText();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const submit = (p, selector) => Promise.all([p.waitForNavigation(), p.click(selector)]);
const workflowPage = (id) => `${base}/workflows/${encodeURIComponent(id)}`;

/** Reloads workflow `id`'s page until its status badge reads `status`. */
async function untilStatus(p, id, status) {
  await p.goto(workflowPage(id));
  for (let i = 0; i < 100 && (await text(p, "#summary .badge")) !== status; i++) {
    await sleep(100);
    await p.reload();
  }
  check((await text(p, "#summary .badge")) === status, `workflow ${id} never became ${status}`);
}

// Times: in the browser's zone by default, named; UTC on request, remembered.
await define(base, approval("times"));
const waiting = await run(base, "times");
await untilDecision(base, waiting);
// A first page tells the daemon the browser's zone (and shows itself again in it).
await page.goto(`${base}/`);
for (let i = 0; i < 50 && !(await context.cookies()).some((c) => c.name === "opcode_zone"); i++) await sleep(100);
check((await context.cookies()).some((c) => c.name === "opcode_zone" && c.value === "Europe%2FMadrid"), "the script keeps the zone in a cookie");
await page.waitForLoadState("load");
await page.goto(workflowPage(waiting));
check((await page.evaluate(() => document.body.dataset.zone)) === "Europe/Madrid", "pages show the browser's zone");
check((await text(page, "header .zone")).includes("Europe/Madrid"), "the header names the zone");
const created = page.locator("#summary dd time").first();
check(/ago|just now/.test(await created.innerText()), `a recent time reads relative: ${await created.innerText()}`);
check(/ CET \(Europe\/Madrid\)$/.test(await created.getAttribute("title")), `the exact time on hover: ${await created.getAttribute("title")}`);
check(/\d+(\.\d)? (ms|s|min)/.test(await text(page, "#summary dl")), "the run's duration so far");
await page.click("header .zone a:text('UTC')");
await page.waitForFunction(() => document.body.dataset.zone === "UTC");
await page.goto(`${base}/templates`);
check((await page.evaluate(() => document.body.dataset.zone)) === "UTC", "the UTC choice is remembered");
check(/ UTC \(UTC\)$/.test(await page.locator("#template-list time").first().getAttribute("title")), "times in UTC");
await page.click("header .zone a:text('local')");
await page.waitForFunction(() => document.body.dataset.zone === "Europe/Madrid");

// Resume on a run that waits for a decision says so, and offers no button.
await page.goto(workflowPage(waiting));
check((await text(page, "#summary .waiting")).includes("Waiting for the decision of step gate (“Ship it?”)"), "the page says what the run waits for");
check(await page.locator("form[action$='/resume']").count() === 0, "no Resume button on a run waiting for a decision");
const resumed = await postForm(base, `/workflows/${encodeURIComponent(waiting)}/resume`, {});
check(resumed.status === 303 && decodeURIComponent(resumed.location).includes("R0114: nothing to resume"), `resume refused: ${resumed.location}`);

// The scheduler previews the next fires in the job's own zone, named.
await page.goto(`${base}/scheduler`);
await page.fill("input[name=timezone]", "America/New_York");
await page.fill("input[name=cron]", "0 9 * * 1-5");
await page.waitForFunction(() => document.querySelector("#cron-preview")?.textContent.includes("EST"));
const preview = await text(page, "#cron-preview");
check(preview.includes("09:00:00 EST") && preview.includes("(America/New_York)"), `preview: ${preview}`);
await page.fill("input[name=timezone]", "Europe/Madrid");
await page.waitForFunction(() => document.querySelector("#cron-preview")?.textContent.includes("CET"));
check((await text(page, "#cron-preview")).includes("09:00:00 CET"), "the preview follows the zone");

// The timeline draws each step's bar and grows while the run goes, with no reload.
await define(base, {
  name: "slow",
  definition: {
    steps: [
      { id: "begin", action: "workflow.log", params: { message: "go" } },
      { id: "pause", type: "wait", depends_on: ["begin"], config: { duration: "1500ms" } },
      { id: "middle", action: "workflow.log", depends_on: ["pause"], params: { message: "half" } },
      { id: "rest", type: "wait", depends_on: ["middle"], config: { duration: "1500ms" } },
      { id: "end", action: "workflow.log", depends_on: ["rest"], params: { message: "done" } },
    ],
  },
});
const slow = await run(base, "slow");
await page.goto(workflowPage(slow));
await page.evaluate(() => { window.notReloaded = true; });
check(await page.locator("#timeline svg").count() === 1, "the timeline is an SVG");
await page.waitForSelector("#timeline g[data-step=middle] rect", { timeout: 10000 });
await shot(page, "20-timeline-running");
await page.waitForSelector("#timeline g[data-step=end] rect.completed", { timeout: 10000 });
check(await page.evaluate(() => window.notReloaded === true), "the timeline updated without a reload");
check(await page.locator("#timeline rect.bar").count() === 5, "one bar per step");
const waitTitle = await page.locator("#timeline g[data-step=pause] rect").first().textContent();
check(/pause attempt 1: completed, 1\.\d s/.test(waitTitle), `a bar says what it is: ${waitTitle}`);
await shot(page, "21-timeline-done");

// Events: paged 50 at a time, filtered by type and step.
const chain = Array.from({ length: 20 }, (_, i) => ({
  id: `s${i}`, action: "workflow.log", params: { message: `step ${i}` }, ...(i ? { depends_on: [`s${i - 1}`] } : {}),
}));
await define(base, { name: "chain", definition: { steps: chain } });
const chained = await run(base, "chain");
await untilStatus(page, chained, "completed");
await page.goto(`${base}/events?workflow=${encodeURIComponent(chained)}`);
const firstPage = await page.locator("#event-list tbody tr").count();
check(firstPage === 50, `a page holds 50 events: ${firstPage}`);
check(await page.locator("#event-list tbody tr").first().innerText().then((t) => t.includes("workflow_completed")), "newest first");
await shot(page, "22-events-paged");
await page.click("nav.pages a[rel=next]");
await page.waitForURL(/page=2/);
const secondPage = await page.locator("#event-list tbody tr").count();
check(secondPage > 0 && secondPage < 50 && (await page.locator("nav.pages a[rel=next]").count()) === 0, `the second page ends the log: ${secondPage}`);
check((await page.locator("#event-list tbody tr").last().innerText()).includes("run_started"), "the oldest event last");
await page.selectOption("select[name=type]", "step_completed");
await page.click("form.filters button");
const completedRows = await page.locator("#event-list tbody tr").allInnerTexts();
check(completedRows.length === 20 && completedRows.every((r) => r.includes("step_completed")), `type filter: ${completedRows.length}`);
await page.goto(`${base}/events?workflow=${encodeURIComponent(chained)}&step=s3`);
const stepRows = await page.locator("#event-list tbody tr").allInnerTexts();
check(stepRows.length >= 2 && stepRows.every((r) => r.includes("s3")), `step filter: ${stepRows}`);

// The run form comes from the input schema; problems sit at their fields.
await define(base, {
  name: "deploy-form",
  input_schema: {
    type: "object", required: ["service", "env"],
    properties: {
      service: { type: "string", description: "The service to deploy" },
      replicas: { type: "integer", minimum: 1, default: 2 },
      env: { enum: ["staging", "production"] },
      dry_run: { type: "boolean" },
    },
  },
  definition: { steps: [{ id: "say", action: "workflow.log", params: { message: "deploy ${{inputs.service}}" } }] },
});
await page.goto(`${base}/templates/deploy-form`);
check(await page.locator("input[name='in.service'][aria-required=true]").count() === 1, "a required text field");
check((await page.inputValue("input[name='in.replicas']")) === "2", "the default is filled in");
check((await page.locator("select[name='in.env'] option").allInnerTexts()).join(",") === "—,staging,production", "an enum is a select");
check((await text(page, "#run")).includes("The service to deploy"), "the description helps");
await submit(page, "#run button[type=submit]");
await page.waitForSelector(".invalid-field");
const missing = await text(page, ".invalid-field:has([name='in.service'])");
check(missing.includes("required") && !missing.includes("property"), `a missing required input is said at its field, in words: ${missing}`);
await page.fill("input[name='in.service']", "billing");
await page.selectOption("select[name='in.env']", "staging");
await page.fill("input[name='in.replicas']", "0");
await submit(page, "#run button[type=submit]");
await page.waitForSelector(".invalid-field");
const problem = await text(page, ".invalid-field");
check(problem.includes("replicas") && problem.includes("must be at least 1"), `the problem is at its field, in words: ${problem}`);
check((await page.inputValue("input[name='in.service']")) === "billing", "typed values are kept");
await shot(page, "23-run-form-problem");
await page.fill("input[name='in.replicas']", "3");
await page.selectOption("select[name='in.dry_run']", "true");
await submit(page, "#run button[type=submit]");
await page.waitForURL(/\/workflows\//);
const inputs = await text(page, "#summary");
check(inputs.includes('"replicas": 3') && inputs.includes('"dry_run": true') && inputs.includes('"service": "billing"'), `typed params: ${inputs}`);
await page.goto(`${base}/templates/deploy-form`);
await page.click("#run summary");
const broken = '{\n  "service": "x",\n  oops\n}';
await page.fill("textarea[name=params]", broken);
await submit(page, "#run button[type=submit]");
await page.waitForSelector("#run .flash.error");
const mistake = await text(page, "#run .flash.error");
check(mistake.includes("line 3, column 3") && mistake.match(/line/g).length === 1, `a JSON mistake is placed, once: ${mistake}`);
check((await page.inputValue("textarea[name=params]")) === broken, "the typed JSON is kept");

// A paste mistake on Templates sits beside the text, its line selected.
await page.goto(`${base}/templates`);
const pasted = approval("pasted");
pasted.definition.steps[2].depends_on = ["gaet"];
await page.fill("textarea[name=source]", JSON.stringify(pasted, null, 2));
await submit(page, "#create button[type=submit]");
await page.waitForSelector(".paste .diagnostics");
const area = await page.locator("textarea[name=source]").boundingBox();
const note = await page.locator(".paste .diagnostics").boundingBox();
check(note.x >= area.x + area.width && note.y < area.y + area.height, `the diagnostic sits beside the text: ${JSON.stringify({ area, note })}`);
const selected = await page.evaluate(() => {
  const t = document.querySelector("textarea[name=source]");
  return t.value.substring(t.selectionStart, t.selectionEnd);
});
check(selected.includes("gaet"), `the line is selected: ${selected}`);
check((await text(page, ".paste .diagnostics pre.excerpt")).includes("^"), "the line is shown with a caret");
await shot(page, "24-template-paste-mistake");

// Bulk cancel from the list, search by id and time, short ids that copy.
await define(base, approval("bulk"));
const bulk = [await run(base, "bulk"), await run(base, "bulk"), await run(base, "bulk")];
for (const id of bulk) await untilDecision(base, id);
await page.goto(`${base}/workflows?template=bulk`);
check(!(await text(page, "#workflow-list thead")).includes("NAME"), "one name column");
await page.check(`input[name="run.${bulk[0]}"]`);
await page.check(`input[name="run.${bulk[1]}"]`);
await page.click("button[value=cancel]");
await page.waitForSelector(".flash.notice");
check((await text(page, ".flash.notice")).includes("Cancelled 2 of 2"), "the notice counts them");
await page.goto(`${base}/workflows?template=bulk&status=cancelled`);
check(await page.locator("#workflow-list tbody tr").count() === 2, "two cancelled");
await page.goto(`${base}/workflows?template=bulk&status=suspended`);
check((await page.locator("#workflow-list tbody tr").allInnerTexts()).length === 1, "one left waiting");
await page.goto(`${base}/workflows`);
await page.fill("input[name=q]", bulk[2].slice(-8));
await page.click("#search button");
check(await page.locator("#workflow-list tbody tr").count() === 1, "found by part of its id");
const shortId = await text(page, "#workflow-list .id");
check(shortId.startsWith("…") && shortId.length < 12, `a short id: ${shortId}`);
await page.click("#workflow-list button.copy");
check((await page.evaluate(() => navigator.clipboard.readText())) === bulk[2], "the copy button copies the whole id");
await page.fill("input[name=from]", "2099-01-01T00:00");
await page.click("#search button");
check((await text(page, "#workflow-list")).includes("No workflow matches"), "a time range in the future finds none");
await shot(page, "25-workflows-search");

// Two versions of a template, compared: a diff and both diagrams.
await define(base, { name: "versioned", definition: { steps: [{ id: "one", action: "workflow.log", params: { message: "1" } }] } });
await define(base, {
  name: "versioned",
  definition: { steps: [{ id: "one", action: "workflow.log", params: { message: "1" } }, { id: "two", action: "workflow.log", depends_on: ["one"], params: { message: "2" } }] },
});
await page.goto(`${base}/templates/versioned`);
await page.click("text=Compare v1 with v2");
await page.waitForURL(/compare/);
check((await page.locator("pre.diff .add").allInnerTexts()).some((l) => l.includes('"two"')), "the added step is in the diff");
check(await page.locator("#diagrams img").count() === 2, "both diagrams");
await shot(page, "26-template-compare");

// Plugins: health, tools, and after a crash its restart and last error.
await page.goto(`${base}/plugins`);
const plugin = await text(page, "#plugin-list");
check(plugin.includes("tiny") && plugin.includes("up") && plugin.includes("tiny.echo"), `plugins: ${plugin}`);
execSync("pkill -f 'tiny-plugin[.]mjs'");
for (let i = 0; i < 100 && (await text(page, "#plugin-list td:nth-child(4)")) === "0"; i++) {
  await sleep(100);
  await page.reload();
}
const restarted = await page.locator("#plugin-list tbody tr").first().innerText();
check((await text(page, "#plugin-list td:nth-child(4)")) !== "0", `restarted after a crash: ${restarted}`);
check((await text(page, "#plugin-list td:nth-child(5)")) !== "none", `the last error is kept: ${restarted}`);
await shot(page, "27-plugins");

// A failed run re-run from its failed step: the completed step's output is
// kept (a fresh uuid would differ), the failed one runs again and passes.
await define(base, {
  name: "needs-secret",
  definition: {
    steps: [
      { id: "stamp", action: "crypto.uuid" },
      { id: "call", action: "workflow.log", depends_on: ["stamp"], params: { message: "${{steps.stamp.output.uuid}} ${{secrets.LATE_TOKEN}}" } },
    ],
  },
});
const failed = await run(base, "needs-secret");
await untilStatus(page, failed, "failed");
// The failed run's Steps list every step in dependency order, the one that
// never ran too; its opened error fits the page.
await define(base, {
  name: "fails-late",
  definition: {
    steps: [
      { id: "prep", action: "crypto.uuid" },
      { id: "hash", action: "crypto.hash", depends_on: ["prep"], params: { data: "${{steps.prep.output.uuid}}" } },
      { id: "check", action: "shell.exec", depends_on: ["hash"], params: { command: "sh", args: ["-c", `echo ${"x".repeat(400)} >&2; exit 3`], fail_on_nonzero: true } },
      { id: "done", action: "workflow.log", depends_on: ["check"], params: { message: "ok" } },
    ],
  },
});
const failedLate = await run(base, "fails-late");
await untilStatus(page, failedLate, "failed");
const failedSteps = (await page.locator("#steps tbody tr").allInnerTexts()).map((r) => r.split("\t").map((c) => c.trim()));
check(failedSteps.map((r) => r[0]).join(",") === "prep,hash,check,done", `steps in dependency order: ${JSON.stringify(failedSteps)}`);
check(failedSteps[3][1] === "workflow.log" && failedSteps[3][2] === "not run", `the step that never ran: ${JSON.stringify(failedSteps[3])}`);
const runWidth = await page.evaluate(() => document.documentElement.scrollWidth);
check(runWidth <= 1280, `a failed run's page is ${runWidth} px wide at 1280`);
await shot(page, "26b-failed-run-steps");
await page.goto(workflowPage(failed));
const stampOf = async () => JSON.parse(await page.locator("#steps tr:has-text('stamp') details:has-text('output') pre").first().textContent()).uuid;
const firstStamp = await stampOf();
await page.goto(`${base}/secrets`);
await page.fill("input[name=name]", "LATE_TOKEN");
await page.fill("input[name=value]", "now-set");
await page.click("form[action='/secrets'] button");
await page.waitForSelector("text=LATE_TOKEN");
await page.goto(workflowPage(failed));
await page.click("form[action$='/retry'] button");
await page.waitForURL((url) => !url.pathname.endsWith(encodeURIComponent(failed)));
const retried = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
await untilStatus(page, retried, "completed");
check((await text(page, "#summary")).includes("Re-run of"), "the new run names the one it re-runs");
check((await stampOf()) === firstStamp, "the completed step's output is kept");
const kept = (await page.locator("#steps tr:has-text('stamp')").first().innerText()).split("\t").map((c) => c.trim());
check(kept[1] === "crypto.uuid" && kept[3].startsWith("carried over from"), `the kept step names its action and was carried over: ${JSON.stringify(kept)}`);
await page.goto(`${base}/events?workflow=${encodeURIComponent(retried)}&step=stamp`);
check(!(await text(page, "#event-list")).includes("step_started"), "the kept step did not start again");
await shot(page, "28-rerun-from-failed-step");

// A decision card says what its timeout will do, and the run's page what
// it did.
const timed = (name, timeout) => ({
  name,
  definition: {
    steps: [{
      id: "gate", type: "reasoning",
      config: { prompt_context: `Ship ${name}?`, options: [{ id: "yes" }, { id: "no" }], timeout, fallback: "no" },
    }],
  },
});
await define(base, timed("slow-gate", "1h"));
await define(base, timed("quick-gate", "1s"));
await run(base, "slow-gate");
await page.goto(`${base}/decisions`);
const card = await text(page, "article.decision:has-text('Ship slow-gate?')");
check(card.includes("then takes no"), `the card says what the timeout does: ${card}`);
const lapsed = await run(base, "quick-gate");
await page.goto(workflowPage(lapsed));
for (let i = 0; i < 300 && (await text(page, "#summary .badge")) !== "completed"; i++) {
  await sleep(100);
  await page.reload();
}
const lapsedDecisions = await text(page, "#decisions");
check(lapsedDecisions.includes("timed out and took no"), `the run says which fallback its timeout took: ${lapsedDecisions}`);

// Every page fits a 390 px phone screen.
const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, timezoneId: "Europe/Madrid", isMobile: true });
const small = await phone.newPage();
watch(small);
const pages = [
  ["/", "dashboard"], ["/workflows", "workflows"], [`/workflows/${encodeURIComponent(slow)}`, "workflow"],
  [`/workflows/${encodeURIComponent(waiting)}`, "workflow-waiting"], [`/workflows/${encodeURIComponent(failedLate)}`, "workflow-failed"],
  ["/templates", "templates"],
  ["/templates/deploy-form", "template-form"], ["/templates/versioned/compare?a=1&b=2", "compare"],
  ["/decisions", "decisions"], ["/scheduler", "scheduler"], ["/events", "events"], ["/agents", "agents"],
  ["/plugins", "plugins"], ["/secrets", "secrets"], ["/registry", "registry"],
  ["/registry/release-notes-writer-for-the-platform", "registry-agent"], ["/triggers", "triggers"],
  ["/no/such/page", "not-found"],
];
for (const [i, [path, name]] of pages.entries()) {
  const response = await small.goto(`${base}${path}`);
  await small.waitForLoadState("load");
  if (name === "not-found") check(response.status() === 404 && (await small.title()).startsWith("Not found"), "a real 404 page");
  await shot(small, `phone-${String(i).padStart(2, "0")}-${name}`);
  // Identifiers in tables stay whole: no step id or action split over lines.
  const split = await small.evaluate(() => [...document.querySelectorAll("td code")]
    .filter((c) => c.getClientRects().length > 1).map((c) => c.textContent));
  if (split.length) problems.push(`${path} breaks identifiers over lines on a 390 px screen: ${split.join(", ")}`);
  const width = await small.evaluate(() => document.documentElement.scrollWidth);
  if (width > 390) {
    const wide = await small.evaluate(() => [...document.querySelectorAll("main *")]
      .filter((e) => e.getBoundingClientRect().right > 390).slice(0, 5).map((e) => `${e.tagName}.${e.className}`));
    problems.push(`${path} is ${width} px wide on a 390 px screen: ${wide.join(", ")}`);
  }
}

// A rejected paste whose excerpt is one long line still fits the phone.
await small.goto(`${base}/templates`);
await small.fill("textarea[name=source]", `{"name": "long", "definition": {"steps": [{"id": "a", "action": "crypto.hsh", "params": {"data": "${"a long value ".repeat(12)}"}}]}`);
await small.click("#create button[type=submit]");
await small.waitForSelector(".diagnostics");
const pasteWidth = await small.evaluate(() => document.documentElement.scrollWidth);
if (pasteWidth > 390) problems.push(`/templates after a rejected paste is ${pasteWidth} px wide on a 390 px screen`);
await shot(small, "phone-rejected-paste");

check(problems.length === 0, `browser problems:\n${problems.join("\n")}`);
await browser.close();
console.log(`operations: times, timeline, events, forms, bulk, search, compare, plugins and phone widths walked; screenshots in ${artifacts}`);

// Headless Chromium (Debian's) walks the panel's main user paths, as a new
// user would, and saves a screenshot of every page it visits.
import { approval, check, define, launchBrowser, run, untilDecision } from "./panel-client.mjs";

const [base, artifacts] = process.argv.slice(2);
const browser = await launchBrowser();
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const problems = [];
const page = await context.newPage();
const watch = (p) => {
  p.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // 422 is the answer to a form with mistakes, which the walk makes on purpose.
  p.on("console", (m) => {
    if (m.type() === "error" && !m.text().includes("status of 422")) problems.push(`console: ${m.text()} (${m.location().url})`);
  });
};
watch(page);
const shot = (p, name) => p.screenshot({ path: `${artifacts}/${name}.png`, fullPage: true });
const text = (p, selector) => p.locator(selector).first().innerText();

// The dashboard of a fresh daemon: every count at zero, every section there.
await page.goto(`${base}/`);
check((await page.title()).startsWith("Dashboard"), "the dashboard's title");
check((await text(page, "#counts")).includes("active"), "the status counts");
await shot(page, "01-dashboard-empty");

// Create a template from pasted JSON with a mistake: the diagnostic shows inline.
await page.goto(`${base}/templates`);
const broken = approval("release");
broken.definition.steps[2].depends_on = ["gaet"];
await page.fill("textarea[name=source]", JSON.stringify(broken, null, 2));
await page.click("#create button[type=submit]");
await page.waitForSelector(".diagnostics");
const diagnostic = await text(page, ".diagnostics");
check(diagnostic.includes("E0021") && diagnostic.includes("gaet") && /line \d+, column \d+/.test(diagnostic), `diagnostic: ${diagnostic}`);
check((await page.inputValue("textarea[name=source]")).includes("gaet"), "the pasted text is kept");
await shot(page, "02-template-diagnostic");

// Fix it: the template page shows its diagram.
await page.fill("textarea[name=source]", JSON.stringify(approval("release"), null, 2));
await page.click("#create button[type=submit]");
await page.waitForURL(/\/templates\/release/);
check(await page.locator("figure.diagram img").count() === 1, "the template's diagram");
const diagramLoaded = await page.locator("figure.diagram img").evaluate((img) => img.complete && img.naturalWidth > 0);
check(diagramLoaded, "the diagram image renders");
await shot(page, "03-template");

// Run it as an agent: the workflow suspends on its decision.
await page.fill("form[action$='/run'] input[name=agent]", "release-bot");
await page.click("form[action$='/run'] button[type=submit]");
await page.waitForURL(/\/workflows\//);
const id = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
await untilDecision(base, id);
await page.reload();
check((await text(page, "#summary")).includes("suspended"), "the run is suspended");

// Watch the workflow in a second tab while the decision is answered in the first.
const watcher = await context.newPage();
watch(watcher);
await watcher.goto(`${base}/workflows/${encodeURIComponent(id)}`);
await watcher.waitForSelector(".live-state.on");
await shot(watcher, "04-workflow-suspended");
await page.goto(`${base}/decisions`);
check((await text(page, "#decision-list")).includes("Ship it?"), "the pending decision is listed");
await shot(page, "05-decisions");
await page.fill(`form:has(input[value="${id}"]) textarea[name=reasoning]`, "tests pass");
await page.click(`form:has(input[value="${id}"]) button[value=yes]`);
await page.waitForURL(/\/workflows\//);
// The watching tab updates itself: no reload.
await watcher.waitForFunction(() => document.querySelector("#summary .badge")?.textContent === "completed", null, { timeout: 10000 });
const steps = await text(watcher, "#steps");
check(steps.includes("done") && !steps.includes("suspended"), `steps after the decision: ${steps}`);
check(steps.includes("workflow.log"), "each step's action is shown");
check((await text(watcher, "#recent-events")).includes("decision_resolved"), "the resolution is in the events");
await shot(watcher, "06-workflow-completed-live");

// Re-run it from its page: a new run, suspended again.
await page.goto(`${base}/workflows/${encodeURIComponent(id)}`);
await page.click("form[action$='/rerun'] button");
await page.waitForURL((url) => !url.pathname.endsWith(encodeURIComponent(id)));
const rerun = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
check(rerun !== id, "re-run starts a new workflow");
await untilDecision(base, rerun);
await page.reload();
await page.click("form[action$='/cancel'] button");
await page.waitForFunction(() => document.querySelector("#summary .badge")?.textContent === "cancelled", null, { timeout: 10000 });

// Schedule it: an invalid expression is refused, a valid one previews and is listed.
await page.goto(`${base}/scheduler`);
await page.fill("input[name=cron]", "61 * * * *");
await page.waitForFunction(() => document.querySelector("#cron-preview")?.textContent.includes("Invalid"));
await page.click("#create-job button:text('Create')");
check((await text(page, "#create-job")).includes("Invalid") || (await text(page, ".flash.error")).length > 0, "an invalid cron is refused");
await page.selectOption("select[name=template]", "release");
await page.fill("input[name=cron]", "30 9 * * 1-5");
await page.fill("input[name=timezone]", "Europe/Madrid");
await page.waitForFunction(() => document.querySelector("#cron-preview")?.textContent.startsWith("Next:"));
await page.click("#create-job button:text('Create')");
await page.waitForSelector("#job-list table");
const jobs = await text(page, "#job-list");
check(jobs.includes("30 9 * * 1-5") && jobs.includes("Europe/Madrid") && jobs.includes("release"), `jobs: ${jobs}`);
await page.click("#job-list button:text('Disable')");
await page.waitForSelector("#job-list button:text('Enable')");
await shot(page, "07-scheduler");
await page.fill("input[name=cron]", "@hourly");
await page.click("#create-job button:text('Create')");
await page.waitForSelector("#job-list td:has-text('@hourly')");
await page.click("#job-list tr:has-text('@hourly') button:text('Delete')");
await page.waitForFunction(() => !document.querySelector("#job-list").textContent.includes("@hourly"));

// Secrets: names only.
await page.goto(`${base}/secrets`);
await page.fill("input[name=name]", "API_TOKEN");
await page.fill("input[name=value]", "s3cr3t-value-never-shown");
await page.click("form[action='/secrets'] button");
await page.waitForSelector("text=API_TOKEN");
check(!(await page.content()).includes("s3cr3t-value-never-shown"), "a secret's value never reaches a page");
await shot(page, "08-secrets");

// A run that uses the secret: its page shows the step's input and output, never the value.
await define(base, {
  name: "uses-secret",
  definition: { steps: [{ id: "call", action: "workflow.log", params: { message: "token ${{secrets.API_TOKEN}}" } }] },
});
const secretRun = await run(base, "uses-secret");
await page.goto(`${base}/workflows/${encodeURIComponent(secretRun)}`);
await page.waitForFunction(() => document.querySelector("#summary .badge")?.textContent === "completed", null, { timeout: 10000 });
await page.click("#steps summary:text('input')");
const secretPage = await page.content();
check(!secretPage.includes("s3cr3t-value-never-shown"), "no secret value on the workflow's page");
check((await text(page, "#steps")).includes("token ${{secrets.API_TOKEN}}"), "the step's input shows the secret's reference");
await shot(page, "08b-workflow-with-secret");
await page.goto(`${base}/secrets`);
await page.fill("input[name=name]", "OLD_TOKEN");
await page.fill("input[name=value]", "old");
await page.click("form[action='/secrets'] button");
await page.click("tr:has-text('OLD_TOKEN') button:text('Delete')");
await page.waitForFunction(() => !document.querySelector("#secret-list").textContent.includes("OLD_TOKEN"));

// The rest of the pages, with what the walk produced.
for (const [path, name, expected] of [
  ["/", "09-dashboard", rerun],
  ["/workflows?status=completed", "10-workflows", id],
  [`/events?workflow=${encodeURIComponent(id)}`, "11-events", "workflow_completed"],
  ["/agents", "12-agents", "release-bot"],
  ["/workflows?agent=release-bot", "12b-workflows-of-agent", id],
]) {
  await page.goto(`${base}${path}`);
  check((await page.content()).includes(expected), `${path} shows ${expected}`);
  await shot(page, name);
}

// Without JavaScript: pages read, and a form still answers a decision.
const plain = await browser.newContext({ javaScriptEnabled: false });
const noScript = await plain.newPage();
await define(base, approval("plain"));
await noScript.goto(`${base}/templates/plain`);
await noScript.click("form[action$='/run'] button[type=submit]");
const plainId = decodeURIComponent(new URL(noScript.url()).pathname.split("/").pop());
await untilDecision(base, plainId);
await noScript.goto(`${base}/decisions`);
await noScript.click(`form:has(input[value="${plainId}"]) button[value=no]`);
await noScript.goto(`${base}/workflows/${encodeURIComponent(plainId)}`);
for (let i = 0; i < 50 && !(await text(noScript, "#summary .badge")).includes("completed"); i++) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  await noScript.reload();
}
check((await text(noScript, "#summary .badge")) === "completed", "answered without JavaScript");
await shot(noScript, "13-no-javascript");

check(problems.length === 0, `browser problems:\n${problems.join("\n")}`);
await browser.close();
console.log(`browser: every path walked; screenshots in ${artifacts}`);

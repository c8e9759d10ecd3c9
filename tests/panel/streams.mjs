// The panel's live updates cost a browser one connection, however many
// pages it shows: twenty pages walked in one tab (the browser keeps the
// last ones for back and forward, with their scripts frozen), back and
// forward through them, then eight tabs open at once. A browser opens at
// most six connections to a host; a stream per page used them up and
// every navigation hung. The daemon counts the streams it serves
// (`opcode_panel_streams`): the oracle is that count, not a time.
import { approval, check, define, launchBrowser, run } from "./panel-client.mjs";

const [base] = process.argv.slice(2);

/** The daemon's count of open `/panel/live` streams. */
async function streams() {
  const text = await (await fetch(`${base}/metrics`)).text();
  const match = text.match(/^opcode_panel_streams (\d+)$/m);
  check(match, "/metrics has opcode_panel_streams");
  return Number(match[1]);
}

/** Waits until the count is at most `most` (a closed stream is noticed
 * when the daemon next writes to it: at most one keep-alive, 15 s, later). */
async function settlesAt(most, what) {
  let count = await streams();
  for (let i = 0; i < 300 && count > most; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    count = await streams();
  }
  check(count <= most, `${what}: ${count} open streams (at most ${most} expected)`);
}

const browser = await launchBrowser({ backForwardCache: true });
const context = await browser.newContext();
const problems = [];
const tab = await context.newPage();
tab.on("pageerror", (e) => problems.push(`page error: ${e.message}`));

// Pages that follow the log live: the lists and a run's own page.
await define(base, approval("streams"));
const id = await run(base, "streams");
const pages = ["/", "/workflows", `/workflows/${encodeURIComponent(id)}`, "/decisions", "/events", "/agents", "/scheduler"];
const live = (p) => p.waitForSelector(".live-state.on", { timeout: 20000 });

for (let i = 0; i < 20; i++) {
  await tab.goto(`${base}${pages[i % pages.length]}`);
  await live(tab);
}
await settlesAt(1, "after twenty pages in one tab");
for (let i = 0; i < 10; i++) {
  await tab.goBack({ waitUntil: "commit" });
  await live(tab);
}
for (let i = 0; i < 5; i++) {
  await tab.goForward({ waitUntil: "commit" });
  await live(tab);
}
await settlesAt(1, "after back and forward");

// Eight tabs at once: each live, one stream for all.
const tabs = [];
for (let i = 0; i < 8; i++) {
  const other = await context.newPage();
  other.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  await other.goto(`${base}${pages[i % pages.length]}`);
  await live(other);
  tabs.push(other);
}
await settlesAt(1, "with nine tabs open");
// A change reaches the tabs through the one stream: a run started now
// appears in a list already open, without a reload.
await tabs[1].goto(`${base}/workflows`);
await live(tabs[1]);
const again = await run(base, "streams");
await tabs[1].waitForFunction((wanted) => document.querySelector("main").innerHTML.includes(wanted),
  encodeURIComponent(again), { timeout: 20000 });

for (const other of tabs) await other.close();
await tab.close();
await settlesAt(0, "with every tab closed");
check(problems.length === 0, `browser problems:\n${problems.join("\n")}`);
await browser.close();
console.log("streams: twenty pages, back and forward, nine tabs: one live stream at a time");

// Plain-HTTP use of the panel's forms, as a browser without JavaScript
// would post them, and the browser itself: shared by the AG-UI and browser
// tests.
import { chromium } from "playwright-core";

/** A browser session: the cookie the panel sets, and the CSRF token it
 * prints into that session's pages. */
export async function session(base) {
  const response = await fetch(`${base}/`);
  const cookie = (response.headers.get("set-cookie") || "").split(";")[0];
  const page = await response.text();
  const match = page.match(/name="csrf-token" content="([^"]+)"/);
  if (!cookie.startsWith("opcode_session=") || !match) throw new Error("no session on the dashboard");
  return { cookie, csrf: match[1] };
}

/** Posts `fields` as a form in a session; answers the status, redirect and body. */
export async function postForm(base, path, fields) {
  const { cookie, csrf } = await session(base);
  const body = new URLSearchParams({ csrf, ...fields });
  const response = await fetch(`${base}${path}`, { method: "POST", body, redirect: "manual", headers: { cookie } });
  return { status: response.status, location: response.headers.get("location"), text: await response.text() };
}

/** Debian's headless Chromium, through playwright-core. A browser that
 * dies while starting (it crashed once in a loaded CI run, before any page
 * opened) is started again, up to three times: that is the host's trouble,
 * not the panel's. `backForwardCache` keeps the cache of pages for back
 * and forward that people's browsers have (playwright turns it off). */
export async function launchBrowser({ backForwardCache = false } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await chromium.launch({
        executablePath: "/usr/bin/chromium",
        ignoreDefaultArgs: backForwardCache ? ["--disable-back-forward-cache"] : [],
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--no-first-run"],
      });
    } catch (e) {
      if (attempt >= 3) throw e;
      console.error(`chromium did not start (attempt ${attempt}): ${e.message.split("\n")[0]}`);
    }
  }
}

/** A template whose run asks one decision (`gate`: yes or no) between two logs. */
export const approval = (name) => ({
  name,
  description: "Prepare, ask, finish",
  definition: {
    steps: [
      { id: "prepare", action: "workflow.log", params: { message: "preparing" } },
      {
        id: "gate", type: "reasoning", depends_on: ["prepare"],
        config: { prompt_context: "Ship it?", options: [{ id: "yes", description: "ship" }, { id: "no", description: "stop" }] },
      },
      { id: "done", action: "workflow.log", depends_on: ["gate"], params: { message: "chose ${{steps.gate.output.choice}}" } },
    ],
  },
});

/** Defines `template` (a whole template object) through the panel's form. */
export async function define(base, template) {
  const answer = await postForm(base, "/templates", { format: "json", source: JSON.stringify(template) });
  if (answer.status !== 303) throw new Error(`defining ${template.name}: ${answer.status} ${answer.text.slice(0, 400)}`);
}

/** Starts a run of template `name`; answers the workflow id. */
export async function run(base, name) {
  const answer = await postForm(base, `/templates/${name}/run`, { params: "{}" });
  const match = answer.location && answer.location.match(/^\/workflows\/(.+)$/);
  if (!match) throw new Error(`running ${name}: ${answer.status} ${answer.location}`);
  return decodeURIComponent(match[1]);
}

/** Waits until workflow `id` has a pending decision. */
export async function untilDecision(base, id) {
  for (let i = 0; i < 100; i++) {
    const page = await (await fetch(`${base}/decisions`)).text();
    if (page.includes(`value="${id}"`)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`workflow ${id} never asked its decision`);
}

/** Fails with `message` unless `condition`. */
export function check(condition, message) {
  if (!condition) throw new Error(message);
}

// Parses Mermaid files with Mermaid's own parser (in jsdom): exit 1 if any fails.
import { JSDOM } from "jsdom";
import fs from "node:fs";
const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.DOMPurify = undefined;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });
let failed = 0;
for (const file of process.argv.slice(2)) {
  const text = fs.readFileSync(file, "utf8");
  try {
    await mermaid.parse(text);
  } catch (e) {
    failed++;
    console.log(`FAIL ${file}: ${String(e.message || e).split("\n")[0]}`);
  }
}
console.log(`parsed ${process.argv.length - 2 - failed} of ${process.argv.length - 2}`);
process.exit(failed ? 1 : 0);

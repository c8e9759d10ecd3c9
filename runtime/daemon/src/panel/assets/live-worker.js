// opcode panel: the one `/panel/live` stream every page of this browser
// shares (panel.js connects to it). A page says "leave" when it goes; the
// stream closes when no page is left.
"use strict";
const pages = new Set();
let source = null;
let open = false;

const tell = (message) => {
  for (const page of pages) page.postMessage(message);
};

const listen = () => {
  source = new EventSource("/panel/live");
  source.addEventListener("open", () => {
    open = true;
    tell({ kind: "open" });
  });
  source.addEventListener("error", () => {
    open = false;
    tell({ kind: "error" });
  });
  source.addEventListener("change", (event) => tell({ kind: "change", data: event.data }));
};

onconnect = (event) => {
  const page = event.ports[0];
  pages.add(page);
  page.onmessage = ({ data }) => {
    if (data !== "leave") return;
    pages.delete(page);
    page.close();
    if (!pages.size && source) {
      source.close();
      source = null;
      open = false;
    }
  };
  page.start();
  if (!source) listen();
  else if (open) page.postMessage({ kind: "open" });
};

// opcode panel: live refresh of the [data-live] parts of a page, and the
// cron preview of the scheduler form. Everything works without it.
(() => {
  "use strict";
  const scope = document.body.dataset.scope || null;
  const state = document.querySelector(".live-state");
  let timer = null;

  async function refresh() {
    timer = null;
    const response = await fetch(location.href, { headers: { "X-Panel-Refresh": "1" } });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const region of document.querySelectorAll("[data-live]")) {
      // Never pull a form out from under someone typing in it.
      if (region.contains(document.activeElement) && document.activeElement !== document.body) continue;
      // Nor a selection someone is making (the runs to cancel).
      if (region.querySelector("input[type=checkbox]:checked")) continue;
      const next = fresh.getElementById(region.id);
      if (next) region.replaceWith(next);
    }
    document.dispatchEvent(new CustomEvent("panel:refreshed"));
  }

  // Pages show times in the browser's zone: tell the daemon which it is.
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const cookies = Object.fromEntries(document.cookie.split("; ").map((c) => c.split("=")));
  if (zone && decodeURIComponent(cookies.opcode_zone || "") !== zone) {
    document.cookie = `opcode_zone=${encodeURIComponent(zone)}; path=/; max-age=31536000; samesite=strict`;
    if (cookies.opcode_times !== "utc" && document.body.dataset.zone !== zone) location.reload();
  }

  // Relative times ("3 min ago") stay true while the page is open.
  const words = (ms) => {
    if (ms < 1000) return `${ms} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
    const units = [[86400000, "d"], [3600000, "h"], [60000, "min"], [1000, "s"]];
    const i = units.findIndex(([unit]) => ms >= unit);
    const [big, name] = units[i];
    const [small, smallName] = units[i + 1] || [0, ""];
    const rest = ms % big;
    return small && rest >= small ? `${Math.floor(ms / big)} ${name} ${Math.floor(rest / small)} ${smallName}`
      : `${Math.floor(ms / big)} ${name}`;
  };
  const ageTimes = () => {
    for (const t of document.querySelectorAll("time[data-relative]")) {
      const delta = Date.parse(t.getAttribute("datetime")) - Date.now();
      if (Number.isNaN(delta) || Math.abs(delta) >= 86400000) continue;
      const span = words(Math.abs(delta));
      t.textContent = Math.abs(delta) < 1000 ? "just now" : delta < 0 ? `${span} ago` : `in ${span}`;
    }
  };
  setInterval(ageTimes, 15000);

  // Copy buttons beside shortened ids.
  const arm = () => {
    for (const button of document.querySelectorAll("button.copy[hidden]")) {
      button.hidden = false;
      button.addEventListener("click", async () => {
        try {
          await navigator.clipboard.writeText(button.dataset.copy);
          button.textContent = "copied";
        } catch {
          button.textContent = "select it";
        }
        setTimeout(() => { button.textContent = "copy"; }, 1500);
      });
    }
  };
  arm();
  document.addEventListener("panel:refreshed", arm);

  // Regions of a running workflow redraw on a timer too (a bar grows).
  setInterval(() => {
    if (document.visibilityState === "visible" && document.querySelector("[data-refresh]") && !timer) refresh();
  }, 2000);

  // A diagnostic's position selects its line in the pasted text.
  const source = document.querySelector("textarea[data-marks]");
  const mark = (line) => {
    const lines = source.value.split("\n");
    const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
    source.focus();
    source.setSelectionRange(start, start + (lines[line - 1] || "").length);
    const height = source.scrollHeight / Math.max(lines.length, 1);
    source.scrollTop = Math.max(0, (line - 3) * height);
  };
  if (source) {
    const marks = document.querySelectorAll("[data-line]");
    for (const link of marks) {
      link.addEventListener("click", (event) => { event.preventDefault(); mark(Number(link.dataset.line)); });
    }
    if (marks.length) mark(Number(marks[0].dataset.line));
  }

  // Live changes. Every panel page of this browser shares one stream,
  // held by a shared worker: a browser opens at most six connections to
  // a host, and a stream per page (tabs, pages kept for back and forward)
  // would use them up. A page leaving (or frozen in the back/forward
  // cache) lets go of it, and takes it again when shown.
  const changed = (data) => {
    const change = JSON.parse(data);
    if (scope && change.workflow_id && change.workflow_id !== scope) return;
    if (!timer) timer = setTimeout(refresh, 120);
  };
  const shown = (on) => state && state.classList.toggle("on", on);
  const follow = () => {
    if (window.SharedWorker) {
      const port = new SharedWorker("/static/live-worker.js", { name: "opcode-live" }).port;
      port.onmessage = ({ data }) => {
        if (data.kind === "change") changed(data.data);
        else shown(data.kind === "open");
      };
      port.start();
      return () => port.postMessage("leave");
    }
    if (!window.EventSource) return () => {};
    const source = new EventSource("/panel/live");
    source.addEventListener("open", () => shown(true));
    source.addEventListener("error", () => shown(false));
    source.addEventListener("change", (event) => changed(event.data));
    return () => source.close();
  };
  if (document.querySelector("[data-live]")) {
    let leave = follow();
    addEventListener("pagehide", () => {
      leave();
      leave = null;
      shown(false);
    });
    addEventListener("pageshow", (event) => {
      if (!event.persisted || leave) return;
      leave = follow();
      refresh();
    });
  }

  const cron = document.querySelector("[data-cron-preview]");
  if (cron) {
    const output = document.querySelector(cron.dataset.cronPreview);
    const zone = cron.form.elements.namedItem("timezone");
    let pending = null;
    const preview = () => {
      clearTimeout(pending);
      pending = setTimeout(async () => {
        if (!cron.value.trim()) { output.textContent = ""; return; }
        const query = new URLSearchParams({ cron: cron.value, timezone: zone ? zone.value : "UTC" });
        const response = await fetch("/scheduler/preview?" + query, { headers: { "X-Panel-Fragment": "1" } });
        if (response.ok) output.innerHTML = await response.text();
      }, 200);
    };
    cron.addEventListener("input", preview);
    if (zone) zone.addEventListener("input", preview);
  }
})();

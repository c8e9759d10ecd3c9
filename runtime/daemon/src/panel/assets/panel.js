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
      const next = fresh.getElementById(region.id);
      if (next) region.replaceWith(next);
    }
    document.dispatchEvent(new CustomEvent("panel:refreshed"));
  }

  if (document.querySelector("[data-live]") && window.EventSource) {
    const source = new EventSource("/panel/live");
    source.addEventListener("open", () => state && state.classList.add("on"));
    source.addEventListener("error", () => state && state.classList.remove("on"));
    source.addEventListener("change", (event) => {
      const change = JSON.parse(event.data);
      if (scope && change.workflow_id && change.workflow_id !== scope) return;
      if (!timer) timer = setTimeout(refresh, 120);
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

// Outbound deliveries (A2A pushes and webhooks) of the key's tenant: how each fared, and a
// way to send a dead one again. Destinations show scheme, host and path only; no secret,
// token or credential is ever part of what the API returns here.

import { api } from "./api.js";
import { announce, badge, every, fill, h, notice, safeUrl, time } from "./dom.js";

const REFRESH_MS = 3000;

/** A table of deliveries; `after` is called once a redelivery was accepted. */
export function deliveryTable(rows, { showRun = true, after = () => {} } = {}) {
  const columns = ["Delivery", "Kind", ...(showRun ? ["Run"] : []), "Destination", "Status", "Attempts", "Last error", "Next attempt", "Action"];
  const body = rows.map((d) => {
    const status = d.status; // the API's word, as `tether push list` prints it (a retry is pending with attempts)
    const action =
      d.status === "dead"
        ? h(
            "button",
            {
              type: "button",
              class: "redeliver",
              "aria-label": `Redeliver ${d.deliveryId}`,
              onclick: async (event) => {
                const button = event.currentTarget;
                button.disabled = true;
                try {
                  await api(`/v1/deliveries/${encodeURIComponent(d.deliveryId)}/redeliver`, { method: "POST", body: {} });
                  announce(`Delivery ${d.deliveryId} is back in line`);
                  after();
                } catch (e) {
                  button.disabled = false;
                  announce(`Could not redeliver: ${e.message}`);
                }
              },
            },
            "Redeliver",
          )
        : "";
    return h(
      "tr",
      { "data-delivery-id": d.deliveryId, "data-status": status },
      h("td", { "data-label": "Delivery", class: "mono one-line" }, d.deliveryId),
      h("td", { "data-label": "Kind", class: "one-line" }, d.kind),
      showRun ? h("td", { "data-label": "Run", class: "one-line" }, d.runId ? h("a", { href: `#/runs/${encodeURIComponent(d.runId)}`, class: "mono" }, d.runId) : "—") : null,
      h("td", { "data-label": "Destination", class: "mono" }, safeUrl(d.url)),
      h("td", { "data-label": "Status" }, badge(status)),
      h("td", { "data-label": "Attempts" }, String(d.attempts)),
      h("td", { "data-label": "Last error" }, d.lastError ?? "—"),
      h("td", { "data-label": "Next attempt" }, d.status === "pending" ? time(d.nextAttemptAt) : "—"),
      h("td", { "data-label": "Action" }, action),
    );
  });
  const table = h(
    "table",
    { class: "deliveries" },
    h("caption", { class: "visually-hidden" }, "Deliveries"),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, body),
  );
  // narrower than the table (its ids stay whole), the window scrolls this region sideways, not the page
  return h("div", { class: "scrolls", role: "region", "aria-label": "Deliveries table", tabindex: "0" }, table);
}

export function deliveriesView(main, ctx) {
  document.title = "Deliveries · Tether console";
  if (!ctx.can.deliveries) {
    fill(main, h("h1", {}, "Deliveries"), notice("empty", "This key cannot see deliveries (it lacks the webhooks:manage scope)."));
    return () => {};
  }
  const status = h("select", { id: "delivery-status" }, h("option", { value: "" }, "Any status"), ["pending", "delivered", "dead"].map((s) => h("option", { value: s }, s)));
  const area = h("div", { id: "deliveries-area" }, notice("loading", "Loading deliveries…"));
  fill(
    main,
    h("h1", {}, "Deliveries"),
    h("p", { class: "help" }, "A2A pushes and webhooks this host sends for your tenant. A dead one failed every attempt of the retry ladder; redeliver it once the receiver is fixed."),
    h("div", { class: "toolbar" }, h("div", { class: "field" }, h("label", { for: "delivery-status" }, "Status"), status)),
    area,
  );
  let shown = "";
  async function load() {
    try {
      const query = new URLSearchParams({ limit: "200" });
      if (status.value) query.set("status", status.value);
      const data = await api(`/v1/deliveries?${query}`);
      const seen = JSON.stringify(data.deliveries);
      if (seen === shown) return; // unchanged: keep the table (and the keyboard focus in it)
      shown = seen;
      fill(area, data.deliveries.length ? deliveryTable(data.deliveries, { after: load }) : notice("empty", "No deliveries" + (status.value ? ` in state ${status.value}.` : " yet.")));
    } catch (e) {
      shown = "";
      fill(area, notice("error", `Could not load deliveries: ${e.message}`, load));
    }
  }
  status.addEventListener("change", load);
  load();
  return every(REFRESH_MS, load);
}

// The runs of the key's tenant, newest first: filter by status and workflow, find one by
// run or task id (they are the same), page through, and stay current while open: live over
// GET /v1/runs:watch (a `sync` re-reads the page; a `run` updates, adds or drops its row), with
// a slow re-list only while that feed is down.

import { api, ApiError, watchRuns } from "./api.js";
import { badge, every, fill, h, notice, time } from "./dom.js";

const STATUSES = ["pending", "running", "paused", "waiting-approval", "waiting-input", "waiting-external", "completed", "failed", "cancelling", "cancelled"];
const PAGE = 20;
// while the live feed is down (it reconnects meanwhile), the page is re-read this often
const FALLBACK_MS = 30000;
// a run that changes which runs the page holds re-reads the page, at most this often
const RELIST_MS = 1000;

/** What a waiting run waits for, in a few words. */
export function waitsFor(run) {
  const interrupt = run.interrupt;
  if (!interrupt) return "";
  const data = interrupt.data ?? {};
  if (data.contextType === "a2a-peer-input" || data.subkind === "a2a-peer-input") {
    return `Peer asks: ${data.title ?? data.questions?.[0]?.question ?? "input"}`; // the peer's words, shown as text
  }
  if (interrupt.kind === "approval") return `Approval: ${data.title ?? interrupt.nodeId}`;
  if (interrupt.kind === "clarification") {
    const first = data.questions?.[0]?.question;
    return `Answer: ${first ?? "a question"}${data.questions?.length > 1 ? ` (+${data.questions.length - 1})` : ""}`;
  }
  if (data.peer || data.agentUrl) return `Peer: ${data.question ?? data.peer ?? "input"}`;
  return `External event at ${interrupt.nodeId}`;
}

export function runsView(main, ctx) {
  document.title = "Runs · Tether console";
  const filters = { status: "", workflow: "" };
  const cursors = [null]; // cursors[i] opens page i
  let page = 0;
  let nextCursor = null;
  let loading = null;

  const status = h("select", { id: "filter-status", name: "status" }, h("option", { value: "" }, "Any status"), STATUSES.map((s) => h("option", { value: s }, s)));
  const workflow = h("input", { id: "filter-workflow", name: "workflow", type: "text", list: "workflow-ids", autocomplete: "off", placeholder: "any" });
  const workflowIds = h("datalist", { id: "workflow-ids" });
  const search = h("input", { id: "find-id", name: "id", type: "search", autocomplete: "off", placeholder: "run_…", required: true });
  const searchError = h("p", { class: "error", role: "alert", id: "find-error" });
  const state = h("div", { id: "runs-state" });
  const body = h("tbody");
  const table = h(
    "table",
    { class: "runs", id: "runs-table", hidden: true },
    h("caption", { class: "visually-hidden" }, "Runs, newest first"),
    h("thead", {}, h("tr", {}, ["Run", "Status", "Workflow", "Waiting for", "Age"].map((c) => h("th", { scope: "col" }, c)))),
    body,
  );
  const newer = h("button", { type: "button", id: "page-newer", disabled: true }, "Newer");
  const older = h("button", { type: "button", id: "page-older", disabled: true }, "Older");
  const pageLabel = h("span", { id: "page-label", "aria-live": "polite" });
  const updated = h("p", { class: "help", id: "runs-updated", "aria-live": "off" });

  const filterForm = h(
    "form",
    { class: "filters", "aria-label": "Filter runs" },
    h("div", { class: "field" }, h("label", { for: "filter-status" }, "Status"), status),
    h("div", { class: "field" }, h("label", { for: "filter-workflow" }, "Workflow"), workflow, workflowIds),
    h("button", { type: "submit" }, "Filter"),
  );
  const searchForm = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Find a run" },
    h("div", { class: "field" }, h("label", { for: "find-id" }, "Run or task id"), search),
    h("button", { type: "submit" }, "Open"),
    searchError,
  );

  fill(
    main,
    h("h1", {}, "Runs"),
    h("div", { class: "toolbar" }, filterForm, searchForm),
    state,
    table,
    h("div", { class: "pager" }, newer, pageLabel, older),
    updated,
  );

  // per shown run, the lastSequence its row shows: a change older than that is old news
  const shownSequence = new Map();
  // changes that came while a list read was in flight: applied again on top of what it returns
  const changedMeanwhile = [];
  let reading = 0;
  let live = false;

  function row(run) {
    shownSequence.set(run.runId, run.lastSequence ?? -1);
    const link = h("a", { href: `#/runs/${encodeURIComponent(run.runId)}`, class: "mono" }, run.runId);
    return h(
      "tr",
      { "data-run-id": run.runId, "data-last-sequence": String(run.lastSequence ?? -1) },
      h("td", { "data-label": "Run" }, link),
      h("td", { "data-label": "Status" }, badge(run.status)),
      h("td", { "data-label": "Workflow" }, run.workflowId),
      h("td", { "data-label": "Waiting for" }, waitsFor(run)),
      h("td", { "data-label": "Age" }, time(run.createdAt, { relative: true })),
    );
  }

  async function load({ quiet = false } = {}) {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (filters.status) query.set("status", filters.status);
    if (filters.workflow) query.set("workflowId", filters.workflow);
    if (cursors[page]) query.set("cursor", cursors[page]);
    reading += 1;
    let counted = true;
    if (!quiet) {
      fill(state, notice("loading", "Loading runs…"));
      table.setAttribute("aria-busy", "true");
    }
    try {
      const data = await api(`/v1/runs?${query}`);
      nextCursor = data.nextCursor;
      shownSequence.clear();
      fill(body, data.runs.map(row));
      table.hidden = data.runs.length === 0;
      table.removeAttribute("aria-busy");
      const filtered = filters.status || filters.workflow;
      fill(state, data.runs.length ? null : notice("empty", page > 0 ? "No more runs." : filtered ? "No runs match these filters." : "No runs yet. Runs appear here as soon as they are created, over REST or A2A."));
      newer.disabled = page === 0;
      older.disabled = !nextCursor;
      pageLabel.textContent = `Page ${page + 1}`;
      reading -= 1;
      counted = false;
      for (const run of changedMeanwhile.splice(0)) apply(run); // the list may have been read before them
      showUpdated();
    } catch (e) {
      if (!quiet || !state.querySelector(".notice-error")) fill(state, notice("error", `Could not load runs: ${e.message}`, () => load()));
    } finally {
      if (counted) reading -= 1;
    }
  }

  const refresh = () => (loading ??= load({ quiet: true }).finally(() => (loading = null)));
  // a `sync`: a read that starts after it (one already in flight may have read too early)
  const relist = () => {
    const next = (loading ?? Promise.resolve())
      .then(() => load({ quiet: true }))
      .finally(() => {
        if (loading === next) loading = null;
      });
    loading = next;
  };

  function showUpdated() {
    const when = new Date().toLocaleTimeString();
    updated.dataset.live = String(live);
    updated.textContent = live ? `Live: updated ${when} as runs change.` : `Updated ${when}; live updates are reconnecting (re-reading every ${FALLBACK_MS / 1000} s meanwhile).`;
  }

  let relistTimer = 0;
  function relistSoon() {
    relistTimer ||= setTimeout(() => {
      relistTimer = 0;
      refresh();
    }, RELIST_MS);
  }

  const matches = (run) => (!filters.status || run.status === filters.status) && (!filters.workflow || run.workflowId === filters.workflow);

  /** A run changed: update its row, add it to the first page, or re-read the page when it leaves or fills it. */
  function apply(run) {
    if (reading > 0 && changedMeanwhile.push(run) > 500) changedMeanwhile.shift();
    const known = shownSequence.get(run.runId);
    if (known !== undefined && run.lastSequence <= known) return;
    const current = body.querySelector(`tr[data-run-id="${CSS.escape(run.runId)}"]`);
    if (current) {
      if (matches(run)) current.replaceWith(row(run));
      else relistSoon(); // it leaves this filter: the page refills from the host
    } else if (page === 0 && matches(run)) {
      const rows = [...body.children];
      if (rows.length >= PAGE) return relistSoon(); // a full page: the host says which runs stay on it
      const before = rows.find((tr) => tr.dataset.runId < run.runId); // ids sort by creation
      body.insertBefore(row(run), before ?? null);
      table.hidden = false;
      fill(state, null);
    } else {
      return;
    }
    showUpdated();
  }

  const controller = new AbortController();
  async function follow() {
    let lastId = null;
    let wait = 1000;
    while (!controller.signal.aborted) {
      try {
        await watchRuns(
          lastId,
          (frame) => {
            if (frame.id) lastId = frame.id;
            if (frame.event === "sync") {
              live = true;
              wait = 1000;
              relist();
            } else if (frame.event === "run") {
              apply(frame.data);
            }
          },
          controller.signal,
        );
      } catch {
        if (controller.signal.aborted) return;
      }
      live = false; // ended (lagging, shutdown) or broke: reconnect after the last id seen
      showUpdated();
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 15000);
    }
  }

  filterForm.addEventListener("submit", (event) => {
    event.preventDefault();
    filters.status = status.value;
    filters.workflow = workflow.value.trim();
    cursors.length = 1;
    page = 0;
    load();
  });
  searchForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const id = search.value.trim();
    searchError.textContent = "";
    try {
      await api(`/v1/runs/${encodeURIComponent(id)}`);
      location.hash = `#/runs/${encodeURIComponent(id)}`;
    } catch (e) {
      searchError.textContent = e instanceof ApiError && e.status === 404 ? `No run or task ${id} in your tenant.` : `Could not look it up: ${e.message}`;
    }
  });
  newer.addEventListener("click", () => {
    page -= 1;
    load();
  });
  older.addEventListener("click", () => {
    cursors[page + 1] = nextCursor;
    page += 1;
    load();
  });

  if (ctx.can.workflows) {
    api("/v1/workflows")
      .then((data) => fill(workflowIds, data.workflows.map((w) => h("option", { value: w.id }, w.name ?? w.id))))
      .catch(() => {});
  }
  load();
  follow();
  const fallback = every(FALLBACK_MS, () => (live ? undefined : refresh()));
  return () => {
    controller.abort();
    clearTimeout(relistTimer);
    fallback();
  };
}

// One run: its status beside its A2A task state, what it waits for (and the answer form),
// its inputs and outputs, nodes, artifacts, deliveries and every event, live over SSE.

import { a2a, api, ApiError, download, followEvents } from "./api.js";
import { answerPanel } from "./answer.js";
import { deliveryTable } from "./deliveries.js";
import { announce, badge, every, fill, h, json, notice, safeUrl, time } from "./dom.js";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

function summary(event) {
  const p = event.payload ?? {};
  if (p.decidedBy) return `${p.action ?? "answered"} by ${p.decidedBy}`;
  if (p.answeredBy) return `answered by ${p.answeredBy}`;
  if (p.resolvedBy) return `resolved by ${p.resolvedBy}`;
  if (p.askedBy) return `asked by ${p.askedBy}: ${p.question ?? ""}`;
  if (p.error?.message) return p.error.message;
  if (p.reason) return p.reason;
  if (p.question) return p.question;
  return "";
}

function eventRow(event) {
  return h(
    "tr",
    { "data-sequence": String(event.sequence) },
    h("td", { "data-label": "Seq" }, String(event.sequence)),
    h("td", { "data-label": "Time" }, time(event.timestamp)),
    h("td", { "data-label": "Type", class: "mono" }, event.type),
    h("td", { "data-label": "Node" }, event.nodeId ?? event.payload?.nodeId ?? "—"),
    h("td", { "data-label": "Detail" }, summary(event)),
  );
}

/** "512 bytes", "12.3 KiB", "1.0 MiB". */
function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** Hand a Blob to the browser as a download named `name` (always as bytes: the page never renders it). */
function save(blob, name) {
  const url = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }));
  const link = h("a", { href: url, download: name || "file" });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/**
 * A file part, by reference: its name, media type and size, and a button that downloads it.
 * `fetchBytes` gives its bytes (null for a file given by URI: the host keeps the URI and never fetches it).
 */
function fileItem(file, size, fetchBytes) {
  const name = file.name ?? "(unnamed file)";
  const facts = [file.mimeType ?? "no media type", size === null ? null : sizeText(size)].filter(Boolean).join(", ");
  const item = h("div", { class: "file" }, h("strong", {}, name), ` — ${facts}`);
  if (fetchBytes === null) {
    item.append(h("p", { class: "help" }, "A link, kept as given (the host never fetches it): ", h("span", { class: "mono" }, safeUrl(file.uri))));
    return item;
  }
  const button = h("button", { type: "button", class: "download", "aria-label": `Download ${name}` }, "Download");
  button.addEventListener("click", async () => {
    try {
      save(await fetchBytes(), file.name);
      announce(`${name} downloaded`);
    } catch (error) {
      announce(`Download failed: ${error.message}`);
    }
  });
  item.append(" ", button);
  return item;
}

/** The bytes of a 0.3 `file.bytes` (base64), and how many there are, without decoding them first. */
function base64Size(text) {
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  return Math.floor(text.length / 4) * 3 - padding;
}

function artifactPart(part, label) {
  if (part.kind === "text" || part.text !== undefined) return h("pre", { class: "json", tabindex: "0" }, part.text);
  const file = part.file;
  if (part.kind === "file" && file) {
    if (typeof file.bytes === "string") {
      const bytes = () => Promise.resolve(new Blob([Uint8Array.from(atob(file.bytes), (c) => c.charCodeAt(0))]));
      return fileItem(file, base64Size(file.bytes), bytes);
    }
    return fileItem(file, null, null);
  }
  return json(part.data ?? part, label);
}

function artifactList(task) {
  const artifacts = task?.artifacts ?? [];
  if (!artifacts.length) return notice("empty", "No artifacts yet.");
  return h(
    "ul",
    { class: "artifacts" },
    artifacts.map((a) =>
      h(
        "li",
        {},
        h("strong", {}, a.name ?? a.artifactId),
        a.description ? ` — ${a.description}` : "",
        (a.parts ?? []).map((part) => artifactPart(part, `Artifact ${a.name ?? a.artifactId}`)),
      ),
    ),
  );
}

/** The files of the message that started the run: references the run keeps, each downloadable. */
function inputFiles(run) {
  const parts = run.inputs?.message?.parts ?? [];
  const files = parts.filter((p) => p?.kind === "file" && p.file);
  if (!files.length) return null;
  const path = (blob) => `/v1/runs/${encodeURIComponent(run.runId)}/files/${encodeURIComponent(blob)}`;
  return h(
    "div",
    { class: "files", id: "input-files" },
    h("h3", {}, "Files"),
    files.map(({ file }) => (typeof file.blob === "string" ? fileItem(file, file.size ?? null, () => download(path(file.blob))) : fileItem(file, null, null))),
  );
}

function nodeTable(run, workflow) {
  const steps = run.metadata?.a2a?.steps ?? {};
  const states = run.nodeStates ?? {};
  const nodes = workflow?.nodes?.map((n) => ({ id: n.id, name: n.name, typeId: n.typeId })) ?? Object.entries(states).map(([id, s]) => ({ id, name: steps[id], typeId: s.typeId }));
  return h(
    "table",
    { class: "nodes" },
    h("caption", { class: "visually-hidden" }, "Nodes of the workflow"),
    h("thead", {}, h("tr", {}, ["Node", "Name", "Type", "State"].map((c) => h("th", { scope: "col" }, c)))),
    h(
      "tbody",
      {},
      nodes.map((n) => h("tr", { "data-node-id": n.id }, h("td", { "data-label": "Node", class: "mono" }, n.id), h("td", { "data-label": "Name" }, n.name ?? steps[n.id] ?? "—"), h("td", { "data-label": "Type", class: "mono" }, n.typeId ?? "—"), h("td", { "data-label": "State" }, badge(states[n.id]?.status ?? "not reached")))),
    ),
  );
}

export function runView(main, ctx, runId) {
  document.title = `Run ${runId} · Tether console`;
  const controller = new AbortController();
  const state = { run: null, task: null, workflow: undefined, interruptShown: null, lastSequence: -1, deliveries: "" };
  fill(main, h("p", { class: "back" }, h("a", { href: "#/runs" }, "← All runs")), h("h1", {}, "Run ", h("span", { class: "mono" }, runId)), notice("loading", "Loading the run…"));

  const status = h("dd", { id: "run-status" });
  const taskState = h("dd", { id: "task-state" });
  const facts = h("dl", { class: "facts" });
  const answerSlot = h("div", { id: "answer-slot" });
  const controls = h("div", { id: "run-controls" });
  const inputs = h("div");
  const outputs = h("div");
  const nodes = h("div", { id: "nodes" });
  const artifacts = h("div", { id: "artifacts" });
  const deliveries = h("div", { id: "run-deliveries" });
  const timelineBody = h("tbody");
  const live = h("p", { class: "help", id: "live-state", role: "status" }, "Connecting to the event stream…");
  const dialog = cancelDialog();

  function section(id, title, ...content) {
    return h("section", { class: "card", "aria-labelledby": id }, h("h2", { id }, title), ...content);
  }

  function layout() {
    const copy = h("button", { type: "button", id: "copy-task-id", "aria-label": "Copy task id" }, "Copy task id");
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(runId);
        announce("Task id copied");
        copy.textContent = "Copied";
      } catch {
        announce(`Copy failed; the task id is ${runId}`);
      }
    });
    fill(
      main,
      h("p", { class: "back" }, h("a", { href: "#/runs" }, "← All runs")),
      h("div", { class: "title-row" }, h("h1", {}, "Run ", h("span", { class: "mono", id: "run-id" }, runId)), copy),
      h("section", { class: "card", "aria-label": "Summary" }, facts),
      answerSlot,
      controls,
      h("div", { class: "columns" }, section("inputs-title", "Inputs", inputs), section("outputs-title", "Outputs", outputs)),
      section("nodes-title", "Nodes", nodes),
      section("artifacts-title", "Artifacts", artifacts),
      section("deliveries-title", "Deliveries", deliveries),
      section(
        "timeline-title",
        "Timeline",
        live,
        h("table", { class: "timeline", id: "timeline" }, h("caption", { class: "visually-hidden" }, "Events of the run, in order"), h("thead", {}, h("tr", {}, ["Seq", "Time", "Type", "Node", "Detail"].map((c) => h("th", { scope: "col" }, c)))), timelineBody),
      ),
      dialog.element,
    );
  }

  function render() {
    const run = state.run;
    fill(
      facts,
      h("div", {}, h("dt", {}, "Status"), fill(status, badge(run.status))),
      h("div", {}, h("dt", {}, "A2A task state"), fill(taskState, state.task ? badge(state.task.status?.state ?? "unknown") : "—")),
      h("div", {}, h("dt", {}, "Workflow"), h("dd", { class: "mono" }, run.workflowId)),
      h("div", {}, h("dt", {}, "Started by"), h("dd", {}, `${run.owner?.principal ?? "—"} (tenant ${run.owner?.tenant ?? "—"})`)),
      h("div", {}, h("dt", {}, "Created"), h("dd", {}, time(run.createdAt))),
      h("div", {}, h("dt", {}, "Updated"), h("dd", {}, time(run.updatedAt))),
      run.completedAt ? h("div", {}, h("dt", {}, "Finished"), h("dd", {}, time(run.completedAt))) : null,
      run.error ? h("div", {}, h("dt", {}, "Error"), h("dd", {}, run.error.message ?? run.error.code)) : null,
    );
    const interruptId = run.interrupt?.interruptId ?? null;
    if (interruptId !== state.interruptShown) {
      state.interruptShown = interruptId;
      fill(answerSlot, run.interrupt ? answerPanel(run, ctx.can) : null);
    }
    fill(
      controls,
      ctx.can.cancel && !TERMINAL.has(run.status) && run.status !== "cancelling"
        ? h("button", { type: "button", id: "cancel-run", class: "danger", onclick: () => dialog.open() }, "Cancel run…")
        : null,
    );
    fill(inputs, json(run.inputs ?? {}, "Inputs"), inputFiles(run)); // what it was started with; variables also hold node outputs
    fill(outputs, run.outputs !== undefined ? json(run.outputs, "Outputs") : notice("empty", TERMINAL.has(run.status) ? "No outputs." : "No outputs yet."));
    fill(nodes, nodeTable(run, state.workflow));
    fill(artifacts, artifactList(state.task));
  }

  async function loadDeliveries() {
    if (!ctx.can.deliveries) {
      fill(deliveries, notice("empty", "This key cannot see deliveries (it lacks the webhooks:manage scope)."));
      return;
    }
    const data = await api("/v1/deliveries?limit=1000");
    const mine = data.deliveries.filter((d) => d.runId === runId);
    const seen = JSON.stringify(mine);
    if (seen === state.deliveries) return;
    state.deliveries = seen;
    fill(deliveries, mine.length ? deliveryTable(mine, { showRun: false, after: loadDeliveries }) : notice("empty", "No pushes or webhooks for this run."));
  }

  async function refresh() {
    const [run, task] = await Promise.all([api(`/v1/runs/${encodeURIComponent(runId)}`, { signal: controller.signal }), a2a("tasks/get", { id: runId, historyLength: 0 }).catch(() => null)]);
    state.run = run;
    state.task = task;
    if (state.workflow === undefined) state.workflow = ctx.can.workflows ? await api(`/v1/workflows/${encodeURIComponent(run.workflowId)}`).catch(() => null) : null;
    render();
  }

  let pending = null;
  const soon = () => {
    pending ??= new Promise((resolve) => setTimeout(resolve, 100)).then(() => {
      pending = null;
      return Promise.all([refresh(), loadDeliveries()]).catch(() => {});
    });
  };

  async function stream() {
    let wait = 500;
    while (!controller.signal.aborted) {
      try {
        live.textContent = "Live: following events as they happen.";
        await followEvents(
          runId,
          state.lastSequence,
          (event) => {
            if (event.sequence <= state.lastSequence) return;
            state.lastSequence = event.sequence;
            timelineBody.append(eventRow(event));
            wait = 500;
            soon();
          },
          controller.signal,
        );
        live.textContent = "The run has ended; its event log is complete.";
        soon();
        return;
      } catch (e) {
        if (controller.signal.aborted) return;
        live.textContent = `The event stream broke (${e.message}); reconnecting…`;
        await new Promise((resolve) => setTimeout(resolve, wait));
        wait = Math.min(wait * 2, 10000);
      }
    }
  }

  function cancelDialog() {
    const reason = h("input", { id: "cancel-reason", type: "text", autocomplete: "off" });
    const error = h("p", { class: "error", role: "alert" });
    const confirm = h("button", { type: "button", class: "danger", id: "confirm-cancel" }, "Yes, cancel the run");
    const keep = h("button", { type: "button", id: "keep-run" }, "Keep it running");
    const element = h(
      "dialog",
      { "aria-labelledby": "cancel-title", "aria-describedby": "cancel-text" },
      h("h2", { id: "cancel-title" }, "Cancel this run?"),
      h("p", { id: "cancel-text" }, `Run ${runId} stops and ends as cancelled. This cannot be undone.`),
      h("label", { for: "cancel-reason" }, "Reason (optional)"),
      reason,
      h("div", { class: "actions" }, confirm, keep),
      error,
    );
    keep.addEventListener("click", () => element.close());
    confirm.addEventListener("click", async () => {
      confirm.disabled = true;
      try {
        await api(`/v1/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST", body: reason.value.trim() ? { reason: reason.value.trim() } : {} });
        element.close();
        announce("Run cancelled");
        soon();
      } catch (e) {
        error.textContent = `The host refused: ${e.message}`;
      } finally {
        confirm.disabled = false;
      }
    });
    return { element, open: () => element.showModal() };
  }

  (async () => {
    try {
      await refresh();
    } catch (e) {
      if (controller.signal.aborted) return;
      if (e instanceof ApiError && e.status === 404) {
        fill(main, h("p", { class: "back" }, h("a", { href: "#/runs" }, "← All runs")), h("h1", {}, "Run not found"), notice("empty", `There is no run or task ${runId} for this key. It may belong to another tenant, or the id may be wrong.`));
      } else {
        fill(main, h("h1", {}, "Run ", h("span", { class: "mono" }, runId)), notice("error", `Could not load the run: ${e.message}`, () => location.reload()));
      }
      return;
    }
    layout();
    render();
    loadDeliveries().catch((e) => fill(deliveries, notice("error", `Could not load deliveries: ${e.message}`)));
    stream();
  })();

  const stopPolling = every(3000, loadDeliveries);
  return () => {
    controller.abort();
    stopPolling();
  };
}

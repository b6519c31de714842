// Answering a waiting run: an approval's five actions as buttons, a clarification's
// questions as a form, an external event as JSON. The host records the decision with the
// signed-in key as its decidedBy.

import { api } from "./api.js";
import { announce, h, json } from "./dom.js";

const LABELS = {
  accept: "Accept",
  reject: "Reject",
  refine: "Refine with feedback",
  "edit-accept": "Accept with edits",
  ask: "Ask a question",
};

function send(run, resumeValue) {
  return api(`/v1/runs/${encodeURIComponent(run.runId)}/interrupts/${encodeURIComponent(run.interrupt.nodeId)}`, {
    method: "POST",
    body: { resumeValue },
  });
}

function readOnly() {
  return h("p", { class: "help", id: "answer-read-only" }, "This key can read the run but not answer it (it lacks the approvals:respond scope).");
}

function approval(run, can) {
  const data = run.interrupt.data ?? {};
  const actions = data.actions ?? ["accept", "reject"];
  const parts = [
    h("h2", { id: "answer-title" }, `Decision needed: ${data.title ?? run.interrupt.nodeId}`),
    data.description ? h("p", { id: "answer-description" }, data.description) : null,
    data.artifactData !== undefined ? h("div", {}, h("h3", {}, "What is being decided"), json(data.artifactData, "What is being decided")) : null,
  ];
  const exchanges = run.interrupt.askExchanges ?? [];
  if (exchanges.length) {
    parts.push(h("h3", {}, "Questions asked so far"), h("ul", {}, exchanges.map((x) => h("li", {}, x.question ?? JSON.stringify(x)))));
  }
  if (!can.answer) return [...parts, readOnly()];
  const note = h("textarea", { id: "answer-note", name: "note", rows: "3", "aria-describedby": "answer-note-help" });
  const edited = actions.includes("edit-accept")
    ? h("textarea", { id: "answer-edited", name: "edited", rows: "6", class: "mono" }, JSON.stringify(data.artifactData ?? {}, null, 2))
    : null;
  const error = h("p", { class: "error", role: "alert", id: "answer-error" });
  const buttons = actions.map((action) => h("button", { type: "button", "data-action": action, class: action === "accept" ? "primary" : action === "reject" ? "danger" : "" }, LABELS[action] ?? action));
  const group = h("div", { class: "actions", role: "group", "aria-label": "Decision" }, buttons);
  for (const button of buttons) {
    button.addEventListener("click", async () => {
      const action = button.dataset.action;
      const text = note.value.trim();
      let value = { action };
      error.textContent = "";
      if (action === "accept" && text) value.comment = text;
      if (action === "reject" && text) value.feedback = text;
      if (action === "refine" || action === "ask") {
        if (!text) {
          error.textContent = action === "refine" ? "Write the feedback to refine with first." : "Write your question first.";
          note.focus();
          return;
        }
        if (action === "refine") value.refineFeedback = { scope: "whole", text };
        else value.question = text;
      }
      if (action === "edit-accept") {
        try {
          value.editedArtifactData = JSON.parse(edited.value);
        } catch {
          error.textContent = "The edited data is not valid JSON.";
          edited.focus();
          return;
        }
        if (text) value.comment = text;
      }
      for (const b of buttons) b.disabled = true;
      try {
        await send(run, value);
        announce(action === "ask" ? "Question sent" : `Decision sent: ${LABELS[action] ?? action}`);
        if (action === "ask") note.value = "";
      } catch (e) {
        error.textContent = `The host refused the decision: ${e.message}`;
      } finally {
        for (const b of buttons) b.disabled = false;
      }
    });
  }
  return [
    ...parts,
    h("label", { for: "answer-note" }, "Feedback, comment or question"),
    note,
    h("p", { class: "help", id: "answer-note-help" }, "Needed for Refine and Ask; kept with Accept and Reject."),
    edited ? [h("label", { for: "answer-edited" }, "Edited data (JSON), for Accept with edits"), edited] : null,
    group,
    error,
  ];
}

function clarification(run, can) {
  const questions = run.interrupt.data?.questions ?? [];
  const heading = h("h2", { id: "answer-title" }, "Question for you");
  if (!can.answer) return [heading, h("ul", {}, questions.map((q) => h("li", {}, q.question ?? q.id))), readOnly()];
  const fields = questions.map((q, i) => {
    const id = `answer-q-${i}`;
    const choices = q.options ?? q.choices;
    const input = Array.isArray(choices)
      ? h("select", { id, name: q.id, required: true }, choices.map((c) => h("option", { value: typeof c === "string" ? c : c.value }, typeof c === "string" ? c : (c.label ?? c.value))))
      : h("input", { id, name: q.id, type: "text", required: true, autocomplete: "off" });
    return h("div", { class: "field" }, h("label", { for: id }, q.question ?? q.id), input);
  });
  const error = h("p", { class: "error", role: "alert", id: "answer-error" });
  const submit = h("button", { type: "submit", class: "primary" }, "Send answers");
  const form = h("form", { "aria-labelledby": "answer-title" }, h("fieldset", {}, h("legend", {}, "Answers"), fields), submit, error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answers = {};
    for (const q of questions) answers[q.id] = form.elements.namedItem(q.id).value;
    submit.disabled = true;
    error.textContent = "";
    try {
      await send(run, { answers });
      announce("Answers sent");
    } catch (e) {
      error.textContent = `The host refused the answers: ${e.message}`;
      submit.disabled = false;
    }
  });
  return [heading, form];
}

function external(run, can) {
  const heading = h("h2", { id: "answer-title" }, `Waiting for an external event at ${run.interrupt.nodeId}`);
  if (!can.answer) return [heading, readOnly()];
  const area = h("textarea", { id: "answer-event", rows: "4", class: "mono" }, "{}");
  const error = h("p", { class: "error", role: "alert", id: "answer-error" });
  const submit = h("button", { type: "submit" }, "Send event");
  const form = h("form", { "aria-labelledby": "answer-title" }, h("label", { for: "answer-event" }, "Event (JSON object)"), area, submit, error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let value;
    try {
      value = JSON.parse(area.value);
    } catch {
      error.textContent = "The event is not valid JSON.";
      return;
    }
    try {
      await send(run, value);
      announce("Event sent");
    } catch (e) {
      error.textContent = `The host refused the event: ${e.message}`;
    }
  });
  return [heading, form];
}

/**
 * What the peer of a hand-off asked (`interrupt.peerQuestion`): the agent's own words, never
 * checked by anyone, so marked as untrusted and shown as text only (h() never parses HTML).
 */
function peerQuestion(question) {
  return h(
    "div",
    { class: "peer-question", id: "peer-question", role: "group", "aria-labelledby": "peer-question-title", "aria-describedby": "peer-question-trust" },
    h("h3", { id: "peer-question-title" }, "The peer agent asks"),
    h("p", { class: "untrusted", id: "peer-question-trust" }, "Untrusted peer content: written by the agent this run handed off to, not by Tether or your team. Shown as plain text."),
    h("dl", { class: "peer-source" }, h("dt", {}, "Agent"), h("dd", { class: "mono" }, question.agent ?? "unknown"), h("dt", {}, "Peer task"), h("dd", { class: "mono" }, question.taskId ?? "unknown")),
    h("blockquote", { id: "peer-question-message", class: "peer-message" }, question.message ?? "(The peer sent no message with its question.)"),
  );
}

/** The answering panel of a waiting run (`run.interrupt` set). */
export function answerPanel(run, can) {
  const kind = run.interrupt.kind;
  const content = kind === "approval" ? approval(run, can) : kind === "clarification" ? clarification(run, can) : external(run, can);
  const asked = run.interrupt.peerQuestion ? peerQuestion(run.interrupt.peerQuestion) : null;
  return h("section", { class: "card answer", id: "answer", "aria-labelledby": "answer-title" }, content[0], asked, content.slice(1));
}

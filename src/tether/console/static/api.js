// The public REST and A2A API, called with the signed-in key. The key lives in this tab's
// sessionStorage only: never in a URL, never in a cookie; signing out removes it.

const KEY = "tether.console.key";
// a run id no host issues (ids are hex), so probing it can never touch a real run
const PROBE_RUN = "run_console-scope-probe";

export const storedKey = () => sessionStorage.getItem(KEY);
export const remember = (key) => sessionStorage.setItem(KEY, key);
export const forget = () => sessionStorage.removeItem(KEY);

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${storedKey() ?? ""}`, ...extra };
}

export async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, cache: "no-store", credentials: "omit", redirect: "error" };
  init.headers = headers(body === undefined ? { Accept: "application/json" } : { Accept: "application/json", "Content-Type": "application/json" });
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "unreachable", "The host could not be reached. Check that it is running, then try again.");
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, data?.error ?? `http_${response.status}`, data?.message ?? `The host answered ${response.status}.`, data?.details);
  }
  return data;
}

/** Bytes the API serves (a run's file), as a Blob; refusals as for `api`. */
export async function download(path) {
  let response;
  try {
    response = await fetch(path, { cache: "no-store", credentials: "omit", redirect: "error", headers: headers() });
  } catch {
    throw new ApiError(0, "unreachable", "The host could not be reached. Check that it is running, then try again.");
  }
  if (!response.ok) {
    const data = await response.json().catch(() => null);
    throw new ApiError(response.status, data?.error ?? `http_${response.status}`, data?.message ?? `The host answered ${response.status}.`);
  }
  return response.blob();
}

let rpcId = 0;

/** An A2A 0.3 JSON-RPC call on /v1/a2a (e.g. tasks/get for the task state and artifacts). */
export async function a2a(method, params) {
  const data = await api("/v1/a2a", { method: "POST", body: { jsonrpc: "2.0", id: ++rpcId, method, params } });
  if (data?.error) throw new ApiError(200, `a2a_${data.error.code}`, data.error.message, data.error.data);
  return data?.result;
}

/**
 * What the key may do, asked of the API itself: a read that must work, then calls that
 * fail with 403 without the scope and 404 (no such run) with it, so nothing changes.
 */
export async function abilities() {
  await api("/v1/runs?limit=1");
  const allowed = async (path, options) => {
    try {
      await api(path, options);
      return true;
    } catch (error) {
      if (error.status === 401) throw error;
      return error.status !== 403;
    }
  };
  const [cancel, answer, deliveries, workflows] = await Promise.all([
    allowed(`/v1/runs/${PROBE_RUN}/cancel`, { method: "POST", body: {} }),
    allowed(`/v1/runs/${PROBE_RUN}/interrupts/probe`, { method: "POST", body: { resumeValue: null } }),
    allowed("/v1/deliveries?limit=1"),
    allowed("/v1/workflows"),
  ]);
  return { cancel, answer, deliveries, workflows };
}

/** Open an SSE stream with fetch (so the key goes in a header); rejects unless the host answers 200. */
async function openStream(path, lastEventId, signal) {
  const extra = { Accept: "text/event-stream" };
  if (lastEventId !== null && lastEventId !== undefined) extra["Last-Event-ID"] = String(lastEventId);
  const response = await fetch(path, { headers: headers(extra), signal, cache: "no-store", credentials: "omit" });
  if (!response.ok) throw new ApiError(response.status, `http_${response.status}`, `The event stream answered ${response.status}.`);
  return response;
}

/** Call onFrame({id, event, data}) for each SSE frame (comments skipped) until the host closes the stream. */
async function readFrames(response, onFrame) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const lines = buffer.slice(0, end).split("\n");
      buffer = buffer.slice(end + 2);
      const field = (name) => lines.filter((line) => line.startsWith(`${name}:`)).map((line) => line.slice(name.length + 1).replace(/^ /, ""));
      const data = field("data").join("\n");
      if (data) onFrame({ id: field("id").at(-1) ?? null, event: field("event").at(-1) ?? "message", data: JSON.parse(data) });
    }
  }
}

/**
 * Follow a run's events over SSE, from after `after`.
 * Calls onEvent for each; resolves when the stream ends (the run ended), rejects on error.
 */
export async function followEvents(runId, after, onEvent, signal) {
  const response = await openStream(`/v1/runs/${encodeURIComponent(runId)}/events?streamMode=debug`, after >= 0 ? after : null, signal);
  await readFrames(response, (frame) => onEvent(frame.data));
}

/**
 * Watch every run of the key's tenant change (GET /v1/runs:watch), resuming after `lastEventId`.
 * Calls onFrame({id, event, data}) for each `sync`, `run` and `end` frame; resolves when the host
 * ends the stream, rejects on error.
 */
export async function watchRuns(lastEventId, onFrame, signal) {
  await readFrames(await openStream("/v1/runs:watch", lastEventId, signal), onFrame);
}

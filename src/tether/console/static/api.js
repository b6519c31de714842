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

/**
 * Follow a run's events over SSE (fetch, so the key goes in a header), from after `after`.
 * Calls onEvent for each; resolves when the stream ends (the run ended), rejects on error.
 */
export async function followEvents(runId, after, onEvent, signal) {
  const extra = { Accept: "text/event-stream" };
  if (after >= 0) extra["Last-Event-ID"] = String(after);
  const response = await fetch(`/v1/runs/${encodeURIComponent(runId)}/events?streamMode=debug`, {
    headers: headers(extra),
    signal,
    cache: "no-store",
    credentials: "omit",
  });
  if (!response.ok) throw new ApiError(response.status, `http_${response.status}`, `The event stream answered ${response.status}.`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}

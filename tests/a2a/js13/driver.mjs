// Drives Tether with the unmodified @a2a-js/sdk 1.3.0 client, default settings, for test_a2a_js13_interop.py.
//
//   TETHER_URL=http://127.0.0.1:PORT TETHER_KEY=tk_... node driver.mjs <scenario> ['{"json":"args"}']
//
// The client is what a new user builds: `new ClientFactory()` options (ClientFactoryOptions.default:
// the default JSON-RPC and HTTP+JSON transport factories, the default card resolver, no legacyCompat)
// plus one credentials interceptor that adds `Authorization: Bearer <key>`. Nothing else is configured.
// `fetch` is wrapped (globally, so no SDK option changes) only to record the wire: every request and
// response body the SDK sent and read, so the test checks the shapes, not only what the SDK parsed.
//
// Prints one JSON document: {scenario, client, result, wire}; on an unexpected error,
// {scenario, client, error, wire} and exit code 1. Expected A2A errors are results: {name, code, reason, message}.

import { createHash } from "node:crypto";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { Role, Task, TaskState, StreamResponse, ListTasksResponse, TaskPushNotificationConfig } from "@a2a-js/sdk";

const BASE = process.env.TETHER_URL;
const KEY = process.env.TETHER_KEY;
const [scenario, rawArgs] = process.argv.slice(2);
const args = rawArgs ? JSON.parse(rawArgs) : {};
const STREAM_DEADLINE_MS = 30000;

// -- the wire, as the SDK saw it ----------------------------------------------------------------
const wire = [];
const pending = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  const entry = {
    url: String(input),
    method: init.method ?? "GET",
    a2aVersion: headers.get("A2A-Version"),
    request: init.body ? JSON.parse(init.body) : null,
  };
  wire.push(entry);
  const response = await realFetch(input, init);
  entry.status = response.status;
  entry.contentType = response.headers.get("content-type");
  entry.answeredVersion = response.headers.get("a2a-version");
  const copy = response.clone();
  pending.push(
    copy.text().then(
      (text) => {
        entry.response = entry.contentType?.startsWith("text/event-stream") ? sseData(text) : parseJson(text);
      },
      (err) => {
        entry.response = { unread: String(err) };
      },
    ),
  );
  return response;
};

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return { notJson: text };
  }
}

function sseData(text) {
  return text
    .split(/\r?\n\r?\n/)
    .map((block) =>
      block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n"),
    )
    .filter((data) => data.length > 0)
    .map(parseJson);
}

// -- the client: defaults plus credentials --------------------------------------------------------
const credentials = {
  async before(args) {
    args.options = {
      ...args.options,
      serviceParameters: { ...args.options?.serviceParameters, Authorization: `Bearer ${KEY}` },
    };
  },
  async after() {},
};

async function connect() {
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    clientConfig: { interceptors: [credentials] },
  });
  return new ClientFactory(options).createFromUrl(BASE);
}

function describe(client) {
  return {
    protocolName: client.transport.protocolName,
    protocolVersion: client.protocolVersion,
    transport: client.transport.constructor.name,
    endpoint: client.transport.endpoint ?? null,
  };
}

// -- helpers --------------------------------------------------------------------------------------
let counter = 0;
const runTag = `${process.pid}-${Date.now()}`;

function userMessage({ text, data, taskId, contextId, skill } = {}) {
  const parts = [];
  if (text !== undefined) parts.push({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" });
  if (data !== undefined) parts.push({ content: { $case: "data", value: data }, metadata: undefined, filename: "", mediaType: "" });
  return {
    messageId: `js13-${runTag}-${++counter}`,
    contextId: contextId ?? "",
    taskId: taskId ?? "",
    role: Role.ROLE_USER,
    parts,
    metadata: skill ? { skillId: skill } : undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

// args.size bytes (every byte value, the same every run), a file of them and a file by URL, after a text
const FILE_URL = "https://files.example.com/q3/signed.pdf";
function fileBytes() {
  const bytes = Buffer.alloc(args.size);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919 + 13) % 256;
  return bytes;
}
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

function fileMessage(bytes) {
  const message = userMessage({ text: "the Q3 report" });
  message.parts.push(
    { content: { $case: "raw", value: bytes }, metadata: undefined, filename: "q3.bin", mediaType: "application/x-q3" },
    { content: { $case: "url", value: FILE_URL }, metadata: undefined, filename: "signed.pdf", mediaType: "application/pdf" },
  );
  return message;
}

// What the SDK read of an artifact's parts: text as is, a file's bytes by their sha256, a URL as is.
function partsRead(parts) {
  return parts.map((p) => {
    const content = p.content;
    const read = { filename: p.filename, mediaType: p.mediaType };
    if (content.$case === "raw") return { raw: sha256(content.value), ...read };
    if (content.$case === "url") return { url: content.value, ...read };
    return { [content.$case]: content.value };
  });
}

function request(message, configuration = {}) {
  return { tenant: "", message, configuration: { acceptedOutputModes: [], ...configuration }, metadata: undefined };
}

const taskJson = (task) => Task.toJSON(task);
const stateName = (task) => TaskState[task.status.state];

async function sendTask(client, message, configuration) {
  const result = await client.sendMessage(request(message, configuration));
  if (!("status" in result)) throw new Error(`Tether answered a Message, not a Task: ${JSON.stringify(result)}`);
  return result;
}

function errorJson(err) {
  return {
    name: err?.name ?? null,
    code: err?.envelopeCode ?? err?.cause?.envelopeCode ?? null,
    reason: err?.reason ?? err?.cause?.reason ?? null,
    message: String(err?.message ?? err),
  };
}

async function expectError(call) {
  try {
    const value = await call();
    return { unexpectedSuccess: value };
  } catch (err) {
    return errorJson(err);
  }
}

// Each event of a stream as {case, state?, json}; `onEvent` may act between events (approve at a gate).
async function collect(iterable, onEvent) {
  const events = [];
  const deadline = setTimeout(() => {
    console.error(`stream still open after ${STREAM_DEADLINE_MS} ms: ${JSON.stringify(events)}`);
    process.exit(3);
  }, STREAM_DEADLINE_MS);
  try {
    for await (const event of iterable) {
      const payload = event.payload;
      const item = { case: payload?.$case ?? null, json: StreamResponse.toJSON(event) };
      if (payload?.$case === "task" || payload?.$case === "statusUpdate") item.state = TaskState[payload.value.status.state];
      events.push(item);
      if (onEvent) await onEvent(item, event);
    }
  } finally {
    clearTimeout(deadline);
  }
  return events;
}

async function listAll(client, params) {
  const pages = [];
  let pageToken = "";
  do {
    const page = await client.listTasks({ tenant: "", contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, statusTimestampAfter: undefined, ...params, pageToken });
    pages.push(ListTasksResponse.toJSON(page));
    pageToken = page.nextPageToken;
  } while (pageToken && pages.length < 100);
  return pages;
}

const approval = () => ({ action: "accept" });

// The first value of `read()` that `done` accepts, read again until a deadline (no fixed waits).
async function until(read, done, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// -- scenarios ------------------------------------------------------------------------------------
const scenarios = {
  async card(client) {
    return { card: client.agentCard, extended: await client.getAgentCard() };
  },

  async send(client) {
    const echo = await sendTask(client, userMessage({ text: "hello from js" }));
    const gated = await sendTask(client, userMessage({ text: "publish", skill: "approval-gated" }));
    const queued = await sendTask(client, userMessage({ data: {}, skill: "slow" }), { returnImmediately: true });
    return { echo: taskJson(echo), gated: taskJson(gated), queued: taskJson(queued) };
  },

  async reply(client) {
    const gated = await sendTask(client, userMessage({ text: "publish", skill: "approval-gated" }));
    const answered = await sendTask(client, userMessage({ data: approval(), taskId: gated.id }));
    const again = await expectError(() => client.sendMessage(request(userMessage({ data: approval(), taskId: gated.id }))));
    return { gated: taskJson(gated), answered: taskJson(answered), afterEnd: again };
  },

  async stream(client) {
    const echo = await collect(client.sendMessageStream(request(userMessage({ text: "streamed from js" }))));
    const gated = await collect(client.sendMessageStream(request(userMessage({ text: "draft", skill: "approval-gated" }))));
    return { echo, gated };
  },

  async get(client) {
    const done = await sendTask(client, userMessage({ text: "read me back" }));
    const full = await client.getTask({ tenant: "", id: done.id });
    const one = await client.getTask({ tenant: "", id: done.id, historyLength: 1 });
    const none = await client.getTask({ tenant: "", id: done.id, historyLength: 0 });
    const missing = await expectError(() => client.getTask({ tenant: "", id: "run_no_such_task" }));
    return { sent: taskJson(done), full: taskJson(full), one: taskJson(one), none: taskJson(none), missing };
  },

  async list(client) {
    // args.contextId: a context of this run's own; five tasks in it, two of them at a gate
    const contextId = args.contextId;
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await sendTask(client, userMessage({ text: `list ${i}`, contextId })));
    for (let i = 0; i < 2; i++) made.push(await sendTask(client, userMessage({ text: "gate", contextId, skill: "approval-gated" })));
    const paged = await listAll(client, { contextId, pageSize: 2 });
    const gated = await listAll(client, { contextId, status: TaskState.TASK_STATE_INPUT_REQUIRED, pageSize: 10 });
    const everything = await listAll(client, { pageSize: 100 });
    return { made: made.map(taskJson), paged, gated, everything };
  },

  async foreign(client) {
    // args.taskId: another tenant's task; args.contextId: the context it was made in
    return {
      get: await expectError(() => client.getTask({ tenant: "", id: args.taskId })),
      unknown: await expectError(() => client.getTask({ tenant: "", id: "run_no_such_task" })),
      cancel: await expectError(() => client.cancelTask({ tenant: "", id: args.taskId, metadata: undefined })),
      subscribe: await expectError(() => collect(client.resubscribeTask({ tenant: "", id: args.taskId }))),
      listed: await listAll(client, { contextId: args.contextId, pageSize: 100 }),
    };
  },

  async cancel(client) {
    const gated = await sendTask(client, userMessage({ text: "never mind", skill: "approval-gated" }));
    const canceledAtGate = await client.cancelTask({ tenant: "", id: gated.id, metadata: undefined });
    const queued = await sendTask(client, userMessage({ data: {}, skill: "slow" }), { returnImmediately: true });
    const canceled = await client.cancelTask({ tenant: "", id: queued.id, metadata: undefined });
    const read = await until(
      () => client.getTask({ tenant: "", id: queued.id, historyLength: 0 }),
      (task) => stateName(task) === "TASK_STATE_CANCELED",
    );
    const again = await expectError(() => client.cancelTask({ tenant: "", id: queued.id, metadata: undefined }));
    return {
      canceledAtGate: taskJson(canceledAtGate),
      queued: taskJson(queued),
      canceled: taskJson(canceled),
      read: taskJson(read),
      again,
    };
  },

  async subscribe(client) {
    const gated = await sendTask(client, userMessage({ text: "watch me", skill: "approval-gated" }));
    const approvals = [];
    const events = await collect(client.resubscribeTask({ tenant: "", id: gated.id }), async (item) => {
      if (item.case === "task" && item.state === "TASK_STATE_INPUT_REQUIRED") {
        const sent = await sendTask(client, userMessage({ data: approval(), taskId: gated.id }), { returnImmediately: true });
        approvals.push(taskJson(sent));
      }
    });
    const ended = await expectError(() => collect(client.resubscribeTask({ tenant: "", id: gated.id })));
    const final = await client.getTask({ tenant: "", id: gated.id, historyLength: 0 });
    return { gated: taskJson(gated), events, approvals, ended, final: taskJson(final) };
  },

  async push(client) {
    // args.url: a push URL the host's egress guard accepts
    const gated = await sendTask(client, userMessage({ text: "push me", skill: "approval-gated" }));
    const config = (id) => ({ tenant: "", id, taskId: gated.id, url: args.url, token: "js13-token", authentication: { scheme: "Bearer", credentials: "js13-secret" } });
    const created = await client.createTaskPushNotificationConfig(config("js13-a"));
    const second = await client.createTaskPushNotificationConfig(config(""));
    const got = await client.getTaskPushNotificationConfig({ tenant: "", taskId: gated.id, id: "js13-a" });
    const listed = await client.listTaskPushNotificationConfig({ tenant: "", taskId: gated.id, pageSize: 0, pageToken: "" });
    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: gated.id, id: "js13-a" });
    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: gated.id, id: "js13-a" });
    const afterDelete = await client.listTaskPushNotificationConfig({ tenant: "", taskId: gated.id, pageSize: 0, pageToken: "" });
    const gone = await expectError(() => client.getTaskPushNotificationConfig({ tenant: "", taskId: gated.id, id: "js13-a" }));
    const pnc = TaskPushNotificationConfig.toJSON;
    return {
      task: taskJson(gated),
      created: pnc(created),
      second: pnc(second),
      got: pnc(got),
      listed: listed.configs.map(pnc),
      afterDelete: afterDelete.configs.map(pnc),
      gone,
    };
  },

  // A file of args.size bytes and one by URL to echo: read back from the send, GetTask and a stream.
  async files(client) {
    const bytes = fileBytes();
    const sent = await sendTask(client, fileMessage(bytes));
    const got = await client.getTask({ tenant: "", id: sent.id });
    let streamedId = null;
    let streamedParts = null;
    await collect(client.sendMessageStream(request(fileMessage(bytes))), async (item, event) => {
      if (item.case === "task") streamedId = event.payload.value.id;
      if (item.case === "artifactUpdate") streamedParts = partsRead(event.payload.value.artifact.parts);
    });
    return {
      sha256: sha256(bytes),
      taskIds: [sent.id, streamedId],
      states: [stateName(sent), stateName(got)],
      read: { sent: partsRead(sent.artifacts[0].parts), got: partsRead(got.artifacts[0].parts), streamed: streamedParts },
    };
  },

  // After a restart: the tasks args.taskIds, read again.
  async filesAgain(client) {
    const read = [];
    for (const id of args.taskIds) {
      const task = await client.getTask({ tenant: "", id });
      read.push({ state: stateName(task), parts: partsRead(task.artifacts[0].parts) });
    }
    return { read };
  },

  // The hand-off: send a gated task, print it and leave (the process exits: the disconnect).
  async handoff(client) {
    const gated = await sendTask(
      client,
      userMessage({ text: "Publish the Q3 report", skill: "approval-gated", contextId: args.contextId }),
    );
    return { task: taskJson(gated) };
  },

  // The hand-off over a stream: read the first frame of a slow-gate task, then leave mid-stream (exit).
  async leave(client) {
    leaving = true;
    const stream = client.sendMessageStream(request(userMessage({ text: "work, then ask", skill: "slow-gate" })));
    for await (const event of stream) {
      return { first: StreamResponse.toJSON(event) };
    }
    throw new Error("the stream ended without a frame");
  },

  // After the host's restart, a new run finds the task, subscribes, approves and watches it complete.
  async resume(client) {
    const found = await listAll(client, { status: TaskState.TASK_STATE_INPUT_REQUIRED, pageSize: 50 });
    const got = await client.getTask({ tenant: "", id: args.taskId });
    const approvals = [];
    const events = await collect(client.resubscribeTask({ tenant: "", id: args.taskId }), async (item) => {
      if (item.case === "task" && item.state === "TASK_STATE_INPUT_REQUIRED") {
        const sent = await sendTask(client, userMessage({ data: approval(), taskId: args.taskId }), { returnImmediately: true });
        approvals.push(taskJson(sent));
      }
    });
    const final = await client.getTask({ tenant: "", id: args.taskId });
    return { found, got: taskJson(got), events, approvals, final: taskJson(final) };
  },
};

// -- main -------------------------------------------------------------------------------------------
let leaving = false;
const out = { scenario };
let code = 0;
try {
  const run = scenarios[scenario];
  if (!run) throw new Error(`unknown scenario ${scenario}: one of ${Object.keys(scenarios).join(", ")}`);
  const client = await connect();
  out.client = describe(client);
  out.result = await run(client);
} catch (err) {
  out.error = { ...errorJson(err), stack: err?.stack ?? null };
  code = 1;
}
if (!leaving) await Promise.all(pending); // a stream the client walked away from never ends: not awaited
for (const entry of wire) entry.response ??= null; // null: never read to its end
out.wire = wire;
process.stdout.write(JSON.stringify(out), () => process.exit(code));

// Drives Tether with the unmodified @a2a-js/sdk 0.3.14 client (the last 0.3.x), default settings, for
// test_a2a_js03_interop.py.
//
//   TETHER_URL=http://127.0.0.1:PORT TETHER_KEY=tk_... node driver.mjs <scenario> ['{"json":"args"}']
//
// The client is what a user of the 0.3 SDK builds: `new ClientFactory()` with ClientFactoryOptions.default
// (it reads the card and picks the transport the card prefers) plus one credentials interceptor that adds
// `Authorization: Bearer <key>`. `fetch` is wrapped (globally, no SDK option) only to record the wire: every
// request and response body the SDK sent and read, so the test checks the shapes, not only what the SDK parsed.
//
// Prints one JSON document: {scenario, client, result, wire}; on an unexpected error, {scenario, client, error,
// wire} and exit code 1.

import { createHash } from "node:crypto";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";

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
  const copy = response.clone();
  pending.push(
    copy.text().then(
      (text) => {
        entry.response = entry.contentType?.startsWith("text/event-stream") ? sseData(text) : JSON.parse(text);
      },
      (err) => {
        entry.response = { unread: String(err) };
      },
    ),
  );
  return response;
};

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
    .map((data) => JSON.parse(data));
}

// -- the client: defaults plus credentials --------------------------------------------------------
const credentials = {
  async before(call) {
    call.options = {
      ...call.options,
      serviceParameters: { ...call.options?.serviceParameters, Authorization: `Bearer ${KEY}` },
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
  return { transport: client.transport.constructor.name };
}

// -- files ------------------------------------------------------------------------------------------
let counter = 0;
const runTag = `${process.pid}-${Date.now()}`;
const FILE_URI = "https://files.example.com/q3/signed.pdf";
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

// args.size bytes (every byte value, the same every run)
function fileBytes() {
  const bytes = Buffer.alloc(args.size);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919 + 13) % 256;
  return bytes;
}

// A text, the bytes as a file, and a file by URI: what echo must answer with, part for part.
function fileMessage(bytes) {
  return {
    kind: "message",
    role: "user",
    messageId: `js03-${runTag}-${++counter}`,
    parts: [
      { kind: "text", text: "the Q3 report" },
      { kind: "file", file: { bytes: bytes.toString("base64"), name: "q3.bin", mimeType: "application/x-q3" } },
      { kind: "file", file: { uri: FILE_URI, name: "signed.pdf", mimeType: "application/pdf" } },
    ],
  };
}

// What the SDK read of an artifact's parts: text as is, a file's bytes by their sha256, a URI as is.
function partsRead(parts) {
  return parts.map((p) => {
    if (p.kind !== "file") return p;
    const { bytes, ...rest } = p.file;
    return { kind: "file", file: bytes === undefined ? rest : { sha256: sha256(Buffer.from(bytes, "base64")), ...rest } };
  });
}

async function sendTask(client, message) {
  const result = await client.sendMessage({ message, configuration: { blocking: true } });
  if (result.kind !== "task") throw new Error(`Tether answered a Message, not a Task: ${JSON.stringify(result)}`);
  return result;
}

async function collect(iterable) {
  const events = [];
  const deadline = setTimeout(() => {
    console.error(`stream still open after ${STREAM_DEADLINE_MS} ms`);
    process.exit(3);
  }, STREAM_DEADLINE_MS);
  try {
    for await (const event of iterable) events.push(event);
  } finally {
    clearTimeout(deadline);
  }
  return events;
}

// -- scenarios ------------------------------------------------------------------------------------
const scenarios = {
  // A file of args.size bytes and one by URI to echo: read back from the send, tasks/get and a stream.
  async files(client) {
    const bytes = fileBytes();
    const sent = await sendTask(client, fileMessage(bytes));
    const got = await client.getTask({ id: sent.id });
    const events = await collect(client.sendMessageStream({ message: fileMessage(bytes) }));
    const artifacts = events.filter((e) => e.kind === "artifact-update");
    if (artifacts.length !== 1) throw new Error(`expected one artifact update, got ${JSON.stringify(events.map((e) => e.kind))}`);
    const last = events[events.length - 1];
    return {
      sha256: sha256(bytes),
      taskIds: [sent.id, events[0].id],
      states: [sent.status.state, got.status.state, last.status?.state ?? null],
      read: {
        sent: partsRead(sent.artifacts[0].parts),
        got: partsRead(got.artifacts[0].parts),
        streamed: partsRead(artifacts[0].artifact.parts),
      },
    };
  },

  // After a restart: the tasks args.taskIds, read again.
  async filesAgain(client) {
    const read = [];
    for (const id of args.taskIds) {
      const task = await client.getTask({ id });
      read.push({ state: task.status.state, parts: partsRead(task.artifacts[0].parts) });
    }
    return { read };
  },
};

// -- main -------------------------------------------------------------------------------------------
const out = { scenario };
let code = 0;
try {
  const run = scenarios[scenario];
  if (!run) throw new Error(`unknown scenario ${scenario}: one of ${Object.keys(scenarios).join(", ")}`);
  const client = await connect();
  out.client = describe(client);
  out.result = await run(client);
} catch (err) {
  out.error = { name: err?.name ?? null, message: String(err?.message ?? err), stack: err?.stack ?? null };
  code = 1;
}
await Promise.all(pending);
for (const entry of wire) entry.response ??= null;
out.wire = wire;
process.stdout.write(JSON.stringify(out), () => process.exit(code));

// The official MCP Tasks requester (@modelcontextprotocol/ext-tasks) driving `fanfuse mcp`, for
// tests/integration/test_mcp_tasks.py. One JSON argument says what to do; each outcome is
// printed as one JSON line on stdout. Never reaches anything but the server it is given.
//
// {"transport": "stdio", "command": ..., "args": [...], "env": {...}}
//   or {"transport": "http", "url": ..., "headers": {...}}
// plus "do": one of
//   "settle"  search as a task and wait for its outcome (the task events are printed too)
//   "start"   search as a task, print its serialized reference, and detach (the task runs on)
//   "resume"  resume the task of "reference" and wait for its outcome
//   "cancel"  search as a task, cancel it, and print the outcome
//   "get"     one tasks/get of "taskId" (a denial prints its error)
//   "cancelId" one tasks/cancel of "taskId" (a denial prints its error)
//   "listen"  search as a task, listen for its notifications (prints "listening" once
//             acknowledged), and print the first `notifications/tasks` that is not working
//   "plain"   a client without the extension: tools/call search, its result as is
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL = "2026-07-28";
const ENDPOINT = "fanfuse-test";
const CLIENT_INFO = { name: "fanfuse-tasks-test", version: "0" };
const spec = JSON.parse(process.argv[2]);
const taskNotes = [];
const acks = [];

function out(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

// The host's request coordinator that ext-tasks' V2 path needs (`rawDispatch`): it sends a
// framed JSON-RPC request on the client's own transport under an id of its own and hands the
// matching response back, keeping it from the SDK Client (whose codecs reject task shapes).
class Coordinator {
  constructor(inner) {
    this.inner = inner;
    this.pending = new Map();
    this.next = 0;
    inner.onmessage = (message, extra) => {
      const waiter = this.pending.get(message.id);
      if (waiter !== undefined && !("method" in message)) {
        this.pending.delete(message.id);
        waiter(message);
        return;
      }
      this.onmessage?.(message, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
  }
  start() { return this.inner.start(); }
  close() { return this.inner.close(); }
  send(message, options) { return this.inner.send(message, options); }
  get sessionId() { return this.inner.sessionId; }
  setProtocolVersion(version) { this.inner.setProtocolVersion?.(version); }
  dispatch = async (request) => {
    const id = `raw-${++this.next}`;
    const answered = new Promise((resolve) => this.pending.set(id, resolve));
    await this.inner.send({ ...request, jsonrpc: "2.0", id });
    const message = await answered;
    return "error" in message
      ? { kind: "error", error: message.error }
      : { kind: "result", result: message.result };
  };
}

function transport() {
  if (spec.transport === "stdio")
    return new StdioClientTransport({
      command: spec.command, args: spec.args, env: spec.env, stderr: "inherit",
    });
  const headers = spec.headers ?? {};
  return new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers } });
}

async function connect(withTasks) {
  const wire = new Coordinator(transport());
  const capabilities = withTasks ? { extensions: { "io.modelcontextprotocol/tasks": {} } } : {};
  const client = new Client(CLIENT_INFO, {
    capabilities,
    versionNegotiation: { mode: { pin: PROTOCOL } },
  });
  await client.connect(wire);
  if (!withTasks) return { client, close: () => client.close() };
  // Task notifications reach no registered handler: record them here (ext-tasks chains this).
  client.fallbackNotificationHandler = async (notification) => {
    if (notification.method === "notifications/tasks") taskNotes.push(notification.params);
    if (notification.method === "notifications/subscriptions/acknowledged") acks.push(notification.params);
  };
  const session = createTaskSessionFromClient(client, {
    endpointId: ENDPOINT,
    rawDispatch: wire.dispatch,
    v2RequestFraming: {
      protocolVersion: PROTOCOL, clientInfo: CLIENT_INFO, clientCapabilities: capabilities,
    },
  });
  return {
    client, session, wire, capabilities,
    close: async () => { await session.close(); await client.close(); },
  };
}

function outcomeRecord(outcome) {
  const record = { status: outcome.status };
  if (outcome.status === "completed") record.result = outcome.result;
  if (outcome.status === "failed") record.error = { message: outcome.error.message, code: outcome.error.code };
  return record;
}

async function settle(execution) {
  const events = [];
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === "task")
        events.push({ status: event.task.status, statusMessage: event.task.statusMessage ?? null });
    },
  });
  out({ what: "outcome", kind: execution.kind, events, ...outcomeRecord(outcome) });
}

async function until(done, ms = 30000) {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${done}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function denial(work) {
  try {
    out({ what: "answer", value: await work() });
  } catch (error) {
    out({ what: "error", name: error.name, message: error.message, code: error.code ?? null });
  }
}

const conn = await connect(spec.do !== "plain");
try {
  const args = spec.arguments ?? {};
  if (spec.do === "settle") {
    await settle(await conn.session.callTool("search", args));
  } else if (spec.do === "start") {
    const execution = await conn.session.callTool("search", args);
    out({ what: "started", kind: execution.kind, reference: execution.kind === "task" ? execution.serializeReference() : null });
    if (execution.kind === "task") {
      // Detached, the execution leaves the session's active set only once its result() has
      // settled; a session closed before that would close it, which cancels the task.
      await execution.detach();
      await execution.result().catch(() => {});
      await new Promise((resolve) => setImmediate(resolve));
    }
  } else if (spec.do === "resume") {
    await settle(await conn.session.resumeTask(spec.reference));
  } else if (spec.do === "cancel") {
    const execution = await conn.session.callTool("search", args);
    out({ what: "started", kind: execution.kind, taskId: execution.handle?.taskId ?? null });
    await execution.cancel();
    const { outcome } = await execution.settle();
    out({ what: "outcome", ...outcomeRecord(outcome) });
  } else if (spec.do === "get") {
    await denial(async () => (await conn.session.task(spec.taskId).snapshot()).status);
  } else if (spec.do === "cancelId") {
    await denial(async () => { await conn.session.task(spec.taskId).cancel(); return "acknowledged"; });
  } else if (spec.do === "listen") {
    // The SDK Client's listen() strips filter keys it does not know (`taskIds` is the Tasks
    // extension's), so the listen request goes through the coordinator, framed as the client
    // frames its requests; its notifications reach the fallback handler above, and its
    // response is the server's graceful end of the stream.
    const execution = await conn.session.callTool("search", args);
    const taskId = execution.handle.taskId;
    const ended = conn.wire.dispatch({
      method: "subscriptions/listen",
      params: {
        notifications: { taskIds: [taskId, "no-such-task"] },
        _meta: {
          "io.modelcontextprotocol/protocolVersion": PROTOCOL,
          "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
          "io.modelcontextprotocol/clientCapabilities": conn.capabilities,
        },
      },
    });
    await until(() => acks.length > 0);
    out({ what: "listening", taskId, honored: acks[0].notifications });
    await until(() => taskNotes.some((n) => n.taskId === taskId && n.status !== "working"));
    const end = await ended;
    out({ what: "notified", notes: taskNotes, end: end.kind });
  } else if (spec.do === "plain") {
    const result = await conn.client.callTool({ name: "search", arguments: args });
    out({ what: "plain", era: conn.client.getProtocolEra(), result });
  } else {
    throw new Error(`unknown "do": ${spec.do}`);
  }
} finally {
  await conn.close();
}

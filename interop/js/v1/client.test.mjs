// Interop: the official JavaScript A2A SDK client (npm @a2a-js/sdk 1.x, the
// line that speaks protocol v1.0) against the agent at A2A_INTEROP_URL.
//
// One table of cases (CASES) runs over every binding the SDK client has:
// JSON-RPC, HTTP+JSON and gRPC. Each client is built the way an SDK user
// builds one: ClientFactory fetches /.well-known/agent-card.json and picks the
// card's interface for the binding under test (preferredTransports); no URL
// but the base URL is hard-coded.
//
// The agent must implement the conformance behaviour keyed on the messageId
// prefix (tck-complete-task, tck-stream-001, tck-input-required, ...), as
// `a2a serve --agent conformance` and reference_server.mjs do.
//
// Test names are "<binding> :: <case>"; ../table-reporter.mjs turns them into
// the binding x case table.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';

import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import {
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import { Role, TaskState } from '@a2a-js/sdk';

const BASE_URL = process.env.A2A_INTEROP_URL;
if (!BASE_URL) {
  throw new Error(
    'set A2A_INTEROP_URL to the agent base URL (interop/js/v1/run.sh does it)',
  );
}

// Budget for one request or one stream read; node:test's timeout is the
// per-case guard and run.sh bounds the whole run.
const STEP_MS = 10_000;
const CASE_MS = 30_000;

const BINDINGS = { jsonrpc: 'JSONRPC', rest: 'HTTP+JSON', grpc: 'GRPC' };

const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_REJECTED,
]);

// Cases the SDK cannot pass for a reason on its side, by binding: the value
// is the reason, printed in the table (see ../README.md).
const KNOWN_SDK_LIMITS = {};

// --------------------------------------------------------------------------
// helpers
// --------------------------------------------------------------------------

function stateName(s) {
  return TaskState[s] ?? String(s);
}

function text(value) {
  return { content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' };
}

function userMessage(prefix, { contextId = '', taskId = '' } = {}) {
  return {
    messageId: `${prefix}-${randomUUID()}`,
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts: [text(`interop test message (${prefix})`)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function listParams(contextId) {
  return {
    tenant: '',
    contextId,
    status: TaskState.TASK_STATE_UNSPECIFIED,
    pageToken: '',
    statusTimestampAfter: undefined,
  };
}

function sendParams(message, configuration = undefined) {
  return { tenant: '', message, configuration, metadata: undefined };
}

function texts(parts = []) {
  return parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value);
}

function allTaskTexts(task) {
  const out = [...texts(task.status?.message?.parts)];
  for (const m of task.history ?? []) out.push(...texts(m.parts));
  for (const a of task.artifacts ?? []) out.push(...texts(a.parts));
  return out;
}

function artifactTexts(task) {
  return (task.artifacts ?? []).flatMap((a) => texts(a.parts));
}

function isMessage(result) {
  return result && typeof result === 'object' && 'messageId' in result && 'role' in result;
}

function isTask(result) {
  return result && typeof result === 'object' && 'status' in result && 'id' in result;
}

function kind(ev) {
  return ev?.payload?.$case ?? '<empty>';
}

function describeEvents(events) {
  return `[${events
    .map((ev) => {
      const v = ev.payload?.value;
      switch (kind(ev)) {
        case 'task':
          return `task(${stateName(v.status?.state)})`;
        case 'statusUpdate':
          return `status(${stateName(v.status?.state)})`;
        case 'artifactUpdate':
          return `artifact(${JSON.stringify(texts(v.artifact?.parts))}, append=${v.append}, lastChunk=${v.lastChunk})`;
        default:
          return kind(ev);
      }
    })
    .join(', ')}]`;
}

function eventState(ev) {
  const v = ev.payload?.value;
  if (kind(ev) === 'task' || kind(ev) === 'statusUpdate') return v.status?.state;
  return undefined;
}

// Spec 1.0 lets a stream resend a final terminal Task snapshot before closing.
function stripTrailingSnapshot(events) {
  if (events.length > 1 && kind(events.at(-1)) === 'task') {
    const s = events.at(-1).payload.value.status?.state;
    assert.ok(TERMINAL.has(s), `a trailing Task snapshot must be terminal, got ${stateName(s)}`);
    return events.slice(0, -1);
  }
  return events;
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${STEP_MS} ms`)), STEP_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Reads a stream to its end; each read is bounded.
async function collect(stream, max = 100) {
  const events = [];
  const it = stream[Symbol.asyncIterator]();
  try {
    for (;;) {
      const { value, done } = await withTimeout(
        it.next(),
        `stream read after ${describeEvents(events)}`,
      );
      if (done) return events;
      events.push(value);
      assert.ok(events.length <= max, `stream did not end: ${describeEvents(events)}`);
    }
  } finally {
    await it.return?.();
  }
}

const resolver = new DefaultAgentCardResolver();

async function resolveCard() {
  return withTimeout(resolver.resolve(BASE_URL), 'agent card');
}

function factoryFor(binding) {
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new GrpcTransportFactory()],
      preferredTransports: [binding],
    }),
  );
}

async function sdkClient(binding) {
  const client = await withTimeout(factoryFor(binding).createFromUrl(BASE_URL), 'client from card');
  assert.equal(
    client.transport.protocolName,
    binding,
    `the factory picked ${client.transport.protocolName}, not ${binding}`,
  );
  return client;
}

async function send(client, prefix, opts = {}) {
  const result = await withTimeout(
    client.sendMessage(sendParams(userMessage(prefix, opts), opts.configuration)),
    `SendMessage ${prefix}`,
  );
  return result;
}

async function sendTask(client, prefix, opts = {}) {
  const result = await send(client, prefix, opts);
  assert.ok(isTask(result), `expected a Task, got ${JSON.stringify(result)}`);
  return result;
}

async function assertRejects(promise, errorClass, what) {
  let err;
  try {
    await withTimeout(promise, what);
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${what}: expected ${errorClass.name}, got success`);
  assert.ok(
    err instanceof errorClass,
    `${what}: expected ${errorClass.name}, got ${err?.constructor?.name}: ${err?.message}`,
  );
}

// A promise resolved when the async iterator yields its first event, the
// iterator staying open for the rest.
async function firstEvent(it, what) {
  const { value, done } = await withTimeout(it.next(), what);
  assert.ok(!done, `${what}: the stream ended before its first event`);
  return value;
}

// --------------------------------------------------------------------------
// cases
// --------------------------------------------------------------------------

const CASES = {
  async card_resolution(binding) {
    const card = await resolveCard();
    const iface = card.supportedInterfaces.find((i) => i.protocolBinding === binding);
    assert.ok(
      iface,
      `no ${binding} interface in ${JSON.stringify(card.supportedInterfaces.map((i) => i.protocolBinding))}`,
    );
    assert.equal(iface.protocolVersion, '1.0');
    assert.equal(card.capabilities?.streaming, true);
    const client = await sdkClient(binding);
    const again = await withTimeout(client.getAgentCard(), 'client.getAgentCard');
    assert.equal(again.name, card.name);
  },

  async send_complete_task(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-complete-task');
    assert.equal(stateName(task.status.state), 'TASK_STATE_COMPLETED');
    assert.ok(allTaskTexts(task).includes('Hello from TCK'), JSON.stringify(allTaskTexts(task)));
  },

  async send_artifact_text(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-artifact-text');
    assert.equal(stateName(task.status.state), 'TASK_STATE_COMPLETED');
    assert.deepEqual(artifactTexts(task), ['Generated text content']);
  },

  async send_message_response(binding) {
    const client = await sdkClient(binding);
    const result = await send(client, 'tck-message-response');
    assert.ok(isMessage(result), `expected a Message, got ${JSON.stringify(result)}`);
    assert.equal(result.role, Role.ROLE_AGENT);
    assert.ok(texts(result.parts).includes('Direct message response'));
  },

  async stream_lifecycle(binding) {
    const client = await sdkClient(binding);
    const all = await collect(
      client.sendMessageStream(sendParams(userMessage('tck-stream-001'))),
    );
    const events = stripTrailingSnapshot(all);
    const d = describeEvents(all);
    assert.equal(kind(events[0]), 'task', d);
    const states = events.map(eventState).filter((s) => s !== undefined).map(stateName);
    assert.ok(states.includes('TASK_STATE_WORKING'), d);
    assert.equal(states.at(-1), 'TASK_STATE_COMPLETED', d);
    const arts = events.filter((e) => kind(e) === 'artifactUpdate');
    assert.equal(arts.length, 1, d);
    assert.deepEqual(texts(arts[0].payload.value.artifact.parts), ['Stream hello from TCK']);
    const taskId = events[0].payload.value.id;
    const got = await withTimeout(client.getTask({ tenant: '', id: taskId }), 'GetTask');
    assert.deepEqual(artifactTexts(got), ['Stream hello from TCK']);
  },

  async stream_artifact_chunked(binding) {
    const client = await sdkClient(binding);
    const all = await collect(
      client.sendMessageStream(sendParams(userMessage('tck-stream-artifact-chunked'))),
    );
    const events = stripTrailingSnapshot(all);
    const d = describeEvents(all);
    assert.equal(kind(events[0]), 'task', d);
    const arts = events.filter((e) => kind(e) === 'artifactUpdate').map((e) => e.payload.value);
    assert.equal(arts.length, 2, d);
    assert.deepEqual(texts(arts[0].artifact.parts), ['chunk-1 ']);
    assert.equal(arts[0].lastChunk, false, d);
    assert.deepEqual(texts(arts[1].artifact.parts), ['chunk-2']);
    assert.equal(arts[1].append, true, d);
    assert.equal(arts[1].lastChunk, true, d);
    assert.equal(arts[0].artifact.artifactId, arts[1].artifact.artifactId);
    assert.equal(stateName(eventState(events.at(-1))), 'TASK_STATE_COMPLETED', d);
    const got = await withTimeout(
      client.getTask({ tenant: '', id: events[0].payload.value.id }),
      'GetTask',
    );
    assert.equal(got.artifacts.length, 1);
    assert.equal(artifactTexts(got).join(''), 'chunk-1 chunk-2');
  },

  async get_task(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-complete-task');
    const got = await withTimeout(client.getTask({ tenant: '', id: task.id }), 'GetTask');
    assert.equal(got.id, task.id);
    assert.equal(got.contextId, task.contextId);
    assert.equal(stateName(got.status.state), 'TASK_STATE_COMPLETED');
  },

  async list_tasks(binding) {
    const client = await sdkClient(binding);
    const a = await sendTask(client, 'tck-complete-task');
    const b = await sendTask(client, 'tck-complete-task', { contextId: a.contextId });
    const c = await sendTask(client, 'tck-complete-task');
    const listed = await withTimeout(
      client.listTasks(listParams(a.contextId)),
      'ListTasks',
    );
    const ids = listed.tasks.map((t) => t.id).sort();
    assert.deepEqual(ids, [a.id, b.id].sort());
    assert.ok(!ids.includes(c.id));
    const none = await withTimeout(
      client.listTasks(listParams(`no-such-context-${randomUUID()}`)),
      'ListTasks (unknown context)',
    );
    assert.equal(none.tasks.length, 0);
  },

  async cancel_input_required(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-input-required');
    assert.equal(stateName(task.status.state), 'TASK_STATE_INPUT_REQUIRED');
    const canceled = await withTimeout(client.cancelTask({ tenant: '', id: task.id }), 'CancelTask');
    assert.equal(stateName(canceled.status.state), 'TASK_STATE_CANCELED');
    const got = await withTimeout(client.getTask({ tenant: '', id: task.id }), 'GetTask');
    assert.equal(stateName(got.status.state), 'TASK_STATE_CANCELED');
  },

  async input_required_follow_up(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-input-required');
    assert.equal(stateName(task.status.state), 'TASK_STATE_INPUT_REQUIRED');
    const next = await sendTask(client, 'follow-up', { taskId: task.id, contextId: task.contextId });
    assert.equal(next.id, task.id);
    assert.equal(stateName(next.status.state), 'TASK_STATE_COMPLETED');
  },

  async resubscribe_then_cancel(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-input-required');
    const it = client.resubscribeTask({ tenant: '', id: task.id })[Symbol.asyncIterator]();
    try {
      const first = await firstEvent(it, 'SubscribeToTask first event');
      assert.equal(kind(first), 'task', describeEvents([first]));
      assert.equal(first.payload.value.id, task.id);
      assert.equal(stateName(first.payload.value.status.state), 'TASK_STATE_INPUT_REQUIRED');
      // Canceled from another client: the subscription sees it and ends.
      const other = await sdkClient(binding);
      await withTimeout(other.cancelTask({ tenant: '', id: task.id }), 'CancelTask');
      const rest = [];
      for (;;) {
        const { value, done } = await withTimeout(it.next(), `subscription after ${describeEvents(rest)}`);
        if (done) break;
        rest.push(value);
        assert.ok(rest.length < 20, describeEvents(rest));
      }
      const states = rest.map(eventState).filter((s) => s !== undefined).map(stateName);
      assert.equal(states.at(-1), 'TASK_STATE_CANCELED', describeEvents(rest));
    } finally {
      await it.return?.();
    }
  },

  async push_config_crud(binding) {
    const client = await sdkClient(binding);
    const card = await resolveCard();
    assert.equal(card.capabilities?.pushNotifications, true, 'the agent declares push notifications');
    const task = await sendTask(client, 'tck-input-required');
    const url = 'http://127.0.0.1:9/a2a-js-interop-hook';
    const created = await withTimeout(
      client.createTaskPushNotificationConfig({
        tenant: '',
        id: '',
        taskId: task.id,
        url,
        token: 'interop-token',
        authentication: undefined,
      }),
      'CreateTaskPushNotificationConfig',
    );
    assert.equal(created.taskId, task.id);
    assert.equal(created.url, url);
    assert.ok(created.id, 'the server assigns a config id');
    const got = await withTimeout(
      client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id }),
      'GetTaskPushNotificationConfig',
    );
    assert.equal(got.id, created.id);
    assert.equal(got.url, url);
    assert.equal(got.token, 'interop-token');
    const listed = await withTimeout(
      client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }),
      'ListTaskPushNotificationConfigs',
    );
    assert.deepEqual(listed.configs.map((c) => c.id), [created.id]);
    await withTimeout(
      client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id }),
      'DeleteTaskPushNotificationConfig',
    );
    const after = await withTimeout(
      client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }),
      'ListTaskPushNotificationConfigs after delete',
    );
    assert.equal(after.configs.length, 0);
    await withTimeout(client.cancelTask({ tenant: '', id: task.id }), 'CancelTask');
  },

  async error_get_unknown_task(binding) {
    const client = await sdkClient(binding);
    await assertRejects(
      client.getTask({ tenant: '', id: `no-such-task-${randomUUID()}` }),
      TaskNotFoundError,
      'GetTask of an unknown id',
    );
  },

  async error_cancel_unknown_task(binding) {
    const client = await sdkClient(binding);
    await assertRejects(
      client.cancelTask({ tenant: '', id: `no-such-task-${randomUUID()}` }),
      TaskNotFoundError,
      'CancelTask of an unknown id',
    );
  },

  async error_resubscribe_unknown_task(binding) {
    const client = await sdkClient(binding);
    await assertRejects(
      collect(client.resubscribeTask({ tenant: '', id: `no-such-task-${randomUUID()}` })),
      TaskNotFoundError,
      'SubscribeToTask of an unknown id',
    );
  },

  async error_cancel_terminal_task(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-complete-task');
    await assertRejects(
      client.cancelTask({ tenant: '', id: task.id }),
      TaskNotCancelableError,
      'CancelTask of a completed task',
    );
  },

  async error_resubscribe_terminal_task(binding) {
    const client = await sdkClient(binding);
    const task = await sendTask(client, 'tck-complete-task');
    await assertRejects(
      collect(client.resubscribeTask({ tenant: '', id: task.id })),
      UnsupportedOperationError,
      'SubscribeToTask of a completed task',
    );
  },
};

for (const [label, binding] of Object.entries(BINDINGS)) {
  for (const [name, run] of Object.entries(CASES)) {
    const limit = KNOWN_SDK_LIMITS[`${label}:${name}`];
    test(`${label} :: ${name}`, { timeout: CASE_MS, skip: limit ? `SDK limit: ${limit}` : false }, () =>
      run(binding),
    );
  }
}

// A conformance agent built with the official JavaScript A2A SDK 0.3 server
// (npm @a2a-js/sdk 0.3.x), protocol 0.3 only.
//
// Two uses: client.test.mjs must be green against it (run.sh --reference),
// which validates that suite; and our own client, in 0.3 mode, is tested
// against it (interop/js/client_interop.sh, crates/agentwire-cli/tests/interop_js.rs).
//
// Same behaviour as ../v1/reference_server.mjs (keyed on the messageId
// prefix), in 0.3 shapes. It serves, push notification configs in memory:
//   the agent card  http://127.0.0.1:<port>/.well-known/agent-card.json
//   JSON-RPC        http://127.0.0.1:<port>/        (the card's url, preferred)
//   HTTP+JSON       http://127.0.0.1:<port>/rest    (/rest/v1/message:send, ...)
//   gRPC (h2c)      127.0.0.1:<grpc-port>           (grpc-js cannot share express's port)
//
// Usage: node reference_server.mjs --port 18080 --grpc-port 18081

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import express from 'express';
import * as grpc from '@grpc/grpc-js';

import {
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import {
  UserBuilder,
  agentCardHandler,
  jsonRpcHandler,
  restHandler,
} from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';

const { values: args } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string' },
    'grpc-port': { type: 'string' },
  },
});
if (!args.port) {
  console.error('usage: node reference_server.mjs --port PORT [--grpc-port PORT]');
  process.exit(2);
}
const HOST = args.host;
const PORT = Number(args.port);
const GRPC_PORT = Number(args['grpc-port'] ?? PORT + 1);

function agentMessage(text, taskId, contextId) {
  const m = { kind: 'message', messageId: randomUUID(), role: 'agent', parts: [{ kind: 'text', text }], contextId };
  if (taskId) m.taskId = taskId;
  return m;
}

class ConformanceExecutor {
  // taskId -> contextId, for cancellation (cancelTask only gets the task id).
  contexts = new Map();

  async execute(ctx, bus) {
    const message = ctx.userMessage;
    const messageId = message?.messageId ?? '';
    const { taskId, contextId } = ctx;
    this.contexts.set(taskId, contextId);
    const update = (state, msg, final) =>
      bus.publish({
        kind: 'status-update',
        taskId,
        contextId,
        status: { state, message: msg, timestamp: new Date().toISOString() },
        final,
      });
    const artifact = (artifactId, text, append, lastChunk, name) =>
      bus.publish({
        kind: 'artifact-update',
        taskId,
        contextId,
        artifact: { artifactId, name, parts: [{ kind: 'text', text }] },
        append,
        lastChunk,
      });

    if (messageId.startsWith('tck-message-response')) {
      bus.publish(agentMessage('Direct message response', undefined, contextId));
      bus.finished();
      return;
    }
    if (!ctx.task) {
      // The first event of a task-mode interaction is the Task itself.
      bus.publish({
        kind: 'task',
        id: taskId,
        contextId,
        status: { state: 'submitted', timestamp: new Date().toISOString() },
        artifacts: [],
        history: message ? [message] : [],
      });
    }
    if (messageId.startsWith('tck-input-required')) {
      update('input-required', agentMessage('Please provide input', taskId, contextId), true);
    } else if (messageId.startsWith('tck-artifact-text')) {
      artifact(randomUUID(), 'Generated text content', false, true, 'text-artifact');
      update('completed', undefined, true);
    } else if (messageId.startsWith('tck-stream-artifact-chunked')) {
      const id = randomUUID();
      update('working', undefined, false);
      artifact(id, 'chunk-1 ', false, false);
      artifact(id, 'chunk-2', true, true);
      update('completed', undefined, true);
    } else if (messageId.startsWith('tck-stream-001')) {
      update('working', undefined, false);
      artifact(randomUUID(), 'Stream hello from TCK', false, true);
      update('completed', undefined, true);
    } else {
      // Default, "tck-complete-task", and a follow-up to an input-required task.
      update('completed', agentMessage('Hello from TCK', taskId, contextId), true);
    }
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.publish({
      kind: 'status-update',
      taskId,
      contextId: this.contexts.get(taskId) ?? '',
      status: { state: 'canceled', timestamp: new Date().toISOString() },
      final: true,
    });
    bus.finished();
  }
}

const card = {
  name: 'A2A reference conformance agent (JavaScript SDK 0.3)',
  description: 'TCK conformance behaviour, used to validate interop tests.',
  version: '1.0.0',
  protocolVersion: '0.3.0',
  url: `http://${HOST}:${PORT}/`,
  preferredTransport: 'JSONRPC',
  additionalInterfaces: [
    { url: `http://${HOST}:${PORT}/`, transport: 'JSONRPC' },
    { url: `http://${HOST}:${PORT}/rest`, transport: 'HTTP+JSON' },
    { url: `${HOST}:${GRPC_PORT}`, transport: 'GRPC' },
  ],
  capabilities: { streaming: true, pushNotifications: true },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    {
      id: 'conformance',
      name: 'Conformance',
      description: 'TCK conformance behaviour keyed on messageId.',
      tags: ['tck'],
      examples: ['tck-complete-task'],
    },
  ],
};

const handler = new DefaultRequestHandler(
  card,
  new InMemoryTaskStore(),
  new ConformanceExecutor(),
  undefined,
  new InMemoryPushNotificationStore(),
);

const app = express();
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));

const grpcServer = new grpc.Server();
grpcServer.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
grpcServer.bindAsync(`${HOST}:${GRPC_PORT}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(`cannot bind gRPC on ${HOST}:${GRPC_PORT}: ${err.message}`);
    process.exit(1);
  }
  const http = app.listen(PORT, HOST, () => {
    console.error(`reference server (0.3): HTTP on http://${HOST}:${PORT}, gRPC on ${HOST}:${GRPC_PORT}`);
  });
  const stop = () => {
    http.close();
    grpcServer.tryShutdown(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
});

// A conformance agent built with the official JavaScript A2A SDK 1.x server
// (npm @a2a-js/sdk), protocol 1.0 only.
//
// Two uses: client.test.mjs must be green against it (run.sh --reference),
// which validates that suite; and our own client is tested against it
// (interop/js/client_interop.sh, crates/agentwire-cli/tests/interop_js.rs).
//
// It behaves like `a2a serve --agent conformance` and like
// interop/python/reference_server.py, keyed on the messageId prefix:
//   tck-message-response        -> a direct Message "Direct message response"
//   tck-input-required          -> a Task in INPUT_REQUIRED; a follow-up completes it
//   tck-artifact-text           -> COMPLETED with the artifact "Generated text content"
//   tck-stream-artifact-chunked -> WORKING, chunks "chunk-1 " + "chunk-2", COMPLETED
//   tck-stream-001              -> WORKING, artifact "Stream hello from TCK", COMPLETED
//   anything else               -> COMPLETED with the message "Hello from TCK"
//
// It serves, with push notification configs kept in memory:
//   the agent card  http://127.0.0.1:<port>/.well-known/agent-card.json
//   JSON-RPC        http://127.0.0.1:<port>/
//   HTTP+JSON       http://127.0.0.1:<port>/rest   (/rest/message:send, /rest/tasks/...)
//   gRPC (h2c)      127.0.0.1:<grpc-port>          (grpc-js cannot share express's port)
//
// Usage: node reference_server.mjs --port 18080 --grpc-port 18081

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import express from 'express';
import * as grpc from '@grpc/grpc-js';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
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

function textPart(value) {
  return { content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' };
}

function agentMessage(value, taskId, contextId) {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(value)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function status(state, message = undefined) {
  return { state, message, timestamp: new Date().toISOString() };
}

class ConformanceExecutor {
  // taskId -> contextId, for cancellation (cancelTask only gets the task id).
  contexts = new Map();

  async execute(ctx, bus) {
    const message = ctx.userMessage;
    const messageId = message?.messageId ?? '';
    const { taskId, contextId } = ctx;
    this.contexts.set(taskId, contextId);
    const update = (state, msg) =>
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(state, msg), metadata: undefined }));
    const artifact = (artifactId, value, append, lastChunk, name = '') =>
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: { artifactId, name, description: '', parts: [textPart(value)], metadata: undefined, extensions: [] },
          append,
          lastChunk,
          metadata: undefined,
        }),
      );

    if (messageId.startsWith('tck-message-response')) {
      bus.publish(AgentEvent.message(agentMessage('Direct message response', '', contextId)));
      bus.finished();
      return;
    }
    if (!ctx.task) {
      // The first event of a task-mode interaction is the Task itself.
      bus.publish(
        AgentEvent.task({
          id: taskId,
          contextId,
          status: status(TaskState.TASK_STATE_SUBMITTED),
          artifacts: [],
          history: message ? [message] : [],
          metadata: undefined,
        }),
      );
    }
    if (messageId.startsWith('tck-input-required')) {
      update(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage('Please provide input', taskId, contextId));
    } else if (messageId.startsWith('tck-artifact-text')) {
      artifact(randomUUID(), 'Generated text content', false, true, 'text-artifact');
      update(TaskState.TASK_STATE_COMPLETED);
    } else if (messageId.startsWith('tck-stream-artifact-chunked')) {
      const id = randomUUID();
      update(TaskState.TASK_STATE_WORKING);
      artifact(id, 'chunk-1 ', false, false);
      artifact(id, 'chunk-2', true, true);
      update(TaskState.TASK_STATE_COMPLETED);
    } else if (messageId.startsWith('tck-stream-001')) {
      update(TaskState.TASK_STATE_WORKING);
      artifact(randomUUID(), 'Stream hello from TCK', false, true);
      update(TaskState.TASK_STATE_COMPLETED);
    } else {
      // Default, "tck-complete-task", and a follow-up to an input-required task.
      update(TaskState.TASK_STATE_COMPLETED, agentMessage('Hello from TCK', taskId, contextId));
    }
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    const contextId = this.contexts.get(taskId) ?? '';
    bus.publish(
      AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_CANCELED), metadata: undefined }),
    );
    bus.finished();
  }
}

const card = {
  name: 'A2A reference conformance agent (JavaScript SDK 1.x)',
  description: 'TCK conformance behaviour, used to validate interop tests.',
  version: '1.0.0',
  supportedInterfaces: [
    { url: `http://${HOST}:${PORT}/`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
    { url: `http://${HOST}:${PORT}/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
    { url: `${HOST}:${GRPC_PORT}`, protocolBinding: 'GRPC', protocolVersion: '1.0', tenant: '' },
  ],
  provider: undefined,
  documentationUrl: undefined,
  capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    {
      id: 'conformance',
      name: 'Conformance',
      description: 'TCK conformance behaviour keyed on messageId.',
      tags: ['tck'],
      examples: ['tck-complete-task'],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  signatures: [],
  iconUrl: undefined,
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
    console.error(`reference server: HTTP on http://${HOST}:${PORT}, gRPC on ${HOST}:${GRPC_PORT}`);
  });
  const stop = () => {
    http.close();
    grpcServer.tryShutdown(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
});

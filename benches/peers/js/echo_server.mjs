// Echo agent on the official JavaScript A2A SDK 1.x (npm @a2a-js/sdk, pinned
// in package-lock.json), for scripts/peers-bench.sh.
//
// Usage: node echo_server.mjs PORT
//
// Serves JSON-RPC at / and the agent card at /.well-known/agent-card.json on
// 127.0.0.1:PORT (express, one Node process). A SendMessage gets back a
// completed task holding one artifact named "echo" whose parts are the text
// parts of the message, as `a2a serve --agent echo` answers; the task is kept
// in the SDK's in-memory task store. The SDK's handler wants the Task itself
// as the first event of a new task, so the executor publishes it before the
// artifact and the final status.

import { randomUUID } from 'node:crypto';

import { TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';
import express from 'express';

const PORT = Number(process.argv[2]);
if (!Number.isInteger(PORT) || PORT <= 0 || PORT > 65535) {
  console.error('usage: node echo_server.mjs PORT');
  process.exit(2);
}

const now = () => new Date().toISOString();

class Echo {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const message = ctx.userMessage;
    if (!ctx.task) {
      bus.publish(
        AgentEvent.task({
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
          artifacts: [],
          history: message ? [message] : [],
          metadata: undefined,
        }),
      );
    }
    const parts = (message?.parts ?? []).filter((part) => part.content?.$case === 'text');
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: randomUUID(), name: 'echo', description: '', parts, metadata: undefined, extensions: [] },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: now() },
        metadata: undefined,
      }),
    );
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId: '',
        status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() },
        metadata: undefined,
      }),
    );
    bus.finished();
  }
}

const card = {
  name: 'Echo Agent',
  description: 'Repeats the text it is sent as an artifact.',
  version: '0.0.0',
  supportedInterfaces: [{ url: `http://127.0.0.1:${PORT}/`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
  provider: undefined,
  documentationUrl: undefined,
  capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    {
      id: 'echo',
      name: 'Echo',
      description: 'Repeats the text it is sent.',
      tags: ['echo'],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  signatures: [],
  iconUrl: undefined,
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Echo());
const app = express();
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));

const server = app.listen(PORT, '127.0.0.1', (err) => {
  if (err) {
    console.error(`echo_server.mjs: cannot listen on 127.0.0.1:${PORT}: ${err.message}`);
    process.exit(1);
  }
});
const stop = () => {
  server.close();
  setTimeout(() => process.exit(0), 1000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

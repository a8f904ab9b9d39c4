"""Echo agent on the official Python A2A SDK (PyPI a2a-sdk, 1.x), for
scripts/peers-bench.sh.

Usage: python echo_server.py PORT

Serves JSON-RPC at / and the agent card at /.well-known/agent-card.json on
127.0.0.1:PORT (Starlette under uvicorn, one process, uvicorn's defaults). A
SendMessage gets back a completed task holding one artifact named "echo" whose
parts are the text parts of the message, as `a2a serve --agent echo` answers;
the task is kept in the SDK's in-memory task store. The SDK's handler wants the
Task itself as the first event of a new task, so the executor enqueues it
before the artifact and the final status.

The packages are the pinned ones of interop/python/requirements.txt.
"""

from __future__ import annotations

import logging
import sys
import uuid

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message] if message else [],
                )
            )
        texts = [p.text for p in (message.parts if message else []) if p.HasField('text')]
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.add_artifact([Part(text=t) for t in texts], name='echo', last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or '', context.context_id or '')
        await updater.cancel()


def card(port: int) -> AgentCard:
    return AgentCard(
        name='Echo Agent',
        description='Repeats the text it is sent as an artifact.',
        version='0.0.0',
        supported_interfaces=[
            AgentInterface(
                url=f'http://127.0.0.1:{port}/',
                protocol_binding='JSONRPC',
                protocol_version='1.0',
            )
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[
            AgentSkill(
                id='echo',
                name='Echo',
                description='Repeats the text it is sent.',
                tags=['echo'],
            )
        ],
    )


def main() -> None:
    try:
        port = int(sys.argv[1])
    except (IndexError, ValueError):
        print('usage: python echo_server.py PORT', file=sys.stderr)
        sys.exit(2)
    agent_card = card(port)
    handler = DefaultRequestHandler(
        agent_executor=Echo(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    app = Starlette(
        routes=[
            *create_agent_card_routes(agent_card),
            *create_jsonrpc_routes(handler, rpc_url='/'),
        ]
    )
    logging.basicConfig(level=logging.WARNING)
    # No access log: a line per request would be the server's main cost.
    uvicorn.run(app, host='127.0.0.1', port=port, log_level='warning', access_log=False)


if __name__ == '__main__':
    main()

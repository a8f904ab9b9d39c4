"""Reference conformance agent built with the official Python A2A SDK.

This exists only to validate the interop test suite itself: the suite must be
green against this server (built from the same SDK as the client) before its
verdict on the Rust server can be trusted.

It implements the TCK "conformance agent" behaviour keyed on messageId
prefixes (see spec/tck-scenarios/*.feature) and serves:

  * the agent card at  http://127.0.0.1:<port>/.well-known/agent-card.json
  * JSON-RPC       at  http://127.0.0.1:<port>/
  * HTTP+JSON/REST at  http://127.0.0.1:<port>   (/message:send, /tasks/..., ...)
  * gRPC (h2c)     at  127.0.0.1:<grpc-port>

The Rust server serves gRPC on the same port as HTTP; Python's grpcio server
cannot share a port with uvicorn, so here gRPC gets its own port and the card
advertises it. The test suite reads every interface URL from the card, so it
does not care.

Usage:
    python reference_server.py --port 18080 [--grpc-port 18081]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import uuid

import grpc
import uvicorn

from starlette.applications import Starlette

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)


logger = logging.getLogger('reference_server')


def _text(text: str) -> Part:
    return Part(text=text)


class ConformanceExecutor(AgentExecutor):
    """TCK conformance behaviour, selected by the incoming messageId prefix."""

    async def execute(
        self, context: RequestContext, event_queue: EventQueue
    ) -> None:
        message = context.message
        message_id = message.message_id if message else ''
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())

        if message_id.startswith('tck-message-response'):
            await event_queue.enqueue_event(
                Message(
                    role=Role.ROLE_AGENT,
                    message_id=str(uuid.uuid4()),
                    context_id=context_id,
                    parts=[_text('Direct message response')],
                )
            )
            return

        if context.current_task is None:
            # First event of a task-mode interaction is the Task itself.
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message] if message else [],
                )
            )

        updater = TaskUpdater(event_queue, task_id, context_id)

        if message_id.startswith('tck-input-required'):
            await updater.requires_input(
                updater.new_agent_message([_text('Please provide input')])
            )
            return

        if message_id.startswith('tck-artifact-text'):
            await updater.add_artifact(
                [_text('Generated text content')], name='text-artifact'
            )
            await updater.complete()
            return

        if message_id.startswith('tck-stream-artifact-chunked'):
            artifact_id = str(uuid.uuid4())
            await updater.start_work()
            await updater.add_artifact(
                [_text('chunk-1 ')],
                artifact_id=artifact_id,
                append=False,
                last_chunk=False,
            )
            await updater.add_artifact(
                [_text('chunk-2')],
                artifact_id=artifact_id,
                append=True,
                last_chunk=True,
            )
            await updater.complete()
            return

        if message_id.startswith('tck-stream-001'):
            await updater.start_work()
            await updater.add_artifact([_text('Stream hello from TCK')])
            await updater.complete()
            return

        # Default, and "tck-complete-task": complete with a message.
        await updater.complete(
            updater.new_agent_message([_text('Hello from TCK')])
        )

    async def cancel(
        self, context: RequestContext, event_queue: EventQueue
    ) -> None:
        task = context.current_task
        context_id = (
            context.context_id or (task.context_id if task else '') or ''
        )
        updater = TaskUpdater(event_queue, context.task_id or '', context_id)
        await updater.cancel()


def build_card(host: str, port: int, grpc_port: int) -> AgentCard:
    return AgentCard(
        name='A2A reference conformance agent (Python SDK)',
        description='TCK conformance behaviour, used to validate interop tests.',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(
                url=f'http://{host}:{port}/',
                protocol_binding='JSONRPC',
                protocol_version='1.0',
            ),
            AgentInterface(
                url=f'http://{host}:{port}',
                protocol_binding='HTTP+JSON',
                protocol_version='1.0',
            ),
            AgentInterface(
                url=f'{host}:{grpc_port}',
                protocol_binding='GRPC',
                protocol_version='1.0',
            ),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=False
        ),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[
            AgentSkill(
                id='conformance',
                name='Conformance',
                description='TCK conformance behaviour keyed on messageId.',
                tags=['tck'],
            )
        ],
    )


async def serve(host: str, port: int, grpc_port: int) -> None:
    card = build_card(host, port, grpc_port)
    handler = DefaultRequestHandler(
        agent_executor=ConformanceExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )

    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url='/'),
        *create_rest_routes(handler),
    ]
    app = Starlette(routes=routes)

    grpc_server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(
        GrpcHandler(handler), grpc_server
    )
    grpc_server.add_insecure_port(f'{host}:{grpc_port}')
    await grpc_server.start()

    config = uvicorn.Config(app, host=host, port=port, log_level='warning')
    server = uvicorn.Server(config)
    try:
        await server.serve()
    finally:
        await grpc_server.stop(grace=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument(
        '--grpc-port',
        type=int,
        default=0,
        help='gRPC port (default: --port + 1)',
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve(args.host, args.port, args.grpc_port or args.port + 1))


if __name__ == '__main__':
    main()

"""Reference conformance agent built with the official Python A2A SDK 0.3.

Our client (the `a2a` command with --allow-v03, over agentwire-client) is
tested against it (crates/agentwire-cli/tests/interop_python.rs, the
`py_v03_*` tests; interop/python/client_interop.sh starts it). It implements
the TCK conformance behaviour keyed on messageId prefixes, as
../reference_server.py does for the 1.x SDK, and serves a 0.3 card:

  * the agent card at  http://127.0.0.1:<port>/.well-known/agent-card.json
  * JSON-RPC       at  http://127.0.0.1:<port>/       (A2AStarletteApplication)
  * HTTP+JSON      at  http://127.0.0.1:<port>/rest   (A2ARESTFastAPIApplication)
  * gRPC (h2c)     at  127.0.0.1:<grpc-port>          (GrpcHandler, a2a.v1.A2AService)

Usage:
    python reference_server.py --port 18080 [--grpc-port 18081]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import uuid

import grpc
import httpx
import uvicorn
from starlette.routing import Mount

from a2a.grpc import a2a_pb2_grpc
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2ARESTFastAPIApplication, A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import (
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
    TextPart,
)


def _text(text: str) -> Part:
    return Part(root=TextPart(text=text))


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
                    role=Role.agent,
                    message_id=str(uuid.uuid4()),
                    context_id=context_id,
                    parts=[_text('Direct message response')],
                )
            )
            return

        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.submitted),
                    history=[message] if message else [],
                )
            )

        updater = TaskUpdater(event_queue, task_id, context_id)

        if message_id.startswith('tck-input-required'):
            await updater.requires_input(
                updater.new_agent_message([_text('Please provide input')]),
                final=True,
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
    jsonrpc = f'http://{host}:{port}/'
    return AgentCard(
        name='A2A 0.3 reference conformance agent (Python SDK)',
        description='TCK conformance behaviour, used to test our 0.3 client.',
        version='1.0.0',
        protocol_version='0.3.0',
        url=jsonrpc,
        preferred_transport='JSONRPC',
        additional_interfaces=[
            AgentInterface(url=jsonrpc, transport='JSONRPC'),
            AgentInterface(url=f'http://{host}:{port}/rest', transport='HTTP+JSON'),
            AgentInterface(url=f'{host}:{grpc_port}', transport='GRPC'),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
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
    push_store = InMemoryPushNotificationConfigStore()
    handler = DefaultRequestHandler(
        agent_executor=ConformanceExecutor(),
        task_store=InMemoryTaskStore(),
        push_config_store=push_store,
        push_sender=BasePushNotificationSender(httpx.AsyncClient(), push_store),
    )

    rest_app = A2ARESTFastAPIApplication(agent_card=card, http_handler=handler).build()
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build(
        rpc_url='/', routes=[Mount('/rest', app=rest_app)]
    )

    grpc_server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(
        GrpcHandler(card, handler), grpc_server
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
    parser.add_argument('--grpc-port', type=int, default=0,
                        help='gRPC port (default: --port + 1)')
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve(args.host, args.port, args.grpc_port or args.port + 1))


if __name__ == '__main__':
    main()

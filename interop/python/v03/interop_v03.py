"""Interop: the official Python A2A SDK 0.3 client (a2a-sdk 0.3.x) against
an agent that serves 1.0 and 0.3 on the same endpoints.

Every case runs on the three bindings the 0.3 SDK client speaks
(JSON-RPC, HTTP+JSON, and gRPC: the 0.3 service `a2a.v1.A2AService`, on the
same port as the 1.0 one). Clients are built as an SDK user builds them:
the card resolved from /.well-known/agent-card.json, then `ClientFactory`
picks the card's interface for the binding (the 0.3 card fields: `url`,
`preferredTransport`, `additionalInterfaces`).

Listing and deleting push configs have no call in the 0.3 SDK client; they
are made with the SDK's own request and response types (JSON-RPC), its
protobuf messages (HTTP+JSON) over httpx, or its generated gRPC stub (gRPC).

The agent must implement the conformance behaviour keyed on messageId
prefixes (`a2a serve --agent conformance`).
"""

from __future__ import annotations

import asyncio
import uuid

from contextlib import asynccontextmanager

import grpc
import httpx
import pytest

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.grpc import a2a_pb2, a2a_pb2_grpc
from a2a.types import (
    AgentCard,
    DeleteTaskPushNotificationConfigParams,
    DeleteTaskPushNotificationConfigRequest,
    DeleteTaskPushNotificationConfigResponse,
    DeleteTaskPushNotificationConfigSuccessResponse,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigResponse,
    ListTaskPushNotificationConfigSuccessResponse,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    TransportProtocol,
)
from google.protobuf.json_format import ParseDict


STEP_TIMEOUT_S = 15.0
HTTP_TIMEOUT = httpx.Timeout(STEP_TIMEOUT_S)
HOOK = 'http://127.0.0.1:9/a2a-v03-hook'

BINDINGS = ['JSONRPC', 'HTTP+JSON', 'GRPC']
TRANSPORT = {
    'JSONRPC': TransportProtocol.jsonrpc,
    'HTTP+JSON': TransportProtocol.http_json,
    'GRPC': TransportProtocol.grpc,
}
# The gRPC status of each A2A error code as the 0.3 SDKs carry them
# (UnsupportedOperationError is UNIMPLEMENTED in 0.3, FAILED_PRECONDITION
# in 1.0).
GRPC_CODE = {
    -32001: grpc.StatusCode.NOT_FOUND,
    -32002: grpc.StatusCode.FAILED_PRECONDITION,
    -32004: grpc.StatusCode.UNIMPLEMENTED,
}


def grpc_channel(url: str) -> grpc.aio.Channel:
    """The channel to a card's gRPC interface (`host:port`, plain text)."""
    return grpc.aio.insecure_channel(url.removeprefix('http://'))


def message(prefix: str, task_id: str | None = None) -> Message:
    return Message(
        role=Role.user,
        message_id=f'{prefix}-{uuid.uuid4()}',
        parts=[Part(root=TextPart(text='hello from a2a-sdk 0.3'))],
        task_id=task_id,
    )


@asynccontextmanager
async def sdk_client(base_url: str, binding: str, *, streaming=False, polling=False):
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=http,
            supported_transports=[TRANSPORT[binding]],
            grpc_channel_factory=grpc_channel,
        )
        client = ClientFactory(config).create(card)
        yield client, card, http


def interface_url(card: AgentCard, binding: str) -> str:
    if card.preferred_transport == binding:
        return card.url
    for i in card.additional_interfaces or []:
        if i.transport == binding:
            return i.url
    raise AssertionError(f'the card declares no {binding} interface')


async def first(aiter):
    return await asyncio.wait_for(anext(aiter), STEP_TIMEOUT_S)


async def send_one(client, msg: Message):
    events = [e async for e in client.send_message(msg)]
    assert len(events) == 1, events
    return events[0]


async def completed_task(client) -> Task:
    task, _ = await send_one(client, message('tck-complete-task'))
    assert task.status.state == TaskState.completed, task
    return task


def expect_error(e: Exception, binding: str, code: int, status: int) -> None:
    if binding == 'JSONRPC':
        assert isinstance(e, A2AClientJSONRPCError), repr(e)
        assert e.error.code == code, e.error
    elif binding == 'GRPC':
        assert isinstance(e, grpc.aio.AioRpcError), repr(e)
        assert e.code() == GRPC_CODE[code], e
    else:
        assert isinstance(e, A2AClientHTTPError), repr(e)
        assert e.status_code == status, e


# ----- the cases --------------------------------------------------------------


async def case_card(base_url, binding):
    async with sdk_client(base_url, binding) as (client, card, _):
        assert card.protocol_version.startswith('0.3'), card.protocol_version
        assert card.url.startswith(base_url), card.url
        assert card.preferred_transport == 'JSONRPC'
        assert card.capabilities.streaming is True
        assert card.capabilities.push_notifications is True
        # (The gRPC interface is `host:port`, without a scheme.)
        assert base_url.endswith(interface_url(card, binding).removeprefix('http://').rstrip('/'))
        assert card.skills, card
        got = await client.get_card()
        assert got.name == card.name


async def case_send_task(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        task, update = await send_one(client, message('tck-artifact-text'))
        assert isinstance(task, Task), task
        assert update is None
        assert task.status.state == TaskState.completed
        assert task.artifacts[0].parts[0].root.text == 'Generated text content'
        assert task.context_id


async def case_send_message(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        reply = await send_one(client, message('tck-message-response'))
        assert isinstance(reply, Message), reply
        assert reply.role == Role.agent
        assert reply.parts


async def case_stream(base_url, binding):
    async with sdk_client(base_url, binding, streaming=True) as (client, _, _):
        events = []
        async for ev in client.send_message(message('tck-stream-001')):
            events.append(ev)
        assert events, 'no events'
        task, update = events[-1]
        assert isinstance(update, TaskStatusUpdateEvent), events
        assert update.final is True
        assert update.status.state == TaskState.completed
        assert task.status.state == TaskState.completed
        assert task.artifacts, task


async def case_get(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        task = await completed_task(client)
        got = await client.get_task(TaskQueryParams(id=task.id, history_length=1))
        assert got.id == task.id
        assert got.status.state == TaskState.completed
        assert len(got.history or []) <= 1


async def case_cancel(base_url, binding):
    async with sdk_client(base_url, binding, polling=True) as (client, _, _):
        task, _ = await send_one(client, message('test-resubscribe-message-id'))
        assert task.status.state in (TaskState.submitted, TaskState.working), task
        canceled = await client.cancel_task(TaskIdParams(id=task.id))
        assert canceled.status.state == TaskState.canceled, canceled


async def case_resubscribe(base_url, binding):
    async with sdk_client(base_url, binding, polling=True) as (poller, _, _):
        task, _ = await send_one(poller, message('test-resubscribe-message-id'))
        async with sdk_client(base_url, binding, streaming=True) as (streamer, _, _):
            events = streamer.resubscribe(TaskIdParams(id=task.id))
            got, _ = await first(events)
            assert got.id == task.id
            await poller.cancel_task(TaskIdParams(id=task.id))
            last = None
            while True:
                try:
                    last = await first(events)
                except StopAsyncIteration:
                    break
            assert last is not None, 'no event after the cancellation'
            final_task, update = last
            assert isinstance(update, TaskStatusUpdateEvent), last
            assert update.final is True
            assert update.status.state == TaskState.canceled


async def set_config(client, task_id: str, config_id: str) -> TaskPushNotificationConfig:
    return await client.set_task_callback(
        TaskPushNotificationConfig(
            task_id=task_id,
            push_notification_config=PushNotificationConfig(
                id=config_id, url=HOOK, token='tok-1'
            ),
        )
    )


async def case_push_set(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        task = await completed_task(client)
        got = await set_config(client, task.id, 'cfg-1')
        assert got.task_id == task.id
        assert got.push_notification_config.id == 'cfg-1'
        assert got.push_notification_config.url == HOOK
        assert got.push_notification_config.token == 'tok-1'


async def case_push_get(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        task = await completed_task(client)
        await set_config(client, task.id, 'cfg-2')
        got = await client.get_task_callback(
            GetTaskPushNotificationConfigParams(
                id=task.id, push_notification_config_id='cfg-2'
            )
        )
        assert got.task_id == task.id
        assert got.push_notification_config.url == HOOK


async def list_configs(http, card, binding, task_id) -> list[TaskPushNotificationConfig]:
    url = interface_url(card, binding)
    if binding == 'JSONRPC':
        req = ListTaskPushNotificationConfigRequest(
            id=str(uuid.uuid4()), params=ListTaskPushNotificationConfigParams(id=task_id)
        )
        r = await http.post(url, json=req.model_dump(mode='json', exclude_none=True))
        r.raise_for_status()
        resp = ListTaskPushNotificationConfigResponse.model_validate(r.json())
        assert isinstance(resp.root, ListTaskPushNotificationConfigSuccessResponse), resp
        return resp.root.result
    if binding == 'GRPC':
        async with grpc_channel(url) as channel:
            pb = await a2a_pb2_grpc.A2AServiceStub(channel).ListTaskPushNotificationConfig(
                a2a_pb2.ListTaskPushNotificationConfigRequest(parent=f'tasks/{task_id}')
            )
    else:
        r = await http.get(f'{url.rstrip("/")}/v1/tasks/{task_id}/pushNotificationConfigs')
        r.raise_for_status()
        pb = ParseDict(r.json(), a2a_pb2.ListTaskPushNotificationConfigResponse())
    out = []
    for c in pb.configs:
        tid, _, cid = c.name.removeprefix('tasks/').partition('/pushNotificationConfigs/')
        out.append(
            TaskPushNotificationConfig(
                task_id=tid,
                push_notification_config=PushNotificationConfig(
                    id=cid, url=c.push_notification_config.url
                ),
            )
        )
    return out


async def case_push_list(base_url, binding):
    async with sdk_client(base_url, binding) as (client, card, http):
        task = await completed_task(client)
        await set_config(client, task.id, 'cfg-a')
        await set_config(client, task.id, 'cfg-b')
        configs = await list_configs(http, card, binding, task.id)
        ids = sorted(c.push_notification_config.id for c in configs)
        assert ids == ['cfg-a', 'cfg-b'], configs
        assert all(c.task_id == task.id for c in configs)


async def case_push_delete(base_url, binding):
    async with sdk_client(base_url, binding) as (client, card, http):
        task = await completed_task(client)
        await set_config(client, task.id, 'cfg-d')
        url = interface_url(card, binding)
        if binding == 'JSONRPC':
            req = DeleteTaskPushNotificationConfigRequest(
                id=str(uuid.uuid4()),
                params=DeleteTaskPushNotificationConfigParams(
                    id=task.id, push_notification_config_id='cfg-d'
                ),
            )
            r = await http.post(url, json=req.model_dump(mode='json', exclude_none=True))
            resp = DeleteTaskPushNotificationConfigResponse.model_validate(r.json())
            assert isinstance(resp.root, DeleteTaskPushNotificationConfigSuccessResponse), resp
        elif binding == 'GRPC':
            async with grpc_channel(url) as channel:
                await a2a_pb2_grpc.A2AServiceStub(channel).DeleteTaskPushNotificationConfig(
                    a2a_pb2.DeleteTaskPushNotificationConfigRequest(
                        name=f'tasks/{task.id}/pushNotificationConfigs/cfg-d'
                    )
                )
        else:
            r = await http.delete(
                f'{url.rstrip("/")}/v1/tasks/{task.id}/pushNotificationConfigs/cfg-d'
            )
            assert r.status_code == 200, r.text
        assert await list_configs(http, card, binding, task.id) == []
        with pytest.raises(Exception) as e:
            await client.get_task_callback(
                GetTaskPushNotificationConfigParams(
                    id=task.id, push_notification_config_id='cfg-d'
                )
            )
        expect_error(e.value, binding, -32001, 404)


async def case_error_task_not_found(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        with pytest.raises(Exception) as e:
            await client.get_task(TaskQueryParams(id=f'no-such-task-{uuid.uuid4()}'))
        expect_error(e.value, binding, -32001, 404)


async def case_error_cancel_terminal(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        task = await completed_task(client)
        with pytest.raises(Exception) as e:
            await client.cancel_task(TaskIdParams(id=task.id))
        expect_error(e.value, binding, -32002, 409)


async def case_error_send_to_terminal(base_url, binding):
    async with sdk_client(base_url, binding) as (client, _, _):
        task = await completed_task(client)
        with pytest.raises(Exception) as e:
            await send_one(client, message('again', task_id=task.id))
        expect_error(e.value, binding, -32004, 501)


CASES = {
    name.removeprefix('case_'): fn
    for name, fn in list(globals().items())
    if name.startswith('case_')
}


@pytest.mark.parametrize('operation', list(CASES))
@pytest.mark.parametrize('binding', BINDINGS)
async def test_case(base_url: str, binding: str, operation: str) -> None:
    await asyncio.wait_for(CASES[operation](base_url, binding), 60)

"""Interop: the official Python A2A SDK client (a2a-sdk 1.x) against an agent.

One table of cases (CASES) is run over the three protocol bindings
(JSON-RPC, HTTP+JSON, gRPC). Every client is built the way an SDK user would
build it: resolve the agent card from /.well-known/agent-card.json, then let
`ClientFactory` pick the card interface for the requested binding.

The agent must implement the TCK conformance behaviour keyed on messageId
prefixes (spec/tck-scenarios/*.feature).
"""

from __future__ import annotations

import asyncio
import uuid

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import grpc
import httpx
import pytest

from a2a.client import (
    A2ACardResolver,
    Client,
    ClientConfig,
    ClientFactory,
)
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from conftest import InteropEnv


# Per-case budget (asyncio); pytest-timeout (pytest.ini) is the outer guard.
CASE_TIMEOUT_S = 30.0
# Budget for one stream read / one request.
STEP_TIMEOUT_S = 10.0
HTTP_TIMEOUT = httpx.Timeout(STEP_TIMEOUT_S)

BINDINGS = {
    'jsonrpc': 'JSONRPC',
    'rest': 'HTTP+JSON',
    'grpc': 'GRPC',
}

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def state_name(state: int) -> str:
    return TaskState.Name(state)


def user_message(prefix: str, context_id: str = '', task_id: str = '') -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=f'{prefix}-{uuid.uuid4()}',
        context_id=context_id,
        task_id=task_id,
        parts=[Part(text=f'interop test message ({prefix})')],
    )


def texts(parts) -> list[str]:
    return [p.text for p in parts if p.WhichOneof('content') == 'text']


def all_task_texts(task: Task) -> list[str]:
    out = list(texts(task.status.message.parts))
    for m in task.history:
        out.extend(texts(m.parts))
    for a in task.artifacts:
        out.extend(texts(a.parts))
    return out


def artifact_texts(task: Task) -> list[str]:
    out: list[str] = []
    for a in task.artifacts:
        out.extend(texts(a.parts))
    return out


def kind(ev: StreamResponse) -> str:
    return ev.WhichOneof('payload') or '<empty>'


def describe(events: list[StreamResponse]) -> str:
    out = []
    for ev in events:
        k = kind(ev)
        if k == 'task':
            out.append(f'task({state_name(ev.task.status.state)})')
        elif k == 'status_update':
            out.append(f'status({state_name(ev.status_update.status.state)})')
        elif k == 'artifact_update':
            au = ev.artifact_update
            out.append(
                f'artifact({texts(au.artifact.parts)!r}, append={au.append},'
                f' last_chunk={au.last_chunk})'
            )
        else:
            out.append(k)
    return '[' + ', '.join(out) + ']'


def event_state(ev: StreamResponse) -> int | None:
    if kind(ev) == 'task':
        return ev.task.status.state
    if kind(ev) == 'status_update':
        return ev.status_update.status.state
    return None


def strip_trailing_snapshot(events: list[StreamResponse]) -> list[StreamResponse]:
    """Spec 1.0 lets a stream resend a final Task snapshot before closing."""
    if len(events) > 1 and kind(events[-1]) == 'task':
        assert events[-1].task.status.state in TERMINAL, (
            'a trailing Task snapshot must be terminal, got '
            + state_name(events[-1].task.status.state)
        )
        return events[:-1]
    return events


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    """Reads a stream to its end; each read is bounded."""
    events: list[StreamResponse] = []
    it = stream.__aiter__()
    while True:
        try:
            ev = await asyncio.wait_for(it.__anext__(), STEP_TIMEOUT_S)
        except StopAsyncIteration:
            return events
        except TimeoutError as e:
            raise AssertionError(
                f'stream did not end within {STEP_TIMEOUT_S}s of the last event;'
                f' events so far: {describe(events)}'
            ) from e
        events.append(ev)


async def resolve_card(env: InteropEnv) -> AgentCard:
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
        return await A2ACardResolver(http, env.base_url).get_agent_card()


@asynccontextmanager
async def sdk_client(
    env: InteropEnv, binding: str, *, streaming: bool
) -> AsyncIterator[Client]:
    """A client for `binding`, built by the SDK factory from the agent card.

    streaming=False makes `send_message` use SendMessage (blocking unary);
    streaming=True makes it use SendStreamingMessage, and is needed for
    `subscribe` (the SDK refuses to subscribe without it).
    """
    card = await resolve_card(env)
    http = httpx.AsyncClient(timeout=HTTP_TIMEOUT)
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=[binding],
        httpx_client=http,
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    client = ClientFactory(config).create(card)
    try:
        yield client
    finally:
        try:
            await client.close()
        finally:
            await http.aclose()


async def send_blocking(
    client: Client, message: Message, *, return_immediately: bool = False
) -> StreamResponse:
    """SendMessage via a non-streaming client; returns the single response."""
    request = SendMessageRequest(
        message=message,
        configuration=SendMessageConfiguration(
            return_immediately=return_immediately
        ),
    )
    responses = [r async for r in client.send_message(request)]
    assert len(responses) == 1, f'expected one response, got {describe(responses)}'
    return responses[0]


async def send_for_task(client: Client, prefix: str, **kw) -> Task:
    msg_kw = {k: kw.pop(k) for k in ('context_id', 'task_id') if k in kw}
    resp = await send_blocking(client, user_message(prefix, **msg_kw), **kw)
    assert kind(resp) == 'task', f'{prefix}: expected a Task, got {kind(resp)}'
    assert resp.task.id, 'task.id must be set'
    assert resp.task.context_id, 'task.contextId must be set'
    return resp.task


# --------------------------------------------------------------------------
# cases (each takes the environment and the binding name from the card)
# --------------------------------------------------------------------------


async def case_card_discovery(env: InteropEnv, binding: str) -> None:
    card = await resolve_card(env)
    assert card.name, 'card.name must be set'
    ifaces = [i for i in card.supported_interfaces if i.protocol_binding == binding]
    assert ifaces, (
        f'card lists no {binding} interface: '
        f'{[(i.protocol_binding, i.url) for i in card.supported_interfaces]}'
    )
    assert ifaces[0].url, f'{binding} interface has no url'
    assert ifaces[0].protocol_version.split('.')[:2] == ['1', '0'], (
        f'{binding} interface protocolVersion is '
        f'{ifaces[0].protocol_version!r}, want 1.0'
    )
    assert card.capabilities.streaming, 'card must advertise streaming=true'

    # Full SDK discovery path: ClientFactory.create_from_url fetches the card
    # itself and selects the interface for the requested binding.
    http = httpx.AsyncClient(timeout=HTTP_TIMEOUT)
    try:
        factory = ClientFactory(
            ClientConfig(
                streaming=False,
                supported_protocol_bindings=[binding],
                httpx_client=http,
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
        )
        client = await factory.create_from_url(env.base_url)
        try:
            resp = await send_blocking(client, user_message('tck-message-response'))
            assert kind(resp) == 'message'
        finally:
            await client.close()
    finally:
        await http.aclose()


async def case_send_complete_task(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        task = await send_for_task(client, 'tck-complete-task')
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, state_name(
            task.status.state
        )
        assert 'Hello from TCK' in all_task_texts(task), (
            f'"Hello from TCK" not found in status message, history or '
            f'artifacts: {all_task_texts(task)}'
        )


async def case_send_artifact_text(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        task = await send_for_task(client, 'tck-artifact-text')
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, state_name(
            task.status.state
        )
        assert task.artifacts, 'completed task has no artifacts'
        assert all(a.artifact_id for a in task.artifacts), 'artifactId missing'
        assert 'Generated text content' in artifact_texts(task), artifact_texts(task)


async def case_send_message_response(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        resp = await send_blocking(client, user_message('tck-message-response'))
        assert kind(resp) == 'message', f'expected a Message, got {kind(resp)}'
        msg = resp.message
        assert msg.role == Role.ROLE_AGENT, Role.Name(msg.role)
        assert msg.message_id, 'message.messageId must be set'
        assert 'Direct message response' in texts(msg.parts), texts(msg.parts)


async def case_stream_lifecycle(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=True) as client:
        request = SendMessageRequest(message=user_message('tck-stream-001'))
        events = await collect(client.send_message(request))
        desc = describe(events)
        assert events and kind(events[0]) == 'task', f'stream must begin with a Task: {desc}'
        task = events[0].task
        assert task.id and task.context_id, 'initial Task needs id and contextId'

        rest = strip_trailing_snapshot(events)[1:]
        assert [kind(e) for e in rest] == [
            'status_update',
            'artifact_update',
            'status_update',
        ], f'unexpected event sequence: {desc}'
        working, artifact, completed = rest
        assert working.status_update.status.state == TaskState.TASK_STATE_WORKING, desc
        assert texts(artifact.artifact_update.artifact.parts) == [
            'Stream hello from TCK'
        ], desc
        assert artifact.artifact_update.artifact.artifact_id, 'artifactId missing'
        assert (
            completed.status_update.status.state == TaskState.TASK_STATE_COMPLETED
        ), desc
        for ev in (working.status_update, artifact.artifact_update, completed.status_update):
            assert ev.task_id == task.id, f'event taskId {ev.task_id} != {task.id}'
            assert ev.context_id == task.context_id, 'event contextId mismatch'

        stored = await client.get_task(GetTaskRequest(id=task.id))
        assert stored.status.state == TaskState.TASK_STATE_COMPLETED
        assert 'Stream hello from TCK' in artifact_texts(stored)


async def case_stream_artifact_chunked(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=True) as client:
        request = SendMessageRequest(message=user_message('tck-stream-artifact-chunked'))
        events = await collect(client.send_message(request))
        desc = describe(events)
        assert events and kind(events[0]) == 'task', f'stream must begin with a Task: {desc}'
        task = events[0].task

        rest = strip_trailing_snapshot(events)[1:]
        assert [kind(e) for e in rest] == [
            'status_update',
            'artifact_update',
            'artifact_update',
            'status_update',
        ], f'unexpected event sequence: {desc}'
        working, first, second, completed = rest
        assert working.status_update.status.state == TaskState.TASK_STATE_WORKING, desc
        c1, c2 = first.artifact_update, second.artifact_update
        assert texts(c1.artifact.parts) == ['chunk-1 '], desc
        assert not c1.last_chunk, f'first chunk must not be lastChunk: {desc}'
        assert texts(c2.artifact.parts) == ['chunk-2'], desc
        assert c2.append, f'second chunk must have append=true: {desc}'
        assert c2.last_chunk, f'second chunk must have lastChunk=true: {desc}'
        assert c1.artifact.artifact_id and (
            c1.artifact.artifact_id == c2.artifact.artifact_id
        ), 'both chunks must carry the same artifactId'
        assert (
            completed.status_update.status.state == TaskState.TASK_STATE_COMPLETED
        ), desc

        stored = await client.get_task(GetTaskRequest(id=task.id))
        arts = [a for a in stored.artifacts if a.artifact_id == c1.artifact.artifact_id]
        assert len(arts) == 1, 'stored task must hold the chunked artifact once'
        assert ''.join(texts(arts[0].parts)) == 'chunk-1 chunk-2', texts(arts[0].parts)


async def case_get_task(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        created = await send_for_task(client, 'tck-complete-task')
        got = await client.get_task(GetTaskRequest(id=created.id))
        assert got.id == created.id
        assert got.context_id == created.context_id
        assert got.status.state == TaskState.TASK_STATE_COMPLETED, state_name(
            got.status.state
        )


async def case_list_tasks(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        t1 = await send_for_task(client, 'tck-complete-task')
        t2 = await send_for_task(client, 'tck-complete-task', context_id=t1.context_id)
        assert t2.context_id == t1.context_id
        assert t2.id != t1.id
        t3 = await send_for_task(client, 'tck-complete-task')
        assert t3.context_id != t1.context_id

        # Filter by contextId: exactly the two tasks of that context.
        page = await client.list_tasks(ListTasksRequest(context_id=t1.context_id))
        ids = [t.id for t in page.tasks]
        assert sorted(ids) == sorted([t1.id, t2.id]), (
            f'contextId filter returned {ids}, want {[t1.id, t2.id]}'
        )
        assert all(t.context_id == t1.context_id for t in page.tasks)
        assert page.total_size == 2, f'totalSize {page.total_size}, want 2'
        # Spec: most recently updated first (checked only when the
        # timestamps differ).
        by_id = {t.id: t for t in page.tasks}
        ts1 = by_id[t1.id].status.timestamp.ToNanoseconds()
        ts2 = by_id[t2.id].status.timestamp.ToNanoseconds()
        if ts1 and ts2 and ts1 != ts2:
            assert ids == [t2.id, t1.id], f'not newest-first: {ids}'

        # Unknown context: empty list.
        empty = await client.list_tasks(ListTasksRequest(context_id=str(uuid.uuid4())))
        assert list(empty.tasks) == [], [t.id for t in empty.tasks]

        # Unfiltered: all three appear (paging through, bounded).
        wanted = {t1.id, t2.id, t3.id}
        seen: set[str] = set()
        token = ''
        for _ in range(20):
            req = ListTasksRequest(page_size=50, page_token=token)
            resp = await client.list_tasks(req)
            seen.update(t.id for t in resp.tasks)
            token = resp.next_page_token
            if wanted <= seen or not token:
                break
        assert wanted <= seen, f'unfiltered ListTasks misses {wanted - seen}'


async def _cancel_input_required(
    env: InteropEnv, binding: str, *, return_immediately: bool
) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        task = await send_for_task(
            client, 'tck-input-required', return_immediately=return_immediately
        )
        if return_immediately:
            assert task.status.state not in TERMINAL, state_name(task.status.state)
        else:
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, (
                state_name(task.status.state)
            )
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.id == task.id
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED, state_name(
            canceled.status.state
        )
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED, state_name(
            got.status.state
        )


async def case_cancel_input_required(env: InteropEnv, binding: str) -> None:
    await _cancel_input_required(env, binding, return_immediately=False)


async def case_cancel_input_required_return_immediately(
    env: InteropEnv, binding: str
) -> None:
    await _cancel_input_required(env, binding, return_immediately=True)


async def case_cancel_completed_not_cancelable(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        task = await send_for_task(client, 'tck-complete-task')
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED


async def case_subscribe_then_cancel(env: InteropEnv, binding: str) -> None:
    async with (
        sdk_client(env, binding, streaming=False) as control,
        sdk_client(env, binding, streaming=True) as watcher,
    ):
        task = await send_for_task(control, 'tck-input-required')
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        stream = watcher.subscribe(SubscribeToTaskRequest(id=task.id)).__aiter__()
        try:
            first = await asyncio.wait_for(stream.__anext__(), STEP_TIMEOUT_S)
        except StopAsyncIteration:
            raise AssertionError('SubscribeToTask stream ended with no event') from None
        assert kind(first) == 'task', f'first event must be the Task, got {kind(first)}'
        assert first.task.id == task.id
        assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, (
            state_name(first.task.status.state)
        )

        # Cancel through another call (and connection) while subscribed.
        canceled = await control.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED

        rest = await collect(stream)
        desc = describe([first, *rest])
        states = [event_state(e) for e in rest]
        assert TaskState.TASK_STATE_CANCELED in states, (
            f'canceled status never arrived on the subscription: {desc}'
        )
        assert states[-1] == TaskState.TASK_STATE_CANCELED, (
            f'stream must end at the canceled status: {desc}'
        )
        for ev in rest:
            if kind(ev) == 'status_update':
                assert ev.status_update.task_id == task.id


async def case_subscribe_terminal_task_unsupported(env: InteropEnv, binding: str) -> None:
    async with (
        sdk_client(env, binding, streaming=False) as control,
        sdk_client(env, binding, streaming=True) as watcher,
    ):
        task = await send_for_task(control, 'tck-complete-task')
        with pytest.raises(UnsupportedOperationError):
            await collect(watcher.subscribe(SubscribeToTaskRequest(id=task.id)))


async def case_get_unknown_task(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=f'no-such-task-{uuid.uuid4()}'))


async def case_cancel_unknown_task(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=False) as client:
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id=f'no-such-task-{uuid.uuid4()}'))


async def case_subscribe_unknown_task(env: InteropEnv, binding: str) -> None:
    async with sdk_client(env, binding, streaming=True) as client:
        with pytest.raises(TaskNotFoundError):
            await collect(
                client.subscribe(SubscribeToTaskRequest(id=f'no-such-task-{uuid.uuid4()}'))
            )


CaseFn = Callable[[InteropEnv, str], Awaitable[None]]

CASES: dict[str, CaseFn] = {
    'card_discovery': case_card_discovery,
    'send_complete_task': case_send_complete_task,
    'send_artifact_text': case_send_artifact_text,
    'send_message_response': case_send_message_response,
    'stream_lifecycle': case_stream_lifecycle,
    'stream_artifact_chunked': case_stream_artifact_chunked,
    'get_task': case_get_task,
    'list_tasks': case_list_tasks,
    'cancel_input_required': case_cancel_input_required,
    'cancel_input_required_return_immediately': case_cancel_input_required_return_immediately,
    'cancel_completed_not_cancelable': case_cancel_completed_not_cancelable,
    'subscribe_then_cancel': case_subscribe_then_cancel,
    'subscribe_terminal_task_unsupported': case_subscribe_terminal_task_unsupported,
    'get_unknown_task_not_found': case_get_unknown_task,
    'cancel_unknown_task_not_found': case_cancel_unknown_task,
    'subscribe_unknown_task_not_found': case_subscribe_unknown_task,
}


@pytest.mark.parametrize('binding', list(BINDINGS), ids=list(BINDINGS))
@pytest.mark.parametrize('case', list(CASES), ids=list(CASES))
async def test_interop(interop_env: InteropEnv, case: str, binding: str) -> None:
    try:
        await asyncio.wait_for(
            CASES[case](interop_env, BINDINGS[binding]), CASE_TIMEOUT_S
        )
    except TimeoutError as e:
        raise AssertionError(
            f'case {case} over {binding} did not finish within {CASE_TIMEOUT_S}s'
        ) from e

"""Interop, the mixed multi-hop: the official Python SDK 0.3 client ->
our agent (the relay example of agentwire-agents, served by agentwire-server,
which speaks 0.3 to its caller) -> the official Python SDK 1.x server
(interop/python/reference_server.py, spoken to in 1.0 by agentwire-client)
-> back, in one test per binding of the 0.3 client.

The relay passes each message on as it came (same messageId, so the far
conformance agent's script applies) and answers with the far agent's
artifacts and a status naming it. Run by multihop.sh, which starts both
servers; A2A_INTEROP_URL is the relay's base URL.
"""

from __future__ import annotations

import pytest

from a2a.types import Task, TaskState

from interop_v03 import BINDINGS, message, sdk_client, send_one

FAR_AGENT = 'A2A reference conformance agent (Python SDK)'


@pytest.mark.parametrize('binding', BINDINGS)
async def test_multihop(base_url: str, binding: str) -> None:
    async with sdk_client(base_url, binding) as (client, card, _):
        assert card.name == 'Relay'
        task, update = await send_one(client, message('tck-artifact-text'))
        assert isinstance(task, Task), task
        assert update is None
        assert task.status.state == TaskState.completed, task
        # What the far agent (another SDK, protocol 1.0) produced, in the
        # 0.3 form the client reads.
        texts = [p.root.text for a in task.artifacts for p in a.parts]
        assert 'Generated text content' in texts, task
        assert task.artifacts[0].name == 'text-artifact', task
        said = ''.join(p.root.text for p in task.status.message.parts)
        assert said.startswith(f'relayed to {FAR_AGENT}'), said

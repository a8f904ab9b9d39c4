"""Fixtures for the A2A interop suite.

The agent under test is named by A2A_INTEROP_URL (its base URL, e.g.
http://127.0.0.1:8080; the card is fetched from
<base>/.well-known/agent-card.json and every interface URL comes from the
card). When A2A_INTEROP_URL is unset, the Python-SDK reference server in
reference_server.py is started on free loopback ports for the session, so
`pytest` alone validates the suite itself.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest


HERE = Path(__file__).resolve().parent
CARD_PATH = '/.well-known/agent-card.json'
STARTUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class InteropEnv:
    base_url: str
    card_json: dict


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _wait_for_card(base_url: str, proc: subprocess.Popen | None) -> dict:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last_err: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f'reference server exited early with code {proc.returncode}'
            )
        try:
            r = httpx.get(base_url + CARD_PATH, timeout=2.0)
            if r.status_code == 200:
                return r.json()
            last_err = RuntimeError(f'HTTP {r.status_code}')
        except (httpx.HTTPError, ValueError) as e:
            last_err = e
        time.sleep(0.2)
    raise RuntimeError(
        f'agent card at {base_url + CARD_PATH} did not answer within '
        f'{STARTUP_TIMEOUT_S:.0f}s: {last_err}'
    )


@pytest.fixture(scope='session')
def interop_env() -> InteropEnv:
    url = os.environ.get('A2A_INTEROP_URL', '').strip()
    if url:
        base = url.rstrip('/')
        yield InteropEnv(base_url=base, card_json=_wait_for_card(base, None))
        return

    port, grpc_port = _free_port(), _free_port()
    base = f'http://127.0.0.1:{port}'
    log_path = Path(
        os.environ.get('A2A_INTEROP_REFERENCE_LOG', '/tmp/a2a-interop-reference.log')
    )
    with log_path.open('wb') as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(HERE / 'reference_server.py'),
                '--port',
                str(port),
                '--grpc-port',
                str(grpc_port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            card = _wait_for_card(base, proc)
            yield InteropEnv(base_url=base, card_json=card)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

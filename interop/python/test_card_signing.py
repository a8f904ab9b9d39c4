"""Interop: signed agent cards (A2A 8.4) checked by an independent implementation.

`a2a serve --sign-card KEY` signs its card; the official Python SDK's
verifier (`a2a.utils.signing`, PyJWT underneath, its own JCS) verifies it
with the key the card's `jku` names, for an Ed25519 (EdDSA), a P-256 (ES256)
and an RSA (RS256) key, and refuses a changed card. The other way round,
the SDK signs a card and `a2a card get --trust-key` verifies it.

Needs the `a2a` binary under test: A2A_INTEROP_BIN (run.sh sets it; without
it, e.g. in the suite's reference mode, the tests are skipped).
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time

from pathlib import Path

import httpx
import pytest

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt.api_jwk import PyJWK

from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import (
    InvalidSignaturesError,
    create_agent_card_signer,
    create_signature_verifier,
)


BIN = os.environ.get('A2A_INTEROP_BIN', '').strip()
CARD_PATH = '/.well-known/agent-card.json'
STARTUP_S = 30.0

pytestmark = pytest.mark.skipif(
    not BIN, reason='needs the a2a binary: set A2A_INTEROP_BIN (run.sh does)'
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _public_pem(key) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM,
        serialization.PublicFormat.SubjectPublicKeyInfo,
    )


KEYS = {
    'EdDSA': lambda: ed25519.Ed25519PrivateKey.generate(),
    'ES256': lambda: ec.generate_private_key(ec.SECP256R1()),
    'RS256': lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
}


class Served:
    """`a2a serve --agent echo --sign-card KEY` on a free loopback port."""

    def __init__(self, key_file: Path, log: Path):
        self.port = _free_port()
        self.base = f'http://127.0.0.1:{self.port}'
        self._log = log.open('wb')
        self.proc = subprocess.Popen(
            [
                BIN, 'serve', '--agent', 'echo', '--store', 'memory',
                '--port', str(self.port), '--sign-card', str(key_file),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + STARTUP_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f'a2a serve exited with {self.proc.returncode}: {log.read_text()}')
            try:
                r = httpx.get(self.base + CARD_PATH, timeout=2.0)
                if r.status_code == 200:
                    self.card_json = r.json()
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('a2a serve did not answer in time')
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()


def _jwks_key_provider(kid, jku):
    assert jku, 'the signature names its JWKS (jku)'
    jwks = httpx.get(jku, timeout=5.0).json()
    for k in jwks['keys']:
        if k.get('kid') == kid:
            return PyJWK(k)
    raise AssertionError(f'no key {kid} in {jku}')


def _card(card_json: dict) -> AgentCard:
    return ParseDict(card_json, AgentCard(), ignore_unknown_fields=True)


@pytest.mark.parametrize('alg', sorted(KEYS))
def test_the_sdk_verifies_a_card_signed_by_a2a_serve(alg: str, tmp_path: Path) -> None:
    key_file = tmp_path / 'card-key.pem'
    key_file.write_bytes(_pem(KEYS[alg]()))
    served = Served(key_file, tmp_path / 'serve.log')
    try:
        sigs = served.card_json.get('signatures') or []
        assert len(sigs) == 1, served.card_json
        verify = create_signature_verifier(_jwks_key_provider, [alg])
        verify(_card(served.card_json))  # raises when no signature verifies
        # A changed card is refused.
        changed = dict(served.card_json, name='Someone else')
        with pytest.raises(InvalidSignaturesError):
            verify(_card(changed))
    finally:
        served.stop()


def test_a2a_card_get_verifies_a_card_signed_by_the_sdk(tmp_path: Path) -> None:
    # Any 1.0 card will do: the one a2a serve writes for the echo agent,
    # without its own signature, signed by the SDK with a P-256 key.
    served_key = tmp_path / 'served.pem'
    served_key.write_bytes(_pem(KEYS['EdDSA']()))
    served = Served(served_key, tmp_path / 'serve.log')
    try:
        card = _card(served.card_json)
    finally:
        served.stop()
    del card.signatures[:]
    key = KEYS['ES256']()
    sign = create_agent_card_signer(
        signing_key=_pem(key),
        protected_header={'kid': 'sdk-key-1', 'alg': 'ES256', 'typ': 'JOSE'},
    )
    signed = sign(card)
    card_file = tmp_path / 'agent-card.json'
    import json

    card_file.write_text(json.dumps(MessageToDict(signed)))
    public = tmp_path / 'sdk-key.pub.pem'
    public.write_bytes(_public_pem(key))
    home = tempfile.mkdtemp(dir=tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith('A2A')}
    env['HOME'] = home
    out = subprocess.run(
        [BIN, 'card', 'get', '-a', str(card_file), '--trust-key', str(public)],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith('Signature: '))
    assert line.startswith('Signature: verified (ES256, key sdk-key-1'), out.stdout
    # With another key: unverified.
    other = tmp_path / 'other.pub.pem'
    other.write_bytes(_public_pem(KEYS['ES256']()))
    out = subprocess.run(
        [BIN, 'card', 'get', '-a', str(card_file), '--trust-key', str(other)],
        capture_output=True, text=True, timeout=60, env=env,
    )
    line = next(l for l in out.stdout.splitlines() if l.startswith('Signature: '))
    assert line.startswith('Signature: unverified: '), out.stdout

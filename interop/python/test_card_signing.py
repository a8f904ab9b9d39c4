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
        # Fetched without A2A-Version: the card for 0.3 clients, with a
        # signature of its own and the 1.0 card's.
        sigs = served.card_json.get('signatures') or []
        assert len(sigs) == 2, served.card_json
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


# --- Both forms, both directions (the SDK form: null and empty values out) ---

import json
import math
from decimal import Decimal

from a2a.client.card_resolver import parse_agent_card
from jwt.utils import base64url_decode, base64url_encode


def _es_number(x) -> str:
    """ECMAScript's Number::toString of a double (RFC 8785 3.2.2.3)."""
    x = float(x)
    assert math.isfinite(x)
    if x == 0:
        return '0'
    if x < 0:
        return '-' + _es_number(-x)
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    d = ''.join(map(str, digits))
    k, n = len(d), len(d) + exp
    if k <= n <= 21:
        return d + '0' * (n - k)
    if 0 < n <= 21:
        return d[:n] + '.' + d[n:]
    if -6 < n <= 0:
        return '0.' + '0' * -n + d
    e = n - 1
    return d[0] + ('.' + d[1:] if k > 1 else '') + 'e' + ('+' if e >= 0 else '-') + str(abs(e))


def _jcs(v) -> str:
    """RFC 8785, written here (neither the SDK's nor the project's)."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, (int, float)):
        return _es_number(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return '[' + ','.join(_jcs(x) for x in v) + ']'
    items = sorted(v.items(), key=lambda kv: kv[0].encode('utf-16-be'))
    return '{' + ','.join(json.dumps(k, ensure_ascii=False) + ':' + _jcs(x) for k, x in items) + '}'


def test_the_test_s_jcs() -> None:
    assert [_es_number(x) for x in (1e21, 1e-7, 0.1, -0.0, 1.0, 12345678901234567890, 4.5, 1e20)] == [
        '1e+21', '1e-7', '0.1', '0', '1', '12345678901234567000', '4.5', '100000000000000000000']
    assert _jcs({'\U0001f600': 1, '\ufb33': 2, 'é': [None, '\x01']}) == '{"é":[null,"\\u0001"],"\U0001f600":1,"\ufb33":2}'


def _rfc8785_verifies(card_json: dict, keys: dict) -> bool:
    """Whether a signature of the card verifies over its RFC 8785 form as it is."""
    doc = {k: v for k, v in card_json.items() if k != 'signatures'}
    payload = base64url_encode(_jcs(doc).encode('utf-8')).decode()
    for sig in card_json.get('signatures') or []:
        header = json.loads(base64url_decode(sig['protected'].encode()))
        key = keys.get(header.get('kid'))
        if key is None:
            continue
        try:
            api_jws.decode_complete(
                f"{sig['protected']}.{payload}.{sig['signature']}".encode(),
                key=key, algorithms=[header['alg']],
            )
            return True
        except PyJWTError:
            continue
    return False


from jwt import api_jws
from jwt.exceptions import PyJWTError


@pytest.mark.parametrize('version', [None, '1.0'])
def test_each_served_form_verifies_as_served_and_in_the_sdk(version, tmp_path: Path) -> None:
    key_file = tmp_path / 'card-key.pem'
    key_file.write_bytes(_pem(KEYS['ES256']()))
    served = Served(key_file, tmp_path / 'serve.log')
    try:
        headers = {'A2A-Version': version} if version else {}
        r = httpx.get(served.base + CARD_PATH, headers=headers, timeout=5.0)
        assert r.headers['vary'] == 'A2A-Version'
        assert 'max-age=' in r.headers['cache-control']
        card_json = r.json()
        assert ('url' in card_json) == (version is None), card_json
        jwks = httpx.get(served.base + '/.well-known/jwks.json', timeout=5.0).json()
        keys = {k['kid']: PyJWK(k) for k in jwks['keys']}
        assert _rfc8785_verifies(card_json, keys), card_json
        verify = create_signature_verifier(_jwks_key_provider, ['ES256'])
        verify(parse_agent_card(dict(card_json)))
    finally:
        served.stop()


def _awkward_card(base_card: dict) -> dict:
    card = {k: v for k, v in base_card.items()
            if k not in ('signatures', 'url', 'preferredTransport', 'additionalInterfaces',
                         'protocolVersion')}
    card['description'] = 'Grüße — 日本語 — 🦀 "quoted" \\ back'
    card.setdefault('capabilities', {})['extensions'] = [{
        'uri': 'https://example.com/ext/awkward',
        'params': {
            'none': None, 'empty': '', 'list': [], 'object': {},
            'nested': {'gone': None, 'also': [None, '']},
            'kept': {'big': 1e21, 'tenth': 0.1, 'negzero': -0.0, 'one': 1.0,
                     'large': 12345678901234567890, 'zero': 0, 'no': False,
                     '\U00010000': 'astral', '\uffff': 'bmp', 'ключ': 'значение'},
        },
    }]
    return card


@pytest.fixture(scope='module')
def base_card(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp('base')
    key_file = tmp / 'k.pem'
    key_file.write_bytes(_pem(KEYS['EdDSA']()))
    served = Served(key_file, tmp / 'serve.log')
    try:
        return httpx.get(served.base + CARD_PATH, headers={'A2A-Version': '1.0'}, timeout=5.0).json()
    finally:
        served.stop()


def _run(args, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith('A2A')}
    env['HOME'] = tempfile.mkdtemp(dir=tmp_path)
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize('form', ['both', 'sdk', 'rfc8785'])
@pytest.mark.parametrize('alg', ['EdDSA', 'ES256'])
def test_a_card_signed_by_a2a_verifies_in_the_sdk(form, alg, base_card, tmp_path: Path) -> None:
    key = KEYS[alg]()
    (tmp_path / 'k.pem').write_bytes(_pem(key))
    (tmp_path / 'card.json').write_text(json.dumps(_awkward_card(base_card), ensure_ascii=False))
    out = _run(['card', 'sign', '-a', str(tmp_path / 'card.json'), '--signing-key', str(tmp_path / 'k.pem'),
                '--card-signature-form', form], tmp_path)
    assert out.returncode == 0, out.stderr
    signed = json.loads(out.stdout)
    assert len(signed['signatures']) == (2 if form == 'both' else 1)
    public = PyJWK.from_json(json.dumps(_jwk_of(key)))
    verify = create_signature_verifier(lambda kid, jku: public, [alg])
    if form == 'rfc8785':
        # The SDK drops null and empty values before canonicalizing: a card
        # holding some does not verify there in the RFC 8785 form alone.
        with pytest.raises(InvalidSignaturesError):
            verify(parse_agent_card(dict(signed)))
    else:
        verify(parse_agent_card(dict(signed)))
    kid = json.loads(base64url_decode(signed['signatures'][0]['protected'].encode()))['kid']
    assert _rfc8785_verifies(signed, {kid: public}) == (form != 'sdk')


def _jwk_of(key) -> dict:
    from jwt.algorithms import ECAlgorithm, OKPAlgorithm
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return json.loads(OKPAlgorithm.to_jwk(key.public_key()))
    return json.loads(ECAlgorithm.to_jwk(key.public_key()))


@pytest.mark.parametrize('alg', ['EdDSA', 'ES256'])
def test_a_card_signed_by_the_sdk_with_null_values_verifies_in_a2a(alg, base_card, tmp_path: Path) -> None:
    card = parse_agent_card(_awkward_card(base_card))
    key = KEYS[alg]()
    sign = create_agent_card_signer(
        signing_key=_pem(key),
        protected_header={'kid': 'sdk-key-1', 'alg': alg, 'typ': 'JOSE'},
    )
    signed = MessageToDict(sign(card))
    assert signed['capabilities']['extensions'][0]['params']['none'] is None
    (tmp_path / 'card.json').write_text(json.dumps(signed, ensure_ascii=False))
    (tmp_path / 'k.pub.pem').write_bytes(_public_pem(key))
    out = _run(['card', 'get', '-a', str(tmp_path / 'card.json'), '--trust-key', str(tmp_path / 'k.pub.pem')], tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith('Signature: '))
    assert line.startswith(f'Signature: verified ({alg}, key sdk-key-1'), out.stdout

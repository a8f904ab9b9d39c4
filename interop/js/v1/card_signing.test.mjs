// Interop: signed agent cards (A2A 8.4) between the project and the official
// JavaScript SDK (npm @a2a-js/sdk 1.x: generateAgentCardSignature,
// verifyAgentCardSignature, its own JCS after its own normalisation: fields
// outside the v1.0 schema, protobuf defaults, null and empty values out).
//
// Both directions, with cards holding non-ASCII text, awkward numbers, and
// empty and null values:
// - the project signs (`a2a serve --sign-card`, and `a2a card sign
//   --card-signature-form rfc8785|sdk|both`) -> the SDK verifies (the
//   rfc8785 form alone is refused there when the card holds null or empty
//   values: the SDK drops them before canonicalising; see
//   docs/card-signing.md);
// - the SDK signs -> `a2a card get --trust-key` verifies.
//
// Needs A2A_INTEROP_BIN, the `a2a` binary under test (card_signing.sh sets
// it). Test names are "<direction> :: <case>" for ../table-reporter.mjs.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  createPublicKey,
  generateKeyPairSync,
} from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  generateAgentCardSignature,
  verifyAgentCardSignature,
} from '@a2a-js/sdk';

const BIN = process.env.A2A_INTEROP_BIN;
if (!BIN) {
  throw new Error('set A2A_INTEROP_BIN to the a2a binary (card_signing.sh does it)');
}
const CARD_PATH = '/.well-known/agent-card.json';
const STARTUP_MS = 30_000;
const CASE_MS = 60_000;

const WORK = mkdtempSync(join(tmpdir(), 'a2a-js-signing-'));
after(() => rmSync(WORK, { recursive: true, force: true }));

const KEYS = {
  EdDSA: () => generateKeyPairSync('ed25519'),
  ES256: () => generateKeyPairSync('ec', { namedCurve: 'P-256' }),
};

function pem(privateKey) {
  return privateKey.export({ type: 'pkcs8', format: 'pem' });
}

function publicPem(publicKey) {
  return publicKey.export({ type: 'spki', format: 'pem' });
}

let fileCounter = 0;
function file(name, text) {
  fileCounter += 1;
  const path = join(WORK, `${fileCounter}-${name}`);
  writeFileSync(path, text);
  return path;
}

/** Runs `a2a ARGS` in a home of its own; {status, stdout, stderr}. */
function a2a(args) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('A2A')),
  );
  env.HOME = mkdtempSync(join(WORK, 'home-'));
  const r = spawnSync(BIN, args, { env, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** `a2a serve --agent echo --sign-card KEY` on a free loopback port. */
async function serveSigned(keyFile) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(
    BIN,
    ['serve', '--agent', 'echo', '--store', 'memory', '--port', String(port), '--sign-card', keyFile],
    { stdio: 'ignore' },
  );
  const deadline = Date.now() + STARTUP_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`a2a serve exited with ${child.exitCode}`);
    try {
      const r = await fetch(base + CARD_PATH, { signal: AbortSignal.timeout(2000) });
      if (r.status === 200) return { base, stop: () => child.kill() };
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  child.kill();
  throw new Error('a2a serve did not answer in time');
}

/** The SDK's verifier with the keys of the JWKS each signature names (jku). */
const jwksVerifier = verifyAgentCardSignature(async (kid, jku) => {
  assert.ok(jku, 'the signature names its JWKS (jku)');
  const jwks = await (await fetch(jku, { signal: AbortSignal.timeout(5000) })).json();
  const jwk = jwks.keys.find((k) => k.kid === kid);
  assert.ok(jwk, `no key ${kid} in ${jku}`);
  return createPublicKey({ key: jwk, format: 'jwk' });
});

/** The SDK's verifier with one public key. */
const keyVerifier = (publicKey) => verifyAgentCardSignature(async () => publicKey);

/** Whether the SDK verifies the card (its verifier throws when not). */
async function sdkVerifies(verify, card) {
  const quiet = console.debug;
  console.debug = () => {}; // the SDK logs each failed entry
  try {
    await verify(card);
    return true;
  } catch {
    return false;
  } finally {
    console.debug = quiet;
  }
}

// A 1.0 card of the project's echo agent, unsigned by us afterwards.
let baseCard;
before(async () => {
  const key = KEYS.EdDSA();
  const served = await serveSigned(file('base-key.pem', pem(key.privateKey)));
  try {
    const r = await fetch(served.base + CARD_PATH, { headers: { 'A2A-Version': '1.0' } });
    baseCard = await r.json();
  } finally {
    served.stop();
  }
});

/** The card with non-ASCII text, awkward numbers, empty and null values. */
function awkwardCard() {
  const card = structuredClone(baseCard);
  delete card.signatures;
  card.description = 'Grüße — 日本語 — 🦀 "quoted" \\ back';
  card.capabilities = card.capabilities ?? {};
  card.capabilities.extensions = [
    {
      uri: 'https://example.com/ext/awkward',
      params: {
        none: null,
        empty: '',
        list: [],
        object: {},
        nested: { gone: null, also: [null, ''] },
        kept: {
          big: 1e21,
          tenth: 0.1,
          small: 1e-7,
          negzero: -0,
          one: 1.0,
          large: 12345678901234567890,
          zero: 0,
          no: false,
          '\u{10000}': 'astral',
          '\uffff': 'bmp',
          ключ: 'значение',
        },
      },
    },
  ];
  return card;
}

for (const alg of Object.keys(KEYS)) {
  test(`project signs :: a2a serve --sign-card (${alg}), both served forms`, { timeout: CASE_MS }, async () => {
    const key = KEYS[alg]();
    const served = await serveSigned(file('serve-key.pem', pem(key.privateKey)));
    try {
      for (const headers of [{ 'A2A-Version': '1.0' }, {}]) {
        const card = await (await fetch(served.base + CARD_PATH, { headers })).json();
        assert.ok(card.signatures?.length >= 1, JSON.stringify(card));
        assert.ok(await sdkVerifies(jwksVerifier, card), `not verified: ${JSON.stringify(headers)}`);
        const changed = { ...card, name: 'Someone else' };
        assert.equal(await sdkVerifies(jwksVerifier, changed), false, 'a changed card verifies');
      }
    } finally {
      served.stop();
    }
  });

  for (const form of ['both', 'sdk', 'rfc8785']) {
    test(`project signs :: a2a card sign --card-signature-form ${form} (${alg})`, { timeout: CASE_MS }, async () => {
      const key = KEYS[alg]();
      const cardFile = file('card.json', JSON.stringify(awkwardCard()));
      const keyFile = file('key.pem', pem(key.privateKey));
      const out = a2a(['card', 'sign', '-a', cardFile, '--signing-key', keyFile, '--card-signature-form', form]);
      assert.equal(out.status, 0, out.stderr);
      const signed = JSON.parse(out.stdout);
      assert.equal(signed.signatures.length, form === 'both' ? 2 : 1);
      const verified = await sdkVerifies(keyVerifier(key.publicKey), signed);
      // The SDK drops null and empty values before canonicalising: the
      // RFC 8785 form alone does not verify there for this card.
      assert.equal(verified, form !== 'rfc8785', `form ${form}`);
      // And the project verifies what it signed, whatever the form.
      const pub = file('key.pub.pem', publicPem(key.publicKey));
      const back = a2a(['card', 'get', '-a', file('signed.json', out.stdout), '--trust-key', pub]);
      assert.equal(back.status, 0, back.stderr);
      assert.match(back.stdout, new RegExp(`^Signature: verified \\(${alg}`, 'm'));
    });
  }

  test(`SDK signs :: a2a card get --trust-key verifies (${alg}, null and empty values)`, { timeout: CASE_MS }, async () => {
    const key = KEYS[alg]();
    const sign = generateAgentCardSignature(key.privateKey, { alg, kid: 'sdk-key-1', typ: 'JOSE' });
    const signed = await sign(awkwardCard());
    assert.equal(signed.capabilities.extensions[0].params.none, null);
    const cardFile = file('sdk-signed.json', JSON.stringify(signed));
    const pub = file('sdk-key.pub.pem', publicPem(key.publicKey));
    const out = a2a(['card', 'get', '-a', cardFile, '--trust-key', pub]);
    assert.equal(out.status, 0, out.stderr);
    assert.match(out.stdout, new RegExp(`^Signature: verified \\(${alg}, key sdk-key-1`, 'm'));
    // With another key: unverified, and --require-signature fails.
    const other = file('other.pub.pem', publicPem(KEYS[alg]().publicKey));
    const bad = a2a(['card', 'get', '-a', cardFile, '--trust-key', other]);
    assert.match(bad.stdout, /^Signature: unverified: /m);
    const required = a2a(['card', 'get', '-a', cardFile, '--trust-key', other, '--require-signature']);
    assert.equal(required.status, 1, required.stderr);
    // A changed card no longer verifies.
    const changed = JSON.parse(readFileSync(cardFile, 'utf8'));
    changed.description = 'changed';
    const out2 = a2a(['card', 'get', '-a', file('changed.json', JSON.stringify(changed)), '--trust-key', pub]);
    assert.match(out2.stdout, /^Signature: unverified: /m);
  });
}

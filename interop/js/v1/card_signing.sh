#!/usr/bin/env bash
# Interop: signed agent cards between the project and the official
# JavaScript A2A SDK 1.x (npm @a2a-js/sdk, pinned in package-lock.json), in
# both directions: the project signs (a2a serve --sign-card, a2a card sign
# --card-signature-form rfc8785|sdk|both) and the SDK verifies; the SDK signs
# and a2a card get --trust-key verifies. Cards with non-ASCII text, awkward
# numbers, empty and null values (see card_signing.test.mjs).
#
# Usage:
#   interop/js/v1/card_signing.sh [A2A_BINARY] [NODE_TEST_ARGS...]
#
#   A2A_BINARY  the `a2a` binary to test (default: target/debug/a2a under the
#               repo root); the tests start their own `a2a serve` processes
#               on free loopback ports.
#
# Exit code: node --test's (0 = all passed); 2 for setup problems.
set -euo pipefail

SDK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JS_DIR="$(cd "$SDK_DIR/.." && pwd)"
REPO_ROOT="$(cd "$JS_DIR/../.." && pwd)"
LOG_TAG=js-v1-signing
RUN_TIMEOUT="${A2A_INTEROP_TIMEOUT:-600}"
# shellcheck source=../common.sh
source "$JS_DIR/common.sh"

BIN="$REPO_ROOT/target/debug/a2a"
if [[ $# -gt 0 && "$1" != -* ]]; then
  BIN="$1"
  shift
fi
if [[ ! -x "$BIN" ]]; then
  log "a2a binary not found or not executable: $BIN (build it with cargo first)"
  exit 2
fi
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

js_install

log "signing matrix: JS SDK @a2a-js/sdk $(node -p 'require("'"$SDK_DIR"'/node_modules/@a2a-js/sdk/package.json").version') <-> $BIN"
cd "$SDK_DIR"
A2A_INTEROP_BIN="$BIN" \
  A2A_INTEROP_TITLE="Card signatures: the project <-> JS SDK @a2a-js/sdk" \
  timeout --kill-after=10 "$RUN_TIMEOUT" node --test \
  --test-reporter=spec --test-reporter-destination=stderr \
  --test-reporter="$JS_DIR/table-reporter.mjs" --test-reporter-destination=stdout \
  "$@" card_signing.test.mjs

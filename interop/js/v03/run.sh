#!/usr/bin/env bash
# Interop: the official JavaScript A2A SDK 0.3 client (npm @a2a-js/sdk, pinned
# in package-lock.json) against the 0.3 layer of our Rust agent, over JSON-RPC, HTTP+JSON and
# gRPC. Prints the binding x case table.
#
# Usage:
#   interop/js/v03/run.sh [SERVER_BINARY] [NODE_TEST_ARGS...]
#   interop/js/v03/run.sh --reference [NODE_TEST_ARGS...]
#
#   SERVER_BINARY  the `a2a` binary to test (default: target/debug/a2a under the
#                  repo root), started as
#                    SERVER_BINARY serve --agent conformance --port <free port>
#                  on 127.0.0.1 and stopped when the tests end.
#   --reference    run the suite against the same SDK's own server
#                  (reference_server.mjs) instead, to validate the suite itself.
#   NODE_TEST_ARGS e.g. --test-name-pattern='grpc ::'
#
# Environment:
#   A2A_INTEROP_LOG      server log (default: <repo>/target/a2a-js-v03-server.log)
#   A2A_INTEROP_TIMEOUT  overall bound on the test run, seconds (default: 600)
#
# Exit code: node --test's (0 = all passed); 2 for setup problems.
set -euo pipefail

SDK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JS_DIR="$(cd "$SDK_DIR/.." && pwd)"
REPO_ROOT="$(cd "$JS_DIR/../.." && pwd)"
LOG_TAG=js-v03
LOG="${A2A_INTEROP_LOG:-$REPO_ROOT/target/a2a-js-v03-server.log}"
RUN_TIMEOUT="${A2A_INTEROP_TIMEOUT:-600}"
# shellcheck source=../common.sh
source "$JS_DIR/common.sh"

MODE=binary
BIN="$REPO_ROOT/target/debug/a2a"
if [[ $# -gt 0 && "$1" == "--reference" ]]; then
  MODE=reference
  shift
elif [[ $# -gt 0 && "$1" != -* ]]; then
  BIN="$1"
  shift
fi

js_install
trap stop_all EXIT INT TERM

PORT="$(free_port)"
BASE_URL="http://127.0.0.1:$PORT"
if [[ "$MODE" == reference ]]; then
  log "starting the JS SDK reference server on $BASE_URL"
  start_bg "$LOG" node "$SDK_DIR/reference_server.mjs" --port "$PORT" --grpc-port "$(free_port)"
else
  if [[ ! -x "$BIN" ]]; then
    log "server binary not found or not executable: $BIN (build it with cargo first)"
    exit 2
  fi
  STORE_DIR="$(mktemp -d)"
  log "starting $BIN serve --agent conformance --port $PORT --store sqlite:$STORE_DIR/tasks.db"
  start_bg "$LOG" "$BIN" serve --agent conformance --port "$PORT" --store "sqlite:$STORE_DIR/tasks.db"
fi
if ! wait_card "$BASE_URL/.well-known/agent-card.json" 30 "$BG_PID"; then
  log "the server did not come up; last lines of $LOG:"
  tail -n 40 "$LOG" >&2 || true
  exit 2
fi

log "running the JS SDK 0.3 client against $BASE_URL"
set +e
(
  cd "$SDK_DIR"
  A2A_INTEROP_REFERENCE="$([[ "$MODE" == reference ]] && echo 1 || echo 0)" \
    A2A_INTEROP_URL="$BASE_URL" \
    A2A_INTEROP_TITLE="JS SDK @a2a-js/sdk $(node -p 'require("./node_modules/@a2a-js/sdk/package.json").version') client -> ${MODE/binary/our server} (protocol 0.3)" \
    timeout --kill-after=10 "$RUN_TIMEOUT" node --test \
    --test-reporter=spec --test-reporter-destination=stderr \
    --test-reporter="$JS_DIR/table-reporter.mjs" --test-reporter-destination=stdout \
    "$@" client.test.mjs
)
RC=$?
set -e
if [[ $RC -ne 0 ]]; then
  log "node --test exited $RC; server log: $LOG (last lines below)"
  tail -n 40 "$LOG" >&2 || true
fi
exit $RC

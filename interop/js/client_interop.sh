#!/usr/bin/env bash
# Interop: our Rust client (the `a2a` command over agentwire-client) against
# the official JavaScript A2A SDK's servers: the 1.x server (v1/, protocol 1.0)
# over JSON-RPC, HTTP+JSON and gRPC, and the 0.3 server (v03/, protocol 0.3)
# with --allow-v03.
#
# Usage: interop/js/client_interop.sh [CARGO_TEST_ARGS...]
#
# Installs the pinned packages (npm ci), starts both reference servers on free
# loopback ports, waits for their agent cards, then runs
#   cargo test -p agentwire-cli --test interop_js
# with A2A_INTEROP_JS_URL and A2A_INTEROP_JS_V03_URL pointing at them, and
# stops the servers. Server logs: <repo>/target/a2a-js-reference-{v1,v03}.log.
# Exit code: cargo's (0 = all passed); 2 for setup problems.
set -euo pipefail

JS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$JS_DIR/../.." && pwd)"
LOG_TAG=js-client-interop
# shellcheck source=common.sh
source "$JS_DIR/common.sh"

for v in v1 v03; do
  SDK_DIR="$JS_DIR/$v" js_install
done
trap stop_all EXIT INT TERM

start_reference() { # VERSION -> sets REF_URL
  local v="$1" port grpc_port logfile
  port="$(free_port)"
  grpc_port="$(free_port)"
  logfile="$REPO_ROOT/target/a2a-js-reference-$v.log"
  log "starting the JS SDK $v reference server on http://127.0.0.1:$port (gRPC on $grpc_port)"
  start_bg "$logfile" node "$JS_DIR/$v/reference_server.mjs" --port "$port" --grpc-port "$grpc_port"
  if ! wait_card "http://127.0.0.1:$port/.well-known/agent-card.json" 30 "$BG_PID"; then
    log "the $v reference server did not come up; last lines of $logfile:"
    tail -n 40 "$logfile" >&2 || true
    exit 2
  fi
  REF_URL="http://127.0.0.1:$port"
}

start_reference v1
V1_URL="$REF_URL"
start_reference v03
V03_URL="$REF_URL"

log "running cargo test -p agentwire-cli --test interop_js against $V1_URL (1.x) and $V03_URL (0.3)"
cd "$REPO_ROOT"
# Build first (a build is not bounded), then bound the run itself.
cargo test --locked -p agentwire-cli --test interop_js --no-run >&2 \
  || { log "building the interop_js tests failed"; exit 2; }
set +e
A2A_INTEROP_JS_URL="$V1_URL" A2A_INTEROP_JS_V03_URL="$V03_URL" \
  timeout --kill-after=10 900 cargo test --locked -p agentwire-cli --test interop_js "$@" -- --nocapture
RC=$?
set -e
if [[ $RC -ne 0 ]]; then
  log "cargo test exited $RC; server logs: $REPO_ROOT/target/a2a-js-reference-{v1,v03}.log"
fi
exit $RC

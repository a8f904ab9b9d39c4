#!/usr/bin/env bash
# Interop: our Rust client (the `a2a` command over agentwire-client) against the
# official Python A2A SDK's server (reference_server.py, PyPI a2a-sdk 1.x)
# over JSON-RPC, HTTP+JSON and gRPC.
#
# Usage: interop/python/client_interop.sh [CARGO_TEST_ARGS...]
#
# Starts reference_server.py on free loopback ports (venv as in run.sh),
# waits for its agent card, then runs
#   cargo test -p agentwire-cli --test interop_python
# with A2A_INTEROP_PY_URL pointing at it, and stops the server.
# Exit code: cargo's (0 = all passed); 2 for setup problems.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${A2A_INTEROP_VENV:-$REPO_ROOT/.venv-interop}"
PYTHON_BOOT="${A2A_INTEROP_PYTHON:-python3}"
LOG="${A2A_INTEROP_CLIENT_LOG:-$REPO_ROOT/target/a2a-interop-reference-server.log}"
STARTUP_WAIT=60

log() { echo "[client-interop] $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV"
  "$PYTHON_BOOT" -m venv "$VENV" || { log "cannot create venv"; exit 2; }
fi
PY="$VENV/bin/python"
if ! "$PY" -c 'import a2a, uvicorn, grpc' 2>/dev/null; then
  log "installing requirements into $VENV"
  timeout 600 "$PY" -m pip install --disable-pip-version-check -q \
    -r "$HERE/requirements.txt" || { log "pip install failed"; exit 2; }
fi

SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

PORT="$(free_port)"
GRPC_PORT="$(free_port)"
BASE_URL="http://127.0.0.1:$PORT"
mkdir -p "$(dirname "$LOG")"
log "starting the Python SDK reference server on $BASE_URL (gRPC on $GRPC_PORT)"
"$PY" "$HERE/reference_server.py" --port "$PORT" --grpc-port "$GRPC_PORT" >"$LOG" 2>&1 &
SERVER_PID=$!

CARD_URL="$BASE_URL/.well-known/agent-card.json"
if ! "$PY" - "$CARD_URL" "$STARTUP_WAIT" "$SERVER_PID" <<'PYEOF'
import os, sys, time, httpx
url, wait, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + wait
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("server process exited")
    try:
        if httpx.get(url, timeout=2.0).status_code == 200:
            sys.exit(0)
    except httpx.HTTPError:
        pass
    time.sleep(0.2)
sys.exit("no answer in time")
PYEOF
then
  log "the reference server did not come up; last lines of $LOG:"
  tail -n 40 "$LOG" >&2 || true
  exit 2
fi

log "running cargo test -p agentwire-cli --test interop_python against $BASE_URL"
set +e
(
  cd "$REPO_ROOT"
  A2A_INTEROP_PY_URL="$BASE_URL" timeout --kill-after=10 900 \
    cargo test --locked -p agentwire-cli --test interop_python "$@" -- --ignored --test-threads=1
)
RC=$?
set -e
if [[ $RC -ne 0 ]]; then
  log "cargo test exited $RC; server log: $LOG (last lines below)"
  tail -n 40 "$LOG" >&2 || true
fi
exit $RC

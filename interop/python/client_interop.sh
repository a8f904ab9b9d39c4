#!/usr/bin/env bash
# Interop: our Rust client (the `a2a` command over agentwire-client) against the
# official Python A2A SDK's servers over JSON-RPC, HTTP+JSON and gRPC: the 1.x
# server (reference_server.py, PyPI a2a-sdk 1.x) and the 0.3 server
# (v03/reference_server.py, a2a-sdk 0.3.x, called with --allow-v03).
#
# Usage: interop/python/client_interop.sh [CARGO_TEST_ARGS...]
#
# Starts both reference servers on free loopback ports (venvs as in run.sh and
# v03/run.sh), waits for their agent cards, then runs
#   cargo test -p agentwire-cli --test interop_python
# with A2A_INTEROP_PY_URL and A2A_INTEROP_PY_V03_URL pointing at them, and
# stops the servers.
# Exit code: cargo's (0 = all passed); 2 for setup problems.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${A2A_INTEROP_VENV:-$REPO_ROOT/.venv-interop}"
VENV_V03="${A2A_INTEROP_V03_VENV:-$REPO_ROOT/.venv-interop-v03}"
LOG_V03="${A2A_INTEROP_CLIENT_V03_LOG:-$REPO_ROOT/target/a2a-interop-reference-server-v03.log}"
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

if [[ ! -x "$VENV_V03/bin/python" ]]; then
  log "creating venv $VENV_V03"
  "$PYTHON_BOOT" -m venv "$VENV_V03" || { log "cannot create venv"; exit 2; }
fi
PY_V03="$VENV_V03/bin/python"
if ! "$PY_V03" -c 'import a2a.server.apps, fastapi, uvicorn, grpc' 2>/dev/null; then
  log "installing the 0.3 requirements into $VENV_V03"
  timeout 600 "$PY_V03" -m pip install --disable-pip-version-check -q \
    -r "$HERE/v03/requirements.txt" || { log "pip install failed"; exit 2; }
fi

SERVER_PIDS=()
stop_pid() {
  local pid="$1"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}
cleanup() {
  for pid in "${SERVER_PIDS[@]}"; do
    stop_pid "$pid"
  done
}
trap cleanup EXIT INT TERM

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_reference PYTHON SCRIPT LOG -> sets REF_URL
start_reference() {
  local py="$1" script="$2" logfile="$3" port grpc_port pid
  port="$(free_port)"
  grpc_port="$(free_port)"
  mkdir -p "$(dirname "$logfile")"
  log "starting $script on http://127.0.0.1:$port (gRPC on $grpc_port)"
  "$py" "$script" --port "$port" --grpc-port "$grpc_port" >"$logfile" 2>&1 &
  pid=$!
  SERVER_PIDS+=("$pid")
  if ! "$PY" - "http://127.0.0.1:$port/.well-known/agent-card.json" "$STARTUP_WAIT" "$pid" <<'PYEOF'
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
    log "$script did not come up; last lines of $logfile:"
    tail -n 40 "$logfile" >&2 || true
    exit 2
  fi
  REF_URL="http://127.0.0.1:$port"
}

start_reference "$PY" "$HERE/reference_server.py" "$LOG"
BASE_URL="$REF_URL"
start_reference "$PY_V03" "$HERE/v03/reference_server.py" "$LOG_V03"
V03_URL="$REF_URL"

log "running cargo test -p agentwire-cli --test interop_python against $BASE_URL (1.x) and $V03_URL (0.3)"
set +e
(
  cd "$REPO_ROOT"
  A2A_INTEROP_PY_URL="$BASE_URL" A2A_INTEROP_PY_V03_URL="$V03_URL" timeout --kill-after=10 900 \
    cargo test --locked -p agentwire-cli --test interop_python "$@" -- --ignored --test-threads=1
)
RC=$?
set -e
if [[ $RC -ne 0 ]]; then
  log "cargo test exited $RC; server logs: $LOG, $LOG_V03 (last lines below)"
  tail -n 40 "$LOG" "$LOG_V03" >&2 || true
fi
exit $RC

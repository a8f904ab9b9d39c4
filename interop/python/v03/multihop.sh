#!/usr/bin/env bash
# Interop, the mixed multi-hop: the official Python SDK 0.3 client (a2a-sdk
# 0.3.x, the venv of run.sh) -> our relay agent (the `relay` example of
# agentwire-agents) -> the official Python SDK 1.x server
# (interop/python/reference_server.py, the venv of ../run.sh) -> back.
#
# Usage:
#   interop/python/v03/multihop.sh [RELAY_BINARY] [PYTEST_ARGS...]
#
#   RELAY_BINARY  the relay example (default: target/debug/examples/relay
#                 under the repo root; build it with
#                 cargo build -p agentwire-agents --example relay)
#
# Environment: A2A_INTEROP_V03_VENV and A2A_INTEROP_VENV (the two venvs, as
# in run.sh and ../run.sh), A2A_INTEROP_PYTHON, A2A_INTEROP_TIMEOUT.
# Exit code: pytest's (0 = all passed); 2 for setup problems.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY_DIR="$(cd "$HERE/.." && pwd)"
REPO_ROOT="$(cd "$HERE/../../.." && pwd)"
VENV03="${A2A_INTEROP_V03_VENV:-$REPO_ROOT/.venv-interop-v03}"
VENV1="${A2A_INTEROP_VENV:-$REPO_ROOT/.venv-interop}"
PYTHON_BOOT="${A2A_INTEROP_PYTHON:-python3}"
PYTEST_TIMEOUT="${A2A_INTEROP_TIMEOUT:-300}"
LOG_DIR="$REPO_ROOT/target"

BIN="$REPO_ROOT/target/debug/examples/relay"
if [[ $# -gt 0 && "$1" != -* ]]; then
  BIN="$1"
  shift
fi

log() { echo "[interop-multihop] $*" >&2; }

# venv DIR REQUIREMENTS: creates DIR if needed and installs REQUIREMENTS.
venv() {
  if [[ ! -x "$1/bin/python" ]]; then
    log "creating venv $1"
    "$PYTHON_BOOT" -m venv "$1" || { log "cannot create venv $1"; exit 2; }
  fi
  timeout 600 "$1/bin/python" -m pip install --disable-pip-version-check -q -r "$2" \
    || { log "pip install into $1 failed"; exit 2; }
}
venv "$VENV03" "$HERE/requirements.txt"
venv "$VENV1" "$PY_DIR/requirements.txt"
PY03="$VENV03/bin/python"

if [[ ! -x "$BIN" ]]; then
  log "relay binary not found or not executable: $BIN (build it with cargo first)"
  exit 2
fi

PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

free_port() {
  "$PY03" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_card URL PID LOG: waits (30 s) for URL's agent card while PID lives.
wait_card() {
  if ! "$PY03" - "$1/.well-known/agent-card.json" 30 "$2" <<'PYEOF'
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
    log "server at $1 did not come up; last lines of $3:"
    tail -n 40 "$3" >&2 || true
    exit 2
  fi
}

mkdir -p "$LOG_DIR"
FAR_PORT="$(free_port)"
FAR_URL="http://127.0.0.1:$FAR_PORT"
FAR_LOG="$LOG_DIR/a2a-multihop-far.log"
log "starting the Python SDK 1.x reference server on $FAR_URL"
"$VENV1/bin/python" "$PY_DIR/reference_server.py" --port "$FAR_PORT" --grpc-port "$(free_port)" >"$FAR_LOG" 2>&1 &
PIDS+=($!)
wait_card "$FAR_URL" "${PIDS[-1]}" "$FAR_LOG"

RELAY_PORT="$(free_port)"
RELAY_URL="http://127.0.0.1:$RELAY_PORT"
RELAY_LOG="$LOG_DIR/a2a-multihop-relay.log"
log "starting $BIN $RELAY_PORT $FAR_URL"
"$BIN" "$RELAY_PORT" "$FAR_URL" >"$RELAY_LOG" 2>&1 &
PIDS+=($!)
wait_card "$RELAY_URL" "${PIDS[-1]}" "$RELAY_LOG"

log "running the 0.3 client against the relay ($RELAY_URL -> $FAR_URL)"
set +e
(
  cd "$HERE"
  A2A_INTEROP_URL="$RELAY_URL" timeout --kill-after=10 "$PYTEST_TIMEOUT" \
    "$PY03" -m pytest -p no:cacheprovider "$@" multihop_v03.py
)
RC=$?
set -e
if [[ $RC -ne 0 ]]; then
  log "pytest exited $RC; logs: $RELAY_LOG, $FAR_LOG (last lines below)"
  tail -n 20 "$RELAY_LOG" "$FAR_LOG" >&2 || true
fi
exit $RC

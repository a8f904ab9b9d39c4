#!/usr/bin/env bash
# Interop: the official Python A2A SDK client against our Rust agent.
#
# Usage:
#   interop/python/run.sh [SERVER_BINARY] [PYTEST_ARGS...]
#   interop/python/run.sh --reference [PYTEST_ARGS...]
#
#   SERVER_BINARY  the `a2a` binary to test (default: target/debug/a2a under the
#                  repo root). It is started as
#                    SERVER_BINARY serve --agent conformance --port <free port>
#                  on 127.0.0.1, and stopped when the tests end.
#   --reference    run the suite against the Python-SDK reference server
#                  (reference_server.py) instead, to validate the suite itself.
#
# Environment:
#   A2A_INTEROP_VENV     virtualenv to create/use (default: <repo>/.venv-interop)
#   A2A_INTEROP_PYTHON   interpreter used to create it (default: python3)
#   A2A_INTEROP_LOG      server log file (default: <repo>/target/a2a-interop-server.log)
#   A2A_INTEROP_TIMEOUT  overall bound on the pytest run, seconds (default: 900)
#
# Exit code: pytest's (0 = all passed); 2 for setup problems.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${A2A_INTEROP_VENV:-$REPO_ROOT/.venv-interop}"
PYTHON_BOOT="${A2A_INTEROP_PYTHON:-python3}"
LOG="${A2A_INTEROP_LOG:-$REPO_ROOT/target/a2a-interop-server.log}"
PYTEST_TIMEOUT="${A2A_INTEROP_TIMEOUT:-900}"
STARTUP_WAIT=30

MODE=binary
BIN="$REPO_ROOT/target/debug/a2a"
if [[ $# -gt 0 && "$1" == "--reference" ]]; then
  MODE=reference
  shift
elif [[ $# -gt 0 && "$1" != -* ]]; then
  BIN="$1"
  shift
fi

log() { echo "[interop] $*" >&2; }

# --- venv -------------------------------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV"
  "$PYTHON_BOOT" -m venv "$VENV" || { log "cannot create venv"; exit 2; }
fi
PY="$VENV/bin/python"
log "installing requirements into $VENV"
timeout 600 "$PY" -m pip install --disable-pip-version-check -q \
  -r "$HERE/requirements.txt" || { log "pip install failed"; exit 2; }

# --- server -----------------------------------------------------------------
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
BASE_URL="http://127.0.0.1:$PORT"
mkdir -p "$(dirname "$LOG")"

if [[ "$MODE" == reference ]]; then
  log "starting reference server (Python SDK) on $BASE_URL"
  "$PY" "$HERE/reference_server.py" --port "$PORT" --grpc-port "$(free_port)" \
    >"$LOG" 2>&1 &
else
  if [[ ! -x "$BIN" ]]; then
    log "server binary not found or not executable: $BIN (build it with cargo first)"
    exit 2
  fi
  # A fresh SQLite task store per run (the durable default of `a2a serve`).
  STORE_DIR="$(mktemp -d)"
  log "starting $BIN serve --agent conformance --port $PORT --store sqlite:$STORE_DIR/tasks.db"
  "$BIN" serve --agent conformance --port "$PORT" --store "sqlite:$STORE_DIR/tasks.db" >"$LOG" 2>&1 &
fi
SERVER_PID=$!

CARD_URL="$BASE_URL/.well-known/agent-card.json"
log "waiting up to ${STARTUP_WAIT}s for $CARD_URL"
if ! "$PY" - "$CARD_URL" "$STARTUP_WAIT" "$SERVER_PID" <<'EOF'
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
EOF
then
  log "server did not come up; last lines of $LOG:"
  tail -n 40 "$LOG" >&2 || true
  exit 2
fi

# --- tests ------------------------------------------------------------------
log "running pytest against $BASE_URL"
set +e
(
  cd "$HERE"
  # test_card_signing.py starts its own `a2a serve --sign-card` processes.
  if [[ "$MODE" == binary ]]; then export A2A_INTEROP_BIN="$BIN"; fi
  A2A_INTEROP_URL="$BASE_URL" timeout --kill-after=10 "$PYTEST_TIMEOUT" \
    "$PY" -m pytest -p no:cacheprovider "$@"
)
RC=$?
set -e
if [[ $RC -ne 0 ]]; then
  log "pytest exited $RC; server log: $LOG (last lines below)"
  tail -n 40 "$LOG" >&2 || true
fi
exit $RC

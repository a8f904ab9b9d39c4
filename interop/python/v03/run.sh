#!/usr/bin/env bash
# Interop: the official Python A2A SDK 0.3 client (a2a-sdk 0.3.x) against our
# agent, which serves 0.3 beside 1.0 on the same endpoints.
#
# Usage:
#   interop/python/v03/run.sh [SERVER_BINARY] [PYTEST_ARGS...]
#
#   SERVER_BINARY  the `a2a` binary to test (default: target/debug/a2a under the
#                  repo root), started as
#                    SERVER_BINARY serve --agent conformance --port <free port>
#                  on 127.0.0.1 and stopped when the tests end.
#
# Environment:
#   A2A_INTEROP_V03_VENV  virtualenv to create/use (default: <repo>/.venv-interop-v03;
#                         a venv of its own: a2a-sdk 0.3 cannot be installed beside 1.x)
#   A2A_INTEROP_PYTHON    interpreter used to create it (default: python3)
#   A2A_INTEROP_LOG       server log file (default: <repo>/target/a2a-interop-v03-server.log)
#   A2A_INTEROP_TIMEOUT   overall bound on the pytest run, seconds (default: 600)
#
# Prints a table client x binding x operation (passed/total) at the end.
# Exit code: pytest's (0 = all passed); 2 for setup problems.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../../.." && pwd)"
VENV="${A2A_INTEROP_V03_VENV:-$REPO_ROOT/.venv-interop-v03}"
PYTHON_BOOT="${A2A_INTEROP_PYTHON:-python3}"
LOG="${A2A_INTEROP_LOG:-$REPO_ROOT/target/a2a-interop-v03-server.log}"
PYTEST_TIMEOUT="${A2A_INTEROP_TIMEOUT:-600}"
STARTUP_WAIT=30

BIN="$REPO_ROOT/target/debug/a2a"
if [[ $# -gt 0 && "$1" != -* ]]; then
  BIN="$1"
  shift
fi

log() { echo "[interop-v03] $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV"
  "$PYTHON_BOOT" -m venv "$VENV" || { log "cannot create venv"; exit 2; }
fi
PY="$VENV/bin/python"
log "installing requirements into $VENV"
timeout 600 "$PY" -m pip install --disable-pip-version-check -q \
  -r "$HERE/requirements.txt" || { log "pip install failed"; exit 2; }

if [[ ! -x "$BIN" ]]; then
  log "server binary not found or not executable: $BIN (build it with cargo first)"
  exit 2
fi

SERVER_PID=""
STORE_DIR="$(mktemp -d)"
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
  rm -rf "$STORE_DIR"
}
trap cleanup EXIT INT TERM

PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
BASE_URL="http://127.0.0.1:$PORT"
mkdir -p "$(dirname "$LOG")"
log "starting $BIN serve --agent conformance --port $PORT"
"$BIN" serve --agent conformance --port "$PORT" --store "sqlite:$STORE_DIR/tasks.db" >"$LOG" 2>&1 &
SERVER_PID=$!

if ! "$PY" - "$BASE_URL/.well-known/agent-card.json" "$STARTUP_WAIT" "$SERVER_PID" <<'PYEOF'
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
  log "server did not come up; last lines of $LOG:"
  tail -n 40 "$LOG" >&2 || true
  exit 2
fi

log "running pytest against $BASE_URL"
set +e
(
  cd "$HERE"
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

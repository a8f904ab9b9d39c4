#!/usr/bin/env bash
# The official A2A TCK (a2aproject/a2a-tck, branch 1.0-dev at 357c4a8) on all
# three bindings (JSON-RPC, HTTP+JSON, gRPC), its failures set against
# interop/tck/allowlist.toml.
#
# Usage:
#   interop/tck/run.sh [A2A_BINARY] [TCK_DIR]
#   interop/tck/run.sh --url AGENT_URL [TCK_DIR]
#
#   A2A_BINARY  the `a2a` binary (default: target/debug/a2a under the repo
#               root). Started as
#                 A2A_BINARY serve --agent conformance --port <free port> --store sqlite:<temp>
#               on 127.0.0.1 (push notifications on, loopback webhooks
#               allowed), stopped when the run ends.
#   --url       test an agent already running at AGENT_URL instead (ours or
#               another; its card at AGENT_URL/.well-known/agent-card.json
#               says which bindings it serves).
#   TCK_DIR     the TCK's tree (default: $A2A_TCK_DIR, else ../shared/tck/a2a-tck
#               beside the repository). From a clone of the public
#               repository: git clone https://github.com/a2aproject/a2a-tck
#               and git -C a2a-tck checkout 357c4a8, then pass its path.
#               It is copied to a temporary directory and run from there
#               (the TCK writes its reports inside its own tree).
#
# Environment:
#   A2A_TCK_DIR           the TCK's tree (see TCK_DIR)
#   A2A_TCK_VENV          virtualenv to create/use (default: <repo>/.venv-tck)
#   A2A_TCK_PYTHON        interpreter that creates it, 3.11+ (default: python3)
#   A2A_TCK_REPORTS       where the TCK's reports, the outcomes and the server
#                         log are kept (default: <repo>/target/tck)
#   A2A_TCK_ALLOWLIST     the allow-list (default: interop/tck/allowlist.toml)
#   A2A_TCK_WEBHOOK_HOST  the address the TCK's push receiver binds and gives
#                         the agent (default: 127.0.0.1)
#   A2A_TCK_TIMEOUT       bound on the TCK run, seconds (default: 900)
#
# Exit code: 0 when every failure is on the allow-list, 1 when one is not,
# 2 for setup problems (no TCK, no venv, the agent did not start, the TCK
# ran no test).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${A2A_TCK_VENV:-$REPO_ROOT/.venv-tck}"
PYTHON_BOOT="${A2A_TCK_PYTHON:-python3}"
REPORTS="${A2A_TCK_REPORTS:-$REPO_ROOT/target/tck}"
ALLOWLIST="${A2A_TCK_ALLOWLIST:-$HERE/allowlist.toml}"
WEBHOOK_HOST="${A2A_TCK_WEBHOOK_HOST:-127.0.0.1}"
TCK_TIMEOUT="${A2A_TCK_TIMEOUT:-900}"
STARTUP_WAIT=30
PINNED_COMMIT=357c4a8

log() { echo "[tck] $*" >&2; }

URL=""
BIN="$REPO_ROOT/target/debug/a2a"
if [[ $# -gt 0 && "$1" == "--url" ]]; then
  [[ $# -ge 2 ]] || { log "--url needs the agent's URL"; exit 2; }
  URL="${2%/}"
  shift 2
elif [[ $# -gt 0 ]]; then
  BIN="$1"
  shift
fi
TCK_DIR="${1:-${A2A_TCK_DIR:-$REPO_ROOT/../shared/tck/a2a-tck}}"

if [[ ! -f "$TCK_DIR/run_tck.py" || ! -d "$TCK_DIR/tests/compatibility" ]]; then
  log "no A2A TCK at $TCK_DIR"
  log "get it: git clone https://github.com/a2aproject/a2a-tck && git -C a2a-tck checkout $PINNED_COMMIT"
  log "then: interop/tck/run.sh <a2a binary> <path to a2a-tck> (or set A2A_TCK_DIR)"
  exit 2
fi
if git -C "$TCK_DIR" rev-parse --git-dir >/dev/null 2>&1; then
  HEAD_COMMIT="$(git -C "$TCK_DIR" rev-parse HEAD)"
  if [[ "$HEAD_COMMIT" != "$PINNED_COMMIT"* ]]; then
    log "warning: $TCK_DIR is at ${HEAD_COMMIT:0:12}; the allow-list and the pinned dependencies are for $PINNED_COMMIT"
  fi
fi

START=$SECONDS

# --- venv (the TCK's dependencies, pinned with hashes from its uv.lock) -------
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV"
  "$PYTHON_BOOT" -m venv "$VENV" || { log "cannot create venv"; exit 2; }
fi
PY="$VENV/bin/python"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { log "the TCK needs Python 3.11+ ($PY is older); set A2A_TCK_PYTHON"; exit 2; }
log "installing the TCK's pinned dependencies into $VENV"
timeout 600 "$PY" -m pip install --disable-pip-version-check -q --require-hashes \
  -r "$HERE/requirements.txt" || { log "pip install failed"; exit 2; }

# --- a writable copy of the TCK -----------------------------------------------
WORK="$(mktemp -d "${TMPDIR:-/tmp}/a2a-tck.XXXXXX")"
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
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir -p "$WORK/a2a-tck" "$REPORTS"
tar -C "$TCK_DIR" --exclude=./.git --exclude=./.venv --exclude=./reports -cf - . \
  | tar -C "$WORK/a2a-tck" -xf -
chmod -R u+w "$WORK/a2a-tck"

# --- the agent ----------------------------------------------------------------
LOG="$REPORTS/server.log"
: >"$LOG"
if [[ -z "$URL" ]]; then
  if [[ ! -x "$BIN" ]]; then
    log "a2a binary not found or not executable: $BIN (build it: cargo build -p agentwire-cli)"
    exit 2
  fi
  PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
  URL="http://127.0.0.1:$PORT"
  log "starting $BIN serve --agent conformance --port $PORT"
  "$BIN" serve --agent conformance --port "$PORT" --store "sqlite:$WORK/tasks.db" >"$LOG" 2>&1 &
  SERVER_PID=$!
fi

CARD_URL="$URL/.well-known/agent-card.json"
log "waiting up to ${STARTUP_WAIT}s for $CARD_URL"
if ! "$PY" - "$CARD_URL" "$STARTUP_WAIT" "${SERVER_PID:-0}" "$([[ -n "$SERVER_PID" ]] && echo all || echo any)" <<'EOF'
import os, sys, time, httpx
url, wait, pid, need = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + wait
while time.monotonic() < deadline:
    if pid:
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit("the agent's process exited")
    try:
        r = httpx.get(url, timeout=2.0)
        if r.status_code == 200:
            bindings = {i.get("protocolBinding") for i in r.json().get("supportedInterfaces", [])}
            print("[tck] the card declares: " + ", ".join(sorted(b for b in bindings if b)), file=sys.stderr)
            missing = {"JSONRPC", "HTTP+JSON", "GRPC"} - bindings
            if need == "all" and missing:
                sys.exit("the card lacks " + ", ".join(sorted(missing)))
            sys.exit(0)
    except (httpx.HTTPError, ValueError):
        pass
    time.sleep(0.2)
sys.exit("no agent card in time")
EOF
then
  log "the agent is not ready; last lines of $LOG:"
  tail -n 40 "$LOG" >&2 || true
  exit 2
fi

# --- the TCK --------------------------------------------------------------------
RESULTS="$REPORTS/outcomes.json"
rm -f "$RESULTS"
log "running the TCK (run_tck.py) against $URL on jsonrpc, http_json, grpc"
set +e
(
  cd "$WORK/a2a-tck"
  PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" \
  A2A_TCK_RESULTS="$RESULTS" A2A_TCK_WEBHOOK_HOST="$WEBHOOK_HOST" \
    timeout --kill-after=10 "$TCK_TIMEOUT" "$PY" run_tck.py --sut-host "$URL" \
      --transport jsonrpc,http_json,grpc -- \
      -p tck_plugin -p no:cacheprovider --webhook-host="$WEBHOOK_HOST"
)
RC=$?
set -e
cp -R "$WORK/a2a-tck/reports/." "$REPORTS/" 2>/dev/null || true
ELAPSED=$((SECONDS - START))

# pytest: 0 all passed, 1 some failed; anything else is no usable run.
if [[ $RC -ne 0 && $RC -ne 1 ]]; then
  log "the TCK run ended with status $RC (timeout, interruption or a pytest error)"
  [[ -n "$SERVER_PID" ]] && { log "last lines of $LOG:"; tail -n 40 "$LOG" >&2 || true; }
  exit 2
fi
set +e
"$PY" "$HERE/compare.py" "$RESULTS" "$ALLOWLIST" --seconds "$ELAPSED"
VERDICT=$?
set -e
log "reports: $REPORTS (compatibility.html, junitreport.xml, outcomes.json, server.log)"
exit $VERDICT

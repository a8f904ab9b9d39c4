# Shared by the JavaScript SDK interop scripts (sourced, not run).
#
# Needs: JS_DIR (interop/js), SDK_DIR (interop/js/v1 or interop/js/v03), LOG_TAG.
# Gives: log, js_install, free_port, start_bg, wait_card, stop_all, run_client_suite.

log() { echo "[$LOG_TAG] $*" >&2; }

# Installs the SDK's pinned packages (package-lock.json) into SDK_DIR/node_modules.
js_install() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    log "node and npm are needed (Debian/Ubuntu: apt-get install nodejs npm)"
    exit 2
  fi
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [[ "$major" -lt 20 ]]; then
    log "node $(node --version) is too old: the SDK needs node 20 or newer"
    exit 2
  fi
  if [[ -f "$SDK_DIR/node_modules/.package-lock.json" ]] \
    && cmp -s <(node -p 'JSON.stringify(require(process.argv[1]).packages)' "$SDK_DIR/package-lock.json" 2>/dev/null) \
              <(node -p 'JSON.stringify(require(process.argv[1]).packages)' "$SDK_DIR/node_modules/.package-lock.json" 2>/dev/null); then
    return 0
  fi
  log "installing the pinned packages into $SDK_DIR/node_modules (npm ci)"
  (cd "$SDK_DIR" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >&2) \
    || { log "npm ci failed"; exit 2; }
}

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

BG_PIDS=()
# start_bg LOGFILE CMD...: starts CMD in the background, output to LOGFILE.
start_bg() {
  local logfile="$1"
  shift
  mkdir -p "$(dirname "$logfile")"
  "$@" >"$logfile" 2>&1 &
  BG_PID=$!
  BG_PIDS+=("$BG_PID")
}

stop_all() {
  local pid
  for pid in "${BG_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

# wait_card URL SECONDS PID: waits for URL to answer 200 while PID lives.
wait_card() {
  node - "$1" "$2" "$3" <<'EOF'
const [url, wait, pid] = process.argv.slice(2);
const deadline = Date.now() + Number(wait) * 1000;
(async () => {
  while (Date.now() < deadline) {
    try { process.kill(Number(pid), 0); } catch { console.error('server process exited'); process.exit(1); }
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
      if (r.status === 200) process.exit(0);
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  console.error('no answer in time');
  process.exit(1);
})();
EOF
}

# run_client_suite [SERVER_BINARY | --reference] [NODE_TEST_ARGS...]: the
# whole run of a client suite (SDK_DIR/client.test.mjs, see v1/run.sh):
# installs the pinned packages, starts our server (or the SDK's reference
# server), waits for its card, runs node --test with the table reporter and
# exits with its code. Needs besides the above: REPO_ROOT, LOG (server log),
# RUN_TIMEOUT (seconds), SDK_LABEL ("1.x", "0.3") and PROTOCOL ("1.0", "0.3").
run_client_suite() {
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

  log "running the JS SDK $SDK_LABEL client against $BASE_URL"
  set +e
  (
    cd "$SDK_DIR"
    A2A_INTEROP_REFERENCE="$([[ "$MODE" == reference ]] && echo 1 || echo 0)" \
      A2A_INTEROP_URL="$BASE_URL" \
      A2A_INTEROP_TITLE="JS SDK @a2a-js/sdk $(node -p 'require("./node_modules/@a2a-js/sdk/package.json").version') client -> ${MODE/binary/our server} (protocol $PROTOCOL)" \
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
}

# Shared by the JavaScript SDK interop scripts (sourced, not run).
#
# Needs: JS_DIR (interop/js), SDK_DIR (interop/js/v1 or interop/js/v03), LOG_TAG.
# Gives: log, js_install, free_port, start_bg, wait_card, stop_all.

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

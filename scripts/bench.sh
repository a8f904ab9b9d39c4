#!/usr/bin/env bash
# Performance benchmark of the A2A server against a bare axum baseline.
#
#   scripts/bench.sh            # full run (about 3 minutes), report in target/bench-report.txt
#                               # (in $CARGO_TARGET_DIR when that is set, binaries too)
#
# Builds release binaries, starts the echo agent on the library alone
# (`agent-server --agent echo`: A2aServer, in-memory store, the agent that
# `a2a serve --agent echo` runs) and `bare-server` on loopback, loads both
# with oha (SendMessage at c=1/16/64, agent card at c=16/64), probes SSE
# streaming of the a2a server with stream-probe, prints a table and checks
# the targets. The idle memory of `a2a serve --agent echo` (same code, in the
# CLI's larger binary) is reported beside it. See benches/README.md.
#
# Exit status: 0 all targets met, 1 some target missed, 2 setup error.
#
# Settings (environment):
#   BENCH_DURATION=5s      oha duration of each load run
#   BENCH_ROUNDS=3         load runs per server and test, alternating between the
#                          two servers; the report takes the median of each figure
#   BENCH_A2A_PORT=18080   BENCH_BARE_PORT=18081
#   BENCH_FIRST_N=1000     time-to-first-event samples
#   BENCH_CHUNK_N=200      100-chunk stream samples
#   BENCH_STREAMS=10000    concurrent streams held    BENCH_HOLD_SECS=10
#   BENCH_CHUNK_BODY=FILE  JSON-RPC body of the 100-chunk stream (default: 100
#                          words, message.metadata {"chunks":100})
#   BENCH_HOLD_BODY=FILE   JSON-RPC body whose SSE stream stays open while held
#                          ({{i}} = stream index, {{taskId}} = task of BENCH_HOLD_SETUP)
#   BENCH_HOLD_SETUP=FILE  JSON-RPC request sent once before the hold (e.g. a
#                          SendMessage leaving a task open for SubscribeToTask)
#   BENCH_PIN=1            pin the servers to CPU 1 (one tokio worker) and oha/probe to CPU 0
#   BENCH_A2A_CMD='...'    command serving the A2A server instead of
#                          agent-server ({port} is replaced), e.g.
#                          'target/release/a2a serve --agent echo --store memory --port {port}'
#   BENCH_SKIP_BUILD=1     use the binaries already in target/release
#   BENCH_DURABLE=1        the durable rows: `a2a serve --agent echo` on the SQLite
#                          store (empty, and holding BENCH_FILL tasks) against the
#                          memory store, same binary, same run (0 skips them)
#   BENCH_FILL=100000      tasks written into the filled store first (store-fill)
#   BENCH_DURABLE_PORT=18090  first of the three ports of the durable rows
#   BENCH_POSTGRES=1       with the durable rows, the PostgreSQL rows: `a2a serve --agent
#                          echo --store postgres://...` at c=64 as one replica, then two
#                          replicas on the same database loaded together (c=64 each);
#                          a throwaway server on loopback (.ci/postgres, installed from
#                          Debian's packages if missing; 0 skips the rows)
#   BENCH_POSTGRES_URL=... an existing database to use instead of the throwaway server
#   BENCH_POSTGRES_PORT=18093  first of the two ports of the replicas
#   BENCH_OBSERVE=1        the observability rows: `a2a serve --agent echo` with
#                          --metrics and with --otel (exporting to otlp-sink, every
#                          span sampled) against both off (0 skips them)
#   BENCH_OBSERVE_PORT=18095  first of the four ports of the observability rows
#   BENCH_AUTH=1           the JWT-auth rows: `a2a serve --agent echo --store memory` with
#                          --auth-jwks FILE --auth-issuer --auth-audience (a key and a
#                          token valid for an hour minted for the run by jwt-mint, sent as
#                          Authorization: Bearer) against the same without auth (0 skips them)
#   BENCH_AUTH_PORT=18100  first of the two ports of the JWT-auth rows
#   BENCH_V03=1            the 0.3 rows: one `a2a serve --agent echo --store memory` loaded
#                          with the 0.3 JSON-RPC `message/send` (no A2A-Version header) and
#                          with the 1.0 SendMessage (0 skips them)
#   BENCH_V03_PORT=18102   the port of the 0.3 rows
#   BENCH_MAIN=1           the a2a-vs-bare rows and the streaming probes (0 skips them,
#                          e.g. to run only some rows: BENCH_MAIN=0 BENCH_DURABLE=0 ...)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
# Where cargo puts the binaries (CARGO_TARGET_DIR when set, as cargo does).
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
mkdir -p "$TARGET"
REPORT=$TARGET/bench-report.txt

DURATION=${BENCH_DURATION:-5s}
ROUNDS=${BENCH_ROUNDS:-3}
P1=${BENCH_A2A_PORT:-18080}
P2=${BENCH_BARE_PORT:-18081}
FIRST_N=${BENCH_FIRST_N:-1000}
CHUNK_N=${BENCH_CHUNK_N:-200}
STREAMS=${BENCH_STREAMS:-10000}
HOLD_SECS=${BENCH_HOLD_SECS:-10}

die() { echo "bench.sh: error: $*" >&2; exit 2; }
log() { echo "== $*" >&2; }

# ---------------------------------------------------------------- tools
OHA=$(command -v oha || true)
[[ -z $OHA && -x $HOME/.cargo/bin/oha ]] && OHA=$HOME/.cargo/bin/oha
[[ -n $OHA ]] || die "oha not found. Install it with: cargo install oha --locked   (then make sure ~/.cargo/bin is on PATH)"
command -v python3 >/dev/null || die "python3 is needed to parse oha's JSON output"
command -v curl >/dev/null || die "curl is needed for the response checks"
CLK_TCK=$(getconf CLK_TCK)

# File descriptors: 10k streams need 10k sockets in the server and in the probe.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [[ $NOFILE != unlimited && $NOFILE -lt $((STREAMS + 1024)) ]]; then
    echo "bench.sh: warning: open-file limit is $NOFILE (ulimit -n 65536 refused); $STREAMS streams need $((STREAMS + 1024))" >&2
fi

PIN_SERVER=()
PIN_CLIENT=()
OHA_THREADS=()
if [[ ${BENCH_PIN:-0} == 1 ]]; then
    command -v taskset >/dev/null || die "BENCH_PIN=1 needs taskset (util-linux)"
    # One core each: one runtime worker in the servers (tokio reads
    # TOKIO_WORKER_THREADS) and in oha.
    PIN_SERVER=(env TOKIO_WORKER_THREADS=1 taskset -c 1)
    PIN_CLIENT=(taskset -c 0)
    OHA_THREADS=(--worker-threads 1)
fi

# ---------------------------------------------------------------- build
A2A_CMD=${BENCH_A2A_CMD:-}
if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
    log "building agentwire-bench and agentwire-cli (release)"
    cargo build --release -p agentwire-bench -p agentwire-cli || die "cargo build --release -p agentwire-bench -p agentwire-cli failed"
fi
BARE=$TARGET/release/bare-server
PROBE=$TARGET/release/stream-probe
AGENT=$TARGET/release/agent-server
CLI=$TARGET/release/a2a
MAIN=${BENCH_MAIN:-1}
[[ $MAIN != 1 || ( -x $BARE && -x $PROBE && -x $AGENT ) ]] || die "target/release/bare-server, stream-probe or agent-server missing (cargo build --release -p agentwire-bench)"
if [[ -z $A2A_CMD ]]; then
    A2A_CMD="$AGENT --agent echo --port {port}"
fi

# ---------------------------------------------------------------- servers
WORK=$(mktemp -d /tmp/a2a-bench.XXXXXX)
PIDS=()
PG_STARTED=0
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    if [[ $PG_STARTED == 1 ]]; then
        A2A_PG_DIR="$WORK/postgres" bash "$ROOT/.ci/postgres" stop 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM

if [[ $MAIN == 1 ]]; then
for port in "$P1" "$P2"; do
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
        die "port $port is already in use (set BENCH_A2A_PORT / BENCH_BARE_PORT)"
    fi
done
fi

# start NAME PORT CMD...: starts a server in the background, waits until its
# agent card answers, and sets PID_<NAME>.
start() {
    local name=$1 port=$2
    shift 2
    "${PIN_SERVER[@]}" "$@" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do
        if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port/.well-known/agent-card.json"; then
            printf -v "PID_$name" %s "$pid"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.log" >&2; die "$name exited at start ($*)"; }
        sleep 0.1
    done
    cat "$WORK/$name.log" >&2
    die "$name did not serve /.well-known/agent-card.json on port $port within 10 s"
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { python3 -c 'import sys; f=open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")",1)[1].split(); print(int(f[11])+int(f[12]))' "$1"; }
# Times the server's threads were preempted (nonvoluntary context switches).
preemptions() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^nonvoluntary_ctxt_switches:/ {n += $2} END {print n + 0}'; }

PORT_a2a=$P1
PORT_bare=$P2
# shellcheck disable=SC2206
A2A_ARGV=(${A2A_CMD//\{port\}/$P1})
IDLE_RSS_A2A=0 IDLE_RSS_BARE=0 IDLE_RSS_CLI=0 LOADED_RSS_A2A=0 LOADED_RSS_BARE=0 RSS_BEFORE_HOLD_A2A=0
if [[ $MAIN == 1 ]]; then
log "starting a2a server: ${A2A_ARGV[*]}"
start a2a "$P1" "${A2A_ARGV[@]}"
log "starting bare-server on port $P2"
start bare "$P2" "$BARE" --port "$P2"
# The a2a command serving the same agent (same library code in a larger
# binary): its idle memory is reported for information.
IDLE_RSS_CLI=0
if [[ -x $CLI ]]; then
    P4=${BENCH_CLI_PORT:-$((P1 + 3))}
    start cli "$P4" "$CLI" serve --agent echo --store memory --port "$P4"
fi
sleep 1
IDLE_RSS_A2A=$(rss_kib "$PID_a2a")
IDLE_RSS_BARE=$(rss_kib "$PID_bare")
if [[ -n ${PID_cli:-} ]]; then
    IDLE_RSS_CLI=$(rss_kib "$PID_cli")
    kill "$PID_cli" 2>/dev/null || true
fi
fi

# ---------------------------------------------------------------- bodies and checks
SEND_BODY=$WORK/send.json
cat >"$SEND_BODY" <<'EOF'
{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}
EOF

# Per server name: the SendMessage body (default SEND_BODY), no A2A-Version
# header (a 0.3 client), an Authorization header value, and what the
# answer of a completed task contains.
declare -A BODY=() NOVERSION=() AUTHZ=() EXPECT=()

# send_headers NAME: the headers of NAME's SendMessage (in HEADERS).
send_headers() {
    HEADERS=()
    [[ ${NOVERSION[$1]:-0} == 1 ]] || HEADERS+=(-H 'A2A-Version: 1.0')
    [[ -z ${AUTHZ[$1]:-} ]] || HEADERS+=(-H "Authorization: ${AUTHZ[$1]}")
}

# check NAME PORT: one real request before the load; oha counts any HTTP 200
# as a success, even a JSON-RPC error, so the body is checked here.
check() {
    local name=$1 port=$2 code body=${BODY[$1]:-$SEND_BODY} expect=${EXPECT[$1]:-TASK_STATE_COMPLETED}
    send_headers "$name"
    code=$(curl -s --max-time 5 -o "$WORK/check-$name.json" -w '%{http_code}' -X POST \
        "${HEADERS[@]}" -H 'Content-Type: application/json' \
        --data-binary "@$body" "http://127.0.0.1:$port/") || die "$name: SendMessage request failed"
    [[ $code == 200 ]] || die "$name: SendMessage answered HTTP $code: $(head -c 300 "$WORK/check-$name.json")"
    if grep -q '"error"' "$WORK/check-$name.json"; then
        die "$name: SendMessage answered a JSON-RPC error: $(head -c 300 "$WORK/check-$name.json")"
    fi
    grep -q "$expect" "$WORK/check-$name.json" \
        || die "$name: SendMessage did not return a completed task: $(head -c 300 "$WORK/check-$name.json")"
    code=$(curl -s --max-time 5 -o "$WORK/card-$name.json" -w '%{http_code}' \
        "http://127.0.0.1:$port/.well-known/agent-card.json") || die "$name: agent card request failed"
    [[ $code == 200 ]] || die "$name: agent card answered HTTP $code"
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c.get("name") and "error" not in c' \
        "$WORK/card-$name.json" || die "$name: agent card is not a card: $(head -c 300 "$WORK/card-$name.json")"
}
if [[ $MAIN == 1 ]]; then
    check a2a "$P1"
    check bare "$P2"
fi

# ---------------------------------------------------------------- load
# load NAME TEST C [ROUND]: one oha run; stores oha's JSON and the CPU ticks
# used (files suffixed with the round).
load() {
    local name=$1 test=$2 c=$3 round=${4:-1} pid port t0 t1 s0 s1
    pid=PID_$name
    pid=${!pid}
    port=PORT_$name
    port=${!port}
    local args=(-z "$DURATION" -c "$c" --no-tui --output-format json -o "$WORK/oha-$name-$test-$round.json" "${OHA_THREADS[@]}")
    if [[ $test == send-* || $test == pair-* || $test == warmup ]]; then
        send_headers "$name"
        args+=(-m POST "${HEADERS[@]}" -T application/json -D "${BODY[$name]:-$SEND_BODY}" "http://127.0.0.1:$port/")
    else
        args+=(-H 'A2A-Version: 1.0' "http://127.0.0.1:$port/.well-known/agent-card.json")
    fi
    t0=$(cpu_ticks "$pid")
    s0=$(preemptions "$pid")
    "${PIN_CLIENT[@]}" "$OHA" "${args[@]}" >/dev/null || die "oha failed ($name $test)"
    t1=$(cpu_ticks "$pid")
    s1=$(preemptions "$pid")
    echo $((t1 - t0)) >"$WORK/cpu-$name-$test-$round.txt"
    echo $((s1 - s0)) >"$WORK/preempt-$name-$test-$round.txt"
    kill -0 "$pid" 2>/dev/null || die "$name died during $test (log: $(tail -5 "$WORK/$name.log"))"
    log "$name $test c=$c round $round: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print("%.0f req/s" % s["requestsPerSec"])' "$WORK/oha-$name-$test-$round.json")"
}

if [[ $MAIN == 1 ]]; then
log "warm-up (2 s each)"
DURATION_SAVED=$DURATION
DURATION=2s
load bare warmup 16
load a2a warmup 16
DURATION=$DURATION_SAVED

# Each test alternates the two servers ROUNDS times: a burst of load from the
# machine's other tenants then hits both rather than one.
for test in send-c1 send-c16 send-c64 card-c16 card-c64; do
    c=${test##*-c}
    for round in $(seq "$ROUNDS"); do
        load bare "$test" "$c" "$round"
        load a2a "$test" "$c" "$round"
    done
done
LOADED_RSS_A2A=$(rss_kib "$PID_a2a")
LOADED_RSS_BARE=$(rss_kib "$PID_bare")
check a2a "$P1"

# ---------------------------------------------------------------- streaming (a2a only)
URL=http://127.0.0.1:$P1/
log "time to first streamed event ($FIRST_N requests)"
"${PIN_CLIENT[@]}" "$PROBE" --url "$URL" --first-event "$FIRST_N" --json >"$WORK/probe-first.json" 2>"$WORK/probe-first.log" || true
cat "$WORK/probe-first.log" >&2

log "100-chunk stream ($CHUNK_N requests)"
CHUNK_ARGS=()
[[ -n ${BENCH_CHUNK_BODY:-} ]] && CHUNK_ARGS=(--body-file "$BENCH_CHUNK_BODY")
"${PIN_CLIENT[@]}" "$PROBE" --url "$URL" --stream "$CHUNK_N" --warmup 5 "${CHUNK_ARGS[@]}" --json >"$WORK/probe-chunks.json" 2>"$WORK/probe-chunks.log" || true
cat "$WORK/probe-chunks.log" >&2

HOLD_BODY=${BENCH_HOLD_BODY:-}
HOLD_URL=$URL
HOLD_PID=$PID_a2a
if [[ -z $HOLD_BODY ]]; then
    # Default: the conformance agent's long-running scenario (working, then
    # completed after twice its streaming timeout) keeps every stream open
    # for the whole hold. It runs in a server of its own so that its memory
    # is read alone.
    P3=${BENCH_HOLD_PORT:-$((P1 + 2))}
    HOLD_MS=$(((HOLD_SECS + 60) * 1000))
    log "starting a conformance server on port $P3 for the held streams"
    # All the streams come from one address: the bounds per caller (1,000
    # open tasks, 1,000 streams, 1,000 connections by default) are off for
    # this measurement.
    start hold "$P3" "$AGENT" --agent conformance --port "$P3" --tck-streaming-timeout-ms "$HOLD_MS" \
        --max-open-tasks-per-caller 0 --max-streams-per-caller 0 --max-connections-per-address 0
    HOLD_URL=http://127.0.0.1:$P3/
    HOLD_PID=$PID_hold
    HOLD_BODY=$WORK/hold.json
    printf '{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"test-resubscribe-message-id-{{i}}","role":"ROLE_USER","parts":[{"text":"hold"}]}}}\n' >"$HOLD_BODY"
    sleep 1
fi
HOLD_ARGS=(--body-file "$HOLD_BODY")
[[ -n ${BENCH_HOLD_SETUP:-} ]] && HOLD_ARGS+=(--setup-body-file "$BENCH_HOLD_SETUP")
log "holding $STREAMS concurrent streams for $HOLD_SECS s"
RSS_BEFORE_HOLD_A2A=$(rss_kib "$HOLD_PID")
"${PIN_CLIENT[@]}" "$PROBE" --url "$HOLD_URL" --hold "$STREAMS" --hold-secs "$HOLD_SECS" --timeout 30 \
    --server-pid "$HOLD_PID" "${HOLD_ARGS[@]}" --json >"$WORK/probe-hold.json" 2>"$WORK/probe-hold.log" || true
tail -n 20 "$WORK/probe-hold.log" >&2
echo 1 >"$WORK/main.txt"
fi

# ---------------------------------------------------------------- durable rows
# The same `a2a serve --agent echo` on the memory store, on an empty SQLite
# store and on a SQLite store already holding BENCH_FILL finished tasks,
# loaded in turn in each round; the ratios are SQLite / memory.
if [[ ${BENCH_DURABLE:-1} == 1 ]]; then
    [[ -x $CLI ]] || die "target/release/a2a missing (cargo build --release -p agentwire-cli)"
    FILLER=$TARGET/release/store-fill
    [[ -x $FILLER ]] || die "target/release/store-fill missing (cargo build --release -p agentwire-bench)"
    FILL=${BENCH_FILL:-100000}
    DP=${BENCH_DURABLE_PORT:-18090}
    for name in hold a2a bare; do
        pid=PID_$name
        # The servers of the rows above are stopped: the durable rows get the machine.
        [[ -n ${!pid:-} ]] && kill "${!pid}" 2>/dev/null || true
    done
    log "filling a SQLite store with $FILL finished tasks"
    "$FILLER" --sqlite "$WORK/filled.db" --tasks "$FILL" 2>"$WORK/fill.log" || { cat "$WORK/fill.log" >&2; die "store-fill failed"; }
    cat "$WORK/fill.log" >&2
    PORT_mem=$DP
    PORT_sqlite=$((DP + 1))
    PORT_filled=$((DP + 2))
    start mem "$PORT_mem" "$CLI" serve --agent echo --store memory --port "$PORT_mem"
    start sqlite "$PORT_sqlite" "$CLI" serve --agent echo --store "sqlite:$WORK/empty.db" --port "$PORT_sqlite"
    start filled "$PORT_filled" "$CLI" serve --agent echo --store "sqlite:$WORK/filled.db" --port "$PORT_filled"
    check mem "$PORT_mem"
    check sqlite "$PORT_sqlite"
    check filled "$PORT_filled"
    DURATION_SAVED=$DURATION
    DURATION=2s
    for name in mem sqlite filled; do load "$name" warmup 16; done
    DURATION=$DURATION_SAVED
    for test in send-c1 send-c16 send-c64; do
        c=${test##*-c}
        for round in $(seq "$ROUNDS"); do
            for name in mem sqlite filled; do load "$name" "$test" "$c" "$round"; done
        done
    done
    for name in mem sqlite; do
        log "100-chunk stream on the $name store ($CHUNK_N requests)"
        "${PIN_CLIENT[@]}" "$PROBE" --url "http://127.0.0.1:$((PORT_$name))/" --stream "$CHUNK_N" --warmup 5 "${CHUNK_ARGS[@]}" --json \
            >"$WORK/probe-chunks-$name.json" 2>"$WORK/probe-chunks-$name.log" || true
        cat "$WORK/probe-chunks-$name.log" >&2
    done
    echo "$FILL" >"$WORK/fill.txt"

    # PostgreSQL: one replica at c=64, then two replicas of the same
    # database loaded together (c=64 each); the memory and SQLite servers
    # are stopped first.
    if [[ ${BENCH_POSTGRES:-1} == 1 ]]; then
        for name in mem sqlite filled; do
            pid=PID_$name
            [[ -n ${!pid:-} ]] && kill "${!pid}" 2>/dev/null || true
        done
        PG_URL=${BENCH_POSTGRES_URL:-}
        if [[ -z $PG_URL ]]; then
            log "starting a throwaway PostgreSQL server on loopback"
            PG_STARTED=1
            # The server runs as the postgres user, which must reach its folder
            # inside this run's work folder (made 0700 by mktemp).
            chmod 711 "$WORK"
            PG_URL=$(A2A_PG_DIR="$WORK/postgres" bash "$ROOT/.ci/postgres" start) || die "cannot start PostgreSQL (.ci/postgres)"
        fi
        PGP=${BENCH_POSTGRES_PORT:-18093}
        PORT_pg1=$PGP
        PORT_pg2=$((PGP + 1))
        start pg1 "$PORT_pg1" "$CLI" serve --agent echo --store "$PG_URL" --port "$PORT_pg1"
        start pg2 "$PORT_pg2" "$CLI" serve --agent echo --store "$PG_URL" --port "$PORT_pg2"
        check pg1 "$PORT_pg1"
        check pg2 "$PORT_pg2"
        DURATION_SAVED=$DURATION
        DURATION=2s
        for name in pg1 pg2; do load "$name" warmup 16; done
        DURATION=$DURATION_SAVED
        for round in $(seq "$ROUNDS"); do
            load pg1 send-c64 64 "$round"
            # Both replicas at once: two load generators, one per replica.
            load pg1 pair-c64 64 "$round" &
            pair=$!
            load pg2 pair-c64 64 "$round"
            wait "$pair" || die "the load of the first replica failed (two replicas, round $round)"
        done
        echo "$PG_URL" | sed 's#//[^@]*@#//#' >"$WORK/postgres.txt"
    fi
fi

# ---------------------------------------------------------------- observability rows
# The same `a2a serve --agent echo --store memory` with nothing on, with
# --metrics, and with --otel exporting every span (sampling 100%) over OTLP
# HTTP to otlp-sink, a local receiver that swallows the exports; loaded in
# turn in each round; the ratios are on / off.
if [[ ${BENCH_OBSERVE:-1} == 1 ]]; then
    [[ -x $CLI ]] || die "target/release/a2a missing (cargo build --release -p agentwire-cli)"
    SINK=$TARGET/release/otlp-sink
    [[ -x $SINK ]] || die "target/release/otlp-sink missing (cargo build --release -p agentwire-bench)"
    OP=${BENCH_OBSERVE_PORT:-18095}
    for name in hold a2a bare mem sqlite filled; do
        pid=PID_$name
        # The servers of the rows above are stopped: these rows get the machine.
        [[ -n ${!pid:-} ]] && kill "${!pid}" 2>/dev/null || true
    done
    SINK_PORT=$((OP + 3))
    log "starting otlp-sink on port $SINK_PORT"
    "${PIN_CLIENT[@]}" "$SINK" --port "$SINK_PORT" >"$WORK/sink.log" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 50); do
        curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$SINK_PORT/stats" && break
        sleep 0.1
    done
    curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$SINK_PORT/stats" || die "otlp-sink did not start (log: $(cat "$WORK/sink.log"))"
    PORT_off=$OP
    PORT_metrics=$((OP + 1))
    PORT_otel=$((OP + 2))
    start off "$PORT_off" "$CLI" serve --agent echo --store memory --port "$PORT_off"
    start metrics "$PORT_metrics" "$CLI" serve --agent echo --store memory --port "$PORT_metrics" --metrics
    start otel "$PORT_otel" env OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK_PORT" \
        OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_TRACES_SAMPLER=always_on \
        "$CLI" serve --agent echo --store memory --port "$PORT_otel" --otel
    for name in off metrics otel; do check "$name" "$((PORT_$name))"; done
    DURATION_SAVED=$DURATION
    DURATION=2s
    for name in off metrics otel; do load "$name" warmup 16; done
    DURATION=$DURATION_SAVED
    for test in send-c1 send-c16; do
        c=${test##*-c}
        for round in $(seq "$ROUNDS"); do
            for name in off metrics otel; do load "$name" "$test" "$c" "$round"; done
        done
    done
    curl -sf --max-time 2 "http://127.0.0.1:$SINK_PORT/stats" >"$WORK/sink-stats.json" || echo '{}' >"$WORK/sink-stats.json"
fi

# ---------------------------------------------------------------- JWT-auth rows
# The same `a2a serve --agent echo --store memory` without authentication
# and with JWT validation against a JWKS file (the keys read once and
# cached), loaded in turn in each round with a token minted for the run;
# the ratio is auth / no auth.
stop_all() {
    local name pid
    for name in "$@"; do
        pid=PID_$name
        [[ -n ${!pid:-} ]] && kill "${!pid}" 2>/dev/null || true
    done
}
EARLIER="hold a2a bare mem sqlite filled pg1 pg2 off metrics otel"
if [[ ${BENCH_AUTH:-1} == 1 ]]; then
    [[ -x $CLI ]] || die "target/release/a2a missing (cargo build --release -p agentwire-cli)"
    MINT=$TARGET/release/jwt-mint
    [[ -x $MINT ]] || die "target/release/jwt-mint missing (cargo build --release -p agentwire-bench)"
    # shellcheck disable=SC2086
    stop_all $EARLIER
    AP=${BENCH_AUTH_PORT:-18100}
    ISS=https://bench.test
    AUD=urn:a2a:bench
    TOKEN=$("$MINT" --jwks "$WORK/jwks.json" --issuer "$ISS" --audience "$AUD") || die "jwt-mint failed"
    PORT_noauth=$AP
    PORT_jwt=$((AP + 1))
    start noauth "$PORT_noauth" "$CLI" serve --agent echo --store memory --port "$PORT_noauth"
    start jwt "$PORT_jwt" "$CLI" serve --agent echo --store memory --port "$PORT_jwt" \
        --auth-jwks "$WORK/jwks.json" --auth-issuer "$ISS" --auth-audience "$AUD"
    # Without the token the agent refuses: the rows measure real checks.
    code=$(curl -s --max-time 5 -o "$WORK/refused.json" -w '%{http_code}' -X POST -H 'A2A-Version: 1.0' \
        -H 'Content-Type: application/json' --data-binary "@$SEND_BODY" "http://127.0.0.1:$PORT_jwt/") || die "jwt: request failed"
    [[ $code == 401 ]] || grep -q '"error"' "$WORK/refused.json" \
        || die "jwt: a SendMessage without a token was not refused (HTTP $code: $(head -c 300 "$WORK/refused.json"))"
    AUTHZ[jwt]="Bearer $TOKEN"
    for name in noauth jwt; do check "$name" "$((PORT_$name))"; done
    DURATION_SAVED=$DURATION
    DURATION=2s
    for name in noauth jwt; do load "$name" warmup 16; done
    DURATION=$DURATION_SAVED
    for test in send-c1 send-c16; do
        c=${test##*-c}
        for round in $(seq "$ROUNDS"); do
            for name in noauth jwt; do load "$name" "$test" "$c" "$round"; done
        done
    done
    echo 1 >"$WORK/auth.txt"
fi

# ---------------------------------------------------------------- 0.3 rows
# One `a2a serve --agent echo --store memory` (0.3 clients are served by
# default) loaded in turn with the 1.0 SendMessage and the 0.3 JSON-RPC
# message/send without an A2A-Version header; the ratio is 0.3 / 1.0.
if [[ ${BENCH_V03:-1} == 1 ]]; then
    [[ -x $CLI ]] || die "target/release/a2a missing (cargo build --release -p agentwire-cli)"
    # shellcheck disable=SC2086
    stop_all $EARLIER noauth jwt
    VP=${BENCH_V03_PORT:-18102}
    printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hello"}]}}}' \
        >"$WORK/send-v03.json"
    PORT_v10=$VP
    PORT_v03=$VP
    start v10 "$VP" "$CLI" serve --agent echo --store memory --port "$VP"
    PID_v03=$PID_v10
    BODY[v03]=$WORK/send-v03.json
    NOVERSION[v03]=1
    EXPECT[v03]='"completed"'
    for name in v10 v03; do check "$name" "$VP"; done
    DURATION_SAVED=$DURATION
    DURATION=2s
    for name in v10 v03; do load "$name" warmup 16; done
    DURATION=$DURATION_SAVED
    for test in send-c1 send-c16; do
        c=${test##*-c}
        for round in $(seq "$ROUNDS"); do
            for name in v10 v03; do load "$name" "$test" "$c" "$round"; done
        done
    done
    echo 1 >"$WORK/v03.txt"
fi

# ---------------------------------------------------------------- report
STATUS=0
python3 - "$WORK" "$REPORT" "$CLK_TCK" "$DURATION" "$ROUNDS" "$STREAMS" \
    "$IDLE_RSS_A2A" "$IDLE_RSS_BARE" "$LOADED_RSS_A2A" "$LOADED_RSS_BARE" "$RSS_BEFORE_HOLD_A2A" "$IDLE_RSS_CLI" \
    "$("$OHA" --version 2>/dev/null | head -1)" "${A2A_ARGV[*]}" <<'PY' || STATUS=$?
import json, os, statistics, sys, time

(work, report, clk, duration, rounds, streams, idle_a2a, idle_bare, loaded_a2a, loaded_bare,
 pre_hold, idle_cli, oha_version, a2a_cmd) = sys.argv[1:]
clk, rounds, streams = int(clk), int(rounds), int(streams)

def load_round(name, test, r):
    with open(f"{work}/oha-{name}-{test}-{r}.json") as f:
        o = json.load(f)
    codes = {k: int(v) for k, v in o.get("statusCodeDistribution", {}).items()}
    n = sum(codes.values())
    ok = codes.get("200", 0)
    errs = {k: v for k, v in o.get("errorDistribution", {}).items() if "deadline" not in k}
    ticks = int(open(f"{work}/cpu-{name}-{test}-{r}.txt").read())
    preempted = int(open(f"{work}/preempt-{name}-{test}-{r}.txt").read())
    lat = o["latencyPercentiles"]
    return {
        "rps": o["summary"]["requestsPerSec"] * (ok / n if n else 0),  # successes only
        "p50": (lat.get("p50") or 0) * 1e3,
        "p99": (lat.get("p99") or 0) * 1e3,
        "cpu_us": ticks / clk / n * 1e6 if n else float("nan"),
        "preempt": preempted / n if n else float("nan"),
        "n": n, "non200": n - ok, "errors": errs,
        "size": o["summary"].get("sizePerRequest") or 0,
    }

def load(name, test):
    """The median of each figure over the rounds; failures summed."""
    runs = [load_round(name, test, r) for r in range(1, rounds + 1)]
    out = {k: statistics.median(x[k] for x in runs) for k in ("rps", "p50", "p99", "cpu_us", "preempt", "size")}
    out["n"] = sum(x["n"] for x in runs)
    out["non200"] = sum(x["non200"] for x in runs)
    out["errors"] = {}
    for x in runs:
        for k, v in x["errors"].items():
            out["errors"][k] = out["errors"].get(k, 0) + v
    out["spread"] = (min(x["rps"] for x in runs), max(x["rps"] for x in runs))
    return out

def probe(name):
    try:
        with open(f"{work}/probe-{name}.json") as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except Exception:
        return None

rows, checks, notes = [], [], []
def row(test, metric, bare, a2a, ratio, target="", ok=None):
    rows.append((test, metric, bare, a2a, ratio, target, "" if ok is None else ("PASS" if ok else "FAIL")))
    if ok is not None:
        checks.append(ok)

f1 = lambda x: f"{x:,.0f}"
f3 = lambda x: f"{x:.3f}"
fr = lambda x: f"{x:.2f}" if x == x else "-"

check_size = {}
for name in ("a2a", "bare"):
    try:
        check_size[name] = os.path.getsize(f"{work}/check-{name}.json")
    except OSError:
        check_size[name] = 0

main = os.path.exists(f"{work}/main.txt")
if main:
    for test, label, rps_min in [("send-c1", "SendMessage c=1", None), ("send-c16", "SendMessage c=16", 0.70),
                                 ("send-c64", "SendMessage c=64", 0.70), ("card-c16", "agent card c=16", 0.90),
                                 ("card-c64", "agent card c=64", 0.90)]:
        b, a = load("bare", test), load("a2a", test)
        r = a["rps"] / b["rps"] if b["rps"] else float("nan")
        row(label, "req/s", f1(b["rps"]), f1(a["rps"]), fr(r),
            f">= {rps_min:.2f}" if rps_min else "", (r >= rps_min) if rps_min else None)
        if rounds > 1:
            span = lambda x: f"{x['spread'][0] / 1e3:.0f}k-{x['spread'][1] / 1e3:.0f}k"
            row("", "req/s range", span(b), span(a), "")
        row("", "p50 ms", f3(b["p50"]), f3(a["p50"]), fr(a["p50"] / b["p50"] if b["p50"] else float("nan")))
        send = test.startswith("send") and rps_min
        r99 = a["p99"] / b["p99"] if b["p99"] else float("nan")
        row("", "p99 ms", f3(b["p99"]), f3(a["p99"]), fr(r99), "< 2.00" if send else "", (r99 < 2.0) if send else None)
        rc = a["cpu_us"] / b["cpu_us"] if b["cpu_us"] else float("nan")
        row("", "CPU us/req", f"{b['cpu_us']:.1f}", f"{a['cpu_us']:.1f}", fr(rc), "<= 1.50" if send else "",
            (rc <= 1.5) if send else None)
        # How often the load generator took the server's core: a busier server
        # is preempted more, and each preemption costs it CPU and cache.
        row("", "preempted /req", f"{b['preempt']:.3f}", f"{a['preempt']:.3f}", "")
        for name, x in (("bare", b), ("a2a", a)):
            if x["non200"] or x["errors"]:
                notes.append(f"{label}: {name} had {x['non200']} non-200 answers, errors {x['errors']}")
                row("", f"{name} failures", "", str(x["non200"] + sum(x["errors"].values())), "", "0", False)
            if test.startswith("send") and check_size[name] and x["size"] < 0.8 * check_size[name]:
                notes.append(f"{label}: {name} answers average {x['size']} bytes, the checked success was "
                             f"{check_size[name]} bytes: some answers under load are not successes")
                row("", f"{name} body size", "", str(x["size"]), "", f"~{check_size[name]}", False)

    mb = lambda kib: int(kib) * 1024 / 1e6  # VmRSS is in KiB; targets are in MB (10^6 bytes)
    row("server RSS", "idle MB", f"{mb(idle_bare):.1f}", f"{mb(idle_a2a):.1f}", fr(int(idle_a2a) / int(idle_bare)),
        "< 10 MB", mb(idle_a2a) < 10)
    row("", "after load MB", f"{mb(loaded_bare):.1f}", f"{mb(loaded_a2a):.1f}", fr(int(loaded_a2a) / int(loaded_bare)))
    if int(idle_cli):
        row("", "idle MB, a2a serve", "", f"{mb(idle_cli):.1f}", fr(int(idle_cli) / int(idle_bare)))

    p = probe("first")
    if p and p.get("first_event"):
        fe = p["first_event"]
        row("stream: first event", "median ms", "", f3(fe["median_ms"]), "", "< 1 ms", fe["median_ms"] < 1.0 and p["failures"] == 0)
        row("", "p99 ms", "", f3(fe["p99_ms"]), "")
        if p["failures"]:
            notes.append(f"first event: {p['failures']} of {p['requests']} requests failed: {p['errors']}")
    else:
        row("stream: first event", "median ms", "", "failed", "", "< 1 ms", False)
        notes.append("first-event probe failed: " + open(f"{work}/probe-first.log").read().strip()[-500:])

    p = probe("chunks")
    if p and p.get("completed"):
        c = p["completed"]
        ok = c["median_ms"] < 2.0 and p["failures"] == 0 and c["n"] == p["requests"]
        row("stream: 100 chunks", "median ms", "", f3(c["median_ms"]), "", "< 2 ms", ok)
        row("", "p99 ms", "", f3(c["p99_ms"]), "")
        row("", "events/stream", "", f"{p['events_median']} ({p['events_min']}-{p['events_max']})", "")
        if p["failures"] or p["not_completed"]:
            notes.append(f"100-chunk stream: failures {p['errors']}, not completed {p['not_completed']}")
    else:
        row("stream: 100 chunks", "median ms", "", "failed", "", "< 2 ms", False)
        notes.append("100-chunk probe failed: " + open(f"{work}/probe-chunks.log").read().strip()[-500:])

    p = probe("hold")
    if p:
        held = p.get("rss_held_kib") or 0
        ok = p["open_at_end"] == streams and held and mb(held) < 300
        row(f"stream: {streams} held", "open at end", "", f"{p['open_at_end']}/{streams}", "", f"{streams}",
            p["open_at_end"] == streams)
        row("", "RSS held MB", "", f"{mb(held):.1f}", "", "< 300 MB", bool(ok))
        row("", "RSS before MB", "", f"{mb(pre_hold):.1f}", "")
        if p["failed"] or p["closed_early"]:
            notes.append(f"hold: opened {p['opened']}, failed {p['failed']}, closed by the server during the hold "
                         f"{p['closed_early']}; errors {p['errors']}"
                         + (" (streams closing early: the hold body does not keep the stream open; set BENCH_HOLD_BODY)"
                            if p["closed_early"] else ""))
    else:
        row(f"stream: {streams} held", "open at end", "", "failed", "", f"{streams}", False)
        notes.append("hold probe failed: " + open(f"{work}/probe-hold.log").read().strip()[-500:])

# The durable rows: memory / sqlite / filled columns of the same binary.
drows = []
if os.path.exists(f"{work}/fill.txt"):
    fill = int(open(f"{work}/fill.txt").read())
    def drow(test, metric, mem, sq, filled, ratio, target="", ok=None):
        drows.append((test, metric, mem, sq, filled, ratio, target, "" if ok is None else ("PASS" if ok else "FAIL")))
        if ok is not None:
            checks.append(ok)
    for test, label in [("send-c1", "SendMessage c=1"), ("send-c16", "SendMessage c=16"), ("send-c64", "SendMessage c=64")]:
        m, s_, f = load("mem", test), load("sqlite", test), load("filled", test)
        r = s_["rps"] / m["rps"] if m["rps"] else float("nan")
        t16 = test == "send-c16"
        drow(label, "req/s", f1(m["rps"]), f1(s_["rps"]), f1(f["rps"]), fr(r), ">= 0.33" if t16 else "", (r >= 0.33) if t16 else None)
        rf = f["rps"] / s_["rps"] if s_["rps"] else float("nan")
        drow("", "filled/empty", "", "", fr(rf), "", ">= 0.90" if t16 else "", (rf >= 0.9) if t16 else None)
        drow("", "p50 ms", f3(m["p50"]), f3(s_["p50"]), f3(f["p50"]), fr(s_["p50"] / m["p50"] if m["p50"] else float("nan")))
        t64 = test == "send-c64"
        drow("", "p99 ms", f3(m["p99"]), f3(s_["p99"]), f3(f["p99"]), fr(s_["p99"] / m["p99"] if m["p99"] else float("nan")),
             "< 10 ms" if t64 else "", (s_["p99"] < 10 and f["p99"] < 10) if t64 else None)
        rc = s_["cpu_us"] / m["cpu_us"] if m["cpu_us"] else float("nan")
        drow("", "CPU us/req", f"{m['cpu_us']:.1f}", f"{s_['cpu_us']:.1f}", f"{f['cpu_us']:.1f}", fr(rc),
             "<= 3.00" if t16 else "", (rc <= 3.0) if t16 else None)
        for name, x in (("memory", m), ("sqlite", s_), ("filled", f)):
            if x["non200"] or x["errors"]:
                notes.append(f"durable {label}: {name} had {x['non200']} non-200 answers, errors {x['errors']}")
                drow("", f"{name} failures", "", "", str(x["non200"] + sum(x["errors"].values())), "", "0", False)
    pm, ps = probe("chunks-mem"), probe("chunks-sqlite")
    if pm and ps and pm.get("completed") and ps.get("completed"):
        cm, cs = pm["completed"], ps["completed"]
        r = cs["median_ms"] / cm["median_ms"] if cm["median_ms"] else float("nan")
        ok = r <= 2.0 and ps["failures"] == 0 and cs["n"] == ps["requests"]
        drow("stream: 100 chunks", "median ms", f3(cm["median_ms"]), f3(cs["median_ms"]), "", fr(r), "<= 2.00", ok)
        drow("", "p99 ms", f3(cm["p99_ms"]), f3(cs["p99_ms"]), "", "")
    else:
        drow("stream: 100 chunks", "median ms", "", "failed", "", "", "<= 2.00", False)

# The PostgreSQL rows: one replica, then two replicas loaded together.
prows = []
if os.path.exists(f"{work}/postgres.txt"):
    def prow(test, metric, one, two, ratio, target="", ok=None):
        prows.append((test, metric, one, two, ratio, target, "" if ok is None else ("PASS" if ok else "FAIL")))
        if ok is not None:
            checks.append(ok)
    one = load("pg1", "send-c64")
    a, b = load("pg1", "pair-c64"), load("pg2", "pair-c64")
    both = a["rps"] + b["rps"]
    r = both / one["rps"] if one["rps"] else float("nan")
    prow("SendMessage c=64", "req/s", f1(one["rps"]), f"{f1(both)} ({f1(a['rps'])} + {f1(b['rps'])})", fr(r),
         ">= 5,000 / >= 1.60", one["rps"] >= 5000 and r >= 1.6)
    prow("", "p50 ms", f3(one["p50"]), f"{f3(a['p50'])} / {f3(b['p50'])}", "")
    prow("", "p99 ms", f3(one["p99"]), f"{f3(a['p99'])} / {f3(b['p99'])}", "")
    prow("", "CPU us/req", f"{one['cpu_us']:.1f}", f"{a['cpu_us']:.1f} / {b['cpu_us']:.1f}", "")
    for name, x in (("one replica", one), ("replica 1 of 2", a), ("replica 2 of 2", b)):
        if x["non200"] or x["errors"]:
            notes.append(f"postgres {name}: {x['non200']} non-200 answers, errors {x['errors']}")
            prow("", f"{name} failures", str(x["non200"] + sum(x["errors"].values())), "", "", "0", False)
# The observability rows: off / --metrics / --otel of the same binary.
orows = []
if os.path.exists(f"{work}/sink-stats.json"):
    def orow(test, metric, off, met, otel, rm, ro, target="", ok=None):
        orows.append((test, metric, off, met, otel, rm, ro, target, "" if ok is None else ("PASS" if ok else "FAIL")))
        if ok is not None:
            checks.append(ok)
    for test, label in [("send-c1", "SendMessage c=1"), ("send-c16", "SendMessage c=16")]:
        o, m, t = load("off", test), load("metrics", test), load("otel", test)
        rm = m["rps"] / o["rps"] if o["rps"] else float("nan")
        ro = t["rps"] / o["rps"] if o["rps"] else float("nan")
        t16 = test == "send-c16"
        orow(label, "req/s", f1(o["rps"]), f1(m["rps"]), f1(t["rps"]), fr(rm), fr(ro),
             "metrics >= 0.95, otel >= 0.70" if t16 else "", (rm >= 0.95 and ro >= 0.70) if t16 else None)
        orow("", "p50 ms", f3(o["p50"]), f3(m["p50"]), f3(t["p50"]), "", "")
        orow("", "p99 ms", f3(o["p99"]), f3(m["p99"]), f3(t["p99"]), "", "")
        orow("", "CPU us/req", f"{o['cpu_us']:.1f}", f"{m['cpu_us']:.1f}", f"{t['cpu_us']:.1f}",
             fr(m["cpu_us"] / o["cpu_us"] if o["cpu_us"] else float("nan")),
             fr(t["cpu_us"] / o["cpu_us"] if o["cpu_us"] else float("nan")))
        for name, x in (("off", o), ("metrics", m), ("otel", t)):
            if x["non200"] or x["errors"]:
                notes.append(f"observability {label}: {name} had {x['non200']} non-200 answers, errors {x['errors']}")
    sink = json.load(open(f"{work}/sink-stats.json"))
    if not sink.get("requests"):
        notes.append("observability: otlp-sink received no trace export (is --otel exporting?)")
        checks.append(False)
    else:
        notes.append(f"observability: otlp-sink received {sink['requests']} exports, {sink['bytes']:,} bytes")

# The JWT-auth rows and the 0.3 rows: two columns of the same binary, a
# ratio and a target at c=16.
def pair_rows(first, second, target):
    out = []
    def xrow(test, metric, a, b, ratio, tgt="", ok=None):
        out.append((test, metric, a, b, ratio, tgt, "" if ok is None else ("PASS" if ok else "FAIL")))
        if ok is not None:
            checks.append(ok)
    for test, label in [("send-c1", "SendMessage c=1"), ("send-c16", "SendMessage c=16")]:
        x, y = load(first, test), load(second, test)
        r = y["rps"] / x["rps"] if x["rps"] else float("nan")
        t16 = test == "send-c16"
        xrow(label, "req/s", f1(x["rps"]), f1(y["rps"]), fr(r), f">= {target:.2f}" if t16 else "",
             (r >= target) if t16 else None)
        xrow("", "p50 ms", f3(x["p50"]), f3(y["p50"]), fr(y["p50"] / x["p50"] if x["p50"] else float("nan")))
        xrow("", "p99 ms", f3(x["p99"]), f3(y["p99"]), fr(y["p99"] / x["p99"] if x["p99"] else float("nan")))
        xrow("", "CPU us/req", f"{x['cpu_us']:.1f}", f"{y['cpu_us']:.1f}",
             fr(y["cpu_us"] / x["cpu_us"] if x["cpu_us"] else float("nan")))
        for name, z in ((first, x), (second, y)):
            if z["non200"] or z["errors"]:
                notes.append(f"{label}: {name} had {z['non200']} non-200 answers, errors {z['errors']}")
                xrow("", f"{name} failures", "", str(z["non200"] + sum(z["errors"].values())), "", "0", False)
    return out

arows = pair_rows("noauth", "jwt", 0.90) if os.path.exists(f"{work}/auth.txt") else []
vrows = pair_rows("v10", "v03", 0.85) if os.path.exists(f"{work}/v03.txt") else []

head = ("test", "metric", "bare", "a2a", "a2a/bare", "target", "result")
w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
fmt = lambda r: "  ".join(str(x).ljust(w[i]) if i < 2 or i == 5 else str(x).rjust(w[i]) for i, x in enumerate(r)).rstrip()
out = [
    f"A2A server benchmark  {time.strftime('%Y-%m-%d %H:%M:%S')}",
    f"machine: {os.cpu_count()} cores; load: {oha_version}, {duration} per run, {rounds} runs per server and test "
    "(alternating; medians), HTTP/1.1 keep-alive, loopback",
    f"a2a: {a2a_cmd}",
    f"bare: bare-server (axum, serde_json parse, fixed body); CPU us/req = (utime+stime) / responses",
    "",
    fmt(head),
    "  ".join("-" * x for x in w),
] + ([fmt(r) for r in rows] if rows else ["(not run: BENCH_MAIN=0)"])
def table(title, hd, rs):
    tw = [max(len(str(r[i])) for r in rs + [hd]) for i in range(len(hd))]
    tf = lambda r: "  ".join(str(x).ljust(tw[i]) if i < 2 or i == len(hd) - 2 else str(x).rjust(tw[i])
                             for i, x in enumerate(r)).rstrip()
    return ["", title, tf(hd), "  ".join("-" * x for x in tw)] + [tf(r) for r in rs]
if arows:
    out += table("JWT auth: `a2a serve --agent echo --store memory` (one binary) without auth, and with --auth-jwks FILE "
                 "--auth-issuer --auth-audience (ES256, keys cached), Authorization: Bearer on every request",
                 ("auth rows", "metric", "no auth", "JWT", "JWT/none", "target", "result"), arows)
if vrows:
    out += table("A2A 0.3: one `a2a serve --agent echo --store memory`, the 1.0 SendMessage (A2A-Version: 1.0) and "
                 "the 0.3 JSON-RPC message/send (no A2A-Version header)",
                 ("0.3 rows", "metric", "1.0", "0.3", "0.3/1.0", "target", "result"), vrows)
if drows:
    dhead = ("durable rows", "metric", "memory", "sqlite", f"sqlite, {fill:,} stored", "sqlite/memory", "target", "result")
    dw = [max(len(str(r[i])) for r in drows + [dhead]) for i in range(len(dhead))]
    dfmt = lambda r: "  ".join(str(x).ljust(dw[i]) if i < 2 or i == 6 else str(x).rjust(dw[i]) for i, x in enumerate(r)).rstrip()
    out += ["", "durable store: `a2a serve --agent echo` (one binary), --store memory / sqlite:empty.db / sqlite:filled.db",
            dfmt(dhead), "  ".join("-" * x for x in dw)] + [dfmt(r) for r in drows]
if prows:
    phead = ("postgres rows", "metric", "one replica", "two replicas", "two/one", "target", "result")
    pw = [max(len(str(r[i])) for r in prows + [phead]) for i in range(len(phead))]
    pfmt = lambda r: "  ".join(str(x).ljust(pw[i]) if i < 2 or i == 5 else str(x).rjust(pw[i]) for i, x in enumerate(r)).rstrip()
    out += ["", "PostgreSQL store: `a2a serve --agent echo --store " + open(f"{work}/postgres.txt").read().strip()
            + "` (each process a replica)", pfmt(phead), "  ".join("-" * x for x in pw)] + [pfmt(r) for r in prows]
if orows:
    ohead = ("observability rows", "metric", "off", "--metrics", "--otel", "metrics/off", "otel/off", "target", "result")
    ow = [max(len(str(r[i])) for r in orows + [ohead]) for i in range(len(ohead))]
    ofmt = lambda r: "  ".join(str(x).ljust(ow[i]) if i < 2 or i == 7 else str(x).rjust(ow[i]) for i, x in enumerate(r)).rstrip()
    out += ["", "observability: `a2a serve --agent echo --store memory` (one binary) with nothing on, with --metrics, "
            "and with --otel (every span exported over OTLP HTTP to otlp-sink)",
            ofmt(ohead), "  ".join("-" * x for x in ow)] + [ofmt(r) for r in orows]
passed, failed = sum(checks), len(checks) - sum(checks)
out += ["", f"targets: {passed} passed, {failed} failed"]
if notes:
    out += ["", "notes:"] + [f"- {n}" for n in notes]
text = "\n".join(out) + "\n"
os.makedirs(os.path.dirname(report), exist_ok=True)
with open(report, "w") as f:
    f.write(text)
print(text)
sys.exit(1 if failed else 0)
PY
echo "report written to $REPORT (raw data in $WORK)" >&2
exit $STATUS

#!/usr/bin/env bash
# Deterministic cost benchmark: instructions per request of the server
# process, counted by valgrind's callgrind (a count, not a time: the same
# binary on the same machine gives the same figure run after run, whatever
# the load of the machine).
#
#   scripts/icount.sh            # full run: every server, binding and scenario,
#                                # table in target/icount-report.txt
#   scripts/icount.sh --check    # the CI guard: a subset (about 3 minutes on two
#                                # cores); exit 1 when a case costs more than 3%
#                                # over benches/icount-baseline.toml
#   scripts/icount.sh --update   # full run, twice, and writes the baseline
#                                # (commit it with a message that says why)
#
# Each server runs under `valgrind --tool=callgrind` with one tokio worker
# (TOKIO_WORKER_THREADS=1, --workers 1) on 127.0.0.1. The load driver
# `icount-load` (crates/agentwire-bench) runs outside valgrind: per case it
# warms the server up, zeroes the counters (callgrind_control --zero), sends
# N requests one after the other, dumps the counters (callgrind_control
# --dump) and divides the instruction total (Ir) of the server process, all
# its threads, by N. Servers:
#   bare           bare-server (axum, fixed answer): JSON-RPC SendMessage only
#   agent-server   the library alone: A2aServer, memory store, echo agent
#   agent-server-log     the same with the request log of a2a serve (--request-log)
#   agent-server-sqlite  the same with the SQLite store (--sqlite FILE)
#                  (these two only when named in ICOUNT_SERVERS: the cost of
#                  the line and of the durable store in the library, symbols kept)
#   a2a-memory     a2a serve --agent echo --store memory
#   a2a-sqlite     a2a serve --agent echo --store sqlite:FILE (a new file)
#   a2a-postgres   a2a serve --agent echo --store $A2A_TEST_POSTGRES_URL (when set;
#                  reported, not in the baseline: the database's content varies)
#   a2a-otel       a2a serve --agent echo --store memory --otel, every span exported
#                  over OTLP/HTTP to otlp-sink (only when named in ICOUNT_SERVERS)
# Scenarios: send (SendMessage "hello"), stream (SendStreamingMessage of 100
# words: 100 artifact chunks; Ir per stream), get (GetTask), list (ListTasks,
# page of 10); bindings jsonrpc, rest (HTTP+JSON), grpc.
#
# The check: a case fails when it costs more than ICOUNT_TOLERANCE (3%) over
# its baseline, both in instructions and in instructions relative to the
# bare server of the same run (a machine whose glibc or valgrind counts
# differently moves both servers). A failing server is measured again once;
# it fails only if it fails again.
#
# Settings (environment):
#   ICOUNT_SKIP_BUILD=1    use the binaries in target/release (CI builds them first)
#   ICOUNT_SCALE=1         multiplies the request counts (full run: send/get/list
#                          200, stream 10; check: send/get/list 100, stream 5)
#   ICOUNT_TOLERANCE=3     allowed increase over the baseline, in percent
#   ICOUNT_PORT=18440      first port (one per server, in turn)
#   ICOUNT_BASELINE=FILE   the baseline (default benches/icount-baseline.toml)
#   A2A_TEST_POSTGRES_URL  adds the a2a-postgres rows (full run only)
#   ICOUNT_SERVERS="..."   the servers measured instead of the default list
#                          (bare agent-server a2a-memory a2a-sqlite; check: bare
#                          a2a-memory a2a-sqlite); bare should stay first
#   ICOUNT_SERVER_ENV="K=V ..."  extra environment of the servers
#   ICOUNT_BIN_DIR=DIR     where the binaries are (default target/release)
#   ICOUNT_RUNS=1          full runs (2 or more: the spread between runs is reported)
#
# Exit status: 0 measured (and, with --check, within the tolerance), 1 a case
# over the tolerance, 2 setup error.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
mkdir -p "$TARGET"
REPORT=$TARGET/icount-report.txt
BASELINE=${ICOUNT_BASELINE:-$ROOT/benches/icount-baseline.toml}
TOLERANCE=${ICOUNT_TOLERANCE:-3}
SCALE=${ICOUNT_SCALE:-1}
PORT=${ICOUNT_PORT:-18440}

die() { echo "icount.sh: error: $*" >&2; exit 2; }
log() { echo "== $*" >&2; }

MODE=full
case "${1:-}" in
    "") ;;
    --check) MODE=check ;;
    --update) MODE=update ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1 (--check, --update or nothing)" ;;
esac

command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
command -v callgrind_control >/dev/null || die "callgrind_control not found (apt-get install valgrind)"
command -v python3 >/dev/null || die "python3 is needed for the report"
command -v curl >/dev/null || die "curl is needed to wait for the servers"

if [[ ${ICOUNT_SKIP_BUILD:-0} != 1 ]]; then
    log "building a2a, agent-server, bare-server and icount-load (release)"
    cargo build --release --locked -p agentwire-cli -p agentwire-bench \
        --bin a2a --bin agent-server --bin bare-server --bin icount-load ||
        die "cargo build --release failed"
fi
BIN=${ICOUNT_BIN_DIR:-$TARGET/release}
need() { [[ -x $BIN/$1 ]] || die "$BIN/$1 missing (cargo build --release --locked -p agentwire-cli -p agentwire-bench --bin $1)"; }
need icount-load

WORK=$(mktemp -d /tmp/a2a-icount.XXXXXX)
SERVER_PID=""
SINK_PID=""
SINK_PORT=""
# start_sink: otlp-sink on a loopback port (once), for a2a-otel.
start_sink() {
    [[ -n $SINK_PID ]] && return 0
    [[ -x $BIN/otlp-sink ]] || die "$BIN/otlp-sink missing (cargo build --release -p agentwire-bench)"
    SINK_PORT=$((PORT + 50))
    "$BIN/otlp-sink" --port "$SINK_PORT" >"$WORK/sink.log" 2>&1 &
    SINK_PID=$!
    for _ in $(seq 100); do
        curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$SINK_PORT/stats" && return 0
        sleep 0.1
    done
    die "otlp-sink did not start: $(cat "$WORK/sink.log")"
}
cleanup() {
    if [[ -n $SINK_PID ]]; then
        kill "$SINK_PID" 2>/dev/null || true
        wait "$SINK_PID" 2>/dev/null || true
    fi
    if [[ -n $SERVER_PID ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

n() { echo $(($1 * SCALE)); }
# The cases of a server: BINDING:SCENARIO:N,...
cases_for() {
    local server=$1 out="" b
    if [[ $server == bare ]]; then
        echo "jsonrpc:send:$(n "$N_SEND")"
        return
    fi
    if [[ $MODE == check ]]; then
        case $server in
            a2a-memory)
                echo "jsonrpc:send:$(n "$N_SEND"),rest:send:$(n "$N_SEND"),grpc:send:$(n "$N_SEND"),jsonrpc:stream:$(n "$N_STREAM"),jsonrpc:get:$(n "$N_SEND"),jsonrpc:list:$(n "$N_SEND")"
                ;;
            a2a-sqlite) echo "jsonrpc:send:$(n "$N_SEND"),jsonrpc:get:$(n "$N_SEND")" ;;
            *) echo "jsonrpc:send:$(n "$N_SEND")" ;;
        esac
        return
    fi
    for b in jsonrpc rest grpc; do
        out+="$b:send:$(n "$N_SEND"),$b:stream:$(n "$N_STREAM"),$b:get:$(n "$N_SEND"),$b:list:$(n "$N_SEND"),"
    done
    echo "${out%,}"
}

# measure SERVER RESULTS_FILE: measure_once, and once more when the driver
# failed (a connection reset by a server slowed down by valgrind on a loaded
# machine is not a result).
measure() {
    measure_once "$1" "$2" 0 || measure_once "$1" "$2" 1
}

# measure_once SERVER RESULTS_FILE LAST: starts the server under callgrind,
# runs its cases with icount-load, appends "SERVER LABEL N IR" lines, stops
# it. A failing driver returns 1, or with LAST=1 ends the script.
measure_once() {
    local server=$1 results=$2 last=$3 port=$PORT cmd
    PORT=$((PORT + 1))
    case $server in
        bare) need bare-server; cmd=("$BIN/bare-server" --port "$port" --workers 1) ;;
        agent-server) need agent-server; cmd=("$BIN/agent-server" --agent echo --port "$port" --workers 1) ;;
        agent-server-log)
            need agent-server
            cmd=("$BIN/agent-server" --agent echo --port "$port" --workers 1 --request-log)
            ;;
        agent-server-sqlite)
            need agent-server
            rm -f "$WORK"/lib-tasks.db*
            cmd=("$BIN/agent-server" --agent echo --port "$port" --workers 1 --sqlite "$WORK/lib-tasks.db")
            ;;
        a2a-memory) cmd=("$BIN/a2a" serve --agent echo --store memory --port "$port") ;;
        a2a-sqlite)
            rm -f "$WORK"/tasks.db*
            cmd=("$BIN/a2a" serve --agent echo --store "sqlite:$WORK/tasks.db" --port "$port")
            ;;
        a2a-postgres) cmd=("$BIN/a2a" serve --agent echo --store "$A2A_TEST_POSTGRES_URL" --port "$port") ;;
        a2a-otel)
            start_sink
            cmd=(env OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK_PORT"
                OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_TRACES_SAMPLER=always_on
                "$BIN/a2a" serve --agent echo --store memory --port "$port" --otel)
            ;;
        *) die "unknown server $server" ;;
    esac
    [[ $server == a2a-* ]] && need a2a
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
        die "port $port is in use (set ICOUNT_PORT)"
    fi
    local out=$WORK/cg.$server.$port
    log "$server: ${cmd[*]##*/}"
    # shellcheck disable=SC2086
    (cd "$WORK" && exec env TOKIO_WORKER_THREADS=1 ${ICOUNT_SERVER_ENV:-} valgrind --tool=callgrind --callgrind-out-file="$out" \
        "${cmd[@]}") >"$WORK/$server.log" 2>&1 &
    SERVER_PID=$!
    local up=0
    for _ in $(seq 600); do
        if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/.well-known/agent-card.json"; then
            up=1
            break
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.2
    done
    if [[ $up != 1 ]]; then
        cat "$WORK/$server.log" >&2
        die "$server did not start under valgrind within 120 s"
    fi
    local status=0
    "$BIN/icount-load" --url "http://127.0.0.1:$port" --pid "$SERVER_PID" --out-file "$out" \
        --cases "$(cases_for "$server")" ${BARE_FLAG[$server]:-} >"$WORK/load.out" 2>"$WORK/load.err" || status=$?
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    rm -f "$out"*
    if [[ $status != 0 ]]; then
        grep -v '^==[0-9]' "$WORK/load.err" | head -20 >&2
        if [[ $last == 0 ]]; then
            log "icount-load failed against $server; measuring it again"
            return 1
        fi
        tail -20 "$WORK/$server.log" >&2
        die "icount-load failed against $server (twice)"
    fi
    awk -v s="$server" '$1 == "case" {print s, $2, $3, $4}' "$WORK/load.out" >>"$results"
}

declare -A BARE_FLAG=([bare]=--bare)
# configure MODE: the servers and counts of a full run or of the check.
configure() {
    MODE=$1
    SERVERS=(bare agent-server a2a-memory a2a-sqlite)
    N_SEND=200
    N_STREAM=10
    if [[ $MODE == check ]]; then
        SERVERS=(bare a2a-memory a2a-sqlite)
        N_SEND=100
        N_STREAM=5
    elif [[ -n ${A2A_TEST_POSTGRES_URL:-} ]]; then
        SERVERS+=(a2a-postgres)
    fi
    if [[ -n ${ICOUNT_SERVERS:-} ]]; then
        read -r -a SERVERS <<<"$ICOUNT_SERVERS"
    fi
}
# run_all MODE RUNS: measures every server of MODE, RUNS times, into
# $WORK/results.MODE.RUN.
run_all() {
    configure "$1"
    local run server
    for run in $(seq "$2"); do
        for server in "${SERVERS[@]}"; do
            measure "$server" "$WORK/results.$1.$run"
        done
    done
}

started=$SECONDS
if [[ $MODE == update ]]; then
    # The baseline holds both: the full run's figures and the check's (the
    # check runs fewer requests, so its stores hold fewer tasks: it is
    # compared with figures made the same way).
    run_all full 2
    run_all check 2
    MODE=update
else
    RUNS=${ICOUNT_RUNS:-1}
    run_all "$MODE" "$RUNS"
fi
log "measured in $((SECONDS - started)) s"

report() {
    python3 "$ROOT/scripts/icount_report.py" --mode "$MODE" --baseline "$BASELINE" \
        --tolerance "$TOLERANCE" --root "$ROOT" "$@"
}

if [[ $MODE == update ]]; then
    report --write-baseline "full:$WORK/results.full.1" "full:$WORK/results.full.2" \
        "check:$WORK/results.check.1" "check:$WORK/results.check.2" >"$WORK/report.txt" || true
    tee "$REPORT" <"$WORK/report.txt"
    log "wrote $BASELINE: commit it with a message that says why the cost changed"
    exit 0
fi

RESULTS=()
for run in $(seq "$RUNS"); do RESULTS+=("$MODE:$WORK/results.$MODE.$run"); done
status=0
report "${RESULTS[@]}" >"$WORK/report.txt" || status=$?
if [[ $status == 1 && $MODE == check ]]; then
    # Measure the failing servers (and the bare server, the reference) again.
    cat "$WORK/report.txt"
    mapfile -t again < <(awk '$1 == "FAILED" {print $2}' "$WORK/report.txt" | sort -u)
    log "over the tolerance: ${again[*]}; measuring again once"
    cp "$WORK/results.check.1" "$WORK/results.check.2"
    for server in bare "${again[@]}"; do
        grep -v "^$server " "$WORK/results.check.2" >"$WORK/results.tmp" || true
        mv "$WORK/results.tmp" "$WORK/results.check.2"
        measure "$server" "$WORK/results.check.2"
    done
    status=0
    report "check:$WORK/results.check.2" >"$WORK/report.txt" || status=$?
fi
tee "$REPORT" <"$WORK/report.txt"
[[ $status == 2 ]] && exit 2
exit "$status"

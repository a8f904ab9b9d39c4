#!/usr/bin/env bash
# The peers benchmark: the echo agent of every A2A SDK in the same run.
#
#   scripts/peers-bench.sh            # report in target/peers-report.md
#   scripts/peers-bench.sh --dry-run  # print the plan (servers, commands, loads) and stop
#   scripts/peers-bench.sh --help
#
# Servers (one echo agent each, answering a JSON-RPC SendMessage with a
# completed task whose artifact "echo" repeats the message's text):
#   bare           target/release/bare-server: hyper, a canned answer, no A2A work
#   memory         target/release/a2a serve --agent echo --store memory
#   sqlite         target/release/a2a serve --agent echo --store sqlite:FILE (the default store)
#   rust-official  benches/peers/rust-official: the official Rust SDK (crates a2a-lf, a2a-server-lf)
#   rust-tomtom    benches/peers/rust-tomtom: tomtom215's a2a-rust (crate a2a-protocol-server)
#   js             benches/peers/js: the official JavaScript SDK (npm @a2a-js/sdk 1.x)
#   python         benches/peers/python: the official Python SDK (PyPI a2a-sdk 1.x)
#
# It builds the two Rust peers (cargo build --release, in their own target
# directory, cached), installs the JavaScript and Python packages (pinned,
# cached), starts every server on 127.0.0.1, checks that each answers the
# same SendMessage with a completed task echoing the text, then loads them
# with oha in turn: for each concurrency, ROUNDS rounds, each round loading
# every server once (round-robin, so that a burst of load from the machine's
# other tenants hits all of them rather than one). For each run it reads
# oha's req/s and p99 and the server process's CPU time (utime + stime of
# /proc/PID/stat) before and after; the table gives the median over the
# rounds of req/s, p99 and CPU per request, and each server's resident
# memory (VmRSS) after all the runs. The machine's load average is printed
# before and after each round. Then the two targets of the peers' issue are
# evaluated (PASS / MISS): our CPU per request (memory store) at most half
# of the best peer's at every concurrency, and the SQLite store's req/s at
# least 0.6x the memory store's at c=16.
#
# Exit status: 0 when the run completed (whatever the targets say: this is a
# benchmark, not a test), 2 when the setup failed (a tool or binary missing,
# a build or install failing, a server not starting or answering wrongly).
#
# Our binaries are not built here (a release build of the workspace is
# long): build them first with
#   cargo build --release -p agentwire-cli -p agentwire-bench
# or point PEERS_A2A_BIN / PEERS_BARE_BIN at existing ones.
#
# Settings (environment):
#   PEERS_DURATION=5s        oha duration of each load run
#   PEERS_WARMUP=2s          warm-up load of each server at c=16 (0 skips it)
#   PEERS_ROUNDS=3           rounds per concurrency (the median is reported)
#   PEERS_CONCURRENCY="1 16 64"
#   PEERS="bare memory sqlite rust-official rust-tomtom js python"
#                            the servers, in their round-robin order
#   PEERS_PORT=18200         first loopback port (one port per server, in order)
#   PEERS_A2A_BIN=...        the a2a binary (default: target/release/a2a)
#   PEERS_BARE_BIN=...       bare-server (default: target/release/bare-server)
#   PEERS_TARGET_DIR=...     the Rust peers' target directory
#                            (default: $CARGO_TARGET_DIR/peers or target/peers)
#   PEERS_VENV=...           the Python virtualenv (default: <repo>/.venv-interop,
#                            the one of interop/python, same pinned requirements)
#   PEERS_SKIP_INSTALL=1     build and install nothing (use what is there)
#   PEERS_REPORT=...         the report (default: target/peers-report.md, or under
#                            $CARGO_TARGET_DIR when that is set)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

usage() { sed -n '2,/^set -euo/p' "$ROOT/scripts/peers-bench.sh" | sed '$d' | sed 's/^# \{0,1\}//'; }
DRY=0
for arg in "$@"; do
    case $arg in
        -h | --help) usage; exit 0 ;;
        -n | --dry-run) DRY=1 ;;
        *) echo "peers-bench.sh: unknown argument: $arg (see --help)" >&2; exit 2 ;;
    esac
done

DURATION=${PEERS_DURATION:-5s}
WARMUP=${PEERS_WARMUP:-2s}
ROUNDS=${PEERS_ROUNDS:-3}
read -r -a CONCURRENCY <<<"${PEERS_CONCURRENCY:-1 16 64}"
read -r -a SERVERS <<<"${PEERS:-bare memory sqlite rust-official rust-tomtom js python}"
PORT0=${PEERS_PORT:-18200}
A2A_BIN=${PEERS_A2A_BIN:-$TARGET/release/a2a}
BARE_BIN=${PEERS_BARE_BIN:-$TARGET/release/bare-server}
PEERS_TARGET=${PEERS_TARGET_DIR:-$TARGET/peers}
VENV=${PEERS_VENV:-$ROOT/.venv-interop}
REPORT=${PEERS_REPORT:-$TARGET/peers-report.md}
PEERS_DIR=$ROOT/benches/peers

die() { echo "peers-bench.sh: error: $*" >&2; exit 2; }
log() { echo "== $*" >&2; }

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "PEERS_ROUNDS must be a positive number (got '$ROUNDS')"
[[ ${#CONCURRENCY[@]} -gt 0 ]] || die "PEERS_CONCURRENCY is empty"
for c in "${CONCURRENCY[@]}"; do
    [[ $c =~ ^[1-9][0-9]*$ ]] || die "PEERS_CONCURRENCY: '$c' is not a positive number"
done
[[ ${#SERVERS[@]} -gt 0 ]] || die "PEERS is empty"

# ---------------------------------------------------------------- servers
WORK=$(mktemp -d /tmp/a2a-peers.XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# The command serving NAME on PORT (in CMD).
server_cmd() {
    local name=$1 port=$2
    case $name in
        bare) CMD=("$BARE_BIN" --port "$port") ;;
        memory) CMD=("$A2A_BIN" serve --agent echo --store memory --port "$port") ;;
        sqlite) CMD=("$A2A_BIN" serve --agent echo --store "sqlite:$WORK/sqlite.db" --port "$port") ;;
        rust-official) CMD=("$PEERS_TARGET/release/peer-rust-official" "$port") ;;
        rust-tomtom) CMD=("$PEERS_TARGET/release/peer-rust-tomtom" "$port") ;;
        js) CMD=(node "$PEERS_DIR/js/echo_server.mjs" "$port") ;;
        python) CMD=("$VENV/bin/python" "$PEERS_DIR/python/echo_server.py" "$port") ;;
        *) die "unknown server '$name' in PEERS (known: bare memory sqlite rust-official rust-tomtom js python)" ;;
    esac
}

declare -A PORT=() PID=()
i=0
for name in "${SERVERS[@]}"; do
    [[ -z ${PORT[$name]:-} ]] || die "server '$name' named twice in PEERS"
    PORT[$name]=$((PORT0 + i))
    i=$((i + 1))
    server_cmd "$name" "${PORT[$name]}"
done

if [[ $DRY == 1 ]]; then
    echo "servers (127.0.0.1):"
    for name in "${SERVERS[@]}"; do
        server_cmd "$name" "${PORT[$name]}"
        printf '  %-14s %s\n' "$name" "${CMD[*]}"
    done
    echo "loads: oha -z $DURATION -c C, C in ${CONCURRENCY[*]}; $ROUNDS round(s) per C, each round every server once; warm-up ${WARMUP} at c=16"
    echo "report: $REPORT"
    exit 0
fi

# ---------------------------------------------------------------- tools
OHA=$(command -v oha || true)
[[ -z $OHA && -x $HOME/.cargo/bin/oha ]] && OHA=$HOME/.cargo/bin/oha
[[ -n $OHA ]] || die "oha not found. Install it with: cargo install oha --locked   (then make sure ~/.cargo/bin is on PATH)"
command -v python3 >/dev/null || die "python3 is needed to parse oha's JSON output"
command -v curl >/dev/null || die "curl is needed for the answer checks"
CLK_TCK=$(getconf CLK_TCK)
has() { local s; for s in "${SERVERS[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }

# ---------------------------------------------------------------- build and install
if has bare; then [[ -x $BARE_BIN ]] || die "$BARE_BIN missing (cargo build --release -p agentwire-bench, or set PEERS_BARE_BIN)"; fi
if has memory || has sqlite; then [[ -x $A2A_BIN ]] || die "$A2A_BIN missing (cargo build --release -p agentwire-cli, or set PEERS_A2A_BIN)"; fi
if [[ ${PEERS_SKIP_INSTALL:-0} != 1 ]]; then
    for peer in rust-official rust-tomtom; do
        has "$peer" || continue
        log "building $peer (cargo build --release --locked, target $PEERS_TARGET)"
        cargo build --release --locked --manifest-path "$PEERS_DIR/$peer/Cargo.toml" --target-dir "$PEERS_TARGET" \
            || die "building $peer failed"
    done
    if has js; then
        command -v npm >/dev/null || die "node and npm are needed for the js peer (Debian: apt-get install nodejs npm)"
        # npm ci only when node_modules does not hold the locked packages
        # (npm's record of them lacks the lock file's root entry "").
        locked() { node -p 'const p = require(process.argv[1]).packages; delete p[""]; JSON.stringify(p)' "$1" 2>/dev/null; }
        if ! cmp -s <(locked "$PEERS_DIR/js/package-lock.json") <(locked "$PEERS_DIR/js/node_modules/.package-lock.json"); then
            log "installing the js peer's pinned packages (npm ci)"
            (cd "$PEERS_DIR/js" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >&2) || die "npm ci failed in benches/peers/js"
        fi
    fi
    if has python; then
        if [[ ! -x $VENV/bin/python ]]; then
            log "creating the virtualenv $VENV"
            python3 -m venv "$VENV" || die "cannot create the virtualenv $VENV"
        fi
        log "installing interop/python/requirements.txt into $VENV"
        timeout 600 "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$ROOT/interop/python/requirements.txt" \
            || die "pip install -r interop/python/requirements.txt failed"
    fi
fi
if has js; then command -v node >/dev/null || die "node is needed for the js peer"; fi

# ---------------------------------------------------------------- start
for name in "${SERVERS[@]}"; do
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:${PORT[$name]}/"; then
        die "port ${PORT[$name]} ($name) is already in use (set PEERS_PORT)"
    fi
done

# start NAME: starts the server in the background and waits (30 s at most)
# until its agent card answers.
start() {
    local name=$1 port=${PORT[$1]} pid
    server_cmd "$name" "$port"
    log "starting $name on port $port: ${CMD[*]}"
    "${CMD[@]}" >"$WORK/$name.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 300); do
        if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port/.well-known/agent-card.json"; then
            PID[$name]=$pid
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.log" >&2; die "$name exited at start"; }
        sleep 0.1
    done
    cat "$WORK/$name.log" >&2
    die "$name did not serve /.well-known/agent-card.json on port $port within 30 s"
}

SEND_BODY=$WORK/send.json
TEXT="hello from the peers bench"
printf '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"%s"}]}}}\n' \
    "$TEXT" >"$SEND_BODY"

# check NAME: one SendMessage; the answer must be a completed task whose
# artifacts hold the text sent (oha counts any HTTP 200 as a success, even a
# JSON-RPC error). The bare server's canned answer is only checked to be a
# completed task.
check() {
    local name=$1 code out=$WORK/check-$1.json
    code=$(curl -s --max-time 10 -o "$out" -w '%{http_code}' -X POST -H 'A2A-Version: 1.0' \
        -H 'Content-Type: application/json' --data-binary "@$SEND_BODY" "http://127.0.0.1:${PORT[$name]}/") \
        || die "$name: the SendMessage request failed"
    [[ $code == 200 ]] || die "$name: SendMessage answered HTTP $code: $(head -c 400 "$out")"
    python3 - "$out" "$TEXT" "$name" <<'EOF' || die "$name: wrong answer to SendMessage: $(head -c 600 "$out")"
import json, sys
path, text, name = sys.argv[1:4]
answer = json.load(open(path))
assert "error" not in answer, "a JSON-RPC error"
task = answer["result"]["task"]
assert task["status"]["state"] == "TASK_STATE_COMPLETED", "not a completed task"
if name != "bare":
    texts = [p.get("text") for a in task.get("artifacts", []) for p in a.get("parts", [])]
    assert texts == [text], f"artifact texts {texts}, expected [{text!r}]"
EOF
}

for name in "${SERVERS[@]}"; do start "$name"; done
for name in "${SERVERS[@]}"; do
    check "$name"
    log "$name answers: $(head -c 300 "$WORK/check-$name.json")"
done

# ---------------------------------------------------------------- loads
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# load NAME C TAG: one oha run; keeps oha's JSON and the server's CPU ticks.
load() {
    local name=$1 c=$2 tag=$3 dur=${4:-$DURATION} pid=${PID[$1]} t0 t1
    t0=$(cpu_ticks "$pid")
    "$OHA" -z "$dur" -c "$c" --no-tui --output-format json -o "$WORK/oha-$name-$tag.json" \
        -m POST -H 'A2A-Version: 1.0' -T application/json -D "$SEND_BODY" "http://127.0.0.1:${PORT[$name]}/" >/dev/null \
        || die "oha failed ($name, c=$c)"
    t1=$(cpu_ticks "$pid")
    echo $((t1 - t0)) >"$WORK/cpu-$name-$tag.txt"
    kill -0 "$pid" 2>/dev/null || die "$name died during its load (log: $(tail -5 "$WORK/$name.log"))"
    log "$name c=$c $tag: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print("%.0f req/s" % s["requestsPerSec"])' "$WORK/oha-$name-$tag.json")"
}

if [[ $WARMUP != 0 ]]; then
    log "warm-up ($WARMUP each at c=16)"
    for name in "${SERVERS[@]}"; do load "$name" 16 warmup "$WARMUP"; done
fi
: >"$WORK/loadavg.txt"
for c in "${CONCURRENCY[@]}"; do
    for round in $(seq "$ROUNDS"); do
        before=$(loadavg)
        for name in "${SERVERS[@]}"; do load "$name" "$c" "c$c-r$round"; done
        after=$(loadavg)
        log "c=$c round $round: load average $before before, $after after"
        echo "$c $round $before | $after" >>"$WORK/loadavg.txt"
    done
done
for name in "${SERVERS[@]}"; do
    rss_kib "${PID[$name]}" >"$WORK/rss-$name.txt"
    check "$name"
done

# ---------------------------------------------------------------- report
mkdir -p "$(dirname "$REPORT")"
python3 - "$WORK" "$REPORT" "$CLK_TCK" "$ROUNDS" "$DURATION" "$("$OHA" --version 2>/dev/null | head -1)" "${#CONCURRENCY[@]}" "${CONCURRENCY[@]}" "${SERVERS[@]}" <<'EOF'
import json, os, statistics, sys, subprocess

work, report, clk_tck, rounds, duration, oha, nc = sys.argv[1:8]
clk_tck, rounds, nc = int(clk_tck), int(rounds), int(nc)
concurrency = [int(c) for c in sys.argv[8:8 + nc]]
servers = sys.argv[8 + nc:]
# The versions pinned in benches/peers (keep in step with them).
LABEL = {
    "bare": "bare hyper server (no A2A work)",
    "memory": "agentwire, memory store",
    "sqlite": "agentwire, SQLite store",
    "rust-official": "official Rust SDK (a2a-server-lf 0.5.3)",
    "rust-tomtom": "tomtom215/a2a-rust (a2a-protocol-server 0.15.0)",
    "js": "a2a-js (@a2a-js/sdk 1.3.0, Node %s)",
    "python": "a2a-python (a2a-sdk 1.3.0, uvicorn)",
}
PEERS = ["rust-official", "rust-tomtom", "js", "python"]
try:
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
except OSError:
    node = "?"
LABEL["js"] = LABEL["js"] % node

def run(name, tag):
    o = json.load(open(f"{work}/oha-{name}-{tag}.json"))
    s = o["summary"]
    codes = o.get("statusCodeDistribution", {})
    ok = int(codes.get("200", 0))
    # oha stops the requests in flight at the end of -z and counts them as
    # errors "aborted due to deadline": not failures of the server.
    bad = sum(int(v) for k, v in codes.items() if k != "200") + \
        sum(int(v) for k, v in o.get("errorDistribution", {}).items() if "deadline" not in k)
    ticks = int(open(f"{work}/cpu-{name}-{tag}.txt").read())
    cpu_us = ticks * 1e6 / clk_tck / ok if ok else float("nan")
    p99 = (o.get("latencyPercentiles") or {}).get("p99")
    return {"rps": s["requestsPerSec"], "p99_ms": p99 * 1e3 if p99 is not None else float("nan"),
            "cpu_us": cpu_us, "ok": ok, "bad": bad}

med = {}
for name in servers:
    for c in concurrency:
        runs = [run(name, f"c{c}-r{r}") for r in range(1, rounds + 1)]
        med[name, c] = {
            "rps": statistics.median(r["rps"] for r in runs),
            "rps_min": min(r["rps"] for r in runs),
            "rps_max": max(r["rps"] for r in runs),
            "p99_ms": statistics.median(r["p99_ms"] for r in runs),
            "cpu_us": statistics.median(r["cpu_us"] for r in runs),
            "bad": sum(r["bad"] for r in runs),
        }
rss = {name: int(open(f"{work}/rss-{name}.txt").read()) for name in servers}

out = []
out.append(f"# Peers benchmark: JSON-RPC SendMessage of an echo agent, loopback\n")
out.append(f"oha -z {duration} per run, {rounds} round(s) per concurrency, servers loaded in turn "
           f"(round-robin); each figure is the median of the rounds. CPU per request: the server "
           f"process's utime+stime over the run divided by the number of its HTTP 200 answers (CPU time counted in clock ticks of {1e3 / clk_tck:g} ms). "
           f"RSS: VmRSS after all the runs. {os.cpu_count()} CPUs; {oha or 'oha'} runs on the same machine.\n")
head = "| server | " + " | ".join(f"c={c} req/s | c={c} p99 ms" for c in concurrency) + " | " + \
    " | ".join(f"CPU us/req c={c}" for c in concurrency) + " | RSS after MiB |"
out.append(head)
out.append("|" + " --- |" * (1 + 3 * len(concurrency) + 1))
for name in servers:
    cells = [LABEL.get(name, name)]
    for c in concurrency:
        m = med[name, c]
        cells.append(f"{m['rps']:,.0f}")
        cells.append(f"{m['p99_ms']:.2f}")
    for c in concurrency:
        cells.append(f"{med[name, c]['cpu_us']:.1f}")
    cells.append(f"{rss[name] / 1024:.1f}")
    out.append("| " + " | ".join(cells) + " |")
bad = [(n, c, med[n, c]["bad"]) for n in servers for c in concurrency if med[n, c]["bad"]]
if bad:
    out.append("\nNon-200 answers or errors: " + ", ".join(f"{n} c={c}: {b}" for n, c, b in bad))
out.append("\nreq/s range over the rounds (min - max):\n")
out.append("| server | " + " | ".join(f"c={c}" for c in concurrency) + " |")
out.append("|" + " --- |" * (1 + len(concurrency)))
for name in servers:
    out.append("| " + name + " | " + " | ".join(
        f"{med[name, c]['rps_min']:,.0f} - {med[name, c]['rps_max']:,.0f}" for c in concurrency) + " |")

out.append("\nLoad average (1, 5, 15 min) before | after each round:\n")
out.append("| c | round | before | after |")
out.append("| --- | --- | --- | --- |")
for line in open(f"{work}/loadavg.txt"):
    c, r, rest = line.split(" ", 2)
    before, after = (x.strip() for x in rest.split("|"))
    out.append(f"| {c} | {r} | {before} | {after} |")

out.append("\n## Targets\n")
peers = [p for p in PEERS if p in servers]
if "memory" in servers and peers:
    ok_all = True
    for c in concurrency:
        best = min(peers, key=lambda p: med[p, c]["cpu_us"])
        ours, theirs = med["memory", c]["cpu_us"], med[best, c]["cpu_us"]
        ratio = ours / theirs if theirs else float("nan")
        ok = ratio <= 0.5
        ok_all &= ok
        extra = ""
        if "sqlite" in servers:
            extra = f"; SQLite store {med['sqlite', c]['cpu_us']:.1f} us ({med['sqlite', c]['cpu_us'] / theirs:.2f}x)"
        out.append(f"- CPU per request at c={c}: ours (memory) {ours:.1f} us, best peer {best} {theirs:.1f} us: "
                   f"{ratio:.2f}x (target <= 0.5x): {'PASS' if ok else 'MISS'}{extra}")
    out.append(f"- **our CPU per request at most half of the best peer's at every concurrency: {'PASS' if ok_all else 'MISS'}**")
else:
    out.append("- CPU per request against the best peer: not evaluated (needs memory and at least one peer)")
if "memory" in servers and "sqlite" in servers and 16 in concurrency:
    ratio = med["sqlite", 16]["rps"] / med["memory", 16]["rps"]
    out.append(f"- **SQLite store at c=16: {med['sqlite', 16]['rps']:,.0f} req/s, {ratio:.2f}x the memory store's "
               f"{med['memory', 16]['rps']:,.0f} (target >= 0.6x): {'PASS' if ratio >= 0.6 else 'MISS'}**")
else:
    out.append("- SQLite against memory at c=16: not evaluated (needs memory, sqlite and c=16)")

text = "\n".join(out) + "\n"
open(report, "w").write(text)
print(text)
EOF
log "report written to $REPORT"

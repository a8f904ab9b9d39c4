#!/usr/bin/env bash
# Replica scaling on PostgreSQL, measured with CPU caps.
#
#   scripts/replicas-bench.sh     # about 2 minutes; report in target/replicas-report.txt
#                                 # ($CARGO_TARGET_DIR when that is set)
#
# Two cores shared by PostgreSQL, the load generators and the servers
# cannot show scale-out with uncapped servers: one replica alone already
# fills them. Here each `a2a serve --agent echo --store postgres://...`
# runs in a cgroup of its own capped at Q CPU (cgroup v2 `cpu.max`, cgroup v1
# `cpu.cfs_quota_us`, or `systemd-run --scope -p CPUQuota=`, whichever the
# machine has), so that the replica, not the machine, is the bottleneck.
# For each cap, in interleaved rounds: replica A alone under one load
# generator (SendMessage, blocking, c=RB_CONC), then A and B together, one
# each (c=RB_CONC each), both on the same database. The report gives the total
# SendMessage/s of one and of two replicas (medians), the ratio, and the
# CPU each request cost the servers and PostgreSQL (utime+stime from /proc
# of the replicas, and of the PostgreSQL server's processes: the postmaster
# and its children, found from the port it listens on), and the
# statements and commits per request when pg_stat_statements is loaded.
#
# Streams and push across replicas are not exercised by this script: the
# ignored tests `cargo test -p agentwire-server --test cluster -- --ignored`
# and `cargo test -p agentwire-cli --test cluster -- --ignored` (two
# `a2a serve` processes) check them on PostgreSQL; RB_CROSS_TESTS=1 runs
# them against the bench's database after the load (debug build).
#
# Needs root (cgroups), oha (`cargo install oha --locked`) or ab, python3, curl,
# and PostgreSQL's Debian packages for the throwaway server (.ci/postgres).
#
# Exit status: 0 when the first cap's ratio (0.25 by default) is >= RB_TARGET
# with no failed request, 1 otherwise, 2 setup error.
#
# Settings (environment):
#   RB_CAPS="0.25 0.5"     CPU caps per replica, in CPUs (on a machine busy with
#                          other work, a replica may not use all of 0.25: see the
#                          report's "cap used"; RB_CAPS="0.15 0.25" then)
#   RB_ROUNDS=3            rounds per cap (one replica, then two)
#   RB_DURATION=5s         duration of each run
#   RB_CONC=64             connections of each load generator
#   RB_PORT=18610          port of replica A (B: RB_PORT+1)
#   RB_A2A=PATH            the a2a binary (default target/release/a2a)
#   RB_TARGET=1.7          two/one ratio the first cap must reach
#   BENCH_POSTGRES_URL=... an existing database instead of the throwaway server
#   RB_PG_PORT=25700       first port tried for the throwaway server
#   RB_CROSS_TESTS=1       run the replica tests above against the database afterwards
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
mkdir -p "$TARGET"
REPORT=$TARGET/replicas-report.txt

CAPS=${RB_CAPS:-0.25 0.5}
ROUNDS=${RB_ROUNDS:-3}
DURATION=${RB_DURATION:-5s}
CONC=${RB_CONC:-64}
PORT_A=${RB_PORT:-18610}
PORT_B=$((PORT_A + 1))
A2A=${RB_A2A:-$TARGET/release/a2a}
TARGET_RATIO=${RB_TARGET:-1.7}

die() { echo "replicas-bench.sh: error: $*" >&2; exit 2; }
log() { echo "== $*" >&2; }

[[ $(id -u) == 0 ]] || die "needs root (the replicas' CPU caps are cgroups)"
# The load generator: oha, or ApacheBench (`ab`, Debian's apache2-utils:
# HTTP/1.0 keep-alive) when oha is missing; RB_LOAD=ab forces it.
OHA=$(command -v oha || true)
[[ -z $OHA && -x $HOME/.cargo/bin/oha ]] && OHA=$HOME/.cargo/bin/oha
AB=$(command -v ab || true)
LOADGEN=${RB_LOAD:-}
if [[ -z $LOADGEN ]]; then
    if [[ -n $OHA ]]; then LOADGEN=oha; elif [[ -n $AB ]]; then LOADGEN=ab; fi
fi
case $LOADGEN in
    oha) [[ -n $OHA ]] || die "oha not found: cargo install oha --locked" ;;
    ab) [[ -n $AB ]] || die "ab not found: apt-get install apache2-utils" ;;
    *) die "no load generator: cargo install oha --locked (or apt-get install apache2-utils for ab)" ;;
esac
command -v python3 >/dev/null || die "python3 is needed"
command -v curl >/dev/null || die "curl is needed"
[[ -x $A2A ]] || die "$A2A missing (cargo build --release -p agentwire-cli --bin a2a, or RB_A2A=PATH)"
CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------- CPU caps
# One cgroup per replica. CAP_KIND: v2 (cpu.max), v1 (cpu.cfs_quota_us) or
# systemd (a transient scope; its quota is set with systemctl set-property).
PERIOD_US=100000
CAP_KIND=""
CG_BASE=""
for base in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    if [[ -f $base/cgroup.controllers ]] && grep -qw cpu "$base/cgroup.controllers"; then
        # The cpu controller must be on for the children of base.
        grep -qw cpu "$base/cgroup.subtree_control" 2>/dev/null ||
            echo +cpu >"$base/cgroup.subtree_control" 2>/dev/null || continue
        CAP_KIND=v2 CG_BASE=$base
        break
    fi
done
if [[ -z $CAP_KIND && -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
    CAP_KIND=v1 CG_BASE=/sys/fs/cgroup/cpu
fi
if [[ -z $CAP_KIND ]] && command -v systemd-run >/dev/null &&
    systemd-run --quiet --scope -p CPUQuota=50% true >/dev/null 2>&1; then
    CAP_KIND=systemd
fi
[[ -n $CAP_KIND ]] || die "no way to cap a process's CPU: no cgroup v2 cpu controller, no writable cgroup v1 cpu hierarchy, no working systemd-run --scope"

WORK=$(mktemp -d /tmp/a2a-replicas.XXXXXX)
chmod 711 "$WORK"
PIDS=()
GROUPS_MADE=()
PG_STARTED=0
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    if [[ $PG_STARTED == 1 ]]; then
        A2A_PG_DIR="$WORK/postgres" bash "$ROOT/.ci/postgres" stop 2>/dev/null || true
        # Hundreds of MB of tasks; the raw figures stay in WORK.
        rm -rf "$WORK/postgres"
    fi
    for g in "${GROUPS_MADE[@]}"; do
        # What is left in a group (a PostgreSQL server not started here)
        # goes back to the root of the hierarchy first.
        while read -r p; do
            echo "$p" >"$(dirname "$g")/cgroup.procs" 2>/dev/null || true
        done <"$g/cgroup.procs" 2>/dev/null
        rmdir "$g" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# cap NAME Q: sets replica NAME's cap to Q CPUs.
cap() {
    local name=$1 q=$2 quota
    quota=$(python3 -c 'import sys; print(int(float(sys.argv[1]) * int(sys.argv[2])))' "$q" "$PERIOD_US")
    case $CAP_KIND in
        v2) echo "$quota $PERIOD_US" >"$CG_BASE/a2a-replica-$name-$$/cpu.max" ;;
        v1) echo "$PERIOD_US" >"$CG_BASE/a2a-replica-$name-$$/cpu.cfs_period_us"
            echo "$quota" >"$CG_BASE/a2a-replica-$name-$$/cpu.cfs_quota_us" ;;
        systemd) systemctl set-property --runtime "a2a-replica-$name-$$.scope" \
            "CPUQuota=$(python3 -c 'import sys; print(round(float(sys.argv[1]) * 100))' "$q")%" ;;
    esac
}

# group NAME: makes replica NAME's cgroup, capped at the first cap (in this
# shell, so that cleanup removes it).
group() {
    local name=$1
    [[ $CAP_KIND == systemd ]] && return 0
    local g=$CG_BASE/a2a-replica-$name-$$
    mkdir "$g" || die "cannot create the cgroup $g"
    GROUPS_MADE+=("$g")
    cap "$name" "${CAPS%% *}"
}

# capped NAME CMD...: becomes CMD in replica NAME's cgroup (or scope); run in
# a background subshell, so that $! is the server's pid.
capped() {
    local name=$1
    shift
    case $CAP_KIND in
        v2 | v1)
            # The shell joins the group, then becomes the server.
            exec sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG_BASE/a2a-replica-$name-$$" "$@"
            ;;
        systemd)
            # systemd-run --scope runs the command in this process.
            exec systemd-run --quiet --scope --unit "a2a-replica-$name-$$" \
                -p "CPUQuota=$(python3 -c 'import sys; print(round(float(sys.argv[1]) * 100))' "${CAPS%% *}")%" "$@"
            ;;
    esac
}

# ---------------------------------------------------------------- PostgreSQL
PG_URL=${BENCH_POSTGRES_URL:-}
if [[ -z $PG_URL ]]; then
    log "starting a throwaway PostgreSQL server on loopback"
    PG_STARTED=1
    PG_URL=$(A2A_PG_DIR="$WORK/postgres" A2A_PG_PORT="${RB_PG_PORT:-25700}" bash "$ROOT/.ci/postgres" start) ||
        die "cannot start PostgreSQL (.ci/postgres)"
    # pg_stat_statements, for the statements per request (a restart: the
    # library loads at start). Best effort: the rows go without it.
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    pg_port=$(python3 -c 'import sys,urllib.parse as u; print(u.urlparse(sys.argv[1]).port)' "$PG_URL")
    as_pg_psql() { (cd /tmp && runuser -u postgres -- "$pg_bin/psql" -h "$WORK/postgres" -p "$pg_port" -U postgres -d a2a_test -qAt "$@"); }
    if as_pg_psql -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null 2>&1 &&
        (cd /tmp && runuser -u postgres -- "$pg_bin/pg_ctl" -D "$WORK/postgres/data" -w -t 60 restart \
            -l "$WORK/postgres/server.log" >/dev/null 2>&1) &&
        as_pg_psql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null 2>&1; then
        log "pg_stat_statements loaded"
    else
        log "pg_stat_statements not available: no statements per request"
    fi
fi
PG_PORT=$(python3 -c 'import sys,urllib.parse as u; print(u.urlparse(sys.argv[1]).port or 5432)' "$PG_URL")
# The PostgreSQL server's processes: the postmaster listening on PG_PORT
# and its children (backends, walwriter, checkpointer...). Empty when the
# server is not on this machine: no PostgreSQL CPU is reported then.
PG_MASTER=$(ss -Hltnp "sport = :$PG_PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2 || true)
# The postmaster's own pid when ss names a child.
if [[ -n $PG_MASTER ]]; then
    while :; do
        parent=$(awk '{print $4}' "/proc/$PG_MASTER/stat" 2>/dev/null || echo 1)
        [[ $(cat "/proc/$parent/comm" 2>/dev/null) == postgres* ]] || break
        PG_MASTER=$parent
    done
fi
# The PostgreSQL server's CPU: its processes (backends of connections that
# close included) in a CPU-accounting cgroup of their own when the cgroup
# hierarchy allows it (cgroup v1 cpuacct, or v2 with the cpu controller);
# otherwise the sum over its processes in /proc at the start and the end of
# each run (a backend that exits during a run is then missed).
PG_ACCT=""
if [[ -n $PG_MASTER ]]; then
    acct_dir=""
    if [[ $CAP_KIND == v2 ]]; then
        acct_dir=$CG_BASE/a2a-postgres-$$
    elif [[ -w /sys/fs/cgroup/cpuacct/cgroup.procs ]]; then
        acct_dir=/sys/fs/cgroup/cpuacct/a2a-postgres-$$
    fi
    if [[ -n $acct_dir ]] && mkdir "$acct_dir" 2>/dev/null; then
        GROUPS_MADE+=("$acct_dir")
        moved=1
        for p in $PG_MASTER $(awk -v m="$PG_MASTER" '$4 == m {print $1}' /proc/[0-9]*/stat 2>/dev/null); do
            echo "$p" >"$acct_dir/cgroup.procs" 2>/dev/null || moved=0
        done
        [[ $moved == 1 ]] && PG_ACCT=$acct_dir
    fi
fi
# pg_cpu_ns: the PostgreSQL server's CPU so far, in ns ("" without PG_ACCT).
pg_cpu_ns() {
    if [[ -f $PG_ACCT/cpuacct.usage ]]; then
        cat "$PG_ACCT/cpuacct.usage"
    elif [[ -f $PG_ACCT/cpu.stat ]]; then
        awk '/^usage_usec/ {print $2 * 1000}' "$PG_ACCT/cpu.stat"
    fi
}

# Statements and commits per request from pg_stat_statements and
# pg_stat_database, when the extension is loaded and psql is at hand.
PSQL=$(command -v psql || true)
[[ -n $PSQL ]] || PSQL=$(ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)
psql_url() { "$PSQL" "$PG_URL" -Atqc "$1" 2>/dev/null; }
PGSS=0
if [[ -n $PSQL ]] && psql_url "SELECT 1 FROM pg_stat_statements LIMIT 1" >/dev/null; then
    PGSS=1
fi

# ---------------------------------------------------------------- replicas
# ticks PID...: utime+stime of the processes, in clock ticks.
ticks() {
    python3 - "$@" <<'PY'
import sys
n = 0
for p in sys.argv[1:]:
    try:
        f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        n += int(f[11]) + int(f[12])
    except OSError:
        pass
print(n)
PY
}
# The PostgreSQL server's processes now (backends come and go; the pool keeps its own).
pg_pids() {
    [[ -n $PG_MASTER ]] || return 0
    echo "$PG_MASTER"
    awk -v m="$PG_MASTER" '$4 == m {print $1}' /proc/[0-9]*/stat 2>/dev/null || true
}

start() {
    local name=$1 port=$2
    group "$name"
    capped "$name" "$A2A" serve --agent echo --store "$PG_URL" --port "$port" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 150); do
        if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port/.well-known/agent-card.json"; then
            printf -v "PID_$name" %s "$pid"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.log" >&2; die "replica $name exited at start"; }
        sleep 0.1
    done
    die "replica $name did not answer on port $port within 15 s"
}

SEND_BODY=$WORK/send.json
cat >"$SEND_BODY" <<'EOF'
{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}
EOF
check() {
    local port=$1 out=$WORK/check-$1.json
    curl -s --max-time 5 -o "$out" -X POST -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' \
        --data-binary "@$SEND_BODY" "http://127.0.0.1:$port/" || die "SendMessage on port $port failed"
    grep -q TASK_STATE_COMPLETED "$out" || die "SendMessage on port $port: $(head -c 300 "$out")"
}

log "replicas: $A2A (caps by $CAP_KIND${CG_BASE:+ at $CG_BASE}), database ${PG_URL//\/\/*@///}"
start a "$PORT_A"
start b "$PORT_B"
check "$PORT_A"
check "$PORT_B"

# oha_run FILE PORT: one load run (oha's JSON, or ab's text in FILE).
oha_run() {
    if [[ $LOADGEN == oha ]]; then
        "$OHA" -z "$DURATION" -c "$CONC" --no-tui --output-format json -o "$1" \
            -m POST -H 'A2A-Version: 1.0' -T application/json -D "$SEND_BODY" "http://127.0.0.1:$2/" >/dev/null
    else
        # -t: seconds (oha's 5s form accepted); -n: a bound ab needs, never reached.
        "$AB" -q -k -c "$CONC" -t "${DURATION%s}" -n 100000000 -p "$SEND_BODY" -T application/json \
            -H 'A2A-Version: 1.0' "http://127.0.0.1:$2/" >"$1" 2>&1
    fi
}

# run CAP MODE ROUND: MODE one (A alone) or two (A and B); writes
# WORK/run-CAP-MODE-ROUND.json with the oha files and the CPU used.
run() {
    local q=$1 mode=$2 round=$3 tag="$1-$2-$3" a0 b0 g0 a1 b1 g1 s0 s1 c0 c1 l0 l1 w0 w1
    local pgp
    pgp=$(pg_pids)
    a0=$(ticks "$PID_a") b0=$(ticks "$PID_b")
    if [[ -n $PG_ACCT ]]; then
        g0=$(pg_cpu_ns)
    else
        # shellcheck disable=SC2086
        g0=$(( $(ticks $pgp) * 1000000000 / CLK_TCK ))
    fi
    s0=0 c0=0
    if [[ $PGSS == 1 ]]; then
        s0=$(psql_url "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'")
        c0=$(psql_url "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    fi
    l0=$(cut -d' ' -f1 /proc/loadavg)
    w0=$(date +%s.%N)
    oha_run "$WORK/oha-$tag-a.json" "$PORT_A" &
    local oa=$!
    local ob=""
    if [[ $mode == two ]]; then
        oha_run "$WORK/oha-$tag-b.json" "$PORT_B" &
        ob=$!
    fi
    wait "$oa" || die "oha failed (replica a, $tag)"
    [[ -z $ob ]] || wait "$ob" || die "oha failed (replica b, $tag)"
    w1=$(date +%s.%N)
    a1=$(ticks "$PID_a") b1=$(ticks "$PID_b")
    if [[ -n $PG_ACCT ]]; then
        g1=$(pg_cpu_ns)
    else
        # shellcheck disable=SC2086
        g1=$(( $(ticks $pgp) * 1000000000 / CLK_TCK ))
    fi
    s1=0 c1=0
    if [[ $PGSS == 1 ]]; then
        s1=$(psql_url "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'")
        c1=$(psql_url "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    fi
    l1=$(cut -d' ' -f1 /proc/loadavg)
    kill -0 "$PID_a" 2>/dev/null && kill -0 "$PID_b" 2>/dev/null || die "a replica died during $tag"
    python3 - "$WORK/run-$tag.json" "$q" "$mode" "$round" "$((a1 - a0))" "$((b1 - b0))" "$((g1 - g0))" \
        "$((s1 - s0))" "$((c1 - c0))" "$l0" "$l1" "$w0" "$w1" "$CLK_TCK" "$WORK/oha-$tag-a.json" \
        "$([[ $mode == two ]] && echo "$WORK/oha-$tag-b.json")" <<'PY'
import json, sys
(out, q, mode, rnd, ta, tb, tg, st, cm, l0, l1, w0, w1, tck, fa, fb) = sys.argv[1:]
def oha(f):
    text = open(f).read()
    if not text.lstrip().startswith("{"):
        # ab: complete requests, less the failed and non-2xx ones.
        def num(label):
            for line in text.splitlines():
                if line.startswith(label):
                    return int(line.split(":", 1)[1].split()[0])
            return 0
        bad = num("Failed requests") + num("Non-2xx responses")
        return num("Complete requests") - bad, bad
    d = json.loads(text)
    codes = d.get("statusCodeDistribution", {})
    ok = int(codes.get("200", 0))
    # oha cancels the requests still in flight when its duration ends ("aborted due to
    # deadline", at most one per connection): the load generator's own, not a failure.
    errors = {k: v for k, v in d.get("errorDistribution", {}).items() if "aborted due to deadline" not in k}
    return ok, sum(int(v) for k, v in codes.items() if k != "200") + sum(errors.values())
runs = [oha(fa)] + ([oha(fb)] if fb else [])
wall = float(w1) - float(w0)
ok = sum(r[0] for r in runs)
tck = int(tck)
json.dump({"cap": float(q), "mode": mode, "round": int(rnd), "ok": ok, "bad": sum(r[1] for r in runs),
           "rps": ok / wall, "rps_each": [r[0] / wall for r in runs],
           "server_cpu_us": (int(ta) + (int(tb) if fb else 0)) * 1e6 / tck / max(ok, 1),
           "idle_b_cpu_s": 0 if fb else int(tb) / tck,
           "pg_cpu_us": int(tg) / 1e3 / max(ok, 1),
           "stmts": int(st) / max(ok, 1), "commits": int(cm) / max(ok, 1),
           # The share of its cap each loaded replica used.
           "cap_use": (int(ta) + (int(tb) if fb else 0)) / tck / wall / len(runs) / float(q),
           "load": [float(l0), float(l1)]}, open(out, "w"))
PY
    log "cap $q, $mode replica(s), round $round: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.0f SendMessage/s, server %.1f us/req, PostgreSQL %.1f us/req" % (r["rps"], r["server_cpu_us"], r["pg_cpu_us"]))' "$WORK/run-$tag.json")"
}

log "warm-up (2 s, both replicas)"
DURATION_SAVED=$DURATION
DURATION=2s
oha_run "$WORK/warm-a.json" "$PORT_A" & wa=$!
oha_run "$WORK/warm-b.json" "$PORT_B" || die "oha failed (warm-up)"
wait "$wa" || die "oha failed (warm-up)"
DURATION=$DURATION_SAVED

for q in $CAPS; do
    cap a "$q"
    cap b "$q"
    for round in $(seq "$ROUNDS"); do
        run "$q" one "$round"
        run "$q" two "$round"
    done
done
check "$PORT_A"
check "$PORT_B"

CROSS="not run (RB_CROSS_TESTS=1 runs them)"
if [[ ${RB_CROSS_TESTS:-0} == 1 ]]; then
    log "streams and push across replicas: the ignored replica tests on this database"
    if A2A_TEST_POSTGRES_URL=$PG_URL cargo test -q --locked -p agentwire-server --test cluster -- --ignored >"$WORK/cross.log" 2>&1 &&
        A2A_TEST_POSTGRES_URL=$PG_URL cargo test -q --locked -p agentwire-cli --test cluster -- --ignored >>"$WORK/cross.log" 2>&1; then
        CROSS="passed (agentwire-server and agentwire-cli --test cluster -- --ignored)"
    else
        CROSS="FAILED (see $WORK/cross.log)"
    fi
fi

python3 - "$WORK" "$REPORT" "$CAPS" "$CONC" "$DURATION" "$ROUNDS" "$TARGET_RATIO" "$CAP_KIND" \
    "$(if [[ $LOADGEN == oha ]]; then "$OHA" --version 2>/dev/null | head -n 1; else echo "ab (ApacheBench), HTTP/1.0 keep-alive"; fi)" "$PGSS" "$CROSS" "$A2A" "$([[ -n $PG_MASTER ]] && echo 1 || echo 0)" <<'PY'
import glob, json, os, statistics, sys, time
(work, report, caps, conc, duration, rounds, target, kind, oha, pgss, cross, a2a, pgcpu) = sys.argv[1:]
runs = [json.load(open(f)) for f in sorted(glob.glob(f"{work}/run-*.json"))]
med = statistics.median
out = [f"Replica scaling on PostgreSQL  {time.strftime('%Y-%m-%d %H:%M:%S')}",
       f"machine: {os.cpu_count()} cores; replicas: {a2a} serve --agent echo --store postgres://... (loopback), "
       f"each capped by {kind}; load: {oha}, blocking SendMessage, c={conc} per replica (one load generator each), "
       f"{duration} per run, {rounds} rounds per cap (one, then two; medians)",
       "CPU us/req = (utime+stime) / answered requests; server: the loaded replicas; PostgreSQL: the postmaster and its children",
       ""]
head = ("cap/replica", "one req/s", "two req/s", "two/one", "cap used 1|2", "server us/req 1|2", "PG us/req 1|2",
        "stmts/req 1|2", "commits/req 1|2", "load avg", "target", "result")
rows, ok_all, notes = [], True, []
for i, q in enumerate(caps.split()):
    q = float(q)
    one = [r for r in runs if r["cap"] == q and r["mode"] == "one"]
    two = [r for r in runs if r["cap"] == q and r["mode"] == "two"]
    if not one or not two:
        continue
    r1, r2 = med([r["rps"] for r in one]), med([r["rps"] for r in two])
    ratios = [b["rps"] / a["rps"] for a, b in zip(sorted(one, key=lambda r: r["round"]), sorted(two, key=lambda r: r["round"])) if a["rps"]]
    ratio = r2 / r1 if r1 else float("nan")
    f = lambda xs, k, d=1: f"{med([x[k] for x in xs]):.{d}f}"
    bad = sum(r["bad"] for r in one + two)
    check = i == 0
    ok = ratio >= float(target) and bad == 0
    if check:
        ok_all &= ok
    loads = [l for r in one + two for l in r["load"]]
    use1, use2 = med([r["cap_use"] for r in one]), med([r["cap_use"] for r in two])
    if min(use1, use2) < 0.6:
        notes.append(f"cap {q:g}: the replicas used {use1:.0%} (one) and {use2:.0%} (two) of their cap: "
                     "something else bounds them (the machine's load, the database), so the ratio "
                     "does not measure scale-out")
    rows.append((f"{q:g} CPU", f"{r1:,.0f}", f"{r2:,.0f}", f"{ratio:.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
                 f"{use1:.0%} | {use2:.0%}",
                 f"{f(one, 'server_cpu_us')} | {f(two, 'server_cpu_us')}",
                 (f"{f(one, 'pg_cpu_us')} | {f(two, 'pg_cpu_us')}" if pgcpu == "1" else "n/a"),
                 (f"{f(one, 'stmts', 2)} | {f(two, 'stmts', 2)}" if pgss == "1" else "n/a"),
                 (f"{f(one, 'commits', 3)} | {f(two, 'commits', 3)}" if pgss == "1" else "n/a"),
                 f"{min(loads):.1f}-{max(loads):.1f}",
                 f">= {float(target):.2f}" if check else "", ("PASS" if ok else "FAIL") if check else ""))
    if bad:
        notes.append(f"cap {q:g}: {bad} failed requests (non-200 or connection errors)")
w = [max(len(str(r[j])) for r in rows + [head]) for j in range(len(head))]
fmt = lambda r: "  ".join(str(x).ljust(w[j]) for j, x in enumerate(r)).rstrip()
out += [fmt(head), "  ".join("-" * x for x in w)] + [fmt(r) for r in rows]
out += ["", "two/one: the ratio of the medians (each round's ratio in brackets)",
        f"streams and push across replicas: {cross}"]
if pgss != "1":
    out.append("statements per request: pg_stat_statements not loaded in this database")
if notes:
    out += ["", "notes:"] + [f"- {n}" for n in notes]
text = "\n".join(out) + "\n"
open(report, "w").write(text)
print(text)
sys.exit(0 if ok_all and rows else 1)
PY

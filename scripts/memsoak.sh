#!/usr/bin/env bash
# Memory under steady load: for each store, starts `a2a serve --agent echo`
# (release build) on an ephemeral 127.0.0.1 port, drives blocking JSON-RPC
# SendMessage at c=64, samples the server's resident memory (VmRSS) every
# 10 s and fails when, after the first minute (the warm-up), the average of
# the last third of the samples exceeds that of the first third by more
# than 10%.
#
#   scripts/memsoak.sh                      # 10 minutes per store
#   scripts/memsoak.sh --minutes 2          # shorter
#   scripts/memsoak.sh --store sqlite       # one store (memory, sqlite, postgres://URL)
#
# Stores: memory and sqlite, and postgres when A2A_TEST_POSTGRES_URL is set
# (unless --store names one). Other arguments go to the driver
# (target/release/soak --help: --concurrency, --warmup-secs, --sample-secs,
# --max-growth).
#
# Exit status: 0 flat on every store; 1 when one grew past the bound or its
# server died; 2 on a setup error.
#
# Settings (environment):
#   SOAK_SKIP_BUILD=1   use the binaries already in target/release
set -euo pipefail

cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
minutes=10
stores=()
rest=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --store) stores+=("$2"); shift 2 ;;
        *) rest+=("$1"); shift ;;
    esac
done
if [[ ${#stores[@]} -eq 0 ]]; then
    stores=(memory sqlite)
    if [[ -n "${A2A_TEST_POSTGRES_URL:-}" ]]; then
        stores+=("$A2A_TEST_POSTGRES_URL")
    fi
fi
if [[ "${SOAK_SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --locked -p agentwire-cli -p agentwire-bench --bin a2a --bin soak >&2 || exit 2
fi
status=0
for store in "${stores[@]}"; do
    rc=0
    "$target/release/soak" --a2a "$target/release/a2a" --steady --minutes "$minutes" \
        --store "$store" ${rest[@]+"${rest[@]}"} || rc=$?
    if [[ $rc -eq 2 ]]; then
        exit 2
    elif [[ $rc -ne 0 ]]; then
        status=1
    fi
done
exit $status

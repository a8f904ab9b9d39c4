#!/usr/bin/env bash
# Soak: floods a real `a2a serve` (release build) on 127.0.0.1 with what one
# caller can send, while a second, well-behaved client measures its blocking
# SendMessage, then kills a SQLite-backed server with SIGKILL in the middle of
# a load and counts the acknowledged tasks lost.
#
#   scripts/soak.sh --quick     # about 2 minutes (4 s per flood), for CI
#   scripts/soak.sh             # about 10 minutes (30 s per flood)
#
# Floods, each against a fresh server on the memory and on the SQLite store:
# none (the reference), nested-metadata (SendMessage whose metadata is nested
# 200,000 levels deep, 16 clients), input-required (32 anonymous clients
# leaving tasks in input-required, conformance agent), huge-parts (9.8 MB
# bodies of 700,000 parts, 4 clients), slow-subscribers (20 clients streaming
# eight 1 MB chunks that stop reading), rapid-reset (HTTP/2 streams opened and
# reset at once, 4 connections), failed-auth (32 clients with a wrong API
# key). For each it prints the well-behaved client's p50/p99 and errors, what
# the flood sent, and the server's peak resident memory (VmHWM). The flood
# connects from 127.0.0.1, the well-behaved client from 127.0.0.2 (another
# caller to the per-address bounds); under failed-auth a second client with
# the right key from 127.0.0.1 shows the flood's address locked out.
#
# Other arguments go to the driver (target/release/soak --help): e.g.
# --only slow-subscribers,rapid-reset, --store sqlite, --flood-secs 10,
# --port 18300, --no-kill-test.
#
# Exit status: 0; 1 when the server crashed during a flood or an acknowledged
# task was lost after the kill -9; 2 on a setup error. Bad figures alone (a
# flood that slows the well-behaved client down) do not fail it.
#
# Settings (environment):
#   SOAK_SKIP_BUILD=1   use the binaries already in target/release
set -euo pipefail

cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
if [[ "${SOAK_SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --locked -p agentwire-cli -p agentwire-bench --bin a2a --bin soak >&2 || exit 2
fi
exec "$target/release/soak" --a2a "$target/release/a2a" "$@"

#!/usr/bin/env bash
# Interop: the official JavaScript A2A SDK 0.3 client (npm @a2a-js/sdk, pinned
# in package-lock.json) against the 0.3 layer of our Rust agent, over JSON-RPC, HTTP+JSON and
# gRPC. Prints the binding x case table.
#
# Usage:
#   interop/js/v03/run.sh [SERVER_BINARY] [NODE_TEST_ARGS...]
#   interop/js/v03/run.sh --reference [NODE_TEST_ARGS...]
#
#   SERVER_BINARY  the `a2a` binary to test (default: target/debug/a2a under the
#                  repo root), started as
#                    SERVER_BINARY serve --agent conformance --port <free port>
#                  on 127.0.0.1 and stopped when the tests end.
#   --reference    run the suite against the same SDK's own server
#                  (reference_server.mjs) instead, to validate the suite itself.
#   NODE_TEST_ARGS e.g. --test-name-pattern='grpc ::'
#
# Environment:
#   A2A_INTEROP_LOG      server log (default: <repo>/target/a2a-js-v03-server.log)
#   A2A_INTEROP_TIMEOUT  overall bound on the test run, seconds (default: 600)
#
# Exit code: node --test's (0 = all passed); 2 for setup problems.
set -euo pipefail

SDK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JS_DIR="$(cd "$SDK_DIR/.." && pwd)"
REPO_ROOT="$(cd "$JS_DIR/../.." && pwd)"
LOG_TAG=js-v03
LOG="${A2A_INTEROP_LOG:-$REPO_ROOT/target/a2a-js-v03-server.log}"
RUN_TIMEOUT="${A2A_INTEROP_TIMEOUT:-600}"
SDK_LABEL=0.3
PROTOCOL=0.3
# shellcheck source=../common.sh
source "$JS_DIR/common.sh"

run_client_suite "$@"

#!/usr/bin/env bash
# Interop: `a2a mcp` and `a2a serve --agent mcp` with the official MCP
# components: the MCP Python SDK (PyPI `mcp`, pinned in requirements.txt) as
# the client of `a2a mcp` and as an MCP server behind the bundled agent, and
# the MCP Inspector CLI (npm `@modelcontextprotocol/inspector`).
#
# Usage: interop/mcp/run.sh [CARGO_TEST_ARGS...]
#
# Installs the Python SDK into a virtualenv and the Inspector under
# interop/mcp/node_modules, then runs the ignored tests that need them:
#   cargo test -p agentwire-cli --test mcp_interop -- --ignored
#   cargo test -p agentwire-cli --test mcp_agent -- --ignored
# with A2A_MCP_PYTHON and A2A_MCP_INSPECTOR pointing at them.
#
# Environment:
#   A2A_MCP_VENV     virtualenv to create/use (default: <repo>/.venv-mcp)
#   A2A_MCP_PYTHON_BOOT  interpreter used to create it (default: python3)
#
# Exit code: cargo's (0 = all passed); 2 for setup problems.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${A2A_MCP_VENV:-$REPO_ROOT/.venv-mcp}"
PYTHON_BOOT="${A2A_MCP_PYTHON_BOOT:-python3}"

log() { echo "[mcp-interop] $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV"
  "$PYTHON_BOOT" -m venv "$VENV" || { log "cannot create venv"; exit 2; }
fi
PY="$VENV/bin/python"
if ! "$PY" -c 'import mcp.client.stdio, mcp.server' 2>/dev/null; then
  log "installing the MCP Python SDK into $VENV"
  timeout 600 "$PY" -m pip install --disable-pip-version-check -q \
    -r "$HERE/requirements.txt" || { log "pip install failed"; exit 2; }
fi

INSPECTOR="$HERE/node_modules/.bin/mcp-inspector"
if [[ ! -x "$INSPECTOR" ]]; then
  log "installing the MCP Inspector (package.json) under $HERE"
  (cd "$HERE" && timeout 900 npm install --no-audit --no-fund --no-package-lock >&2) \
    || { log "npm install failed"; exit 2; }
fi

export A2A_MCP_PYTHON="$PY"
export A2A_MCP_INSPECTOR="$INSPECTOR"
cd "$REPO_ROOT"
log "running the MCP interop tests"
cargo test --locked -p agentwire-cli --test mcp_interop "$@" -- --ignored
cargo test --locked -p agentwire-cli --test mcp_agent "$@" -- --ignored

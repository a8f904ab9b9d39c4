#!/usr/bin/env bash
# Browser tests of `a2a inspect`: a real headless Chromium (Debian packages
# chromium and chromium-driver) driven with Selenium from Python, against
# the bundled agents served by `a2a serve` on loopback.
#
# Usage:
#   interop/browser/run.sh [A2A_BINARY] [PYTEST_ARGS...]
#
#   A2A_BINARY  the `a2a` binary to test (default: target/debug/a2a under the
#               repo root).
#
# Environment:
#   A2A_BROWSER_VENV          virtualenv to create/use (default: <repo>/.venv-browser)
#   A2A_BROWSER_PYTHON        interpreter used to create it (default: python3)
#   A2A_INSPECT_SCREENSHOTS   where each test writes its screenshots
#                             (default: <repo>/target/inspect-screenshots)
#   CHROMIUM, CHROMEDRIVER    the browser and its driver (default: /usr/bin/chromium,
#                             /usr/bin/chromedriver)
#   A2A_BROWSER_TIMEOUT       overall bound on the run, seconds (default: 900)
#
# Exit code: pytest's (0 = all passed); 2 for setup problems.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${A2A_BROWSER_VENV:-$REPO_ROOT/.venv-browser}"
PYTHON_BOOT="${A2A_BROWSER_PYTHON:-python3}"
TIMEOUT="${A2A_BROWSER_TIMEOUT:-900}"

BIN="$REPO_ROOT/target/debug/a2a"
if [[ $# -gt 0 && "$1" != -* ]]; then
  BIN="$1"
  shift
fi

log() { echo "[browser] $*" >&2; }

[[ -x "$BIN" ]] || { log "no a2a binary at $BIN (build it with cargo build -p agentwire-cli)"; exit 2; }
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
[[ -x "$CHROMIUM" ]] || { log "no Chromium at $CHROMIUM (apt-get install chromium)"; exit 2; }
[[ -x "$CHROMEDRIVER" ]] || { log "no chromedriver at $CHROMEDRIVER (apt-get install chromium-driver)"; exit 2; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV"
  "$PYTHON_BOOT" -m venv "$VENV" || { log "cannot create venv"; exit 2; }
fi
PY="$VENV/bin/python"
log "installing requirements into $VENV"
timeout 600 "$PY" -m pip install --disable-pip-version-check -q \
  -r "$HERE/requirements.txt" || { log "pip install failed"; exit 2; }

export A2A_BIN="$BIN" CHROMIUM CHROMEDRIVER
export A2A_INSPECT_SCREENSHOTS="${A2A_INSPECT_SCREENSHOTS:-$REPO_ROOT/target/inspect-screenshots}"
# Selenium must use the driver given, never fetch one.
export SE_OFFLINE=true
log "screenshots in $A2A_INSPECT_SCREENSHOTS"
cd "$HERE"
exec timeout "$TIMEOUT" "$PY" -m pytest -q -p no:cacheprovider "$@" test_inspector.py

"""pytest plugin that interop/tck/run.sh loads into the A2A TCK (``-p tck_plugin``).

Two things, and nothing that changes what a TCK test checks:

* The TCK's webhook receiver (push-notification delivery tests) binds
  0.0.0.0 in its own code; here it binds the loopback address instead
  (``A2A_TCK_WEBHOOK_HOST``, default 127.0.0.1), the same address the TCK is
  told to give the agent (``--webhook-host``), so a run opens no port to the
  network.
* Every test's outcome (passed, failed, skipped, xfailed, xpassed) and its
  first message line are written as JSON to ``A2A_TCK_RESULTS``, keyed by
  pytest node id, for compare.py to set against the allow-list.
"""

from __future__ import annotations

import json
import os

_results: dict[str, dict[str, str]] = {}

# Outcome precedence when several phases report: a failure anywhere wins.
_RANK = {"passed": 0, "xpassed": 1, "xfailed": 2, "skipped": 3, "failed": 4}


def pytest_configure(config):  # noqa: ARG001 - pytest hook signature
    from tck.webhook import server

    host = os.environ.get("A2A_TCK_WEBHOOK_HOST", "127.0.0.1")
    original_start = server.WebhookReceiver.start

    def start_on_loopback(self):
        self.host = host
        original_start(self)

    server.WebhookReceiver.start = start_on_loopback


def _message(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        text = str(longrepr[2])
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr)
    text = text.strip()
    return text.splitlines()[0] if text else ""


def pytest_runtest_logreport(report):
    if report.when == "call" or not report.passed:
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.failed:
            outcome = "failed"
        elif report.skipped:
            outcome = "skipped"
        else:
            outcome = "passed"
        previous = _results.get(report.nodeid)
        if previous is None or _RANK[outcome] > _RANK[previous["outcome"]]:
            _results[report.nodeid] = {
                "outcome": outcome,
                "phase": report.when,
                "message": _message(report),
            }


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001 - pytest hook signature
    path = os.environ.get("A2A_TCK_RESULTS")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(_results, f, indent=1, sort_keys=True)

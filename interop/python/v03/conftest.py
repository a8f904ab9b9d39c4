"""Fixtures and the result table of the A2A 0.3 interop suite.

The agent under test is named by A2A_INTEROP_URL (its base URL). Only the
standard library, httpx and pytest are imported here: the SDK is imported by
the test module, so this file is harmless to any other pytest run.
"""

from __future__ import annotations

import os
import time

from collections import defaultdict

import httpx
import pytest


CARD_PATH = '/.well-known/agent-card.json'


@pytest.fixture(scope='session')
def base_url() -> str:
    url = os.environ.get('A2A_INTEROP_URL', '').strip().rstrip('/')
    if not url:
        pytest.skip('A2A_INTEROP_URL is not set (run interop/python/v03/run.sh)')
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + CARD_PATH, timeout=2.0).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f'no agent card at {url + CARD_PATH}')
        time.sleep(0.2)


# binding -> operation -> [passed, total]
_RESULTS: dict[str, dict[str, list[int]]] = defaultdict(
    lambda: defaultdict(lambda: [0, 0])
)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != 'call' and not (report.when == 'setup' and report.failed):
        return
    callspec = getattr(report, 'v03_params', None)
    if callspec is None:
        return
    binding, operation = callspec
    cell = _RESULTS[binding][operation]
    cell[1] += 1
    if report.passed:
        cell[0] += 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    spec = getattr(item, 'callspec', None)
    if spec is not None and 'binding' in spec.params and 'operation' in spec.params:
        report.v03_params = (spec.params['binding'], spec.params['operation'])


def pytest_terminal_summary(terminalreporter) -> None:
    if not _RESULTS:
        return
    tr = terminalreporter
    tr.section('a2a-sdk 0.3 client x binding x operation (passed/total)')
    operations: list[str] = []
    for ops in _RESULTS.values():
        for op in ops:
            if op not in operations:
                operations.append(op)
    bindings = list(_RESULTS)
    tr.write_line('| operation | ' + ' | '.join(bindings) + ' |')
    tr.write_line('| --- |' + ' --- |' * len(bindings))
    for op in operations:
        cells = []
        for b in bindings:
            passed, total = _RESULTS[b].get(op, [0, 0])
            cells.append(f'{passed}/{total}')
        tr.write_line(f'| {op} | ' + ' | '.join(cells) + ' |')
    total_passed = sum(c[0] for ops in _RESULTS.values() for c in ops.values())
    total = sum(c[1] for ops in _RESULTS.values() for c in ops.values())
    tr.write_line(f'| all | {total_passed}/{total} |')
